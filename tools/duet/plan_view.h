// Plans as the `duet` command shows them: a short table, and explain() with the policy's source.
// (--json is the core's plan_json.)
#pragma once

#include <string>

#include "duet/common.h"
#include "duet/plan.h"

namespace duet::cli {

// One line per step (kernels: device, precision, tier, estimate; transfers), copies, memory.
std::string plan_summary(const Plan& plan, const ChosenPolicy& policy);
// explain() with its policy line saying where the policy came from.
std::string with_policy_source(const std::string& explained, const ChosenPolicy& policy);
// "cuda:0", or "host"
std::string device_id(const Plan& plan, int device);
// "devices: cpu:0 (AMD EPYC ...), vulkan:0 (llvmpipe ...)"
std::string devices_line(const Plan& plan);
// "upload", "borrow" (a constant the device reads where the host holds it), "download" or
// "copy" (between devices)
std::string transfer_name(const Plan& plan, const PlanStep& s);
// "12.3 us", "4.56 ms"

}  // namespace duet::cli
