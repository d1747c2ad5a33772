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

void quantize_q8(const float* x, int64_t k, int block, int8_t* xq, float* d, int16_t* s16) {
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t b0 = 0; b0 < k / 32; b0 += block / 32) {
    const int64_t b1 = b0 + block / 32;
    __m256 m = _mm256_setzero_ps();
    for (int64_t b = b0; b < b1; ++b)
      for (int i = 0; i < 4; ++i)
        m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + b * 32 + 8 * i), absmask));
    const float amax = hmax(m);
    const float id = amax > 0 ? 127.0f / amax : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    for (int64_t b = b0; b < b1; ++b) {
      d[b] = amax / 127.0f;
      __m256i q[4];
      for (int i = 0; i < 4; ++i)
        q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + b * 32 + 8 * i), vid));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(xq + b * 32), pack16(q[0], q[1]));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(xq + b * 32 + 16), pack16(q[2], q[3]));
      s16[2 * b] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[0], q[1])));
      s16[2 * b + 1] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[2], q[3])));
    }
  }
}

template <int M>
void tile_m(const QTile& t, int g, int64_t s0, int64_t s1, const Q8Rows& x, float* c, int64_t ldc,
            int n, bool accumulate) {
  const int64_t k4 = t.k / 4, subs = t.k / t.sub;
  const uint8_t* u = t.u + g * k4 * 32;
  const float* sc = t.scale + g * subs * 8;
  const float* of = t.off + g * subs * 8;
  const int steps = t.sub / 4;
  const int run = t.signed_bytes ? 1 : t.i16_steps < steps ? t.i16_steps : steps;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 f[M];
  for (int i = 0; i < M; ++i) f[i] = _mm256_setzero_ps();
  for (int64_t s = s0; s < s1; ++s) {
    __m256i a[M];
    for (int i = 0; i < M; ++i) a[i] = _mm256_setzero_si256();
    const uint8_t* us = u + s * steps * 32;
    const int8_t* xs = x.xq + s * t.sub;
    for (int st0 = 0; st0 < steps; st0 += run) {
      __m256i h[M];  // int16 sums of `run` steps
      for (int i = 0; i < M; ++i) h[i] = _mm256_setzero_si256();
      const int st1 = st0 + run < steps ? st0 + run : steps;
      for (int st = st0; st < st1; ++st) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(us + st * 32));
        if (t.signed_bytes) {
          const __m256i aw = _mm256_sign_epi8(w, w);
          for (int i = 0; i < M; ++i)
            h[i] = _mm256_add_epi16(
                h[i],
                _mm256_maddubs_epi16(
                    aw, _mm256_sign_epi8(_mm256_set1_epi32(load_i32(xs + i * x.ldq + st * 4)), w)));
        } else {
          for (int i = 0; i < M; ++i)
            h[i] = _mm256_add_epi16(
                h[i],
                _mm256_maddubs_epi16(w, _mm256_set1_epi32(load_i32(xs + i * x.ldq + st * 4))));
        }
      }
      for (int i = 0; i < M; ++i) a[i] = _mm256_add_epi32(a[i], _mm256_madd_epi16(h[i], ones));
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

#include "kernels/qblocks_x86.inc"

// u8 x s8 byte products of one 32-weight chunk summed into 8 int32 lanes (4 weights each);
// signed (q8_0) bytes move their sign onto the activations.
template <typename F>
__m256i chunk_dot(__m256i u, __m256i xv) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (F::kSigned)
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(u, u), _mm256_sign_epi8(xv, u)),
                             ones);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, xv), ones);
}

// How far ahead of the weights a row dot prefetches (as quant_avx512.cpp: decode M1 from memory
// ran 1.2-1.5x slower without it, on every format).
constexpr int kPrefetch = 1024;

// Rows of activations' floats for sub-blocks [s, s + n) of a group (n <= 8), zero past n.
__m256 load_subs(const float* p, int n) {
  if (n == 8) return _mm256_loadu_ps(p);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane));
}

// One group of R rows (their groups at p[0..R)): kNch chunks (8, a whole group, known when
// compiling), or nch (the last, partial group of a row whose K is not a multiple of 256). Several
// rows share each activation load and keep several weight streams in flight.
// Chunks of whole groups go round kAcc independent accumulators per weight and activation row
// (acc[(r * M + i) * kAcc + c % kAcc]): one chain of fused multiply-adds would otherwise wait out
// each one's latency; the partial group uses the first.
template <typename F, int M, int R, int kNch, int kAcc>
inline void row_dot_group(const uint8_t* const* p, int64_t g, int nch, const Q8Rows& x, __m256* acc,
                          __m256* off) {
  constexpr int kSG = 256 / F::kSub;
  constexpr int kOctetChunks = 8 * F::kSub / 32;  // chunks per octet of sub-blocks: 8 or 4
  if constexpr (kNch > 0) nch = kNch;
  for (int r = 0; r < R; ++r)
    for (int l = 0; l < F::kBytes * (F::kElems == 32 ? 8 : 1); l += 64)
      _mm_prefetch(reinterpret_cast<const char*>(p[r] + kPrefetch + l), _MM_HINT_T0);
  GroupScales gs[R];
  for (int r = 0; r < R; ++r) gs[r] = F::scales(p[r], nch);
  const int nsub = nch * 32 / F::kSub;
#pragma GCC unroll 2
  for (int h = 0; h * 8 < nsub; ++h) {
    const int n = nsub - 8 * h < 8 ? nsub - 8 * h : 8;
    __m256 s[R * M];
    // With one scale per chunk, each chunk's scale is broadcast from a copy in memory: a load
    // instead of a lane permute on the shuffle port, the busiest in this loop.
    alignas(32) float sb[R * M][8];
    for (int i = 0; i < M; ++i) {
      const int64_t so = i * x.lds + g * kSG + 8 * h;
      const __m256 ds = kNch > 0 ? _mm256_loadu_ps(x.dsub + so) : load_subs(x.dsub + so, n);
      const __m256 dx = kNch > 0 ? _mm256_loadu_ps(x.dxs + so) : load_subs(x.dxs + so, n);
      for (int r = 0; r < R; ++r) {
        s[r * M + i] = _mm256_mul_ps(gs[r].sc[h], ds);
        off[r * M + i] = _mm256_fmadd_ps(gs[r].of[h], dx, off[r * M + i]);
        if constexpr (F::kSub == 32) _mm256_store_ps(sb[r * M + i], s[r * M + i]);
      }
    }
    const int c1 = (h + 1) * kOctetChunks < nch ? (h + 1) * kOctetChunks : nch;
#pragma GCC unroll 8
    for (int c = h * kOctetChunks; c < c1; ++c) {
      __m256i u[R];
      for (int r = 0; r < R; ++r) u[r] = F::chunk(p[r], c);
      const int cs = c - h * kOctetChunks;
      const __m256i idx = F::kSub == 32
                              ? _mm256_set1_epi32(cs)
                              : _mm256_setr_epi32(2 * cs, 2 * cs, 2 * cs, 2 * cs, 2 * cs + 1,
                                                  2 * cs + 1, 2 * cs + 1, 2 * cs + 1);
      for (int i = 0; i < M; ++i) {
        const __m256i xv = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(x.xq + i * x.ldq + g * 256 + 32 * c));
        for (int r = 0; r < R; ++r) {
          __m256& a = acc[(r * M + i) * kAcc + (kNch > 0 ? c % kAcc : 0)];
          const __m256 sc = F::kSub == 32 ? _mm256_broadcast_ss(&sb[r * M + i][cs])
                                          : _mm256_permutevar8x32_ps(s[r * M + i], idx);
          a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(chunk_dot<F>(u[r], xv)), sc, a);
        }
      }
    }
  }
}

// R weight rows from w through M activation rows: per row and group the scales once; per
// 32-weight chunk one product per activation row, its int32 lanes scaled by their sub-block's
// scale times the activation block's. Groups are taken in octets of sub-blocks (8 lanes of scales).
template <typename F, int M, int R>
inline void row_dot_rows(const uint8_t* w, int64_t row_bytes, int64_t k, const Q8Rows& x,
                         float* out, int64_t ldo, bool accumulate) {
  constexpr int kGB = F::kElems == 32 ? 8 * F::kBytes : F::kBytes;
  constexpr int kAcc = R * M == 1 ? 4 : R * M == 2 ? 2 : 1;
  const int64_t full = k / 256;
  const int tail = static_cast<int>(k % 256 / 32);
  __m256 acc[R * M * kAcc], off[R * M];
  for (int i = 0; i < R * M * kAcc; ++i) acc[i] = _mm256_setzero_ps();
  for (int i = 0; i < R * M; ++i) off[i] = _mm256_setzero_ps();
  const uint8_t* p[R];
  for (int r = 0; r < R; ++r) p[r] = w + r * row_bytes;
  for (int64_t g = 0; g < full; ++g) {
    row_dot_group<F, M, R, 8, kAcc>(p, g, 8, x, acc, off);
    for (int r = 0; r < R; ++r) p[r] += kGB;
  }
  if (tail) row_dot_group<F, M, R, 0, kAcc>(p, full, tail, x, acc, off);
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < M; ++i) {
      __m256 t = off[r * M + i];
      for (int a = 0; a < kAcc; ++a) t = _mm256_add_ps(t, acc[(r * M + i) * kAcc + a]);
      const float v = hsum(t);
      out[i * ldo + r] = accumulate ? out[i * ldo + r] + v : v;
    }
}

// One activation row takes weight rows in pairs (two streams from memory, one activation load
// for both: decode M1 from memory took 1.1-1.3x less CPU time on q4_0, q5_1, q8_0 and q6_k);
// q2_k and q3_k, whose decode is the most work per byte read, and q4_k ran slower so (two rows
// outgrow AVX2's 16 registers) and take one weight row at a time, as more activation rows do.
template <typename F>
constexpr bool kOneRowAtATime = F::kMaxByte <= 7;
template <>
constexpr bool kOneRowAtATime<QbQ4_K> = true;

template <typename F, int M>
void row_dot_m(const uint8_t* w, int64_t row_bytes, int rows, int64_t k, const Q8Rows& x,
               float* out, int64_t ldo, bool accumulate) {
  constexpr int R = M == 1 && !kOneRowAtATime<F> ? 2 : 1;
  int r = 0;
  for (; r + R <= rows; r += R)
    row_dot_rows<F, M, R>(w + r * row_bytes, row_bytes, k, x, out + r, ldo, accumulate);
  for (; r < rows; ++r)
    row_dot_rows<F, M, 1>(w + r * row_bytes, row_bytes, k, x, out + r, ldo, accumulate);
}

// q2_k and q3_k, whose decode is the most work per byte read, with one activation scale per
// super-block (act_block 256): per group, each chunk's byte products (int16 pairs) meet their
// two sub-blocks' scales in one vpmaddwd and sum in int32, and the offsets (q2_k's mins, q3_k's
// -4 per weight) meet the activations' sums per 16 the same way; one or two conversions to float
// per group and row where the float path had one per chunk (q2_k decode M1 1.1-1.3x less CPU
// time). One weight row at a time: two sharing each activation load ran slower.
template <typename F, int M>
void row_dot_k16_row(const uint8_t* p, int64_t k, const Q8Rows& x, float* out, int64_t ldo,
                     bool accumulate) {
  __m256 acc[M], accm[M];
  for (int i = 0; i < M; ++i) acc[i] = accm[i] = _mm256_setzero_ps();
  for (int64_t g = 0; g < k / 256; ++g, p += F::kBytes) {
    _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetch), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetch + 64), _MM_HINT_T0);
    // The scales the chunks pick from: q2_k's 16 bytes in both halves (zero-extended as picked),
    // q3_k's as int16, sub-blocks 0-7 in both halves of lo and 8-15 in both halves of hi.
    __m256i lo, hi;
    if constexpr (F::kMins) {
      lo = hi = _mm256_broadcastsi128_si256(F::scale_bytes(p));
    } else {
      const __m256i s16 = _mm256_cvtepi8_epi16(F::scale_bytes(p));
      lo = _mm256_permute2x128_si256(s16, s16, 0x00);
      hi = _mm256_permute2x128_si256(s16, s16, 0x11);
    }
    __m256i isum[M];
    for (int i = 0; i < M; ++i) isum[i] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      // Sub-block 2c's scale in the low 128 bits' int16 lanes, 2c + 1's in the high ones.
      const int a = F::kMins ? 0x8000 | (2 * c) : (4 * (c % 4) + 1) << 8 | 4 * (c % 4);
      const int b = F::kMins ? 0x8000 | (2 * c + 1) : (4 * (c % 4) + 3) << 8 | (4 * (c % 4) + 2);
      const __m256i s = _mm256_shuffle_epi8(
          c < 4 ? lo : hi, _mm256_setr_m128i(_mm_set1_epi16(static_cast<short>(a)),
                                             _mm_set1_epi16(static_cast<short>(b))));
      const __m256i u = F::chunk(p, c);
      for (int i = 0; i < M; ++i) {
        const __m256i xv = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(x.xq + i * x.ldq + g * 256 + 32 * c));
        isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(_mm256_maddubs_epi16(u, xv), s));
      }
    }
    if constexpr (F::kMins) {
      const __m256i mn = _mm256_cvtepu8_epi16(F::min_bytes(p));
      const float d = qb_f16(p + DUET_Q2_K_D), dmin = qb_f16(p + DUET_Q2_K_DMIN);
      for (int i = 0; i < M; ++i) {
        const float dx = x.dsub[i * x.lds + g * 16];
        const __m256i ms = _mm256_madd_epi16(
            mn, _mm256_loadu_si256(
                    reinterpret_cast<const __m256i*>(x.s16 + i * (x.ldq / 16) + g * 16)));
        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i]), _mm256_set1_ps(d * dx), acc[i]);
        accm[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_set1_ps(-dmin * dx), accm[i]);
      }
    } else {
      // w = d sc (u - 4): the offset is -4 sc per weight, summed with the products in int32.
      const __m256i s16 = _mm256_cvtepi8_epi16(F::scale_bytes(p));
      const float d = qb_f16(p + DUET_Q3_K_D);
      for (int i = 0; i < M; ++i) {
        const __m256i os = _mm256_madd_epi16(
            s16, _mm256_loadu_si256(
                     reinterpret_cast<const __m256i*>(x.s16 + i * (x.ldq / 16) + g * 16)));
        acc[i] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(isum[i], _mm256_slli_epi32(os, 2))),
                            _mm256_set1_ps(d * x.dsub[i * x.lds + g * 16]), acc[i]);
      }
    }
  }
  for (int i = 0; i < M; ++i) {
    const float v = hsum(_mm256_add_ps(acc[i], accm[i]));
    out[i * ldo] = accumulate ? out[i * ldo] + v : v;
  }
}

template <typename F, int M>
void row_dot_k16_m(const uint8_t* w, int64_t row_bytes, int rows, int64_t k, const Q8Rows& x,
                   float* out, int64_t ldo, bool accumulate) {
  for (int r = 0; r < rows; ++r)
    row_dot_k16_row<F, M>(w + r * row_bytes, k, x, out + r, ldo, accumulate);
}

template <typename F>
void row_dot_k16(const uint8_t* w, int64_t rb, int rows, int64_t k, const Q8Rows& x, int m,
                 float* out, int64_t ldo, bool accumulate) {
  switch (m) {
    case 1:
      return row_dot_k16_m<F, 1>(w, rb, rows, k, x, out, ldo, accumulate);
    case 2:
      return row_dot_k16_m<F, 2>(w, rb, rows, k, x, out, ldo, accumulate);
    case 3:
      return row_dot_k16_m<F, 3>(w, rb, rows, k, x, out, ldo, accumulate);
    default:
      return row_dot_k16_m<F, 4>(w, rb, rows, k, x, out, ldo, accumulate);
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
    default:
      return row_dot_m<F, 4>(w, rb, rows, k, x, out, ldo, accumulate);
  }
}

// ---- unpacking tiles of 8 lanes: 32 weights of one row go to their 8 places of the
// interleaved layout (4 bytes every 32); q8_0 stays signed (QTile::signed_bytes).

void put32(uint8_t* ug, int64_t k, int lane, __m256i bytes) {
  alignas(32) int32_t v[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(v), bytes);
  int32_t* d = reinterpret_cast<int32_t*>(ug) + (k / 4) * 8 + lane;
  for (int i = 0; i < 8; ++i) __builtin_memcpy(d + 8 * i, v + i, 4);
}

template <typename F>
void unpack(const uint8_t* w, int64_t rb, int rows, int64_t b0, int64_t b1, const QTile& t, int g) {
  constexpr int kPerGroup = 256 / F::kElems;
  const int64_t k4 = t.k / 4, subs = t.k / t.sub;
  uint8_t* ug = t.u + g * k4 * 32;
  float* tsc = t.scale + g * subs * 8;
  float* tof = t.off + g * subs * 8;
  for (int lane = 0; lane < 8; ++lane)
    for (int64_t b = b0; b < b1; b += kPerGroup) {
      const int64_t k0 = (b - b0) * F::kElems;
      const int nch = min8((b1 - b) * F::kElems / 32);
      alignas(32) float sc[16] = {}, of[16] = {};
      if (lane < rows) {
        const uint8_t* p = w + lane * rb + b * F::kBytes;
        const GroupScales gs = F::scales(p, nch);
        for (int h = 0; h < 2; ++h) {
          _mm256_store_ps(sc + 8 * h, gs.sc[h]);
          _mm256_store_ps(of + 8 * h, gs.of[h]);
        }
        for (int c = 0; c < nch; ++c) put32(ug, k0 + 32 * c, lane, F::chunk(p, c));
      } else {
        for (int c = 0; c < nch; ++c) put32(ug, k0 + 32 * c, lane, _mm256_setzero_si256());
      }
      const int64_t s0 = k0 / F::kSub;
      for (int s = 0; s < nch * 32 / F::kSub; ++s) {
        tsc[(s0 + s) * 8 + lane] = sc[s];
        tof[(s0 + s) * 8 + lane] = of[s];
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
  q.isa = Isa::avx2;
  q.lanes = 8;
  q.mr = 4;
  q.signed_bytes = true;
  q.row_dot_rows = 4;
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
}  // namespace duet::cpu::kernels::quant_avx2

namespace duet::cpu::kernels {
const QuantKernels& avx2_quant_kernels() {
  return quant_avx2::kTable;
}
}  // namespace duet::cpu::kernels
