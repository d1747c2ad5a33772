#include <cmath>
#include <limits>
#include <vector>

#include "ops/ops.h"

namespace duet::cpu {

// Baseline: one query row at a time with an online softmax in f32.
Status attention(const OpArgs& a) {
  const OpDesc& op = a.op;
  F32In q(a.in[0], a.pool), k(a.in[1], a.pool), v(a.in[2], a.pool);
  std::optional<F32In> mask;
  TensorDesc md;
  const TensorDesc& qd = op.inputs[0];
  const int64_t B = qd.dim(0), Hq = qd.dim(1), Lq = qd.dim(2), D = qd.dim(3);
  const int64_t Hkv = op.inputs[1].dim(1), Lk = op.inputs[1].dim(2), group = Hq / Hkv;
  if (op.has_input(3)) {
    mask.emplace(a.in[3], a.pool);
    const Dims full{B, Hq, Lq, Lk};
    md = *broadcast_to(mask->desc(), full);
  }
  F32Out y(a.out);
  const float scale = attention_scale(op);
  const int64_t shift = Lk - Lq;
  a.pool.parallel_for(B * Hq * Lq, 1, [&](int64_t b0, int64_t e0) {
    std::vector<float> acc(static_cast<size_t>(D));
    for (int64_t r = b0; r < e0; ++r) {
      const int64_t i = r % Lq, h = (r / Lq) % Hq, b = r / (Lq * Hq), hk = h / group;
      const float* qi = q.data() + r * D;
      const float* kb = k.data() + (b * Hkv + hk) * Lk * D;
      const float* vb = v.data() + (b * Hkv + hk) * Lk * D;
      const int64_t kend = op.attrs.causal ? std::min(Lk, std::max<int64_t>(i + shift + 1, 0)) : Lk;
      float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = 0; j < kend; ++j) {
        const float* kj = kb + j * D;
        float s = 0.0f;
        for (int64_t d = 0; d < D; ++d) s += qi[d] * kj[d];
        s *= scale;
        if (mask)
          s += mask->data()[b * md.strides[0] + h * md.strides[1] + i * md.strides[2] +
                            j * md.strides[3]];
        if (s == -std::numeric_limits<float>::infinity()) continue;
        const float mn = std::max(m, s);
        const float corr = std::exp(m - mn), p = std::exp(s - mn);
        l = l * corr + p;
        const float* vj = vb + j * D;
        for (int64_t d = 0; d < D; ++d)
          acc[static_cast<size_t>(d)] = acc[static_cast<size_t>(d)] * corr + p * vj[d];
        m = mn;
      }
      float* yi = y.data() + r * D;
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;  // a query that sees no key outputs zeros
      for (int64_t d = 0; d < D; ++d) yi[d] = acc[static_cast<size_t>(d)] * inv;
    }
  });
  y.finish(a.pool);
  return {};
}

}  // namespace duet::cpu
