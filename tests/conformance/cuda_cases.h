// Cases for the CUDA kernels beyond the conformance set: shapes that stress the tensor-core
// kernels (several tiles with ragged ends, causal skipping, GQA packing, split-KV decode, every
// head dim, strided views) and small ones for the integer tiers, every block format once. Their
// names start with "kernels/" (the CUDA kernels' folder; a case's inputs are drawn from its name);
// they run on CUDA devices only.
#pragma once

#include <string_view>
#include <vector>

#include "check/check.h"

namespace duet::conformance {

void add_cuda_cases(std::vector<check::Case>& out);

inline bool is_cuda_case(std::string_view name) {
  return name.rfind("kernels/", 0) == 0;
}

}  // namespace duet::conformance
