#include <vector>

#include "ops/ops.h"
#include "ops/rows.h"

namespace duet::cpu {

namespace {
size_t u(int64_t i) {
  return static_cast<size_t>(i);
}

// Offset of batch `bi` (over the output's batch dims) in a dense operand of rank `r`.
int64_t batch_offset(const TensorDesc& out, const TensorDesc& dense, int64_t bi) {
  int64_t off = 0, rem = bi;
  const int lead = out.rank - dense.rank;
  for (int d = out.rank - 3; d >= 0; --d) {
    const int64_t i = rem % out.shape[u(d)];
    rem /= out.shape[u(d)];
    const int dd = d - lead;
    if (dd >= 0 && dense.shape[u(dd)] != 1) off += i * dense.strides[u(dd)];
  }
  return off;
}
}  // namespace

// Baseline: row-major i-k-j loops over dense f32 operands, parallel over rows.
Status matmul(const OpArgs& a) {
  const TensorDesc& out = a.op.output;
  F32In A(a.in[0], a.pool), B(a.in[1], a.pool);
  F32Out C(a.out);
  const bool ta = a.op.attrs.transpose_a, tb = a.op.attrs.transpose_b;
  const int64_t M = out.dim(-2), N = out.dim(-1);
  const int64_t K = ta ? A.desc().dim(-2) : A.desc().dim(-1);
  const int64_t batches = out.numel() / (M * N);
  a.pool.parallel_for(batches * M, 4, [&](int64_t b, int64_t e) {
    std::vector<float> bt;
    for (int64_t row = b; row < e; ++row) {
      const int64_t bi = row / M, i = row % M;
      const float* pa = A.data() + batch_offset(out, A.desc(), bi);
      const float* pb = B.data() + batch_offset(out, B.desc(), bi);
      float* pc = C.data() + row * N;
      for (int64_t j = 0; j < N; ++j) pc[j] = 0.0f;
      for (int64_t k = 0; k < K; ++k) {
        const float av = ta ? pa[k * M + i] : pa[i * K + k];
        if (tb) {
          for (int64_t j = 0; j < N; ++j) pc[j] += av * pb[j * K + k];
        } else {
          const float* brow = pb + k * N;
          for (int64_t j = 0; j < N; ++j) pc[j] += av * brow[j];
        }
      }
    }
  });
  C.finish(a.pool);
  return {};
}

}  // namespace duet::cpu
