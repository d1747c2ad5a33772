// The wgmma-tier attention kernels (f16 and bf16), compiled for the emulator. The tensor maps
// are the planner's descriptions themselves (the emulator's TMA reads them).
#include <cstring>

#include "device/instances_sm90.h"
#include "emu/run_kernel.h"
#include "host/runners.h"

namespace duet::kernels::emu_impl {

Status attention_wgmma(const detail::Call& c) {
  dev::WgAttnParams p = std::get<dev::WgAttnParams>(c.params);
  std::memcpy(p.k_map.bytes, &p.k_desc, sizeof p.k_desc);
  std::memcpy(p.v_map.bytes, &p.v_desc, sizeof p.v_desc);
  auto go = [&](auto kernel) { return run_kernel(c, kernel, p); };
  if (c.bf16) return dev::attention_wgmma_instance<dev::Bf16>(c.head_dim, go);
  return dev::attention_wgmma_instance<dev::F16>(c.head_dim, go);
}

}  // namespace duet::kernels::emu_impl
