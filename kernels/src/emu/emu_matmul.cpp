// The tensor-core matmul kernels of both tiers, compiled for the emulator.
#include "device/instances.h"
#include "emu/run_kernel.h"
#include "host/runners.h"

namespace duet::kernels::emu_impl {

Status matmul_tc(const detail::Call& c) {
  auto go = [&](auto kernel) { return run_kernel(c, kernel); };
  if (c.tier == Tier::tiled) return dev::matmul_instance<dev::F16, dev::Sm75Arch>(c.b_nmajor, go);
  if (c.bf16) return dev::matmul_instance<dev::Bf16, dev::Sm80Arch>(c.b_nmajor, go);
  return dev::matmul_instance<dev::F16, dev::Sm80Arch>(c.b_nmajor, go);
}

}  // namespace duet::kernels::emu_impl
