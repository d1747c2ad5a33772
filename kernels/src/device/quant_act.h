// The activation quantization both integer tiers (int_dot, int8_mma) use: q8_act_kernel
// quantizes the activations to int8 per 32 (Q8Block), once per matmul, into the workspace.
#pragma once

#include "device/elem.h"
#include "device/q8_block.h"

DUET_DEV_BEGIN

// a / b and a % b, in 32 bits where a fits (64-bit division is a long instruction sequence: in
// q8_act_kernel it was most of the work, 80 us for 512 x 14336 activations on an H200).
DUET_DEV void divmod_narrow(int64_t a, int64_t b, bool narrow, int64_t& q, int64_t& r) {
  q = narrow ? int64_t(uint32_t(a) / uint32_t(b)) : a / b;
  r = a - q * b;
}

// A[b][m][k] to Q8Block rows: a warp per four blocks of 32, eight lanes a block and four values
// a lane (one 16-byte load where A is dense f32), so that each warp has four blocks' loads in
// flight where a lane per value had one. The same bits as q8_block_store (q8_block.h), which the
// rmsnorm fused with the mat-vecs uses: the maximum and the sums of 16 integers are exact in any
// order.
DUET_KERNEL q8_act_kernel(const Q8ActParams p) {
  grid_dependency_sync();
  const int64_t groups = p.K / 32, total = p.rows * groups;
  const int64_t stride = int64_t(nbid_x()) * nwarps() * 4;
  const bool narrow = total <= 0x7fffffff;
  const int sub = lane() / 8, part = lane() % 8;
  const bool dense = p.a_dtype == Elt::f32 && p.a_k == 1;
  for (int64_t i0 = (int64_t(bid_x()) * nwarps() + warp()) * 4; i0 < total; i0 += stride) {
    const int64_t i = i0 + sub;
    const bool live = i < total;
    float x[4] = {0.f, 0.f, 0.f, 0.f};
    if (live) {
      int64_t r, gi, bz, m, bo, bi;
      divmod_narrow(i, groups, narrow, r, gi);
      divmod_narrow(r, p.M, narrow, bz, m);
      divmod_narrow(bz, p.batch_inner, narrow, bo, bi);
      const int64_t at =
          bo * p.a_batch[0] + bi * p.a_batch[1] + m * p.a_m + (gi * 32 + part * 4) * p.a_k;
      const float* f = static_cast<const float*>(p.a) + at;
      if (dense && (reinterpret_cast<uintptr_t>(f) & 15) == 0) {
        const Vec16 v = load16(f);
        DUET_UNROLL for (int e = 0; e < 4; ++e) x[e] = ffrom(v.w[e]);
      } else {
        DUET_UNROLL for (int e = 0; e < 4; ++e) x[e] = load_f32(p.a, p.a_dtype, at + e * p.a_k);
      }
    }
    bool finite = true;
    float amax = 0.f;
    DUET_UNROLL for (int e = 0; e < 4; ++e) {
      const bool fe = fabsf(x[e]) <= 3.402823466e38f;
      finite = finite && fe;
      amax = fmaxf(amax, fe ? fabsf(x[e]) : 0.f);
    }
    for (int msk = 1; msk < 8; msk <<= 1) amax = fmaxf(amax, shfl_xor(amax, msk));
    const float id = amax > 0.f ? 127.f / amax : 0.f;
    uint32_t packed = 0;
    int sum = 0;
    DUET_UNROLL for (int e = 0; e < 4; ++e) {
      const bool fe = fabsf(x[e]) <= 3.402823466e38f;
      const int q = fe ? static_cast<int>(rintf(fminf(fmaxf(x[e] * id, -127.f), 127.f))) : 0;
      sum += q;
      packed |= (static_cast<uint32_t>(q) & 0xFFu) << (8 * e);
    }
    float s = static_cast<float>(sum);  // a half's 16 values: the 4 lanes of this quad
    s += shfl_xor(s, 1);
    s += shfl_xor(s, 2);
    const bool all = ((ballot(finite) >> (8 * sub)) & 0xFFu) == 0xFFu;
    const float d = all ? amax / 127.f : ffrom(0x7fc00000u);
    if (live) {
      Q8Block& o = p.out[i];
      store_u32(o.q + 4 * part, packed);
      if (part == 0) {
        o.d = d;
        o.ds[0] = d * s;
        o.pad = 0.f;
      }
      if (part == 4) o.ds[1] = d * s;
    }
  }
}

DUET_DEV_END
