// Launching one planned call on the GPU (included by the .cu files of each tier).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "host/launch_plan.h"

namespace duet::kernels::gpu_impl {

inline Status cuda_status(const detail::Call& c, cudaError_t e) {
  if (e == cudaSuccess) return {};
  std::string what = "CUDA kernel '" + c.name() + "': " + cudaGetErrorString(e);
  if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction)
    return Status(Code::unsupported,
                  what +
                      " (this build has no image for the device's architecture; add it to "
                      "DUET_CUDA_ARCHS)");
  if (e == cudaErrorLaunchOutOfResources || e == cudaErrorInvalidConfiguration)
    return Status(Code::unsupported, what + " (launch " + std::to_string(c.threads) + " threads, " +
                                         std::to_string(c.smem) + " bytes of shared memory)");
  return Status(Code::internal, what);
}

// With the call's own arguments, or with `p` (arguments completed at launch: tensor maps).
template <class P>
Status launch_on_gpu(const detail::Call& c, void (*kernel)(P), void* stream, const P& p) {
  if (c.smem > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(c.smem));
    if (e != cudaSuccess) return cuda_status(c, e);
  }
  if (c.programmatic) {
    // Programmatic stream serialization: the kernel may start before the previous one in the
    // stream has finished; its first step (grid_dependency_sync) waits for it.
    cudaLaunchAttribute attr[1] = {};
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(c.grid.x, c.grid.y, c.grid.z);
    cfg.blockDim = dim3(static_cast<unsigned>(c.threads));
    cfg.dynamicSmemBytes = c.smem;
    cfg.stream = static_cast<cudaStream_t>(stream);
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cuda_status(c, cudaLaunchKernelEx(&cfg, kernel, p));
  }
  kernel<<<dim3(c.grid.x, c.grid.y, c.grid.z), dim3(static_cast<unsigned>(c.threads)), c.smem,
           static_cast<cudaStream_t>(stream)>>>(p);
  return cuda_status(c, cudaGetLastError());
}
template <class P>
Status launch_on_gpu(const detail::Call& c, void (*kernel)(P), void* stream) {
  return launch_on_gpu(c, kernel, stream, std::get<P>(c.params));
}

}  // namespace duet::kernels::gpu_impl
