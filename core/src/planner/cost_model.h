// The planner's cost model: estimated time of a kernel, a cast and a copy on a device, from its
// calibration (measured rates) where it has one, else from its capability record (peaks,
// bandwidths) and the kernel tier's efficiency (docs/planner.md). Internal to the planner;
// estimate_kernel_us, estimate_basis and estimate_transfer_us are public in duet/planner.h.
#pragma once

#include <cstdint>
#include <string>

#include "duet/calibration.h"
#include "duet/device.h"

namespace duet::planning {

// The rates a kernel choice reaches on a device, and where they come from.
struct Rates {
  double gflops = 0;     // arithmetic
  double gbps = 0;       // streaming memory
  double launch_us = 0;  // per kernel
  std::string basis;     // "measured matmul simd f32", "peak x tiled efficiency"
};
Rates rates_for(CostFamily f, const KernelChoice& choice, const DeviceCaps& caps,
                const Calibration* measured);

// Microseconds of one kernel launch on the device.
double launch_us(const DeviceCaps& caps, const Calibration* measured);
// A cast of `bytes` (read and written) as an elementwise pass on the device.
double estimate_cast_us(uint64_t bytes, const DeviceCaps& caps, const Calibration* measured);
}  // namespace duet::planning
