// The planner: decides, for every op of a graph, the device, precision and kernel tier, from the
// devices' capability records and their backends' rules (BackendRules::choices) under a user
// policy. It calls no kernel and needs no hardware: the devices may be real (plan_devices) or
// capability profiles (duet/profiles.h), e.g. for `duet plan g.json --profile rtx2080ti,rtx3090`.
//
// The cost model, precision rules and memory planning are described in docs/planner.md.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "duet/device.h"
#include "duet/export.h"
#include "duet/graph.h"
#include "duet/plan.h"
#include "duet/policy.h"

namespace duet {

// Plans `graph` over `devices` (in preference order for ties) under `policy`. Errors name the op
// that cannot be placed and why on every device, or the device whose memory the plan exceeds.
DUET_API Result<Plan> make_plan(const Graph& graph, std::vector<PlanDevice> devices,
                                const Policy& policy = {});

// Real devices as planner devices (id, capability record, rules), with each device's calibration
// (calibration_for, duet/calibration.h) when there are several devices to rank; `calibrate`
// false leaves them uncalibrated (estimates from peaks).
DUET_API std::vector<PlanDevice> plan_devices(std::span<Device* const> devices,
                                              bool calibrate = true);

// The cost model's estimates, exposed for tools and tests: from the device's calibration where
// given (measured rates), else from the capability record's peaks (docs/planner.md).
DUET_API double estimate_kernel_us(const OpDesc& op, const KernelChoice& choice,
                                   const DeviceCaps& caps, const Calibration* measured = nullptr);
// What an estimate rests on, in words: "0.27 GFLOP at 190 GFLOP/s (measured matmul simd f32) +
// 4.0 us launch (measured)".
DUET_API std::string estimate_basis(const OpDesc& op, const KernelChoice& choice,
                                    const DeviceCaps& caps, const Calibration* measured = nullptr);
DUET_API double estimate_transfer_us(uint64_t bytes, const DeviceCaps* from, const DeviceCaps* to);

}  // namespace duet
