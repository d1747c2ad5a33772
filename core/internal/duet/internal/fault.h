// Allocation fault injection, for tests. Every allocation point of duet's own (host tensor
// storage, the CPU device's buffers, the Vulkan allocator's vkCreateBuffer and vkAllocateMemory)
// asks allocation_fails() first. In a build configured with DUET_FAULT_INJECTION=ON (the debug
// presets) the allocations are counted and the n-th one after arm(n) fails as if the memory were
// not there; tests/faults/ sweeps n over every allocation of a run. In every other build
// allocation_fails() is always false and arm() does nothing (available() says which).
#pragma once

#include <cstdint>

namespace duet::fault {

// Counts one allocation; true when it is the one armed to fail (each arming fails once).
bool allocation_fails();

// Whether this build counts and fails allocations (DUET_FAULT_INJECTION).
bool available();
// Restarts the count of allocations and disarms.
void reset();
// The allocation with index `n` (0-based, counted from the last reset) fails.
void arm(int64_t n);
void disarm();
// Allocations counted since the last reset, and whether the armed one has failed.
int64_t allocations();
bool fired();

}  // namespace duet::fault
