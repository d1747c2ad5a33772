// The planner's cost model: estimated time of a kernel, a cast and a copy on a device, from its
// capability record (peaks, bandwidths) and the kernel tier's efficiency (docs/planner.md).
// Internal to the planner; estimate_kernel_us and estimate_transfer_us are public in
// duet/planner.h.
#pragma once

#include <cstdint>

#include "duet/device.h"

namespace duet::planning {

// Microseconds of one kernel launch on the device.
double launch_us(const DeviceCaps& caps);
// A cast of `bytes` (read and written) as an elementwise pass on the device.
double estimate_cast_us(uint64_t bytes, const DeviceCaps& caps);

}  // namespace duet::planning
