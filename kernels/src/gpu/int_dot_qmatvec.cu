// The int_dot tier: activation quantization and the quantized mat-vec, an instance per block
// format and activation rows a block (built for the architectures >= sm_61 of the list).
#include "device/quant_mv.h"
#include "gpu/gpu_launch.h"
#include "host/runners.h"

namespace duet::kernels::gpu_impl {

Status int_dot_qmatvec(const detail::Call& c, void* stream) {
  using detail::Kernel;
  switch (c.kernel) {
    case Kernel::q8_act:
      return launch_on_gpu(c, &dev::q8_act_kernel, stream);
    case Kernel::qmv: {
      const auto& p = std::get<dev::QMvParams>(c.params);
      return dev::qmv_instance(p.fmt, dev::qmv_act_rows(p.M),
                               [&](auto k) { return launch_on_gpu(c, k, stream); });
    }
    default:
      return Status(Code::internal, c.name() + " is not an int_dot kernel");
  }
}

}  // namespace duet::kernels::gpu_impl
