// The generic tier and the split-KV combine (built for every architecture of the list).
#include "device/generic.h"
#include "device/quant.h"
#include "gpu/gpu_launch.h"
#include "host/runners.h"

namespace duet::kernels::gpu_impl {

Status generic(const detail::Call& c, void* stream) {
  using detail::Kernel;
  switch (c.kernel) {
    case Kernel::attention_combine:
      return launch_on_gpu(c, &dev::attention_combine, stream);
    case Kernel::eltwise:
      return std::get<dev::EltwiseParams>(c.params).q8
                 ? launch_on_gpu(c, &dev::eltwise_q8_kernel, stream)
                 : launch_on_gpu(c, &dev::eltwise_kernel, stream);
    case Kernel::copy:
      return launch_on_gpu(c, &dev::copy_kernel, stream);
    case Kernel::rows:
      return std::get<dev::RowParams>(c.params).q8
                 ? launch_on_gpu(c, &dev::rmsnorm_q8_kernel, stream)
                 : launch_on_gpu(c, &dev::rows_kernel, stream);
    case Kernel::rope:
      return launch_on_gpu(c, &dev::rope_kernel, stream);
    case Kernel::rope_write:
      return launch_on_gpu(c, &dev::rope_write_kernel, stream);
    case Kernel::gen_attention:
      return launch_on_gpu(c, &dev::gen_attention_kernel, stream);
    case Kernel::gen_matmul:
      return launch_on_gpu(c, &dev::gen_matmul_kernel, stream);
    case Kernel::embedding:
      return launch_on_gpu(c, &dev::embedding_kernel, stream);
    case Kernel::reduce:
      return launch_on_gpu(c, &dev::reduce_kernel, stream);
    case Kernel::write_slice:
      return launch_on_gpu(c, &dev::write_slice_kernel, stream);
    case Kernel::fill_u64:
      return launch_on_gpu(c, &dev::fill_u64_kernel, stream);
    case Kernel::gen_qmatmul:
      return launch_on_gpu(c, &dev::gen_qmatmul_kernel, stream);
    case Kernel::gen_qrows:
      return launch_on_gpu(c, &dev::gen_qrows_kernel, stream);
    default:
      return Status(Code::internal, c.name() + " is not a generic kernel");
  }
}

}  // namespace duet::kernels::gpu_impl
