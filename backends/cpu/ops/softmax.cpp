#include <cmath>
#include <limits>

#include "kernels/isa.h"
#include "ops/ops.h"
#include "ops/rows.h"

namespace duet::cpu {

Status softmax(const OpArgs& a) {
  const TensorDesc& out = a.op.output;
  F32In x(a.in[0], a.pool, a.scratch);
  std::optional<F32In> mask;
  Dims ms{};
  if (a.op.has_input(1)) {
    mask.emplace(a.in[1], a.pool, a.scratch);
    ms = broadcast_strides(mask->desc(), out);
  }
  F32Out y(a.out, a.scratch);
  if (a.scratch.failed()) return {};
  const float scale = softmax_scale(a.op);
  const int64_t n = out.dim(-1), rows = out.numel() / n;
  const int64_t mstride = mask ? ms[static_cast<size_t>(out.rank - 1)] : 0;
  const kernels::Kernels& kt = kernels::active_kernels();
  a.pool.parallel_for(rows, std::max<int64_t>(1, 2048 / n), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* xr = x.data() + r * n;
      float* yr = y.data() + r * n;
      const float* mr = mask ? mask->data() + row_offset(out, ms, r) : nullptr;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t i = 0; i < n; ++i) {
        float v = xr[i] * scale + (mr ? mr[i * mstride] : 0.0f);
        yr[i] = v;
        mx = std::max(mx, v);
      }
      if (mx == -std::numeric_limits<float>::infinity()) {  // fully masked row: zeros
        for (int64_t i = 0; i < n; ++i) yr[i] = 0.0f;
        continue;
      }
      for (int64_t i = 0; i < n; ++i) yr[i] -= mx;
      const float inv = 1.0f / kt.exp(yr, yr, n);
      for (int64_t i = 0; i < n; ++i) yr[i] *= inv;
    }
  });
  y.finish(a.pool);
  return {};
}

}  // namespace duet::cpu
