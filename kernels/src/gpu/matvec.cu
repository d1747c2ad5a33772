// The generic tier's mat-vec for decode shapes (built for every architecture of the list).
#include "device/matvec.h"
#include "gpu/gpu_launch.h"
#include "host/runners.h"

namespace duet::kernels::gpu_impl {

Status matvec(const detail::Call& c, void* stream) {
  if (c.kernel != detail::Kernel::matvec)
    return Status(Code::internal, c.name() + " is not the mat-vec kernel");
  switch (std::get<dev::MatmulParams>(c.params).dtype) {
    case dev::Elt::f16:
      return launch_on_gpu(c, &dev::matvec_kernel<dev::Elt::f16>, stream);
    case dev::Elt::bf16:
      return launch_on_gpu(c, &dev::matvec_kernel<dev::Elt::bf16>, stream);
    default:
      return launch_on_gpu(c, &dev::matvec_kernel<dev::Elt::f32>, stream);
  }
}

}  // namespace duet::kernels::gpu_impl
