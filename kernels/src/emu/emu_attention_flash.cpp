// The flash-tier attention kernels (bf16 and f16), compiled for the emulator.
#include "device/instances.h"
#include "emu/run_kernel.h"
#include "host/runners.h"

namespace duet::kernels::emu_impl {

Status attention_flash(const detail::Call& c) {
  auto go = [&](auto kernel) { return run_kernel(c, kernel); };
  if (c.bf16) return dev::attention_instance<dev::Bf16, dev::Sm80Arch>(c.head_dim, go);
  return dev::attention_instance<dev::F16, dev::Sm80Arch>(c.head_dim, go);
}

}  // namespace duet::kernels::emu_impl
