// Which CUDA kernel can run an op on a device, and at what launch shape: pure functions of the
// capability record (no CUDA), used by the CUDA backend's rules for real devices and profiles
// alike. Each kernel variant declares what it needs (architecture, tensor cores, dtypes, head
// dims, shared memory at its tile sizes); a variant that does not fit is refused with the reason.
#pragma once

#include <string>
#include <vector>

#include "duet/device.h"
#include "duet/kernels/build_archs.h"

namespace duet::kernels {

// Every kernel choice for `op`, best first (flash, tiled, generic; within a tier the precision
// of the op's dtype first), ok or refused with a reason. Launch configurations are derived from
// caps (shared memory per block, subgroup size, SMs). A tier whose image is missing from the
// build for the device's architecture is refused with that reason. Against this_build().
std::vector<KernelChoice> choices(const DeviceCaps& caps, const OpDesc& op);
// The same against an explicit build (tests; planning for another build).
std::vector<KernelChoice> choices(const DeviceCaps& caps, const OpDesc& op,
                                  const BuildArchs& build);

// Head dims the tensor-core attention kernels are instantiated for.
inline constexpr int kAttentionHeadDims[] = {64, 80, 96, 128, 256};

}  // namespace duet::kernels
