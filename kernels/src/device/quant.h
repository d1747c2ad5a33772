// The generic tier's kernels for block-quantized weights (SIMT dequantize-and-FMA).
#pragma once

#include "device/generic.h"
#include "device/quant_decode.h"

DUET_DEV_BEGIN

// y[b][m][n] = sum_k a[b][m][k] * w[n][k]: one warp per weight row n and up to kQRows rows m;
// the lanes take groups of 32 along K, decode them once for all rows, and reduce by shuffles.

DUET_KERNEL gen_qmatmul_kernel(const QMatmulParams p) {
  grid_dependency_sync();
  const int n = bid_x() * kQWarps + warp();
  if (n >= p.N) return;
  const int m0 = bid_y() * kQRows;
  const int bz = bid_z(), bo = bz / p.batch_inner, bi = bz % p.batch_inner;
  const int64_t ab = bo * p.a_batch[0] + bi * p.a_batch[1];
  const int qk = q_block_elems(p.fmt), qb = q_block_bytes(p.fmt);
  const uint8_t* row = p.w + int64_t(n) * p.w_row_bytes;
  float acc[kQRows] = {};
  for (int k0 = lane() * 32; k0 < p.K; k0 += 32 * kWarp) {
    float w[32];
    q_block32(p.fmt, row + int64_t(k0 / qk) * qb, (k0 % qk) / 32, w);
    DUET_UNROLL for (int r = 0; r < kQRows; ++r) {
      const int m = m0 + r;
      if (m >= p.M) break;
      const int64_t a0 = ab + m * p.a_m + k0 * p.a_k;
      float s = 0.f;
      DUET_UNROLL for (int e = 0; e < 32; ++e) s =
          fmaf(load_f32(p.a, p.a_dtype, a0 + e * p.a_k), w[e], s);
      acc[r] += s;
    }
  }
  const int64_t cb = int64_t(bz) * p.M * p.N;
  DUET_UNROLL for (int r = 0; r < kQRows; ++r) {
    const float v = warp_sum(acc[r]);
    const int m = m0 + r;
    if (lane() == 0 && m < p.M) store_f32(p.c, p.c_dtype, cb + int64_t(m) * p.N + n, v);
  }
}

// Rows of a block-quantized tensor dequantized, one thread per group of 32: gathered by ids
// (embedding; a bad id writes zeros and is recorded as embedding_kernel does) or all of them in
// order (cast, ids.data null).
DUET_KERNEL gen_qrows_kernel(const QRowsParams p) {
  grid_dependency_sync();
  const int64_t groups = p.D / 32;
  const int qk = q_block_elems(p.fmt), qb = q_block_bytes(p.fmt);
  for (int64_t i = grid_tid(); i < p.rows * groups; i += grid_threads()) {
    const int64_t r = i / groups, e0 = (i % groups) * 32;
    int64_t id = r;
    if (p.ids.data) {
      const int32_t v = static_cast<const int32_t*>(p.ids.data)[offset_of(p.ids, p.ids.shape, r)];
      id = p.negative_ids && v < 0 ? v + p.V : v;
      if (id < 0 || id >= p.V) {
        if (e0 == 0)
          atomic_min_u64(p.error, (static_cast<unsigned long long>(r) << 32) | uint32_t(v));
        DUET_UNROLL for (int l = 0; l < 32; ++l)
            store_f32(p.out, p.out_dtype, r * p.D + e0 + l, 0.f);
        continue;
      }
    }
    float w[32];
    q_block32(p.fmt, p.table + id * p.row_bytes + (e0 / qk) * qb, int(e0 % qk) / 32, w);
    DUET_UNROLL for (int l = 0; l < 32; ++l) store_f32(p.out, p.out_dtype, r * p.D + e0 + l, w[l]);
  }
}

DUET_DEV_END
