// The generic tier's mat-vec: C[b][m][n] = sum_k A[b][m][k] * B[b][n][k] for decode shapes (at
// most kMvRows rows of A per block) with B's k stride 1 (a weight stored [N, K]), in fp32 on the
// CUDA cores at the speed of B's bytes, on any architecture:
//   - each warp owns `rpw` rows of B and reads them in 16-byte loads (8 f16/bf16 or 4 f32
//     elements a lane), two steps of every row in flight before the first use;
//   - the block's rows of A sit in shared memory as f32, in chunks of `kc` elements, each read
//     once per step for all of the warp's rows of B;
//   - warp sums at the end.
// Without 16-byte aligned rows of B (b_vec 0), or at a ragged end of K, elements are loaded one
// by one (correct, slower).
#pragma once

#include "device/elem.h"

DUET_DEV_BEGIN

// The raw bytes of 8 consecutive elements of a row of B: one 16-byte load for 16-bit types,
// two for f32.
template <Elt T>
struct Raw8 {
  Vec16 v[T == Elt::f32 ? 2 : 1];
};

// 8 elements of row `row` from k: 16-byte loads where B's rows allow it (b_vec) and all 8 are
// inside K, else one by one (zeros past K).
template <Elt T>
DUET_DEV void mv_load8(const MatmulParams& p, const void* b, int64_t row, int k, Raw8<T>& x) {
  const int64_t i = row * p.b_n + k;
  if (p.b_vec && k + 8 <= p.K) {
    if constexpr (T == Elt::f32) {
      x.v[0] = load16(static_cast<const float*>(b) + i);
      x.v[1] = load16(static_cast<const float*>(b) + i + 4);
    } else {
      x.v[0] = load16(static_cast<const uint16_t*>(b) + i);
    }
    return;
  }
  float f[8];
  DUET_UNROLL for (int e = 0; e < 8; ++e) f[e] = k + e < p.K ? load_f32(b, T, i + e) : 0.f;
  if constexpr (T == Elt::f32) {
    DUET_UNROLL for (int e = 0; e < 4; ++e) {
      x.v[0].w[e] = fbits(f[e]);
      x.v[1].w[e] = fbits(f[e + 4]);
    }
  } else {
    DUET_UNROLL for (int e = 0; e < 4; ++e) x.v[0].w[e] =
        (T == Elt::bf16 ? f2b(f[2 * e]) : f2h(f[2 * e])) |
        static_cast<uint32_t>(T == Elt::bf16 ? f2b(f[2 * e + 1]) : f2h(f[2 * e + 1])) << 16;
  }
}

// The 8 elements as f32.
template <Elt T>
DUET_DEV void mv_unpack(const Raw8<T>& x, float (&f)[8]) {
  DUET_UNROLL for (int e = 0; e < 4; ++e) {
    if constexpr (T == Elt::f32) {
      f[e] = ffrom(x.v[0].w[e]);
      f[e + 4] = ffrom(x.v[1].w[e]);
    } else if constexpr (T == Elt::bf16) {
      f[2 * e] = ffrom(x.v[0].w[e] << 16);
      f[2 * e + 1] = ffrom(x.v[0].w[e] & 0xFFFF0000u);
    } else {
      unpack2(x.v[0].w[e], f[2 * e], f[2 * e + 1], F16{});
    }
  }
}

// Two blocks of 8 warps an SM at least (128 registers a thread): enough loads in flight.
template <Elt T>
DUET_KERNEL_BOUNDED_MIN(256, 2)
matvec_kernel(const MatmulParams p) {
  grid_dependency_sync();
  constexpr int MR = kMvMaxRows, MA = kMvRows;
  const int R = p.rpw, t0 = tid(), w = warp(), ln = lane();
  const int n0 = (bid_x() * nwarps() + w) * R;
  const int rows = p.N - n0 < R ? (p.N - n0 > 0 ? p.N - n0 : 0) : R;
  const int m0 = bid_y() * MA, ma = p.M - m0 < MA ? p.M - m0 : MA;
  const int bz = bid_z(), bo = bz / p.batch_inner, bi = bz % p.batch_inner;
  const int64_t ab = bo * p.a_batch[0] + bi * p.a_batch[1];
  constexpr int esize = T == Elt::f32 ? 4 : 2;
  const void* b =
      static_cast<const uint8_t*>(p.b) + (bo * p.b_batch[0] + bi * p.b_batch[1]) * esize;
  float* as = reinterpret_cast<float*>(smem());  // [ma][kc]

  float acc[MR][MA];
  DUET_UNROLL for (int r = 0; r < MR; ++r) DUET_UNROLL for (int m = 0; m < MA; ++m) acc[r][m] = 0.f;

  for (int c0 = 0; c0 < p.K; c0 += p.kc) {
    const int n = p.K - c0 < p.kc ? p.K - c0 : p.kc;
    sync();  // every warp is done with the previous chunk
    DUET_NO_UNROLL
    for (int i = t0; i < ma * n; i += nthreads()) {
      const int m = i / n, k = i % n;
      as[m * p.kc + k] = load_f32(p.a, T, ab + int64_t(m0 + m) * p.a_m + int64_t(c0 + k) * p.a_k);
    }
    sync();
    if (rows == 0) continue;
    // U steps of 256 elements a row in flight (two of 16-bit types, one of f32: the same bytes),
    // loads first, then the products.
    constexpr int U = T == Elt::f32 ? 1 : 2;
    for (int k = ln * 8; k < n; k += U * 256) {
      Raw8<T> x[U][MR];
      DUET_UNROLL for (int u = 0; u < U; ++u) DUET_UNROLL for (int r = 0; r < MR; ++r) {
        if (r < rows && k + 256 * u < n)
          mv_load8<T>(p, b, n0 + r, c0 + k + 256 * u, x[u][r]);
        else
          x[u][r] = Raw8<T>{};
      }
      DUET_UNROLL for (int u = 0; u < U; ++u) {
        const int kk = k + 256 * u;
        if (kk >= n) break;
        DUET_UNROLL for (int m = 0; m < MA; ++m) {
          if (m >= ma) break;
          float a[8];
          if (kk + 8 <= n) {
            const Vec16 lo = load16(as + m * p.kc + kk), hi = load16(as + m * p.kc + kk + 4);
            DUET_UNROLL for (int e = 0; e < 4; ++e) {
              a[e] = ffrom(lo.w[e]);
              a[e + 4] = ffrom(hi.w[e]);
            }
          } else {
            DUET_UNROLL for (int e = 0; e < 8; ++e) a[e] = kk + e < n ? as[m * p.kc + kk + e] : 0.f;
          }
          DUET_UNROLL for (int r = 0; r < MR; ++r) {
            float f[8];
            mv_unpack<T>(x[u][r], f);
            DUET_UNROLL for (int e = 0; e < 8; ++e) acc[r][m] += a[e] * f[e];
          }
        }
      }
    }
  }

  const int64_t cb = int64_t(bz) * p.M * p.N;
  DUET_UNROLL for (int r = 0; r < MR; ++r) {
    if (r >= rows) break;
    DUET_UNROLL for (int m = 0; m < MA; ++m) {
      if (m >= ma) break;
      const float s = warp_sum(acc[r][m]);
      if (ln == 0) store_f32(p.c, T, cb + int64_t(m0 + m) * p.N + n0 + r, s);
    }
  }
}

DUET_DEV_END
