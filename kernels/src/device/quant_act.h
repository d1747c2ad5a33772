// The activation quantization both integer tiers (int_dot, int8_mma) use: q8_act_kernel
// quantizes the activations to int8 per 32 (Q8Block), once per matmul, into the workspace.
#pragma once

#include "device/elem.h"

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

DUET_DEV_END
