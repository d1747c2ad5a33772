// The int_dot tier: activation quantization and the dp4a mat-vec (built for the
// architectures >= sm_61 of the list).
#include "device/quant_dp4a.h"
#include "gpu/gpu_launch.h"
#include "host/runners.h"

namespace duet::kernels::gpu_impl {

Status dp4a_qmatmul(const detail::Call& c, void* stream) {
  using detail::Kernel;
  switch (c.kernel) {
    case Kernel::q8_act:
      return launch_on_gpu(c, &dev::q8_act_kernel, stream);
    case Kernel::dp4a_qmatmul:
      return launch_on_gpu(c, &dev::dp4a_qmatmul_kernel, stream);
    default:
      return Status(Code::internal, c.name() + " is not an int_dot kernel");
  }
}

}  // namespace duet::kernels::gpu_impl
