// Liveness-based memory planning of a plan's device values (internal to the planner).
#pragma once

#include "duet/plan.h"

namespace duet {

// Marks resident constants, assigns a slot to every non-constant root value on a device (values
// with disjoint lifetimes share a slot, best fit), and fills plan.memory (slots, peak, live
// bytes). Budgets are filled by the caller.
void plan_memory(Plan& plan);

}  // namespace duet
