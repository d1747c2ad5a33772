// The integer tiers for block-quantized weights (int_dot, int8_mma), compiled for the
// emulator.
#include "device/quant_mmq.h"
#include "device/quant_mv.h"
#include "emu/run_kernel.h"
#include "host/runners.h"

namespace duet::kernels::emu_impl {

namespace {

template <class Arch>
Status mmq(const detail::Call& c) {
  const dev::QFmt f = std::get<dev::QMatmulParams>(c.params).fmt;
  const bool per16 = dev::q_scales_per16(f), min = dev::q_has_min(f);
  if (per16 && min) return run_kernel(c, &dev::mmq_kernel<Arch, true, true>);
  if (per16) return run_kernel(c, &dev::mmq_kernel<Arch, true, false>);
  if (min) return run_kernel(c, &dev::mmq_kernel<Arch, false, true>);
  return run_kernel(c, &dev::mmq_kernel<Arch, false, false>);
}

}  // namespace

Status quant_int(const detail::Call& c) {
  using detail::Kernel;
  switch (c.kernel) {
    case Kernel::q8_act:
      return run_kernel(c, &dev::q8_act_kernel);
    case Kernel::qmv: {
      const auto& p = std::get<dev::QMvParams>(c.params);
      return dev::qmv_instance(p.fmt, dev::qmv_act_rows(p.M),
                               [&](auto k) { return run_kernel(c, k); });
    }
    case Kernel::mmq:
      return c.sm80 ? mmq<dev::Sm80Arch>(c) : mmq<dev::Sm75Arch>(c);
    default:
      return Status(Code::internal, "emulator: " + c.name() + " is not an integer-tier kernel");
  }
}

}  // namespace duet::kernels::emu_impl
