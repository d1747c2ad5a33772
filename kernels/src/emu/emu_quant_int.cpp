// The integer tiers for block-quantized weights (int_dot, int8_mma), compiled for the
// emulator.
#include "device/quant_dp4a.h"
#include "device/quant_mma.h"
#include "emu/run_kernel.h"
#include "host/runners.h"

namespace duet::kernels::emu_impl {

Status quant_int(const detail::Call& c) {
  using detail::Kernel;
  switch (c.kernel) {
    case Kernel::q8_act:
      return run_kernel(c, &dev::q8_act_kernel);
    case Kernel::dp4a_qmatmul:
      return run_kernel(c, &dev::dp4a_qmatmul_kernel);
    case Kernel::mma_qmatmul:
      return c.sm80 ? run_kernel(c, &dev::qmma_kernel<dev::Sm80Arch>)
                    : run_kernel(c, &dev::qmma_kernel<dev::Sm75Arch>);
    default:
      return Status(Code::internal, "emulator: " + c.name() + " is not an integer-tier kernel");
  }
}

}  // namespace duet::kernels::emu_impl
