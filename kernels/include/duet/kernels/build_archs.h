// The one record of which CUDA architectures a build carries kernel images for, and the one
// check of which image a device loads from it. The kernels' selection (a tier's image) and the
// CUDA backend (the device's image, refusals, `duet devices`) both read it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace duet::kernels {

// The kernel images a build embeds: cubins (machine code) for some architectures and the PTX of
// one architecture, which the driver can JIT-compile for newer GPUs. Architectures are written
// major*10 + minor (75 = sm_75, 120 = sm_120).
struct BuildArchs {
  std::vector<int> cubins;         // sm_XY cubins, each runs on X.Y' with Y' >= Y
  int ptx = 0;                     // compute_XY PTX, JIT-compiled on any X'.Y' >= X.Y; 0 = none
  std::vector<int> arch_specific;  // sm_XYa cubins (e.g. 90 for sm_90a): run on exactly X.Y
  bool ptx_arch_specific = false;  // the PTX is compute_XYa: JIT only on exactly X.Y
  bool operator==(const BuildArchs&) const = default;
  bool empty() const { return cubins.empty() && arch_specific.empty() && ptx == 0; }
  std::string str() const;  // "cubins sm_75, sm_80; PTX compute_80"
};

// Parses the CMake lists ("75;80;90a", "80"); entries that are not architectures are ignored.
BuildArchs parse_build_archs(std::string_view cubins, std::string_view ptx);

// The architectures this build carries (DUET_CUDA_ARCHS and DUET_CUDA_PTX_ARCH). A build without
// CUDA answers with the list a default CUDA 13 build carries (sm_75, sm_80, sm_90a, sm_120, PTX
// compute_80), so that planning for a CUDA profile gives the same answer on every machine.
const BuildArchs& this_build();
// What a default CUDA 13 build carries (the same list), whatever this build was configured with:
// the reference documentation (`duet ops --markdown`, docs/ops.md) describes that build, so that
// it reads the same from a build made with `-DDUET_CUDA_ARCHS=80` or without CUDA.
const BuildArchs& default_build();

// How a device of compute capability major.minor gets its kernels from a build.
enum class ImageMatch : uint8_t {
  exact_cubin,       // a cubin for exactly this architecture
  compatible_cubin,  // a cubin for the same major version and a lower minor
  ptx_jit,           // no usable cubin; the driver JIT-compiles the PTX at first launch
  none,              // nothing in this build runs on the device
};
std::string_view image_match_name(ImageMatch m);  // "exact cubin", ...

struct ImageCheck {
  ImageMatch match = ImageMatch::none;
  int arch = 0;      // the cubin or PTX architecture used (0 with none)
  std::string text;  // what caps.extra["kernel_image"] holds: "exact cubin sm_75", "none: ..."
  bool ok() const { return match != ImageMatch::none; }
  // Why nothing runs, for refusals: the text without its "none: " prefix.
  std::string refusal() const { return text.rfind("none: ", 0) == 0 ? text.substr(6) : text; }
};
// Exact cubin, else the newest compatible cubin, else PTX, else none (with what to rebuild).
// `min_arch` keeps only images of that architecture and newer: a tier's kernels are compiled
// only for the architectures it runs on (flash: sm_80 and newer).
ImageCheck check_image(const BuildArchs& archs, int cc_major, int cc_minor, int min_arch = 0);
// What the kernels of a tier that uses architecture-specific features need (wgmma: an image for
// sm_90a; duet/kernels/arch.h, ArchFeatures::specific_target): an sm_XYa cubin, or compute_XYa
// PTX, for exactly the device's architecture. Ordinary cubins and PTX lack those instructions.
ImageCheck check_specific_image(const BuildArchs& archs, int cc_major, int cc_minor);

}  // namespace duet::kernels
