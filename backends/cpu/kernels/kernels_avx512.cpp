// AVX-512 kernels (compiled with -mavx512f -mavx2 -mfma -mf16c; run only where
// __builtin_cpu_supports says so). Register tile 14 x 32: 28 zmm accumulators, two zmm of B and
// one broadcast of A per k step (31 of the 32 zmm registers; 12 x 32 measured 3% slower).
// GCC 12 warns about the deliberately undefined vectors inside its own AVX-512 intrinsics
// (GCC bug 105593); the warnings point into the header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "kernels/kernels.h"

namespace duet::cpu::kernels::avx512 {
namespace {

using V = __m512;
constexpr int W = 16;
constexpr Isa kIsa = Isa::avx512;
constexpr int kMR = 14, kNV = 2;
// A 14 x 512 A sliver (28 KiB) stays in L1 (48 KiB) while 32-wide B slivers stream (prefetched)
// from the L2-resident B block of 512 x 384 floats (768 KiB of the 2 MiB L2, next to the A row
// block of 140 x 512 and the C tiles). Measured against kc 256..1024 and nc 128..1536 on one
// core (medians of 7 interleaved runs): 2048^3 157 GFLOP/s vs 143 for kc 256 / nc 1536.
constexpr int kKC = 512, kMC = 140, kNC = 384;
// Accumulators of the decode kernels (rows x weight rows in flight), half the register file.
constexpr int kGemvAcc = 16;

inline __mmask16 lanes_mask(int n) {
  return static_cast<__mmask16>((1u << n) - 1u);
}
inline V vzero() {
  return _mm512_setzero_ps();
}
inline V vset1(float x) {
  return _mm512_set1_ps(x);
}
inline V vload(const float* p) {
  return _mm512_loadu_ps(p);
}
inline void vstore(float* p, V v) {
  _mm512_storeu_ps(p, v);
}
inline V vload_n(const float* p, int n) {
  return _mm512_maskz_loadu_ps(lanes_mask(n), p);
}
inline void vstore_n(float* p, V v, int n) {
  _mm512_mask_storeu_ps(p, lanes_mask(n), v);
}
inline V vadd(V a, V b) {
  return _mm512_add_ps(a, b);
}
inline V vsub(V a, V b) {
  return _mm512_sub_ps(a, b);
}
inline V vdiv(V a, V b) {
  return _mm512_div_ps(a, b);
}
inline V vmul(V a, V b) {
  return _mm512_mul_ps(a, b);
}
inline V vmax(V a, V b) {
  return _mm512_max_ps(a, b);
}
inline V vsqrt(V a) {
  return _mm512_sqrt_ps(a);
}
inline V vmin(V a, V b) {
  return _mm512_min_ps(a, b);
}
inline V vfma(V a, V b, V c) {
  return _mm512_fmadd_ps(a, b, c);
}
inline float vhsum(V v) {
  return _mm512_reduce_add_ps(v);
}
// The sums of four vectors into out[0..3]: each folded to 256 bits, then three horizontal adds
// and one fold for the four together (a quarter of the shuffles of four separate reductions).
inline __m256 fold256(V v) {
  return _mm256_add_ps(_mm512_castps512_ps256(v),
                       _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}
inline void vhsum4(V a, V b, V c, V d, float* out) {
  const __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(fold256(a), fold256(b)),
                                     _mm256_hadd_ps(fold256(c), fold256(d)));
  _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
}
inline float vhmax(V v) {
  return _mm512_reduce_max_ps(v);
}
inline V vround(V x) {
  return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
inline V vldexp(V p, V n) {
  return _mm512_scalef_ps(p, n);
}
inline V vzero_below(V x, float t, V r) {
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, vset1(t), _CMP_NLT_UQ), r);
}
inline V vblend_eq(V x, V t, V a, V b) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, t, _CMP_EQ_OQ), b, a);
}

#include "kernels/half_scalar.inc"

// 16 f16 or bf16 values widened in registers for arithmetic (vcvtph2ps quiets signalling NaNs,
// which no arithmetic result can tell apart).
inline V vload_h(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline V vload_b(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// f16 -> f32 with vcvtph2ps; it quiets signalling NaNs, the scalar definition keeps the payload
// bits as they are, so NaN lanes are rebuilt with integer operations.
void f16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  const __m512i lowbits = _mm512_set1_epi32(0x7fff), inf = _mm512_set1_epi32(0x7c00);
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    V f = _mm512_cvtph_ps(h);
    const __m512i w = _mm512_cvtepu16_epi32(h);
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(w, lowbits), inf);
    if (nan) {
      const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(w, _mm512_set1_epi32(0x8000)), 16);
      const __m512i man = _mm512_slli_epi32(_mm512_and_si512(w, _mm512_set1_epi32(0x3ff)), 13);
      const __m512i bits =
          _mm512_or_si512(_mm512_or_si512(sign, man), _mm512_set1_epi32(0x7f800000));
      f = _mm512_mask_mov_ps(f, nan, _mm512_castsi512_ps(bits));
    }
    _mm512_storeu_ps(dst + i, f);
  }
  for (; i < n; ++i) dst[i] = h2f(src[i]);
}

void bf16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm512_storeu_si512(dst + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  for (; i < n; ++i) dst[i] = b2f(src[i]);
}

// vcvtps2ph rounds to nearest even, saturates to infinity and quiets NaNs keeping the top
// payload bits: the same results as the scalar definition (checked exhaustively by the tests).
void f32_to_f16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = f2h(src[i]);
}

// f32 -> bf16 in integer arithmetic (round to nearest even by adding 0x7fff + lsb). Not
// vcvtneps2bf16: that instruction flushes subnormal inputs and outputs to zero.
void f32_to_bf16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff);
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  for (; i + 16 <= n; i += 16) {
    const __m512i u = _mm512_loadu_si512(src + i);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(bias, lsb)), 16);
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, absmask), inf);
    r = _mm512_mask_mov_epi32(r, nan,
                              _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(r));
  }
  for (; i < n; ++i) dst[i] = f2b(src[i]);
}

}  // namespace

#include "kernels/impl.inc"

}  // namespace duet::cpu::kernels::avx512

namespace duet::cpu::kernels {
const Kernels& avx512_kernels() {
  return avx512::kTable;
}
// The same kernels plus the AVX512-BF16 tile (same 14 x 32 shape) for matmuls computed in bf16.
const Kernels& avx512bf16_kernels() {
  static constexpr Kernels table = avx512::make_table(Isa::avx512bf16, &avx512bf16::tile_bf16);
  return table;
}
}  // namespace duet::cpu::kernels
