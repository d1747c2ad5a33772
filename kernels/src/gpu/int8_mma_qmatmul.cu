// The int8_mma tier: m16n8k32 (sm_80+) and m8n8k16 (sm_75) instances (built for the
// architectures >= sm_75 of the list; the m16n8k32 instruction is emitted only into sm_80+ code).
#include "device/quant_mma.h"
#include "gpu/gpu_launch.h"
#include "host/runners.h"

namespace duet::kernels::gpu_impl {

Status int8_mma_qmatmul(const detail::Call& c, void* stream) {
  if (c.kernel != detail::Kernel::mma_qmatmul)
    return Status(Code::internal, c.name() + " is not an int8_mma kernel");
  return c.sm80 ? launch_on_gpu(c, &dev::qmma_kernel<dev::Sm80Arch>, stream)
                : launch_on_gpu(c, &dev::qmma_kernel<dev::Sm75Arch>, stream);
}

}  // namespace duet::kernels::gpu_impl
