// Helpers for ops that work on rows (the last dimension) of a dense output.
#pragma once

#include "duet/tensor.h"

namespace duet::cpu {

// Offset of output row `row` within a tensor read through broadcast strides `s`.
inline int64_t row_offset(const TensorDesc& out, const Dims& s, int64_t row) {
  int64_t off = 0, rem = row;
  for (int d = out.rank - 2; d >= 0; --d) {
    const auto ud = static_cast<size_t>(d);
    off += (rem % out.shape[ud]) * s[ud];
    rem /= out.shape[ud];
  }
  return off;
}

}  // namespace duet::cpu
