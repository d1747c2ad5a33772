// The int_dot tier: activation quantization and the quantized mat-vec, synchronous staging
// (sm_61, sm_75) and cp.async (sm_80+) instances (built for the architectures >= sm_61 of the
// list; each instance compiles to nothing on the architectures it never runs on).
#include "device/quant_mv.h"
#include "gpu/gpu_launch.h"
#include "host/runners.h"

namespace duet::kernels::gpu_impl {

Status int_dot_qmatvec(const detail::Call& c, void* stream) {
  using detail::Kernel;
  switch (c.kernel) {
    case Kernel::q8_act:
      return launch_on_gpu(c, &dev::q8_act_kernel, stream);
    case Kernel::qmv:
      return c.sm80 ? launch_on_gpu(c, &dev::qmv_kernel<dev::Sm80Arch>, stream)
                    : launch_on_gpu(c, &dev::qmv_kernel<dev::Sm75Arch>, stream);
    default:
      return Status(Code::internal, c.name() + " is not an int_dot kernel");
  }
}

}  // namespace duet::kernels::gpu_impl
