// Word helpers the integer tiers (int_dot, int8_mma) share, in the plain C++ both builds
// compile: bits spread into bytes, and an activation block (Q8Block) as words. A group's product
// with an activation block is
//   d_a * (sc[0] * dot(v, q)[0..16) + sc[1] * dot(v, q)[16..32)) + mn[0] * ds[0] + mn[1] * ds[1]
// (ds: d_a times the sums of q per 16), exact up to the f32 roundings of the scaling; the weights
// are decoded by quant_words.h.
#pragma once

#include "device/quant_decode.h"

DUET_DEV_BEGIN

// Bits 0-3 of `bits` to bit `at` of bytes 0-3.
DUET_DEV uint32_t spread4(uint32_t bits, int at) {
  return ((bits & 1u) | ((bits & 2u) << 7) | ((bits & 4u) << 14) | ((bits & 8u) << 21)) << at;
}

// The 32 int8 of an activation block as words.
DUET_DEV void q8_words(const Q8Block& a, uint32_t (&w)[8]) {
  const Vec16 lo = load16(a.q), hi = load16(a.q + 16);
  DUET_UNROLL for (int i = 0; i < 4; ++i) {
    w[i] = lo.w[i];
    w[i + 4] = hi.w[i];
  }
}

DUET_DEV_END
