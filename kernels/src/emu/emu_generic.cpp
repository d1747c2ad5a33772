// The generic tier, compiled for the emulator.
#include "device/generic.h"
#include "device/quant.h"
#include "emu/run_kernel.h"
#include "host/runners.h"

namespace duet::kernels::emu_impl {

Status generic(const detail::Call& c) {
  using detail::Kernel;
  switch (c.kernel) {
    case Kernel::attention_combine:
      return run_kernel(c, &dev::attention_combine);
    case Kernel::eltwise:
      return std::get<dev::EltwiseParams>(c.params).q8 ? run_kernel(c, &dev::eltwise_q8_kernel)
                                                       : run_kernel(c, &dev::eltwise_kernel);
    case Kernel::copy:
      return run_kernel(c, &dev::copy_kernel);
    case Kernel::rows:
      return std::get<dev::RowParams>(c.params).q8 ? run_kernel(c, &dev::rmsnorm_q8_kernel)
                                                   : run_kernel(c, &dev::rows_kernel);
    case Kernel::rope:
      return run_kernel(c, &dev::rope_kernel);
    case Kernel::rope_write:
      return run_kernel(c, &dev::rope_write_kernel);
    case Kernel::gen_attention:
      return run_kernel(c, &dev::gen_attention_kernel);
    case Kernel::gen_matmul:
      return run_kernel(c, &dev::gen_matmul_kernel);
    case Kernel::embedding:
      return run_kernel(c, &dev::embedding_kernel);
    case Kernel::reduce:
      return run_kernel(c, &dev::reduce_kernel);
    case Kernel::write_slice:
      return run_kernel(c, &dev::write_slice_kernel);
    case Kernel::fill_u64:
      return run_kernel(c, &dev::fill_u64_kernel);
    case Kernel::gen_qmatmul:
      return run_kernel(c, &dev::gen_qmatmul_kernel);
    case Kernel::gen_qrows:
      return run_kernel(c, &dev::gen_qrows_kernel);
    default:
      return Status(Code::internal, "emulator: " + c.name() + " is not a generic kernel");
  }
}

}  // namespace duet::kernels::emu_impl
