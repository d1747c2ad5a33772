// The CUDA backend's selection rules, as pure functions of a capability record and of the
// kernel images a build carries. The planner uses them for real devices and for profiles alike,
// and can ask "what if this build lacked sm_86" by building rules for another architecture list.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "duet/device.h"
#include "duet/kernels/build_archs.h"

namespace duet::cuda {

// The build's kernel images and the image check are the kernels' record
// (duet/kernels/build_archs.h); the backend names them here.
using kernels::BuildArchs;
using kernels::check_image;
using kernels::ImageCheck;
using kernels::ImageMatch;
using kernels::parse_build_archs;
using kernels::this_build;

// caps.extra keys this backend writes, for display (its rules read typed fields only).
inline constexpr std::string_view kKernelImageKey = "kernel_image";
inline constexpr std::string_view kCublasKey = "cublas";  // "cuBLASLt 13.0.2 (...)"

// The cuBLASLt choices' typed launch (LaunchConfig::variant): cuBLASLt picks its own kernel.
struct CublasLt {
  static constexpr double kEfficiency = 0.7;  // its efficiency class: tuned by NVIDIA per GPU
  bool dequant = false;  // on a block-quantized weight's dequantized tiles (qgemm.h)
  std::string name() const { return dequant ? "cublasLt_dequant" : "cublasLt"; }
  bool operator==(const CublasLt&) const = default;
};
inline constexpr std::string_view kTensorCoresKey = "tensor_cores";  // why there are (not) any

// Selection rules for a build carrying `archs`: the kernel-image check first (no image: every
// choice refused with that reason), then the kernels' own choices (flash, tiled, generic), with a
// cuBLASLt choice first for matmul when the device record says the library loaded.
std::unique_ptr<BackendRules> make_rules(BuildArchs archs);

// The cuBLASLt choices for a matmul (one per precision), ok or refused with the reason.
std::vector<KernelChoice> cublas_choices(const DeviceCaps& caps, const OpDesc& op);

// cuBLASLt for a matmul of a block-quantized weight: chunks of K dequantized into a bounded
// workspace tile (qgemm.h), at f16 (bf16 for bf16 activations); ok or refused with the reason.
KernelChoice dequant_cublas_choice(const DeviceCaps& caps, const OpDesc& op);

}  // namespace duet::cuda
