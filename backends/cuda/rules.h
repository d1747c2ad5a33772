// The CUDA backend's selection rules, as pure functions of a capability record and of the
// kernel images a build carries. The planner uses them for real devices and for profiles alike,
// and can ask "what if this build lacked sm_86" by building rules for another architecture list.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "duet/device.h"

namespace duet::cuda {

// The kernel images a build embeds: cubins (machine code) for some architectures and the PTX of
// one architecture, which the driver can JIT-compile for newer GPUs. Architectures are written
// major*10 + minor (75 = sm_75, 120 = sm_120).
struct BuildArchs {
  std::vector<int> cubins;         // sm_XY cubins, each runs on X.Y' with Y' >= Y
  int ptx = 0;                     // compute_XY PTX, JIT-compiled on any X'.Y' >= X.Y; 0 = none
  std::vector<int> arch_specific;  // sm_XYa cubins (e.g. 90 for sm_90a): run on exactly X.Y
  bool ptx_arch_specific = false;  // the PTX is compute_XYa: JIT only on exactly X.Y
  bool operator==(const BuildArchs&) const = default;
};

// Parses the CMake lists ("75;80;90a", "80"); entries that are not architectures are ignored.
BuildArchs parse_build_archs(std::string_view cubins, std::string_view ptx);
// "cubins sm_75, sm_80; PTX compute_80"
std::string describe(const BuildArchs& archs);

// The architectures this build carries. A build without CUDA answers with the list a default
// CUDA 13 build carries (sm_75..sm_90 and sm_120, PTX compute_120), so that planning for a CUDA
// profile gives the same answer on every machine.
BuildArchs this_build();
// Whether this build contains the CUDA backend (the toolkit was found at configure time).
bool backend_built();

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
ImageCheck check_image(const BuildArchs& archs, int cc_major, int cc_minor);

// caps.extra keys this backend writes and its rules read.
inline constexpr std::string_view kKernelImageKey = "kernel_image";
inline constexpr std::string_view kCublasKey = "cublas";             // "cuBLASLt 13.0.2 (...)"
inline constexpr std::string_view kTensorCoresKey = "tensor_cores";  // why there are (not) any

// Selection rules for a build carrying `archs`: the kernel-image check first (no image: every
// choice refused with that reason), then the kernels' own choices (flash, tiled, generic), with a
// cuBLASLt choice first for matmul when the device record says the library loaded.
std::unique_ptr<BackendRules> make_rules(BuildArchs archs);

// The cuBLASLt choices for a matmul (one per precision), ok or refused with the reason.
std::vector<KernelChoice> cublas_choices(const DeviceCaps& caps, const OpDesc& op);

}  // namespace duet::cuda
