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

void quantize_q8(const float* x, int64_t k, int block, int8_t* xq, float* d, int16_t* s16) {
  const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  for (int64_t b0 = 0; b0 < k / 32; b0 += block / 32) {
    const int64_t b1 = b0 + block / 32;
    __m512 m = _mm512_setzero_ps();
    for (int64_t b = b0; b < b1; ++b)
      m = _mm512_max_ps(m, _mm512_max_ps(_mm512_and_ps(_mm512_loadu_ps(x + b * 32), absmask),
                                         _mm512_and_ps(_mm512_loadu_ps(x + b * 32 + 16), absmask)));
    const float amax = _mm512_reduce_max_ps(m);
    const float id = amax > 0 ? 127.0f / amax : 0.0f;
    const __m512 vid = _mm512_set1_ps(id);
    for (int64_t b = b0; b < b1; ++b) {
      d[b] = amax / 127.0f;
      const __m512 v0 = _mm512_loadu_ps(x + b * 32), v1 = _mm512_loadu_ps(x + b * 32 + 16);
      const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, vid));  // round to nearest even
      const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, vid));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(xq + b * 32), _mm512_cvtsepi32_epi8(q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(xq + b * 32 + 16), _mm512_cvtsepi32_epi8(q1));
      s16[2 * b] = static_cast<int16_t>(_mm512_reduce_add_epi32(q0));
      s16[2 * b + 1] = static_cast<int16_t>(_mm512_reduce_add_epi32(q1));
    }
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

#include "kernels/qblocks_x86.inc"

// ---- row dots (decode): 64 weights (two decoded 32-byte chunks) per 512-bit step.

// How far ahead of the weights a row dot prefetches: with several activation rows the hardware
// prefetchers track the activations' streams and lose the weights' (measured: 8 rows through a
// 33 MB q4_0 weight ran 5x slower than the same work from L3 without this); with one row the
// weights' stream alone still ran 1.2-1.5x slower without it (decode M1 from memory, every format).
constexpr int kPrefetch = 1024;

// Bytes of a group of 256 weights (one super-block, or eight 32-blocks).
template <typename F>
constexpr int group_bytes() {
  return F::kElems == 32 ? 8 * F::kBytes : F::kBytes;
}

// The scales and offsets of a group as 16 lanes (sub-blocks 0-15; zero past the group's).
template <typename F>
void group_scales(const uint8_t* p, int nch, __m512* sc, __m512* of) {
  const GroupScales g = F::scales(p, nch);
  *sc = _mm512_insertf32x8(_mm512_zextps256_ps512(g.sc[0]), g.sc[1], 1);
  *of = _mm512_insertf32x8(_mm512_zextps256_ps512(g.of[0]), g.of[1], 1);
  if constexpr (F::kSigned)  // u = q + 128 (the xor below): w = d (u - 128)
    *of = _mm512_fnmadd_ps(*sc, _mm512_set1_ps(128.0f), *of);
}

// Chunks c and c + 1 of a group as 64 unsigned bytes (c + 1 only when `two`); in one decode
// where the format has one (F::chunk2, the k-quants).
template <typename F>
__m512i step_bytes(const uint8_t* p, int c, bool two) {
  if constexpr (requires { F::chunk2(p, c); })
    if (two) return F::chunk2(p, c);
  const __m256i lo = F::chunk(p, c);
  __m512i u = two ? _mm512_inserti64x4(_mm512_castsi256_si512(lo), F::chunk(p, c + 1), 1)
                  : _mm512_zextsi256_si512(lo);
  if constexpr (F::kSigned) u = _mm512_xor_si512(u, _mm512_set1_epi8(static_cast<char>(0x80)));
  return u;
}

// One group of R rows (their groups at p[0..R)): kNch chunks (8, a whole group, known when
// compiling), or nch (the last, partial group of a row whose K is not a multiple of 256). Several
// rows share each activation load and keep several weight streams in flight.
// Steps of whole groups go round kAcc independent accumulators per weight and activation row
// (acc[(r * M + i) * kAcc + step % kAcc]): one chain of fused multiply-adds would otherwise wait
// out each one's latency; the partial group uses the first.
template <typename F, int M, int R, int kNch, int kAcc>
inline void row_dot_group(const uint8_t* const* p, int64_t g, int nch, const Q8Rows& x, __m512* acc,
                          __m512* off) {
  constexpr int kGB = group_bytes<F>(), kSG = 256 / F::kSub, kStepSubs = 64 / F::kSub;
  if constexpr (kNch > 0) nch = kNch;
  const __m512i lane_sub = F::kSub == 32
                               ? _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0)
                               : _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  for (int r = 0; r < R; ++r)
    for (int l = 0; l < kGB; l += 64)
      _mm_prefetch(reinterpret_cast<const char*>(p[r] + kPrefetch + l), _MM_HINT_T0);
  __m512 sc[R], of[R];
  for (int r = 0; r < R; ++r) group_scales<F>(p[r], nch, &sc[r], &of[r]);
  const __mmask16 subs = kNch > 0 && kSG == 16
                             ? __mmask16{0xFFFF}
                             : static_cast<__mmask16>((1u << (nch * 32 / F::kSub)) - 1u);
  __m512 s[R * M];
  for (int i = 0; i < M; ++i) {
    const __m512 ds = _mm512_maskz_loadu_ps(subs, x.dsub + i * x.lds + g * kSG);
    const __m512 dx = _mm512_maskz_loadu_ps(subs, x.dxs + i * x.lds + g * kSG);
    for (int r = 0; r < R; ++r) {
      s[r * M + i] = _mm512_mul_ps(sc[r], ds);
      off[r * M + i] = _mm512_fmadd_ps(of[r], dx, off[r * M + i]);
    }
  }
#pragma GCC unroll 4
  for (int c = 0; c < nch; c += 2) {
    const bool two = kNch > 0 || c + 1 < nch;
    __m512i u[R];
    for (int r = 0; r < R; ++r) u[r] = step_bytes<F>(p[r], c, two);
    const __m512i idx = _mm512_add_epi32(lane_sub, _mm512_set1_epi32(c / 2 * kStepSubs));
    for (int i = 0; i < M; ++i) {
      const int8_t* xp = x.xq + i * x.ldq + g * 256 + 32 * c;
      const __m512i xv = two ? _mm512_loadu_si512(xp) : _mm512_maskz_loadu_epi8(0xFFFFFFFF, xp);
      for (int r = 0; r < R; ++r) {
        const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[r], xv);
        __m512& a = acc[(r * M + i) * kAcc + (kNch > 0 ? c / 2 % kAcc : 0)];
        a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_permutexvar_ps(idx, s[r * M + i]), a);
      }
    }
  }
}

// R weight rows from w through M activation rows: per row and group the scales once; per
// 64-weight step one vpdpbusd per activation row and its int32 lanes (4 weights each) scaled by
// their sub-block's scale times the activation block's.
template <typename F, int M, int R>
inline void row_dot_rows(const uint8_t* w, int64_t row_bytes, int64_t k, const Q8Rows& x,
                         float* out, int64_t ldo, bool accumulate) {
  constexpr int kGB = group_bytes<F>();
  constexpr int kAcc = R * M == 1 ? 4 : R * M == 2 ? 2 : 1;
  const int64_t full = k / 256;
  const int tail = static_cast<int>(k % 256 / 32);
  __m512 acc[R * M * kAcc], off[R * M];
  for (int i = 0; i < R * M * kAcc; ++i) acc[i] = _mm512_setzero_ps();
  for (int i = 0; i < R * M; ++i) off[i] = _mm512_setzero_ps();
  const uint8_t* p[R];
  for (int r = 0; r < R; ++r) p[r] = w + r * row_bytes;
  for (int64_t g = 0; g < full; ++g) {
    row_dot_group<F, M, R, 8, kAcc>(p, g, 8, x, acc, off);
    for (int r = 0; r < R; ++r) p[r] += kGB;
  }
  if (tail) row_dot_group<F, M, R, 0, kAcc>(p, full, tail, x, acc, off);
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < M; ++i) {
      __m512 t = off[r * M + i];
      for (int a = 0; a < kAcc; ++a) t = _mm512_add_ps(t, acc[(r * M + i) * kAcc + a]);
      const float v = _mm512_reduce_add_ps(t);
      out[i * ldo + r] = accumulate ? out[i * ldo + r] + v : v;
    }
}

// One activation row takes weight rows in pairs (two streams from memory, one activation load
// for both: decode M1 from memory took 1.1-1.3x less CPU time on q4_0, q5_1, q8_0, q6_k and, once
// its decode had become one 512-bit step, q3_k; q2_k ran slower so). q2_k and q3_k now have
// integer row dots of their own (row_dot_k16 above).
template <typename F, int M>
void row_dot_m(const uint8_t* w, int64_t row_bytes, int rows, int64_t k, const Q8Rows& x,
               float* out, int64_t ldo, bool accumulate) {
  constexpr int R = M == 1 && F::kMaxByte > 3 ? 2 : 1;
  int r = 0;
  for (; r + R <= rows; r += R)
    row_dot_rows<F, M, R>(w + r * row_bytes, row_bytes, k, x, out + r, ldo, accumulate);
  for (; r < rows; ++r)
    row_dot_rows<F, M, 1>(w + r * row_bytes, row_bytes, k, x, out + r, ldo, accumulate);
}

// q2_k and q3_k with one activation scale per super-block (act_block 256), as on AVX2: per
// 64-weight step the byte products' int16 pairs (vpmaddubsw) meet their four sub-blocks' integer
// scales and sum in int32 in one vpdpwssd; the offsets (q2_k's mins, q3_k's -4 per weight) meet
// the activations' sums per 16; one or two conversions to float per group and row (decode M1
// 1.1-1.2x less CPU time than the float path below, M4 and M8 1.2-1.35x). One weight row at a
// time.
template <typename F, int M>
void row_dot_k16_row(const uint8_t* p, int64_t k, const Q8Rows& x, float* out, int64_t ldo,
                     bool accumulate) {
  __m512 acc[M];
  __m256 accm[M];
  for (int i = 0; i < M; ++i) {
    acc[i] = _mm512_setzero_ps();
    accm[i] = _mm256_setzero_ps();
  }
  for (int64_t g = 0; g < k / 256; ++g, p += F::kBytes) {
    _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetch), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetch + 64), _MM_HINT_T0);
    const __m256i s16 = F::kMins ? _mm256_cvtepu8_epi16(F::scale_bytes(p))
                                 : _mm256_cvtepi8_epi16(F::scale_bytes(p));
    const __m512i sc = _mm512_castsi256_si512(s16);
    __m512i isum[M];
    for (int i = 0; i < M; ++i) isum[i] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < 8; c += 2) {
      // Sub-block 2c + q's scale in every int16 lane of the q-th 128 bits.
      const __m512i s = _mm512_permutexvar_epi16(
          _mm512_inserti64x4(_mm512_castsi256_si512(
                                 _mm256_setr_m128i(_mm_set1_epi16(static_cast<short>(2 * c)),
                                                   _mm_set1_epi16(static_cast<short>(2 * c + 1)))),
                             _mm256_setr_m128i(_mm_set1_epi16(static_cast<short>(2 * c + 2)),
                                               _mm_set1_epi16(static_cast<short>(2 * c + 3))),
                             1),
          sc);
      const __m512i u = F::chunk2(p, c);
      for (int i = 0; i < M; ++i) {
        const __m512i xv = _mm512_loadu_si512(x.xq + i * x.ldq + g * 256 + 32 * c);
        isum[i] = _mm512_dpwssd_epi32(isum[i], _mm512_maddubs_epi16(u, xv), s);
      }
    }
    for (int i = 0; i < M; ++i) {
      const float dx = x.dsub[i * x.lds + g * 16];
      const __m256i xs =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.s16 + i * (x.ldq / 16) + g * 16));
      if constexpr (F::kMins) {
        const __m256i ms = _mm256_madd_epi16(_mm256_cvtepu8_epi16(F::min_bytes(p)), xs);
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[i]),
                                 _mm512_set1_ps(qb_f16(p + DUET_Q2_K_D) * dx), acc[i]);
        accm[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms),
                                  _mm256_set1_ps(-qb_f16(p + DUET_Q2_K_DMIN) * dx), accm[i]);
      } else {
        // w = d sc (u - 4): the offset is -4 sc per weight, summed with the products in int32.
        const __m256i os = _mm256_slli_epi32(_mm256_madd_epi16(s16, xs), 2);
        acc[i] = _mm512_fmadd_ps(
            _mm512_cvtepi32_ps(_mm512_sub_epi32(isum[i], _mm512_zextsi256_si512(os))),
            _mm512_set1_ps(qb_f16(p + DUET_Q3_K_D) * dx), acc[i]);
      }
    }
  }
  for (int i = 0; i < M; ++i) {
    const float v = _mm512_reduce_add_ps(_mm512_add_ps(acc[i], _mm512_zextps256_ps512(accm[i])));
    out[i * ldo] = accumulate ? out[i * ldo] + v : v;
  }
}

template <typename F>
void row_dot_k16(const uint8_t* w, int64_t rb, int rows, int64_t k, const Q8Rows& x, int m,
                 float* out, int64_t ldo, bool accumulate) {
  for (int r = 0; r < rows; ++r) {
    const uint8_t* wr = w + r * rb;
    switch (m) {
      case 1:
        row_dot_k16_row<F, 1>(wr, k, x, out + r, ldo, accumulate);
        break;
      case 2:
        row_dot_k16_row<F, 2>(wr, k, x, out + r, ldo, accumulate);
        break;
      case 3:
        row_dot_k16_row<F, 3>(wr, k, x, out + r, ldo, accumulate);
        break;
      case 4:
        row_dot_k16_row<F, 4>(wr, k, x, out + r, ldo, accumulate);
        break;
      case 5:
        row_dot_k16_row<F, 5>(wr, k, x, out + r, ldo, accumulate);
        break;
      case 6:
        row_dot_k16_row<F, 6>(wr, k, x, out + r, ldo, accumulate);
        break;
      case 7:
        row_dot_k16_row<F, 7>(wr, k, x, out + r, ldo, accumulate);
        break;
      default:
        row_dot_k16_row<F, 8>(wr, k, x, out + r, ldo, accumulate);
    }
  }
}

template <typename F>
void row_dot(const uint8_t* w, int64_t rb, int rows, int64_t k, const Q8Rows& x, int m, float* out,
             int64_t ldo, bool accumulate) {
  switch (m) {
    case 1:
      return row_dot_m<F, 1>(w, rb, rows, k, x, out, ldo, accumulate);
    case 2:
      return row_dot_m<F, 2>(w, rb, rows, k, x, out, ldo, accumulate);
    case 3:
      return row_dot_m<F, 3>(w, rb, rows, k, x, out, ldo, accumulate);
    case 4:
      return row_dot_m<F, 4>(w, rb, rows, k, x, out, ldo, accumulate);
    case 5:
      return row_dot_m<F, 5>(w, rb, rows, k, x, out, ldo, accumulate);
    case 6:
      return row_dot_m<F, 6>(w, rb, rows, k, x, out, ldo, accumulate);
    case 7:
      return row_dot_m<F, 7>(w, rb, rows, k, x, out, ldo, accumulate);
    default:
      return row_dot_m<F, 8>(w, rb, rows, k, x, out, ldo, accumulate);
  }
}

// ---- unpacking tiles: 32 weights of one row at a time into their 8 places of the interleaved
// layout (4 bytes every 64), scales and offsets per sub-block beside.

void put32(uint8_t* ug, int64_t k, int lane, __m256i bytes) {
  const __m256i idx = _mm256_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112);
  _mm256_i32scatter_epi32(reinterpret_cast<int*>(ug) + (k / 4) * 16 + lane, idx, bytes, 4);
}

template <typename F>
void unpack(const uint8_t* w, int64_t rb, int rows, int64_t b0, int64_t b1, const QTile& t, int g) {
  constexpr int kPerGroup = 256 / F::kElems, kSG = 256 / F::kSub;
  const int64_t k4 = t.k / 4, subs = t.k / t.sub;
  uint8_t* ug = t.u + g * k4 * 64;
  float* tsc = t.scale + g * subs * 16;
  float* tof = t.off + g * subs * 16;
  for (int lane = 0; lane < 16; ++lane)
    for (int64_t b = b0; b < b1; b += kPerGroup) {
      const int64_t k0 = (b - b0) * F::kElems;
      const int nch = static_cast<int>(min8((b1 - b) * F::kElems / 32));
      alignas(64) float sc[16], of[16];
      if (lane < rows) {
        const uint8_t* p = w + lane * rb + b * F::kBytes;
        __m512 vs, vo;
        group_scales<F>(p, nch, &vs, &vo);
        _mm512_store_ps(sc, vs);
        _mm512_store_ps(of, vo);
        for (int c = 0; c < nch; ++c) {
          __m256i u = F::chunk(p, c);
          if constexpr (F::kSigned)
            u = _mm256_xor_si256(u, _mm256_set1_epi8(static_cast<char>(0x80)));
          put32(ug, k0 + 32 * c, lane, u);
        }
      } else {
        _mm512_store_ps(sc, _mm512_setzero_ps());
        _mm512_store_ps(of, _mm512_setzero_ps());
        for (int c = 0; c < nch; ++c) put32(ug, k0 + 32 * c, lane, _mm256_setzero_si256());
      }
      const int64_t s0 = k0 / F::kSub;
      for (int s = 0; s < nch * 32 / F::kSub && s < kSG; ++s) {
        tsc[(s0 + s) * 16 + lane] = sc[s];
        tof[(s0 + s) * 16 + lane] = of[s];
      }
    }
}

template <typename F>
constexpr void set_format(QuantKernels& q, QSlot slot) {
  q.row_dot[static_cast<int>(slot)] = row_dot<F>;
  q.unpack[static_cast<int>(slot)] = unpack<F>;
}

constexpr QuantKernels make_table() {
  QuantKernels q{};
  q.isa = Isa::avx512;
  q.lanes = 16;
  q.mr = 8;
  q.signed_bytes = false;
  q.row_dot_rows = 8;
  q.quantize_q8 = quantize_q8;
  q.qgemm_tile = qgemm_tile;
  set_format<QbQ8_0>(q, QSlot::q8_0);
  set_format<QbQ4_0>(q, QSlot::q4_0);
  set_format<QbQ4_1>(q, QSlot::q4_1);
  set_format<QbQ5_0>(q, QSlot::q5_0);
  set_format<QbQ5_1>(q, QSlot::q5_1);
  set_format<QbQ2_K>(q, QSlot::q2_k);
  set_format<QbQ3_K>(q, QSlot::q3_k);
  set_format<QbQ4_K>(q, QSlot::q4_k);
  set_format<QbQ5_K>(q, QSlot::q5_k);
  set_format<QbQ6_K>(q, QSlot::q6_k);
  set_format<QbQ4_Z>(q, QSlot::q4_z);
  q.row_dot[static_cast<int>(QSlot::q2_k)] = row_dot_k16<QbQ2_K>;
  q.act_block[static_cast<int>(QSlot::q2_k)] = 256;
  q.row_dot[static_cast<int>(QSlot::q3_k)] = row_dot_k16<QbQ3_K>;
  q.act_block[static_cast<int>(QSlot::q3_k)] = 256;
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
