// The AVX512-BF16 register tile (compiled with -mavx512f -mavx512bf16; run only
// where __builtin_cpu_supports("avx512bf16") says so, through avx512bf16_kernels()). The
// AVX-512 f32 tile's shape, 14 x 32, but each vdpbf16ps multiplies two k per lane: 28 zmm
// accumulators, two zmm of B pairs and one broadcast A pair per step of two k.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "kernels/kernels.h"

namespace duet::cpu::kernels::avx512bf16 {
namespace {

constexpr int kMR = 14, kNV = 2, W = 16;
constexpr int64_t kPrefetch = 8;  // B pair rows ahead, as the f32 tile

inline __mmask16 lanes_mask(int n) {
  return static_cast<__mmask16>((1u << n) - 1u);
}

inline __m512bh pairs_at(const uint32_t* p) {
  return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p));
}

inline __m512bh broadcast_pair(const uint32_t* p) {
  uint32_t w;
  __builtin_memcpy(&w, p, sizeof w);
  return reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(w)));
}

}  // namespace

void tile_bf16(int64_t pairs, const void* a_, const void* b_, float* c, int64_t ldc, int m, int n,
               bool accumulate) {
  const uint32_t* a = static_cast<const uint32_t*>(a_);
  const uint32_t* b = static_cast<const uint32_t*>(b_);
  for (int i = 0; i < m; ++i) {
    __builtin_prefetch(c + i * ldc, 1);
    __builtin_prefetch(c + i * ldc + n - 1, 1);
  }
  __m512 acc[kMR][kNV];
#pragma GCC unroll 16
  for (int i = 0; i < kMR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    __builtin_prefetch(b + kPrefetch * kNV * W);
    __builtin_prefetch(b + kPrefetch * kNV * W + W);
    const __m512bh b0 = pairs_at(b), b1 = pairs_at(b + W);
#pragma GCC unroll 16
    for (int i = 0; i < kMR; ++i) {
      const __m512bh av = broadcast_pair(a + i);
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], av, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], av, b1);
    }
    a += kMR;
    b += kNV * W;
  }
#pragma GCC unroll 16
  for (int i = 0; i < kMR; ++i) {
    if (i >= m) break;
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) {
      const int cols = n - v * W;
      if (cols <= 0) break;
      float* q = c + i * ldc + v * W;
      const __mmask16 k = cols >= W ? static_cast<__mmask16>(0xffff) : lanes_mask(cols);
      const __m512 r =
          accumulate ? _mm512_add_ps(_mm512_maskz_loadu_ps(k, q), acc[i][v]) : acc[i][v];
      _mm512_mask_storeu_ps(q, k, r);
    }
  }
}

}  // namespace duet::cpu::kernels::avx512bf16
