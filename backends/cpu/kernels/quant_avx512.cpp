// Quantized-weight kernels on AVX-512 with VNNI (compiled with -mavx512f -mavx512bw -mavx512vl
// -mavx512vnni -mavx512dq -mf16c; run only where the CPU has all of them). vpdpbusd multiplies
// the weights' unsigned bytes by the activations' signed bytes and sums four products per int32
// lane; the activation operand comes from memory as a broadcast, so one instruction feeds 16
// weight rows.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "duet/block_layout.h"
#include "kernels/quant.h"

namespace duet::cpu::kernels::quant_avx512 {
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

float f16_scalar(const uint8_t* p) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(load_u16(p))));
}

void quantize_q8(const float* x, int64_t k, int8_t* xq, float* d, int16_t* s16) {
  const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  for (int64_t b = 0; b < k / 32; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + b * 32), v1 = _mm512_loadu_ps(x + b * 32 + 16);
    const float amax =
        _mm512_reduce_max_ps(_mm512_max_ps(_mm512_and_ps(v0, absmask), _mm512_and_ps(v1, absmask)));
    const float id = amax > 0 ? 127.0f / amax : 0.0f;
    d[b] = amax / 127.0f;
    const __m512 vid = _mm512_set1_ps(id);
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, vid));  // round to nearest even
    const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, vid));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(xq + b * 32), _mm512_cvtsepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(xq + b * 32 + 16), _mm512_cvtsepi32_epi8(q1));
    s16[2 * b] = static_cast<int16_t>(_mm512_reduce_add_epi32(q0));
    s16[2 * b + 1] = static_cast<int16_t>(_mm512_reduce_add_epi32(q1));
  }
}

// ---- the tile GEMM: 16 weight rows (lanes) by M activation rows in registers.

template <int M, int STEPS>
void tile_m(const QTile& t, int g, int64_t s0, int64_t s1, const Q8Rows& x, float* c, int64_t ldc,
            int n, bool accumulate) {
  const int64_t k4 = t.k / 4, subs = t.k / t.sub;
  const uint8_t* u = t.u + g * k4 * 64;
  const float* sc = t.scale + g * subs * 16;
  const float* of = t.off + g * subs * 16;
  const int8_t* xr[M];
  const float *dr[M], *sr[M];
  for (int i = 0; i < M; ++i) {
    xr[i] = x.xq + i * x.ldq;
    dr[i] = x.dsub + i * x.lds;
    sr[i] = x.dxs + i * x.lds;
  }
  __m512 f[M];
  for (int i = 0; i < M; ++i) f[i] = _mm512_setzero_ps();
  for (int64_t s = s0; s < s1; ++s) {
    __m512i a[M];
    for (int i = 0; i < M; ++i) a[i] = _mm512_setzero_si512();
    const uint8_t* us = u + s * STEPS * 64;
    const int64_t k = s * STEPS * 4;
#pragma GCC unroll 8
    for (int st = 0; st < STEPS; ++st) {
      const __m512i w = _mm512_loadu_si512(us + st * 64);
#pragma GCC unroll 8
      for (int i = 0; i < M; ++i)
        a[i] = _mm512_dpbusd_epi32(a[i], w, _mm512_set1_epi32(load_i32(xr[i] + k + st * 4)));
    }
    const __m512 vs = _mm512_loadu_ps(sc + s * 16), vo = _mm512_loadu_ps(of + s * 16);
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      f[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a[i]), _mm512_mul_ps(vs, _mm512_set1_ps(dr[i][s])),
                             f[i]);
      f[i] = _mm512_fmadd_ps(vo, _mm512_set1_ps(sr[i][s]), f[i]);
    }
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1u);
  for (int i = 0; i < M; ++i) {
    __m512 r = f[i];
    if (accumulate) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(mask, c + i * ldc));
    _mm512_mask_storeu_ps(c + i * ldc, mask, r);
  }
}

template <int M>
void tile_m(const QTile& t, int g, int64_t s0, int64_t s1, const Q8Rows& x, float* c, int64_t ldc,
            int n, bool accumulate) {
  if (t.sub == 16)
    tile_m<M, 4>(t, g, s0, s1, x, c, ldc, n, accumulate);
  else
    tile_m<M, 8>(t, g, s0, s1, x, c, ldc, n, accumulate);
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
    case 4:
      return tile_m<4>(t, g, s0, s1, x, c, ldc, n, accumulate);
    case 5:
      return tile_m<5>(t, g, s0, s1, x, c, ldc, n, accumulate);
    case 6:
      return tile_m<6>(t, g, s0, s1, x, c, ldc, n, accumulate);
    case 7:
      return tile_m<7>(t, g, s0, s1, x, c, ldc, n, accumulate);
    default:
      return tile_m<8>(t, g, s0, s1, x, c, ldc, n, accumulate);
  }
}

// ---- row dots (decode): two 32-blocks per 512-bit step.

// How far ahead of the weights a row dot prefetches: with several activation rows the hardware
// prefetchers track the activations' streams and lose the weights' (measured: 8 rows through a
// 33 MB q4_0 weight ran 5x slower than the same work from L3 without this).
constexpr int kPrefetch = 1024;

// Two consecutive floats in the low lanes, from any address (a 64-bit integer load: no
// alignment is assumed).
inline __m128 two_floats(const float* p) {
  return _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i_u*>(p)));
}

// [d_b, d_b+1] of two consecutive blocks `stride` bytes apart, from their leading f16 scales.
__m128 two_scales(const uint8_t* p, int64_t stride) {
  const uint32_t h = load_u16(p) | static_cast<uint32_t>(load_u16(p + stride)) << 16;
  return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(h)));
}

// q4_0: the nibbles of blocks b and b+1 as 64 bytes [lo_b, lo_b+1, hi_b, hi_b+1] (lo = elements
// 0..15, hi = 16..31), matched by the activations' 128-bit lanes reordered the same way; int32
// lanes 0-3 and 8-11 then hold block b, 4-7 and 12-15 block b+1.
template <int M>
void row_dot_q4_0_m(const uint8_t* w, int64_t row_bytes, int rows, int64_t k, const Q8Rows& x,
                    float* out, int64_t ldo, bool accumulate) {
  constexpr int kB = DUET_Q4_0_BYTES;
  const int64_t nb = k / 32;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i pattern = _mm512_set_epi32(1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0);
  for (int r = 0; r < rows; ++r) {
    const uint8_t* wr = w + r * row_bytes;
    __m512 acc[M];
    __m128 off[M];
    for (int i = 0; i < M; ++i) acc[i] = _mm512_setzero_ps(), off[i] = _mm_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      const uint8_t* p = wr + b * kB;
      if constexpr (M > 1) _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetch), _MM_HINT_T0);
      const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + DUET_Q4_0_QS));
      const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + kB + DUET_Q4_0_QS));
      const __m256i q2 = _mm256_set_m128i(q1, q0);
      const __m512i qq = _mm512_and_si512(
          _mm512_inserti64x4(_mm512_castsi256_si512(q2), _mm256_srli_epi16(q2, 4), 1), low4);
      const __m128 dw = two_scales(p + DUET_Q4_0_D, kB);
      for (int i = 0; i < M; ++i) {
        __m512i xv = _mm512_loadu_si512(x.xq + i * x.ldq + b * 32);
        xv = _mm512_shuffle_i64x2(xv, xv, _MM_SHUFFLE(3, 1, 2, 0));
        const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), qq, xv);
        const __m128 dx = two_floats(x.dsub + i * x.lds + b);
        const __m512 s = _mm512_permutexvar_ps(pattern, _mm512_castps128_ps512(_mm_mul_ps(dw, dx)));
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), s, acc[i]);
        const __m128 dxs = two_floats(x.dxs + i * x.lds + b);
        off[i] = _mm_fmadd_ps(dw, dxs, off[i]);
      }
    }
    for (int i = 0; i < M; ++i) {
      const float o = _mm_cvtss_f32(off[i]) + _mm_cvtss_f32(_mm_shuffle_ps(off[i], off[i], 1));
      float sum = _mm512_reduce_add_ps(acc[i]) - 8.0f * o;
      for (int64_t bt = b; bt < nb; ++bt) {  // an odd last block
        const uint8_t* p = wr + bt * kB;
        const float d = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(load_u16(p))));
        int dot = 0;
        for (int e = 0; e < 32; ++e) {
          const uint8_t byte = p[DUET_Q4_0_QS + (e & 15)];
          dot += (e < 16 ? byte & 15 : byte >> 4) * x.xq[i * x.ldq + bt * 32 + e];
        }
        sum +=
            d * (x.dsub[i * x.lds + bt] * static_cast<float>(dot) - 8.0f * x.dxs[i * x.lds + bt]);
      }
      out[i * ldo + r] = accumulate ? out[i * ldo + r] + sum : sum;
    }
  }
}

// q8_0: the int8 weights offset by 128 into unsigned bytes (xor 0x80), blocks b and b+1 in the
// two 256-bit halves; the offset comes back as -128 * d * dx * sum(x).
template <int M>
void row_dot_q8_0_m(const uint8_t* w, int64_t row_bytes, int rows, int64_t k, const Q8Rows& x,
                    float* out, int64_t ldo, bool accumulate) {
  constexpr int kB = DUET_Q8_0_BYTES;
  const int64_t nb = k / 32;
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i pattern = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  for (int r = 0; r < rows; ++r) {
    const uint8_t* wr = w + r * row_bytes;
    __m512 acc[M];
    __m128 off[M];
    for (int i = 0; i < M; ++i) acc[i] = _mm512_setzero_ps(), off[i] = _mm_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      const uint8_t* p = wr + b * kB;
      if constexpr (M > 1) _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetch), _MM_HINT_T0);
      const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + DUET_Q8_0_QS));
      const __m256i q1 =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kB + DUET_Q8_0_QS));
      const __m512i qq =
          _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1), flip);
      const __m128 dw = two_scales(p + DUET_Q8_0_D, kB);
      for (int i = 0; i < M; ++i) {
        const __m512i xv = _mm512_loadu_si512(x.xq + i * x.ldq + b * 32);
        const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), qq, xv);
        const __m128 dx = two_floats(x.dsub + i * x.lds + b);
        const __m512 s = _mm512_permutexvar_ps(pattern, _mm512_castps128_ps512(_mm_mul_ps(dw, dx)));
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), s, acc[i]);
        const __m128 dxs = two_floats(x.dxs + i * x.lds + b);
        off[i] = _mm_fmadd_ps(dw, dxs, off[i]);
      }
    }
    for (int i = 0; i < M; ++i) {
      const float o = _mm_cvtss_f32(off[i]) + _mm_cvtss_f32(_mm_shuffle_ps(off[i], off[i], 1));
      float sum = _mm512_reduce_add_ps(acc[i]) - 128.0f * o;
      for (int64_t bt = b; bt < nb; ++bt) {
        const uint8_t* p = wr + bt * kB;
        const float d = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(load_u16(p))));
        int dot = 0;
        for (int e = 0; e < 32; ++e)
          dot += static_cast<int8_t>(p[DUET_Q8_0_QS + e]) * x.xq[i * x.ldq + bt * 32 + e];
        sum += d * x.dsub[i * x.lds + bt] * static_cast<float>(dot);
      }
      out[i * ldo + r] = accumulate ? out[i * ldo + r] + sum : sum;
    }
  }
}

// The 6-bit scales and mins of a q4_k / q5_k super-block as 16 bytes: sc[0..7], m[0..7].
__m128i scales_mins_k4(const uint8_t* p) {
  uint32_t a[4];
  __builtin_memcpy(a, p, 12);
  const uint32_t k1 = 0x3f3f3f3f, k2 = 0x0f0f0f0f, k3 = 0x03030303;
  const uint32_t m4 = ((a[2] >> 4) & k2) | (((a[1] >> 6) & k3) << 4);
  const uint32_t m0 = a[1] & k1;
  const uint32_t s4 = (a[2] & k2) | (((a[0] >> 6) & k3) << 4);
  const uint32_t s0 = a[0] & k1;
  // Built in registers: a load from the array just stored would wait on store forwarding.
  return _mm_set_epi32(static_cast<int>(m4), static_cast<int>(m0), static_cast<int>(s4),
                       static_cast<int>(s0));
}

// q4_k: per 64 weights one 512-bit step, the low nibbles of 32 bytes (sub-block 2j) and their
// high nibbles (2j + 1) in element order; lanes 0-7 and 8-15 take the two sub-blocks' scales.
template <int M>
void row_dot_q4_k_m(const uint8_t* w, int64_t row_bytes, int rows, int64_t k, const Q8Rows& x,
                    float* out, int64_t ldo, bool accumulate) {
  constexpr int kB = DUET_Q4_K_BYTES;
  const int64_t nb = k / 256;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int r = 0; r < rows; ++r) {
    const uint8_t* wr = w + r * row_bytes;
    __m512 acc[M];
    __m256 off[M];
    for (int i = 0; i < M; ++i) acc[i] = _mm512_setzero_ps(), off[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* p = wr + b * kB;
      if constexpr (M > 1) {
        _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetch), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetch + 64), _MM_HINT_T0);
      }
      const __m128i sm = scales_mins_k4(p + DUET_Q4_K_SCALES);
      const float d = f16_scalar(p + DUET_Q4_K_D), dmin = f16_scalar(p + DUET_Q4_K_DMIN);
      const __m256 sc =
          _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sm)));
      const __m256 mn = _mm256_mul_ps(
          _mm256_set1_ps(-dmin), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(sm, 8))));
      __m512i q[4];
      for (int j = 0; j < 4; ++j) {
        const __m256i v =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + DUET_Q4_K_QS + 32 * j));
        q[j] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(v, low4)),
                                  _mm256_and_si256(_mm256_srli_epi16(v, 4), low4), 1);
      }
      for (int i = 0; i < M; ++i) {
        const int8_t* xb = x.xq + i * x.ldq + b * 256;
        const __m256 s = _mm256_mul_ps(sc, _mm256_loadu_ps(x.dsub + i * x.lds + b * 8));
        const __m512 s2 = _mm512_castps256_ps512(s);
        for (int j = 0; j < 4; ++j) {
          const __m512i dot =
              _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[j], _mm512_loadu_si512(xb + 64 * j));
          const __m512i idx = _mm512_set_epi32(2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1,
                                               2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j,
                                               2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j);
          acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_permutexvar_ps(idx, s2), acc[i]);
        }
        off[i] = _mm256_fmadd_ps(mn, _mm256_loadu_ps(x.dxs + i * x.lds + b * 8), off[i]);
      }
    }
    for (int i = 0; i < M; ++i) {
      const float v =
          _mm512_reduce_add_ps(acc[i]) + _mm512_reduce_add_ps(_mm512_castps256_ps512(off[i]));
      out[i * ldo + r] = accumulate ? out[i * ldo + r] + v : v;
    }
  }
}

// q6_k: per 64 weights one 512-bit step over 4 sub-blocks of 16 (4 int32 lanes each).
template <int M>
void row_dot_q6_k_m(const uint8_t* w, int64_t row_bytes, int rows, int64_t k, const Q8Rows& x,
                    float* out, int64_t ldo, bool accumulate) {
  constexpr int kB = DUET_Q6_K_BYTES;
  const int64_t nb = k / 256;
  const __m256i low4 = _mm256_set1_epi8(0x0F), low2 = _mm256_set1_epi8(3);
  for (int r = 0; r < rows; ++r) {
    const uint8_t* wr = w + r * row_bytes;
    __m512 acc[M], off[M];
    for (int i = 0; i < M; ++i) acc[i] = _mm512_setzero_ps(), off[i] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* p = wr + b * kB;
      if constexpr (M > 1)
        for (int l = 0; l < kB; l += 64)
          _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetch + l), _MM_HINT_T0);
      const float d = f16_scalar(p + DUET_Q6_K_D);
      const __m512 sc = _mm512_mul_ps(
          _mm512_set1_ps(d), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(
                                 reinterpret_cast<const __m128i*>(p + DUET_Q6_K_SCALES)))));
      __m512i q[4];
      for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = p + DUET_Q6_K_QL + 64 * h;
        const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
        const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
        const __m256i qh =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + DUET_Q6_K_QH + 32 * h));
        auto high = [&](int shift) {
          return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, shift), low2), 4);
        };
        const __m256i v0 = _mm256_or_si256(_mm256_and_si256(l0, low4), high(0));
        const __m256i v1 = _mm256_or_si256(_mm256_and_si256(l1, low4), high(2));
        const __m256i v2 =
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), high(4));
        const __m256i v3 =
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4), high(6));
        q[2 * h] = _mm512_inserti64x4(_mm512_castsi256_si512(v0), v1, 1);
        q[2 * h + 1] = _mm512_inserti64x4(_mm512_castsi256_si512(v2), v3, 1);
      }
      for (int i = 0; i < M; ++i) {
        const int8_t* xb = x.xq + i * x.ldq + b * 256;
        const __m512 s = _mm512_mul_ps(sc, _mm512_loadu_ps(x.dsub + i * x.lds + b * 16));
        for (int j = 0; j < 4; ++j) {
          const __m512i dot =
              _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[j], _mm512_loadu_si512(xb + 64 * j));
          const int a = 4 * j;
          const __m512i idx = _mm512_set_epi32(a + 3, a + 3, a + 3, a + 3, a + 2, a + 2, a + 2,
                                               a + 2, a + 1, a + 1, a + 1, a + 1, a, a, a, a);
          acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_permutexvar_ps(idx, s), acc[i]);
        }
        // w = d * sc * (u - 32): the zero point through the sums.
        off[i] = _mm512_fmadd_ps(sc, _mm512_loadu_ps(x.dxs + i * x.lds + b * 16), off[i]);
      }
    }
    for (int i = 0; i < M; ++i) {
      const float v = _mm512_reduce_add_ps(acc[i]) - 32.0f * _mm512_reduce_add_ps(off[i]);
      out[i * ldo + r] = accumulate ? out[i * ldo + r] + v : v;
    }
  }
}

// ---- unpacking tiles: 32 weights of one row at a time into their 8 places of the interleaved
// layout (4 bytes every lanes * 4 bytes), scales and offsets per sub-block beside.

// Writes 32 unsigned bytes (elements k .. k+31 of the tile, k a multiple of 4) of row `lane`.
void put32(const QTile& t, uint8_t* ug, int64_t k, int lane, __m256i bytes) {
  const __m256i idx = _mm256_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112);  // lanes == 16
  _mm256_i32scatter_epi32(reinterpret_cast<int*>(ug) + (k / 4) * 16 + lane, idx, bytes, 4);
  (void)t;
}

void put_sub(const QTile& t, float* sc, float* of, int64_t s, int lane, float scale, float off) {
  sc[s * t.lanes + lane] = scale;
  of[s * t.lanes + lane] = off;
}

struct TileRefs {
  uint8_t* u;
  float* sc;
  float* of;
};
TileRefs refs(const QTile& t, int g) {
  const int64_t k4 = t.k / 4, subs = t.k / t.sub;
  return {t.u + g * k4 * 64, t.scale + g * subs * 16, t.off + g * subs * 16};
}

// Lanes past `rows`: zero bytes, scales and offsets (they are computed, then not stored).
void zero_lanes(const QTile& t, int g, int rows, int64_t b0, int64_t b1, int64_t be) {
  const TileRefs r = refs(t, g);
  for (int lane = rows; lane < 16; ++lane)
    for (int64_t k = 0; k < (b1 - b0) * be; k += 32) {
      put32(t, r.u, k, lane, _mm256_setzero_si256());
      for (int64_t s = k / t.sub; s < (k + 32) / t.sub; ++s) put_sub(t, r.sc, r.of, s, lane, 0, 0);
    }
}

void unpack_q4_0(const uint8_t* w, int64_t rb, int rows, int64_t b0, int64_t b1, const QTile& t,
                 int g) {
  const TileRefs r = refs(t, g);
  const __m128i low4 = _mm_set1_epi8(0x0F);
  for (int lane = 0; lane < rows; ++lane)
    for (int64_t b = b0; b < b1; ++b) {
      const uint8_t* p = w + lane * rb + b * DUET_Q4_0_BYTES;
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + DUET_Q4_0_QS));
      const __m256i bytes =
          _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), low4), _mm_and_si128(q, low4));
      const int64_t k = (b - b0) * 32;
      put32(t, r.u, k, lane, bytes);
      const float d = f16_scalar(p + DUET_Q4_0_D);
      put_sub(t, r.sc, r.of, k / 32, lane, d, -8.0f * d);
    }
  zero_lanes(t, g, rows, b0, b1, 32);
}

void unpack_q8_0(const uint8_t* w, int64_t rb, int rows, int64_t b0, int64_t b1, const QTile& t,
                 int g) {
  const TileRefs r = refs(t, g);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int lane = 0; lane < rows; ++lane)
    for (int64_t b = b0; b < b1; ++b) {
      const uint8_t* p = w + lane * rb + b * DUET_Q8_0_BYTES;
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + DUET_Q8_0_QS));
      const int64_t k = (b - b0) * 32;
      put32(t, r.u, k, lane, _mm256_xor_si256(q, flip));
      const float d = f16_scalar(p + DUET_Q8_0_D);
      put_sub(t, r.sc, r.of, k / 32, lane, d, -128.0f * d);
    }
  zero_lanes(t, g, rows, b0, b1, 32);
}

void unpack_q4_k(const uint8_t* w, int64_t rb, int rows, int64_t b0, int64_t b1, const QTile& t,
                 int g) {
  const TileRefs r = refs(t, g);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int lane = 0; lane < rows; ++lane)
    for (int64_t b = b0; b < b1; ++b) {
      const uint8_t* p = w + lane * rb + b * DUET_Q4_K_BYTES;
      const float d = f16_scalar(p + DUET_Q4_K_D), dmin = f16_scalar(p + DUET_Q4_K_DMIN);
      const uint8_t* sc = p + DUET_Q4_K_SCALES;
      const int64_t k0 = (b - b0) * 256;
      for (int j = 0; j < 4; ++j) {
        const __m256i q =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + DUET_Q4_K_QS + 32 * j));
        put32(t, r.u, k0 + 64 * j, lane, _mm256_and_si256(q, low4));
        put32(t, r.u, k0 + 64 * j + 32, lane, _mm256_and_si256(_mm256_srli_epi16(q, 4), low4));
      }
      for (int s = 0; s < 8; ++s) {
        int scale, min;
        if (s < 4) {
          scale = sc[s] & 63;
          min = sc[s + 4] & 63;
        } else {
          scale = (sc[s + 4] & 0xF) | (sc[s - 4] >> 6) << 4;
          min = (sc[s + 4] >> 4) | (sc[s] >> 6) << 4;
        }
        put_sub(t, r.sc, r.of, k0 / 32 + s, lane, d * static_cast<float>(scale),
                -dmin * static_cast<float>(min));
      }
    }
  zero_lanes(t, g, rows, b0, b1, 256);
}

void unpack_q6_k(const uint8_t* w, int64_t rb, int rows, int64_t b0, int64_t b1, const QTile& t,
                 int g) {
  const TileRefs r = refs(t, g);
  const __m256i low4 = _mm256_set1_epi8(0x0F), low2 = _mm256_set1_epi8(3);
  for (int lane = 0; lane < rows; ++lane)
    for (int64_t b = b0; b < b1; ++b) {
      const uint8_t* p = w + lane * rb + b * DUET_Q6_K_BYTES;
      const float d = f16_scalar(p + DUET_Q6_K_D);
      const int64_t k0 = (b - b0) * 256;
      for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = p + DUET_Q6_K_QL + 64 * h;
        const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
        const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
        const __m256i qh =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + DUET_Q6_K_QH + 32 * h));
        auto high = [&](int shift) {
          return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, shift), low2), 4);
        };
        const int64_t k = k0 + 128 * h;
        put32(t, r.u, k, lane, _mm256_or_si256(_mm256_and_si256(l0, low4), high(0)));
        put32(t, r.u, k + 32, lane, _mm256_or_si256(_mm256_and_si256(l1, low4), high(2)));
        put32(t, r.u, k + 64, lane,
              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), high(4)));
        put32(t, r.u, k + 96, lane,
              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4), high(6)));
      }
      for (int s = 0; s < 16; ++s) {
        const float scale = d * static_cast<float>(static_cast<int8_t>(p[DUET_Q6_K_SCALES + s]));
        put_sub(t, r.sc, r.of, k0 / 16 + s, lane, scale, -32.0f * scale);
      }
    }
  zero_lanes(t, g, rows, b0, b1, 256);
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
      case 4:                                                                                      \
        return name##_m<4>(w, rb, rows, k, x, out, ldo, accumulate);                               \
      case 5:                                                                                      \
        return name##_m<5>(w, rb, rows, k, x, out, ldo, accumulate);                               \
      case 6:                                                                                      \
        return name##_m<6>(w, rb, rows, k, x, out, ldo, accumulate);                               \
      case 7:                                                                                      \
        return name##_m<7>(w, rb, rows, k, x, out, ldo, accumulate);                               \
      default:                                                                                     \
        return name##_m<8>(w, rb, rows, k, x, out, ldo, accumulate);                               \
    }                                                                                              \
  }
DUET_ROW_DOT(row_dot_q4_0)
DUET_ROW_DOT(row_dot_q8_0)
DUET_ROW_DOT(row_dot_q4_k)
DUET_ROW_DOT(row_dot_q6_k)
#undef DUET_ROW_DOT

constexpr QuantKernels make_table() {
  QuantKernels q{};
  q.isa = Isa::avx512;
  q.lanes = 16;
  q.mr = 8;
  q.signed_bytes = false;
  q.row_dot_rows = 8;
  q.quantize_q8 = quantize_q8;
  q.qgemm_tile = qgemm_tile;
  q.row_dot[static_cast<int>(QSlot::q8_0)] = row_dot_q8_0;
  q.row_dot[static_cast<int>(QSlot::q4_0)] = row_dot_q4_0;
  q.row_dot[static_cast<int>(QSlot::q4_k)] = row_dot_q4_k;
  q.row_dot[static_cast<int>(QSlot::q6_k)] = row_dot_q6_k;
  q.unpack[static_cast<int>(QSlot::q8_0)] = unpack_q8_0;
  q.unpack[static_cast<int>(QSlot::q4_0)] = unpack_q4_0;
  q.unpack[static_cast<int>(QSlot::q4_k)] = unpack_q4_k;
  q.unpack[static_cast<int>(QSlot::q6_k)] = unpack_q6_k;
  return q;
}

// Constant-initialised: nothing of this translation unit runs before the CPU is checked.
constexpr QuantKernels kTable = make_table();

}  // namespace
}  // namespace duet::cpu::kernels::quant_avx512

namespace duet::cpu::kernels {
const QuantKernels& avx512_quant_kernels() {
  return quant_avx512::kTable;
}
}  // namespace duet::cpu::kernels
