// A group of 32 weights of any block format decoded into signed int8, four to a word, from
// blocks staged in shared memory: what the integer tiers' tensor-core tiles (quant_mmq.h), their
// mat-vec (quant_mv.h) and the dequantizing copy (quant_dequant.h) share.
//
// Blocks of 18, 34, 110 or 210 bytes leave fields on any even address, so words are read as the
// two aligned words around them joined by a funnel shift (two 32-bit loads and a shift, where
// byte loads would take four loads and three shifts). Only aligned words holding a byte of the
// field are read (up to 3 bytes past its end), so the blocks may sit in shared memory (staged)
// or in global memory (the mat-vec reads them there: allocations end on 4-byte multiples).
//
// The zero point of the formats whose element is `d * (q - z)` (q4_0, q5_0, q4_z, q6_k, q3_k:
// every difference lies in [-32, 31]) is subtracted in the int8 words themselves, so their
// products need no offset term; the formats with a float minimum (q4_1, q5_1, q2_k, q4_k, q5_k)
// keep unsigned q and give the minimum per half of 16 (q_has_min, params.h):
//   w[e] = sc[e / 16] * v[e] + mn[e / 16]
#pragma once

#include "device/quant_int.h"

DUET_DEV_BEGIN

// N words from the 2-byte aligned address p: aligned loads and funnel shifts (the word after
// the last only where p is not 4-byte aligned).
template <int N>
DUET_DEV void ldw(const uint8_t* p, uint32_t (&w)[N]) {
  const uintptr_t u = reinterpret_cast<uintptr_t>(p);
  const uint8_t* a = reinterpret_cast<const uint8_t*>(u & ~uintptr_t(3));
  const int s = static_cast<int>(u & 3) * 8;
  uint32_t lo = load_u32(a);
  DUET_UNROLL for (int i = 0; i < N; ++i) {
    const uint32_t hi = i + 1 < N || s != 0 ? load_u32(a + 4 * (i + 1)) : lo;
    w[i] = funnel_r(lo, hi, s);
    lo = hi;
  }
}
DUET_DEV uint32_t ldw1(const uint8_t* p) {
  uint32_t w[1];
  ldw(p, w);
  return w[0];
}
// An f16 at a 2-byte aligned address, as f32 (one cvt on the GPU).
DUET_DEV float ldh(const uint8_t* p) {
  return half_to_float(load_u16(p));
}
// Byte j (< 12) of the three words w, by selects (a run-time index into a register array would
// put it in local memory).
DUET_DEV int byte_of(const uint32_t (&w)[3], int j) {
  const uint32_t x = j < 4 ? w[0] : j < 8 ? w[1] : w[2];
  return static_cast<int>((x >> (8 * (j & 3))) & 0xFFu);
}
// Byte i of the packed scales loaded as words (s12), for the decoders of duet/block_layout.h.
#define DUET_WORD_BYTE(i) byte_of(s12, i)

// Each byte of v (in [0, 128)) minus z, as int8: no borrow crosses a byte.
DUET_DEV uint32_t sub_bytes(uint32_t v, uint32_t z) {
  return ((v | 0x80808080u) - z * 0x01010101u) ^ 0x80808080u;
}

// |v| < 2^22 (a group's sum of int8 products) to f32 by the exponent trick: an integer add and a
// float subtract, both full rate, where cvt.rn.f32.s32 runs at a quarter of it.
DUET_DEV float small_i2f(int v) {
  return ffrom(static_cast<uint32_t>(v) + 0x4B400000u) - 12582912.f;
}

// Group g (elements [32 g, 32 g + 32)) of the block at b (2-byte aligned, shared or global):
// element 4 i + j in byte j of v[i], signed; a scale and a minimum per half of 16.
DUET_DEV void q_group_s8(QFmt f, const uint8_t* b, int g, uint32_t (&v)[8], float (&sc)[2],
                         float (&mn)[2]) {
  mn[0] = mn[1] = 0.f;
  switch (f) {
    case QFmt::q8_0: {
      ldw(b + DUET_Q8_0_QS, v);
      sc[0] = sc[1] = ldh(b + DUET_Q8_0_D);
      return;
    }
    case QFmt::q4_0:
    case QFmt::q4_1:
    case QFmt::q4_z:
    case QFmt::q5_0:
    case QFmt::q5_1: {
      const bool five = f == QFmt::q5_0 || f == QFmt::q5_1;
      const int qs = f == QFmt::q4_0   ? DUET_Q4_0_QS
                     : f == QFmt::q5_0 ? DUET_Q5_0_QS
                     : f == QFmt::q5_1 ? DUET_Q5_1_QS
                                       : DUET_Q4_1_QS;
      uint32_t w[4];
      ldw(b + qs, w);
      DUET_UNROLL for (int i = 0; i < 4; ++i) {
        v[i] = w[i] & 0x0F0F0F0Fu;
        v[i + 4] = (w[i] >> 4) & 0x0F0F0F0Fu;
      }
      if (five) {
        const uint32_t qh = ldw1(b + (f == QFmt::q5_1 ? DUET_Q5_1_QH : DUET_Q5_0_QH));
        DUET_UNROLL for (int i = 0; i < 8; ++i) v[i] |= spread4((qh >> (4 * i)) & 0xFu, 4);
      }
      const float d = ldh(b);
      sc[0] = sc[1] = d;
      if (f == QFmt::q4_1 || f == QFmt::q5_1) {
        mn[0] = mn[1] = ldh(b + (f == QFmt::q5_1 ? DUET_Q5_1_M : DUET_Q4_1_M));
        return;
      }
      const uint32_t z = f == QFmt::q4_0   ? 8u
                         : f == QFmt::q5_0 ? 16u
                                           : (ldw1(b + DUET_Q4_Z_D) >> 16) & 0xFu;
      DUET_UNROLL for (int i = 0; i < 8; ++i) v[i] = sub_bytes(v[i], z);
      return;
    }
    case QFmt::q4_k:
    case QFmt::q5_k: {
      uint32_t s12[3];
      ldw(b + DUET_Q4_K_SCALES, s12);
      const int s = DUET_Q4_K_SCALE(DUET_WORD_BYTE, g), m = DUET_Q4_K_MIN(DUET_WORD_BYTE, g);
      uint32_t w[8];
      ldw(b + (f == QFmt::q5_k ? DUET_Q5_K_QS : DUET_Q4_K_QS) + 32 * (g / 2), w);
      const int shift = (g & 1) * 4;
      DUET_UNROLL for (int i = 0; i < 8; ++i) v[i] = (w[i] >> shift) & 0x0F0F0F0Fu;
      if (f == QFmt::q5_k) {
        ldw(b + DUET_Q5_K_QH, w);
        DUET_UNROLL for (int i = 0; i < 8; ++i) v[i] |= ((w[i] >> g) & 0x01010101u) << 4;
      }
      const uint32_t dd = ldw1(b + DUET_Q4_K_D);  // d, then dmin
      sc[0] = sc[1] = half_to_float(static_cast<uint16_t>(dd)) * static_cast<float>(s);
      mn[0] = mn[1] = -half_to_float(static_cast<uint16_t>(dd >> 16)) * static_cast<float>(m);
      return;
    }
    case QFmt::q6_k: {
      const int h = g / 4, j = g % 4;
      uint32_t ql[8], qh[8];
      ldw(b + DUET_Q6_K_QL + 64 * h + 32 * (j % 2), ql);
      ldw(b + DUET_Q6_K_QH + 32 * h, qh);
      const int shift = (j / 2) * 4;
      DUET_UNROLL for (int i = 0; i < 8; ++i) v[i] = sub_bytes(
          ((ql[i] >> shift) & 0x0F0F0F0Fu) | (((qh[i] >> (2 * j)) & 0x03030303u) << 4), 32u);
      const float d = ldh(b + DUET_Q6_K_D);
      const uint32_t s2 = ldw1(b + DUET_Q6_K_SCALES + 2 * g);
      sc[0] = d * static_cast<float>(static_cast<int8_t>(s2 & 0xFFu));
      sc[1] = d * static_cast<float>(static_cast<int8_t>((s2 >> 8) & 0xFFu));
      return;
    }
    case QFmt::q2_k: {
      const int h = g / 4, j = g % 4;
      uint32_t w[8];
      ldw(b + DUET_Q2_K_QS + 32 * h, w);
      DUET_UNROLL for (int i = 0; i < 8; ++i) v[i] = (w[i] >> (2 * j)) & 0x03030303u;
      const uint32_t dd = ldw1(b + DUET_Q2_K_D);  // d, then dmin
      const float d = half_to_float(static_cast<uint16_t>(dd)),
                  dmin = half_to_float(static_cast<uint16_t>(dd >> 16));
      const uint32_t s2 = ldw1(b + DUET_Q2_K_SCALES + 2 * g);
      DUET_UNROLL for (int i = 0; i < 2; ++i) {
        const uint32_t s = (s2 >> (8 * i)) & 0xFFu;
        sc[i] = d * static_cast<float>(s & 0xF);
        mn[i] = -dmin * static_cast<float>(s >> 4);
      }
      return;
    }
    case QFmt::q3_k: {
      // q = low 2 bits | high bit << 2, minus 4: in [-4, 3].
      const int h = g / 4, j = g % 4;
      uint32_t qs[8], hm[8];
      ldw(b + DUET_Q3_K_QS + 32 * h, qs);
      ldw(b + DUET_Q3_K_HMASK, hm);
      DUET_UNROLL for (int i = 0; i < 8; ++i) v[i] = sub_bytes(
          ((qs[i] >> (2 * j)) & 0x03030303u) | (((hm[i] >> (4 * h + j)) & 0x01010101u) << 2), 4u);
      uint32_t s12[3];
      ldw(b + DUET_Q3_K_SCALES, s12);
      const float d = ldh(b + DUET_Q3_K_D);
      DUET_UNROLL for (int i = 0; i < 2; ++i) {
        sc[i] = d * static_cast<float>(DUET_Q3_K_SCALE(DUET_WORD_BYTE, 2 * g + i) - 32);
      }
      return;
    }
  }
}

#undef DUET_WORD_BYTE

DUET_DEV_END
