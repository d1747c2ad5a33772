// Which CUDA kernel can run an op on a device, and at what launch shape: pure functions of the
// capability record (no CUDA), used by the CUDA backend's rules for real devices and profiles
// alike. Each kernel variant declares what it needs (architecture, tensor cores, dtypes, head
// dims, shared memory at its tile sizes); a variant that does not fit is refused with the reason.
#pragma once

#include <vector>

#include "duet/device.h"

namespace duet::kernels {

// Every kernel choice for `op`, best first (flash, tiled, generic), ok or refused with a reason.
// Launch configurations are derived from caps (shared memory per block, subgroup size, SMs).
std::vector<KernelChoice> choices(const DeviceCaps& caps, const OpDesc& op);

}  // namespace duet::kernels
