// The generic tier's cast of block-quantized rows, staged in 16-byte copies: synchronous (before
// sm_80) and cp.async (sm_80+) instances, built for every architecture of the list.
#include "device/quant_dequant.h"
#include "gpu/gpu_launch.h"
#include "host/runners.h"

namespace duet::kernels::gpu_impl {

Status quant_cast(const detail::Call& c, void* stream) {
  if (c.kernel != detail::Kernel::qdequant)
    return Status(Code::internal, c.name() + " is not the quantized cast kernel");
  return c.sm80 ? launch_on_gpu(c, &dev::qdequant_kernel<dev::Sm80Arch>, stream)
                : launch_on_gpu(c, &dev::qdequant_kernel<dev::Sm75Arch>, stream);
}

}  // namespace duet::kernels::gpu_impl
