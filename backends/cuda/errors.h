// cudaError_t values the backend acts on, spelled out so that host code and tests need no CUDA
// headers (runtime_driver.cpp static_asserts each one against the real enum).
#pragma once

namespace duet::cuda {

#if defined(_WIN32)
inline constexpr const char* kDriverLibrary = "nvcuda.dll";
#else
inline constexpr const char* kDriverLibrary = "libcuda.so.1";
#endif

namespace cuda_error {
inline constexpr int success = 0;
inline constexpr int memory_allocation = 2;
inline constexpr int insufficient_driver = 35;
inline constexpr int devices_unavailable = 46;
inline constexpr int no_device = 100;
inline constexpr int no_kernel_image = 209;
inline constexpr int ecc_uncorrectable = 214;
inline constexpr int nvlink_uncorrectable = 220;
inline constexpr int jit_compiler_not_found = 221;
inline constexpr int unsupported_ptx_version = 222;
inline constexpr int contained = 226;
inline constexpr int illegal_address = 700;
inline constexpr int launch_out_of_resources = 701;
inline constexpr int launch_timeout = 702;
inline constexpr int context_is_destroyed = 709;
inline constexpr int assert_failed = 710;
inline constexpr int hardware_stack_error = 714;
inline constexpr int illegal_instruction = 715;
inline constexpr int misaligned_address = 716;
inline constexpr int invalid_address_space = 717;
inline constexpr int invalid_pc = 718;
inline constexpr int launch_failure = 719;
inline constexpr int system_driver_mismatch = 803;
inline constexpr int compat_not_supported = 804;
inline constexpr int external_device = 911;
}  // namespace cuda_error

}  // namespace duet::cuda
