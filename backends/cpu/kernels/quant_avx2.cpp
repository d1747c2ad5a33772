// Quantized-weight kernels on AVX2 (compiled with -mavx2 -mfma -mf16c). vpmaddubsw multiplies
// unsigned weight bytes by signed activation bytes into pairs of int16 (saturating: the
// weights' bytes must stay below 128, so q8_0 is read as int8 with the sign moved onto the
// activations), vpmaddwd sums the pairs into int32 lanes.
#include <immintrin.h>

#include "duet/block_layout.h"
#include "kernels/quant.h"

namespace duet::cpu::kernels::quant_avx2 {
namespace {

int32_t load_i32(const void* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return v;
}
uint16_t load_u16(const void* p) {
  uint16_t v;
  __builtin_memcpy(&v, p, 2);
  return v;
}

float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Packs two vectors of eight int32 (each within int8's range) into 16 int8 in order.
__m128i pack16(__m256i a, __m256i b) {
  const __m256i w = _mm256_packs_epi32(a, b);  // a0-3 b0-3 | a4-7 b4-7 as int16
  const __m128i lo = _mm256_castsi256_si128(w), hi = _mm256_extracti128_si256(w, 1);
  const __m128i bytes = _mm_packs_epi16(lo, hi);  // a0-3 b0-3 a4-7 b4-7
  return _mm_shuffle_epi32(bytes, _MM_SHUFFLE(3, 1, 2, 0));
}

void quantize_q8(const float* x, int64_t k, int8_t* xq, float* d, int16_t* s16) {
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t b = 0; b < k / 32; ++b) {
    __m256 v[4];
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + b * 32 + 8 * i);
      m = _mm256_max_ps(m, _mm256_and_ps(v[i], absmask));
    }
    const float amax = hmax(m);
    const float id = amax > 0 ? 127.0f / amax : 0.0f;
    d[b] = amax / 127.0f;
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], vid));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(xq + b * 32), pack16(q[0], q[1]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(xq + b * 32 + 16), pack16(q[2], q[3]));
    s16[2 * b] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[0], q[1])));
    s16[2 * b + 1] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[2], q[3])));
  }
}

// u8 x s8 -> int32 lanes of 4 products; `signed_bytes`: w holds int8, its sign goes onto x.
__m256i dot4(__m256i w, __m256i xb, bool signed_bytes) {
  const __m256i ones = _mm256_set1_epi16(1);
  if (signed_bytes)
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(xb, w)),
                             ones);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w, xb), ones);
}

template <int M>
void tile_m(const QTile& t, int g, int64_t s0, int64_t s1, const Q8Rows& x, float* c, int64_t ldc,
            int n, bool accumulate) {
  const int64_t k4 = t.k / 4, subs = t.k / t.sub;
  const uint8_t* u = t.u + g * k4 * 32;
  const float* sc = t.scale + g * subs * 8;
  const float* of = t.off + g * subs * 8;
  const int steps = t.sub / 4;
  __m256 f[M];
  for (int i = 0; i < M; ++i) f[i] = _mm256_setzero_ps();
  for (int64_t s = s0; s < s1; ++s) {
    __m256i a[M];
    for (int i = 0; i < M; ++i) a[i] = _mm256_setzero_si256();
    const uint8_t* us = u + s * steps * 32;
    const int8_t* xs = x.xq + s * t.sub;
    for (int st = 0; st < steps; ++st) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(us + st * 32));
      for (int i = 0; i < M; ++i)
        a[i] = _mm256_add_epi32(
            a[i], dot4(w, _mm256_set1_epi32(load_i32(xs + i * x.ldq + st * 4)), t.signed_bytes));
    }
    const __m256 vs = _mm256_loadu_ps(sc + s * 8), vo = _mm256_loadu_ps(of + s * 8);
    for (int i = 0; i < M; ++i) {
      f[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[i]),
                             _mm256_mul_ps(vs, _mm256_set1_ps(x.dsub[i * x.lds + s])), f[i]);
      f[i] = _mm256_fmadd_ps(vo, _mm256_set1_ps(x.dxs[i * x.lds + s]), f[i]);
    }
  }
  for (int i = 0; i < M; ++i) {
    alignas(32) float r[8];
    _mm256_store_ps(r, f[i]);
    for (int j = 0; j < n; ++j) c[i * ldc + j] = accumulate ? c[i * ldc + j] + r[j] : r[j];
  }
}

void qgemm_tile(const QTile& t, int g, int64_t s0, int64_t s1, const Q8Rows& x, int m, float* c,
                int64_t ldc, int n, bool accumulate) {
  switch (m) {
    case 1:
      return tile_m<1>(t, g, s0, s1, x, c, ldc, n, accumulate);
    case 2:
      return tile_m<2>(t, g, s0, s1, x, c, ldc, n, accumulate);
    case 3:
      return tile_m<3>(t, g, s0, s1, x, c, ldc, n, accumulate);
    default:
      return tile_m<4>(t, g, s0, s1, x, c, ldc, n, accumulate);
  }
}

float scale_of(const uint8_t* p) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(load_u16(p))));
}

// q4_0: one block per step, its 32 nibbles in element order ([lo | hi] 128-bit halves).
template <int M>
void row_dot_q4_0_m(const uint8_t* w, int64_t row_bytes, int rows, int64_t k, const Q8Rows& x,
                    float* out, int64_t ldo, bool accumulate) {
  constexpr int kB = DUET_Q4_0_BYTES;
  const int64_t nb = k / 32;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int r = 0; r < rows; ++r) {
    const uint8_t* wr = w + r * row_bytes;
    __m256 acc[M];
    float off[M] = {};
    for (int i = 0; i < M; ++i) acc[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* p = wr + b * kB;
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + DUET_Q4_0_QS));
      const __m256i qq = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), low4);
      const float d = scale_of(p + DUET_Q4_0_D);
      for (int i = 0; i < M; ++i) {
        const __m256i xv =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.xq + i * x.ldq + b * 32));
        const __m256i dot = dot4(qq, xv, false);
        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(d * x.dsub[i * x.lds + b]),
                                 acc[i]);
        off[i] += d * x.dxs[i * x.lds + b];
      }
    }
    for (int i = 0; i < M; ++i) {
      const float v = hsum(acc[i]) - 8.0f * off[i];
      out[i * ldo + r] = accumulate ? out[i * ldo + r] + v : v;
    }
  }
}

template <int M>
void row_dot_q8_0_m(const uint8_t* w, int64_t row_bytes, int rows, int64_t k, const Q8Rows& x,
                    float* out, int64_t ldo, bool accumulate) {
  constexpr int kB = DUET_Q8_0_BYTES;
  const int64_t nb = k / 32;
  for (int r = 0; r < rows; ++r) {
    const uint8_t* wr = w + r * row_bytes;
    __m256 acc[M];
    for (int i = 0; i < M; ++i) acc[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* p = wr + b * kB;
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + DUET_Q8_0_QS));
      const float d = scale_of(p + DUET_Q8_0_D);
      for (int i = 0; i < M; ++i) {
        const __m256i xv =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.xq + i * x.ldq + b * 32));
        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot4(q, xv, true)),
                                 _mm256_set1_ps(d * x.dsub[i * x.lds + b]), acc[i]);
      }
    }
    for (int i = 0; i < M; ++i)
      out[i * ldo + r] = accumulate ? out[i * ldo + r] + hsum(acc[i]) : hsum(acc[i]);
  }
}

#define DUET_ROW_DOT(name)                                                                         \
  void name(const uint8_t* w, int64_t rb, int rows, int64_t k, const Q8Rows& x, int m, float* out, \
            int64_t ldo, bool accumulate) {                                                        \
    switch (m) {                                                                                   \
      case 1:                                                                                      \
        return name##_m<1>(w, rb, rows, k, x, out, ldo, accumulate);                               \
      case 2:                                                                                      \
        return name##_m<2>(w, rb, rows, k, x, out, ldo, accumulate);                               \
      case 3:                                                                                      \
        return name##_m<3>(w, rb, rows, k, x, out, ldo, accumulate);                               \
      default:                                                                                     \
        return name##_m<4>(w, rb, rows, k, x, out, ldo, accumulate);                               \
    }                                                                                              \
  }
DUET_ROW_DOT(row_dot_q4_0)
DUET_ROW_DOT(row_dot_q8_0)
#undef DUET_ROW_DOT

constexpr QuantKernels make_table() {
  QuantKernels q{};
  q.isa = Isa::avx2;
  q.lanes = 8;
  q.mr = 4;
  q.signed_bytes = true;
  q.row_dot_rows = 4;
  q.quantize_q8 = quantize_q8;
  q.qgemm_tile = qgemm_tile;
  q.row_dot[static_cast<int>(QSlot::q8_0)] = row_dot_q8_0;
  q.row_dot[static_cast<int>(QSlot::q4_0)] = row_dot_q4_0;
  return q;
}

// Constant-initialised: nothing of this translation unit runs before the CPU is checked.
constexpr QuantKernels kTable = make_table();

}  // namespace
}  // namespace duet::cpu::kernels::quant_avx2

namespace duet::cpu::kernels {
const QuantKernels& avx2_quant_kernels() {
  return quant_avx2::kTable;
}
}  // namespace duet::cpu::kernels
