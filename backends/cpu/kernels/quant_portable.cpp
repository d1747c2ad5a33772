// Portable quantized-weight kernels: the activation quantizer and the integer tile product in
// plain C++, the definition the SIMD tables are tested against. No row dots: the driver runs
// every shape through the tile product here.
#include <cmath>

#include "kernels/quant.h"

namespace duet::cpu::kernels::quant_portable {
namespace {

void quantize_q8(const float* x, int64_t k, int block, int8_t* xq, float* d, int16_t* s16) {
  for (int64_t b0 = 0; b0 < k; b0 += block) {
    float amax = 0;
    for (int64_t i = b0; i < b0 + block; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    const float id = amax > 0 ? 127.0f / amax : 0.0f;
    for (int64_t b = b0 / 32; b < (b0 + block) / 32; ++b) {
      d[b] = amax / 127.0f;
      for (int h = 0; h < 2; ++h) {
        int sum = 0;
        for (int64_t i = b * 32 + 16 * h; i < b * 32 + 16 * h + 16; ++i) {
          const int q = static_cast<int>(std::nearbyint(x[i] * id));
          xq[i] = static_cast<int8_t>(q);
          sum += q;
        }
        s16[b * 2 + h] = static_cast<int16_t>(sum);
      }
    }
  }
}

void qgemm_tile(const QTile& t, int g, int64_t s0, int64_t s1, const Q8Rows& x, int m, float* c,
                int64_t ldc, int n, bool accumulate) {
  const int L = t.lanes;
  const int64_t k4 = t.k / 4, subs = t.k / t.sub;
  const uint8_t* u = t.u + g * k4 * L * 4;
  const float* sc = t.scale + g * subs * L;
  const float* of = t.off + g * subs * L;
  for (int i = 0; i < m; ++i) {
    const int8_t* xq = x.xq + i * x.ldq;
    for (int j = 0; j < n; ++j) {
      float acc = accumulate ? c[i * ldc + j] : 0.0f;
      for (int64_t s = s0; s < s1; ++s) {
        int32_t dot = 0;
        for (int64_t kk = s * t.sub / 4; kk < (s + 1) * t.sub / 4; ++kk)
          for (int e = 0; e < 4; ++e) {
            const uint8_t b = u[(kk * L + j) * 4 + e];
            const int w = t.signed_bytes ? static_cast<int8_t>(b) : b;
            dot += w * xq[kk * 4 + e];
          }
        acc += sc[s * L + j] * x.dsub[i * x.lds + s] * static_cast<float>(dot) +
               of[s * L + j] * x.dxs[i * x.lds + s];
      }
      c[i * ldc + j] = acc;
    }
  }
}

constexpr QuantKernels make_table() {
  QuantKernels q{};
  q.isa = Isa::generic;
  q.lanes = 8;
  q.mr = 4;
  q.signed_bytes = false;
  q.row_dot_rows = 0;
  q.quantize_q8 = quantize_q8;
  q.qgemm_tile = qgemm_tile;
  return q;
}

constexpr QuantKernels kTable = make_table();

}  // namespace
}  // namespace duet::cpu::kernels::quant_portable

namespace duet::cpu::kernels {
const QuantKernels& portable_quant_kernels() {
  return quant_portable::kTable;
}
}  // namespace duet::cpu::kernels
