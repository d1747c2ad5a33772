// The activation quantization both integer tiers (int_dot, int8_mma) use: q8_act_kernel
// quantizes the activations to int8 per 32 (Q8Block), once per matmul, into the workspace.
#pragma once

#include "device/elem.h"
#include "device/q8_block.h"

DUET_DEV_BEGIN

// A[b][m][k] to Q8Block rows: a warp per block of 32, a lane per value (q8_block.h).
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
    q8_block_store(x, p.out[i]);
  }
}

DUET_DEV_END
