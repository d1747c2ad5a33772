// One activation block of 32 quantized to int8 (Q8Block) by the warp holding it: what
// q8_act_kernel does for every block, and rows_kernel for the rows of an rmsnorm fused with the
// mat-vecs that read them (RowParams::q8). One function, so both give the same bits.
#pragma once

#include "device/elem.h"

DUET_DEV_BEGIN

// Lane i of a warp holds value i of the block. A block holding a non-finite value gets a NaN
// scale, so its products are NaN as the float64 reference's are.
DUET_DEV void q8_block_store(float x, Q8Block& o) {
  const bool finite = fabsf(x) <= 3.402823466e38f;
  const float amax = warp_max(finite ? fabsf(x) : 0.f);
  const float id = amax > 0.f ? 127.f / amax : 0.f;
  const int q = finite ? static_cast<int>(rintf(fminf(fmaxf(x * id, -127.f), 127.f))) : 0;
  float s = static_cast<float>(q);  // sums of 16 int8 are exact in f32
  for (int msk = 1; msk < 16; msk <<= 1) s += shfl_xor(s, msk);
  const float d = vote_all(finite) ? amax / 127.f : ffrom(0x7fc00000u);
  o.q[lane()] = static_cast<int8_t>(q);
  if (lane() == 0) {
    o.d = d;
    o.ds[0] = d * s;
    o.pad = 0.f;
  }
  if (lane() == 16) o.ds[1] = d * s;
}

DUET_DEV_END
