#include <cmath>

#include "ops/ops.h"

namespace duet::cpu {

Status norm(const OpArgs& a) {
  const TensorDesc& out = a.op.output;
  const bool layer = a.op.kind == OpKind::layernorm;
  F32In x(a.in[0], a.pool, a.scratch);
  std::optional<F32In> w, bias;
  if (a.op.has_input(1)) w.emplace(a.in[1], a.pool, a.scratch);
  if (a.op.has_input(2)) bias.emplace(a.in[2], a.pool, a.scratch);
  F32Out y(a.out, a.scratch);
  if (a.scratch.failed()) return {};
  const int64_t n = out.dim(-1), rows = out.numel() / n;
  const float eps = a.op.attrs.eps;
  a.pool.parallel_for(rows, std::max<int64_t>(1, 2048 / n), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* xr = x.data() + r * n;
      float* yr = y.data() + r * n;
      // Accumulate in double: rows can be long and f32 sums of squares lose digits.
      double mean = 0.0;
      if (layer) {
        for (int64_t i = 0; i < n; ++i) mean += xr[i];
        mean /= static_cast<double>(n);
      }
      double var = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        const double d = xr[i] - mean;
        var += d * d;
      }
      const float inv = static_cast<float>(1.0 / std::sqrt(var / static_cast<double>(n) + eps));
      const float m = static_cast<float>(mean);
      for (int64_t i = 0; i < n; ++i) {
        float v = (xr[i] - m) * inv;
        if (w) v *= w->data()[i];
        if (bias) v += bias->data()[i];
        yr[i] = v;
      }
    }
  });
  y.finish(a.pool);
  return {};
}

}  // namespace duet::cpu
