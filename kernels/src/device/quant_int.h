// What the integer tiers (int_dot, int8_mma) share, in the plain C++ both builds compile:
// q_block32_int decodes 32 weights of any block format into int8 in registers, four to a 32-bit
// word, with a scale and an offset per half of 16 (w = sc[h] * v + mn[h]), and q8_words reads an
// activation block (Q8Block) as words. A group's product with an activation block is then
//   d_a * (sc[0] * dot(v, q)[0..16) + sc[1] * dot(v, q)[16..32)) + mn[0] * ds[0] + mn[1] * ds[1]
// (ds: d_a times the sums of q per 16), exact up to the f32 roundings of the scaling.
#pragma once

#include "device/quant_decode.h"

DUET_DEV_BEGIN

// Four bytes from any address (blocks of 18, 34 or 210 bytes leave words unaligned).
DUET_DEV uint32_t ld_u32(const uint8_t* p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// Bits 0-3 of `bits` to bit `at` of bytes 0-3.
DUET_DEV uint32_t spread4(uint32_t bits, int at) {
  return ((bits & 1u) | ((bits & 2u) << 7) | ((bits & 4u) << 14) | ((bits & 8u) << 21)) << at;
}

// Group g (elements [32 g, 32 g + 32)) of the block at b: element 4 i + j in byte j of v[i].
DUET_DEV void q_block32_int(QFmt f, const uint8_t* b, int g, uint32_t (&v)[8], float (&sc)[2],
                            float (&mn)[2]) {
  switch (f) {
    case QFmt::q8_0: {
      const float d = qf16(b + DUET_Q8_0_D);
      DUET_UNROLL for (int i = 0; i < 8; ++i) v[i] = ld_u32(b + DUET_Q8_0_QS + 4 * i);
      sc[0] = sc[1] = d;
      mn[0] = mn[1] = 0.f;
      return;
    }
    case QFmt::q4_0:
    case QFmt::q4_1:
    case QFmt::q4_z:
    case QFmt::q5_0:
    case QFmt::q5_1: {
      const bool five = f == QFmt::q5_0 || f == QFmt::q5_1;
      const float d = qf16(b);
      const uint8_t* qs = b + (f == QFmt::q4_0   ? DUET_Q4_0_QS
                               : f == QFmt::q5_0 ? DUET_Q5_0_QS
                               : f == QFmt::q5_1 ? DUET_Q5_1_QS
                                                 : DUET_Q4_1_QS);
      DUET_UNROLL for (int i = 0; i < 4; ++i) {
        const uint32_t w = ld_u32(qs + 4 * i);
        v[i] = w & 0x0F0F0F0Fu;
        v[i + 4] = (w >> 4) & 0x0F0F0F0Fu;
      }
      if (five) {
        const uint32_t qh = ld_u32(b + (f == QFmt::q5_1 ? DUET_Q5_1_QH : DUET_Q5_0_QH));
        DUET_UNROLL for (int i = 0; i < 8; ++i) v[i] |= spread4((qh >> (4 * i)) & 0xFu, 4);
      }
      sc[0] = sc[1] = d;
      mn[0] = mn[1] = f == QFmt::q4_0   ? -8.f * d
                      : f == QFmt::q5_0 ? -16.f * d
                      : f == QFmt::q4_1 ? qf16(b + DUET_Q4_1_M)
                      : f == QFmt::q5_1 ? qf16(b + DUET_Q5_1_M)
                                        : -static_cast<float>(b[DUET_Q4_Z_Z] & 0xF) * d;
      return;
    }
    case QFmt::q4_k:
    case QFmt::q5_k: {
      int s = 0, m = 0;
      q_scale_min_k4(b + DUET_Q4_K_SCALES, g, s, m);
      const uint8_t* qs = b + (f == QFmt::q5_k ? DUET_Q5_K_QS : DUET_Q4_K_QS) + 32 * (g / 2);
      const int shift = (g & 1) * 4;
      DUET_UNROLL for (int i = 0; i < 8; ++i) {
        v[i] = (ld_u32(qs + 4 * i) >> shift) & 0x0F0F0F0Fu;
        if (f == QFmt::q5_k) v[i] |= ((ld_u32(b + DUET_Q5_K_QH + 4 * i) >> g) & 0x01010101u) << 4;
      }
      sc[0] = sc[1] = qf16(b + DUET_Q4_K_D) * static_cast<float>(s);
      mn[0] = mn[1] = -qf16(b + DUET_Q4_K_DMIN) * static_cast<float>(m);
      return;
    }
    case QFmt::q6_k: {
      const int h = g / 4, j = g % 4;
      const uint8_t* ql = b + DUET_Q6_K_QL + 64 * h + 32 * (j % 2);
      const uint8_t* qh = b + DUET_Q6_K_QH + 32 * h;
      const int shift = (j / 2) * 4;
      DUET_UNROLL for (int i = 0; i < 8; ++i) v[i] =
          ((ld_u32(ql + 4 * i) >> shift) & 0x0F0F0F0Fu) |
          (((ld_u32(qh + 4 * i) >> (2 * j)) & 0x03030303u) << 4);
      const float d = qf16(b + DUET_Q6_K_D);
      DUET_UNROLL for (int i = 0; i < 2; ++i) {
        sc[i] = d * static_cast<float>(static_cast<int8_t>(b[DUET_Q6_K_SCALES + 2 * g + i]));
        mn[i] = -32.f * sc[i];
      }
      return;
    }
    case QFmt::q2_k: {
      const int h = g / 4, j = g % 4;
      const uint8_t* qs = b + DUET_Q2_K_QS + 32 * h;
      DUET_UNROLL for (int i = 0; i < 8; ++i) v[i] = (ld_u32(qs + 4 * i) >> (2 * j)) & 0x03030303u;
      const float d = qf16(b + DUET_Q2_K_D), dmin = qf16(b + DUET_Q2_K_DMIN);
      DUET_UNROLL for (int i = 0; i < 2; ++i) {
        const uint8_t s = b[DUET_Q2_K_SCALES + 2 * g + i];
        sc[i] = d * static_cast<float>(s & 0xF);
        mn[i] = -dmin * static_cast<float>(s >> 4);
      }
      return;
    }
    case QFmt::q3_k: {
      // q = low 2 bits - (high bit ? 0 : 4): v = low | high << 2 in [0, 8), offset -4 * scale.
      const int h = g / 4, j = g % 4;
      const uint8_t* qs = b + DUET_Q3_K_QS + 32 * h;
      const uint8_t* hm = b + DUET_Q3_K_HMASK;
      DUET_UNROLL for (int i = 0; i < 8; ++i) v[i] =
          ((ld_u32(qs + 4 * i) >> (2 * j)) & 0x03030303u) |
          (((ld_u32(hm + 4 * i) >> (4 * h + j)) & 0x01010101u) << 2);
      const float d = qf16(b + DUET_Q3_K_D);
      const uint8_t* s8 = b + DUET_Q3_K_SCALES;
      DUET_UNROLL for (int i = 0; i < 2; ++i) {
        const int s = 2 * g + i;
        const int low = s < 8 ? s8[s] & 0xF : s8[s - 8] >> 4;
        const int high = (s8[8 + s % 4] >> (2 * (s / 4))) & 3;
        sc[i] = d * static_cast<float>((low | high << 4) - 32);
        mn[i] = -4.f * sc[i];
      }
      return;
    }
  }
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
