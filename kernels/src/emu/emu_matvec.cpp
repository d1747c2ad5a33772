// The generic tier's mat-vec and staged cast of block formats, compiled for the emulator.
#include "device/matvec.h"
#include "device/quant_dequant.h"
#include "emu/run_kernel.h"
#include "host/runners.h"

namespace duet::kernels::emu_impl {

Status matvec(const detail::Call& c) {
  if (c.kernel == detail::Kernel::qdequant)
    return c.sm80 ? run_kernel(c, &dev::qdequant_kernel<dev::Sm80Arch>)
                  : run_kernel(c, &dev::qdequant_kernel<dev::Sm75Arch>);
  if (c.kernel != detail::Kernel::matvec)
    return Status(Code::internal, "emulator: " + c.name() + " is not the mat-vec kernel");
  switch (std::get<dev::MatmulParams>(c.params).dtype) {
    case dev::Elt::f16:
      return run_kernel(c, &dev::matvec_kernel<dev::Elt::f16>);
    case dev::Elt::bf16:
      return run_kernel(c, &dev::matvec_kernel<dev::Elt::bf16>);
    default:
      return run_kernel(c, &dev::matvec_kernel<dev::Elt::f32>);
  }
}

}  // namespace duet::kernels::emu_impl
