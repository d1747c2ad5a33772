// The float64 reference: every op of the set computed in double with plain loops, written for
// obviousness, not speed. It defines the engine's semantics (see duet/op.h); `duet check` and the
// tests compare every backend against it.
#pragma once

#include <span>
#include <vector>

#include "duet/host_tensor.h"
#include "duet/op.h"

namespace duet::reference {

// Evaluates `op` on host inputs (any dtype, any strides) and returns the output's elements in
// row-major order as doubles, before any rounding to the output dtype. Views return the
// elements they select.
Result<std::vector<double>> evaluate(const OpDesc& op, std::span<const HostTensor> inputs);

}  // namespace duet::reference
