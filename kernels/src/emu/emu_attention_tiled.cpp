// The tiled-tier attention kernels (f16), compiled for the emulator.
#include "device/instances.h"
#include "emu/run_kernel.h"
#include "host/runners.h"

namespace duet::kernels::emu_impl {

Status attention_tiled(const detail::Call& c) {
  auto go = [&](auto kernel) { return run_kernel(c, kernel); };
  return dev::attention_instance<dev::F16, dev::Sm75Arch>(c.head_dim, go);
}

}  // namespace duet::kernels::emu_impl
