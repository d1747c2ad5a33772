// The int_dot tier (dp4a, sm_61+), and the activation quantization both integer tiers use:
//   - q8_act_kernel quantizes the activations to int8 per 32 (Q8Block), once per matmul;
//   - dp4a_qmatmul_kernel: a warp per weight row, the lanes along K a group of 32 each, up to
//     kQIntRows activation rows per block (decode and small batches), reduced by shuffles.
#pragma once

#include "device/quant_int.h"

DUET_DEV_BEGIN

// A[b][m][k] to Q8Block rows: a warp per block of 32, a lane per value. A block holding a
// non-finite value gets a NaN scale, so its products are NaN as the float64 reference's are.
DUET_KERNEL q8_act_kernel(const Q8ActParams p) {
  const int64_t groups = p.K / 32, total = p.rows * groups;
  const int64_t stride = int64_t(nbid_x()) * nwarps();
  for (int64_t i = int64_t(bid_x()) * nwarps() + warp(); i < total; i += stride) {
    const int64_t r = i / groups, gi = i % groups;
    const int64_t bz = r / p.M, m = r % p.M;
    const int64_t bo = bz / p.batch_inner, bi = bz % p.batch_inner;
    const float x =
        load_f32(p.a, p.a_dtype,
                 bo * p.a_batch[0] + bi * p.a_batch[1] + m * p.a_m + (gi * 32 + lane()) * p.a_k);
    const bool finite = fabsf(x) <= 3.402823466e38f;
    const float amax = warp_max(finite ? fabsf(x) : 0.f);
    const float id = amax > 0.f ? 127.f / amax : 0.f;
    const int q = finite ? static_cast<int>(rintf(fminf(fmaxf(x * id, -127.f), 127.f))) : 0;
    float s = static_cast<float>(q);  // sums of 16 int8 are exact in f32
    for (int msk = 1; msk < 16; msk <<= 1) s += shfl_xor(s, msk);
    const float d = vote_all(finite) ? amax / 127.f : ffrom(0x7fc00000u);
    Q8Block& o = p.out[i];
    o.q[lane()] = static_cast<int8_t>(q);
    if (lane() == 0) {
      o.d = d;
      o.ds[0] = d * s;
      o.pad = 0.f;
    }
    if (lane() == 16) o.ds[1] = d * s;
  }
}

DUET_KERNEL dp4a_qmatmul_kernel(const QMatmulParams p) {
  const int n = bid_x() * kQWarps + warp();
  if (n >= p.N) return;
  const int m0 = bid_y() * kQIntRows;
  const int groups = p.K / 32;
  const Q8Block* qa = p.qa + (int64_t(bid_z()) * p.M + m0) * groups;
  const int qk = q_block_elems(p.fmt), qb = q_block_bytes(p.fmt);
  const uint8_t* row = p.w + int64_t(n) * p.w_row_bytes;
  float acc[kQIntRows] = {};
  for (int gi = lane(); gi < groups; gi += kWarp) {
    const int k0 = gi * 32;
    uint32_t v[8];
    float sc[2], mn[2];
    q_block32_int(p.fmt, row + int64_t(k0 / qk) * qb, (k0 % qk) / 32, v, sc, mn);
    DUET_UNROLL for (int r = 0; r < kQIntRows; ++r) {
      if (m0 + r >= p.M) break;
      const Q8Block& a = qa[int64_t(r) * groups + gi];
      uint32_t q[8];
      q8_words(a, q);
      int s0 = 0, s1 = 0;
      DUET_UNROLL for (int i = 0; i < 4; ++i) {
        s0 = dp4a(v[i], q[i], s0);
        s1 = dp4a(v[i + 4], q[i + 4], s1);
      }
      acc[r] += a.d * (sc[0] * static_cast<float>(s0) + sc[1] * static_cast<float>(s1)) +
                mn[0] * a.ds[0] + mn[1] * a.ds[1];
    }
  }
  const int64_t cb = int64_t(bid_z()) * p.M * p.N;
  DUET_UNROLL for (int r = 0; r < kQIntRows; ++r) {
    const float v = warp_sum(acc[r]);
    const int m = m0 + r;
    if (lane() == 0 && m < p.M) store_f32(p.c, p.c_dtype, cb + int64_t(m) * p.N + n, v);
  }
}

DUET_DEV_END
