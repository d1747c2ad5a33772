// Why CUDA is unavailable, and what a CUDA error means for the device. Kept free of CUDA
// headers so it is unit-tested everywhere; runtime_driver.cpp checks the numbers against
// cudaError_t at compile time.
#include "errors.h"
#include "caps.h"
#include "driver.h"

namespace duet::cuda {

Status availability(const DriverStatus& s) {
  if (!s.library_found)
    return Status(Code::unsupported,
                  std::string("no NVIDIA driver (") + kDriverLibrary + " not found)");
  // Within one major version the runtime runs on an older driver (minor version
  // compatibility); across major versions it does not.
  const int needs = s.runtime_version / 1000 * 1000;
  if (s.driver_version > 0 && needs > 0 && s.driver_version < needs)
    return Status(Code::unsupported, "driver too old for this build: driver supports CUDA " +
                                         cuda_version_string(s.driver_version) + ", build needs " +
                                         cuda_version_string(needs));
  if (!s.count_error.empty()) return Status(Code::unsupported, s.count_error);
  if (s.device_count <= 0) return Status(Code::unsupported, "no device");
  return {};
}

Code classify_cuda_error(int e) {
  switch (e) {
    case cuda_error::success:
      return Code::ok;
    case cuda_error::memory_allocation:
      return Code::out_of_memory;
    case cuda_error::ecc_uncorrectable:
    case cuda_error::nvlink_uncorrectable:
    case cuda_error::contained:
    case cuda_error::illegal_address:
    case cuda_error::launch_timeout:
    case cuda_error::context_is_destroyed:
    case cuda_error::assert_failed:
    case cuda_error::hardware_stack_error:
    case cuda_error::illegal_instruction:
    case cuda_error::misaligned_address:
    case cuda_error::invalid_address_space:
    case cuda_error::invalid_pc:
    case cuda_error::launch_failure:
    case cuda_error::external_device:
      return Code::device_lost;
    case cuda_error::insufficient_driver:
    case cuda_error::no_device:
    case cuda_error::devices_unavailable:
    case cuda_error::no_kernel_image:
    case cuda_error::unsupported_ptx_version:
    case cuda_error::jit_compiler_not_found:
    case cuda_error::system_driver_mismatch:
    case cuda_error::compat_not_supported:
      return Code::unsupported;
    default:
      return Code::internal;
  }
}

}  // namespace duet::cuda
