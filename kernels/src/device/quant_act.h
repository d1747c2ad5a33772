// The activation quantization both integer tiers (int_dot, int8_mma) use: q8_act_kernel
// quantizes the activations to int8 per 32 (Q8Block), once per matmul, into the workspace; the
// int_dot mat-vec can instead quantize its own activation rows with q8_group (one thread a
// block of 32: the same arithmetic, so the same bits), which spares decode a launch per matmul.
#pragma once

#include "device/elem.h"

DUET_DEV_BEGIN

// Values 8c..8c+7 of the 32 of A from element i0 on, a_k apart: 16-byte loads where they are
// contiguous and 16-byte aligned (`wide`), one value at a time otherwise.
DUET_DEV void q8_load8(const void* a, Elt t, int64_t i0, int64_t a_k, bool wide, int c,
                       float (&x)[8]) {
  if (wide && t == Elt::f32) {
    const auto* p = static_cast<const float*>(a) + i0 + 8 * c;
    const Vec16 lo = load16(p), hi = load16(p + 4);
    DUET_UNROLL for (int j = 0; j < 4; ++j) {
      x[j] = ffrom(lo.w[j]);
      x[j + 4] = ffrom(hi.w[j]);
    }
  } else if (wide) {
    const Vec16 w = load16(static_cast<const uint16_t*>(a) + i0 + 8 * c);
    DUET_UNROLL for (int j = 0; j < 8; ++j) {
      const auto h = static_cast<uint16_t>(w.w[j / 2] >> (16 * (j % 2)));
      x[j] = t == Elt::f16 ? h2f(h) : b2f(h);
    }
  } else {
    DUET_UNROLL for (int j = 0; j < 8; ++j) x[j] = load_f32(a, t, i0 + (8 * c + j) * a_k);
  }
}

// One block of 32 quantized by one thread into o, as q8_act_kernel's warp does it. Two rolled
// passes over the values (the maximum, then the quantization, which reads them again from L1)
// keep eight of them in registers at a time, not 32: the mat-vec that calls it holds its sums
// there, with no register to spare.
DUET_DEV void q8_group(const void* a, Elt t, int64_t i0, int64_t a_k, Q8Block* o) {
  const int es = t == Elt::f32 ? 4 : 2;
  const bool wide = (t == Elt::f32 || t == Elt::f16 || t == Elt::bf16) && a_k == 1 &&
                    (reinterpret_cast<uintptr_t>(a) + static_cast<uintptr_t>(i0 * es)) % 16 == 0;
  float amax = 0.f;
  bool finite = true;
  DUET_NO_UNROLL
  for (int c = 0; c < 4; ++c) {
    float x[8];
    q8_load8(a, t, i0, a_k, wide, c, x);
    DUET_UNROLL for (int j = 0; j < 8; ++j) {
      const bool f = fabsf(x[j]) <= 3.402823466e38f;
      finite = finite && f;
      amax = fmaxf(amax, f ? fabsf(x[j]) : 0.f);
    }
  }
  const float id = amax > 0.f ? 127.f / amax : 0.f;
  int s0 = 0, s1 = 0;
  DUET_NO_UNROLL
  for (int c = 0; c < 4; ++c) {
    float x[8];
    q8_load8(a, t, i0, a_k, wide, c, x);
    uint32_t w[2] = {0, 0};
    int s = 0;
    DUET_UNROLL for (int j = 0; j < 8; ++j) {
      const int q = fabsf(x[j]) <= 3.402823466e38f
                        ? static_cast<int>(rintf(fminf(fmaxf(x[j] * id, -127.f), 127.f)))
                        : 0;
      s += q;
      w[j / 4] |= static_cast<uint32_t>(q & 0xff) << (8 * (j % 4));
    }
    store_u32(o->q + 8 * c, w[0]);
    store_u32(o->q + 8 * c + 4, w[1]);
    if (c < 2)
      s0 += s;
    else
      s1 += s;
  }
  const float d = finite ? amax / 127.f : ffrom(0x7fc00000u);
  store16(&o->d, Vec16{{fbits(d), fbits(d * static_cast<float>(s0)),
                        fbits(d * static_cast<float>(s1)), 0u}});
}

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
