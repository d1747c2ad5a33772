// AVX2 + FMA + F16C kernels (compiled with -mavx2 -mfma -mf16c; run only where
// __builtin_cpu_supports says so). Register tile 6 x 16: 12 ymm accumulators, two ymm of B and
// one broadcast of A per k step (15 of the 16 ymm registers).
#include <immintrin.h>

#include "kernels/kernels.h"

namespace duet::cpu::kernels::avx2 {
namespace {

using V = __m256;
constexpr int W = 8;
constexpr Isa kIsa = Isa::avx2;
constexpr int kMR = 6, kNV = 2;
// A 6 x 256 A sliver (6 KiB) in L1 while 16-wide B slivers (16 KiB) stream from an L2-resident
// B block of 256 x 512 floats (512 KiB; AVX2 parts have 256 KiB to 2 MiB of L2).
constexpr int kKC = 256, kMC = 96, kNC = 512;
// Accumulators of the decode kernels (rows x weight rows in flight), half the register file.
constexpr int kGemvAcc = 8;

alignas(32) constexpr int32_t kMaskTable[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                0,  0,  0,  0,  0,  0,  0,  0};
inline __m256i lanes_mask(int n) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMaskTable + 8 - n));
}
inline V vzero() {
  return _mm256_setzero_ps();
}
inline V vset1(float x) {
  return _mm256_set1_ps(x);
}
inline V vload(const float* p) {
  return _mm256_loadu_ps(p);
}
inline void vstore(float* p, V v) {
  _mm256_storeu_ps(p, v);
}
inline V vload_n(const float* p, int n) {
  return _mm256_maskload_ps(p, lanes_mask(n));
}
inline void vstore_n(float* p, V v, int n) {
  _mm256_maskstore_ps(p, lanes_mask(n), v);
}
inline V vadd(V a, V b) {
  return _mm256_add_ps(a, b);
}
inline V vsub(V a, V b) {
  return _mm256_sub_ps(a, b);
}
inline V vdiv(V a, V b) {
  return _mm256_div_ps(a, b);
}
inline V vmul(V a, V b) {
  return _mm256_mul_ps(a, b);
}
inline V vmax(V a, V b) {
  return _mm256_max_ps(a, b);
}
inline V vsqrt(V a) {
  return _mm256_sqrt_ps(a);
}
inline V vmin(V a, V b) {
  return _mm256_min_ps(a, b);
}
inline V vfma(V a, V b, V c) {
  return _mm256_fmadd_ps(a, b, c);
}
inline float vhsum(V v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
// The sums of four vectors into out[0..3], in three horizontal adds and one fold.
inline void vhsum4(V a, V b, V c, V d, float* out) {
  const __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
}
inline float vhmax(V v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline V vround(V x) {
  return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
inline V vpow2i(V n) {
  const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
  return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
}
inline V vldexp(V p, V n) {
  return vmul(p, vpow2i(vmin(n, vset1(127.0f))));
}
inline V vzero_below(V x, float t, V r) {
  return _mm256_andnot_ps(_mm256_cmp_ps(x, vset1(t), _CMP_LT_OQ), r);
}
inline V vblend_eq(V x, V t, V a, V b) {
  return _mm256_blendv_ps(b, a, _mm256_cmp_ps(x, t, _CMP_EQ_OQ));
}

#include "kernels/half_scalar.inc"

// 8 f16 or bf16 values widened in registers for arithmetic (vcvtph2ps quiets signalling NaNs,
// which no arithmetic result can tell apart).
inline V vload_h(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline V vload_b(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// f16 -> f32 with F16C; NaN lanes are rebuilt in integers because vcvtph2ps quiets signalling
// NaNs and the scalar definition keeps the payload as it is.
void f16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  const __m256i lowbits = _mm256_set1_epi32(0x7fff), inf = _mm256_set1_epi32(0x7c00);
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    V f = _mm256_cvtph_ps(h);
    const __m256i w = _mm256_cvtepu16_epi32(h);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(w, lowbits), inf);
    if (!_mm256_testz_si256(nan, nan)) {
      const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x8000)), 16);
      const __m256i man = _mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x3ff)), 13);
      const __m256i bits =
          _mm256_or_si256(_mm256_or_si256(sign, man), _mm256_set1_epi32(0x7f800000));
      f = _mm256_blendv_ps(f, _mm256_castsi256_ps(bits), _mm256_castsi256_ps(nan));
    }
    _mm256_storeu_ps(dst + i, f);
  }
  for (; i < n; ++i) dst[i] = h2f(src[i]);
}

void bf16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  for (; i < n; ++i) dst[i] = b2f(src[i]);
}

void f32_to_f16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = f2h(src[i]);
}

void f32_to_bf16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
  const __m256i absmask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, lsb)), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, absmask), inf);
    const __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    const __m256i sel = _mm256_blendv_epi8(r, q, nan);
    // Values are below 2^16: the unsigned-saturating pack is exact; it works per 128-bit half.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(sel, sel), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_castsi256_si128(packed));
  }
  for (; i < n; ++i) dst[i] = f2b(src[i]);
}

}  // namespace

#include "kernels/impl.inc"

}  // namespace duet::cpu::kernels::avx2

namespace duet::cpu::kernels {
const Kernels& avx2_kernels() {
  return avx2::kTable;
}
}  // namespace duet::cpu::kernels
