// Block-quantized weights decoded in registers: every format of duet/block_layout.h, 32 elements
// at a time from the compressed bytes, in plain integer C++ shared by the GPU and the emulator
// builds (the weight is never expanded in memory). Values are the exact dequantization
// d * q (+ m) up to the f32 roundings of the products. The kernels of every tier include it.
#pragma once

#include "device/elem.h"
#include "device/params.h"
#include "duet/block_layout.h"

DUET_DEV_BEGIN

DUET_DEV float qf16(const uint8_t* p) {
  return h2f(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}

// Elements and bytes of one block.
DUET_HD int q_block_elems(QFmt f) {
  return f == QFmt::q2_k || f == QFmt::q3_k || f == QFmt::q4_k || f == QFmt::q5_k || f == QFmt::q6_k
             ? DUET_QK_K
             : 32;
}
DUET_HD int q_block_bytes(QFmt f) {
  switch (f) {
    case QFmt::q8_0:
      return DUET_Q8_0_BYTES;
    case QFmt::q4_0:
      return DUET_Q4_0_BYTES;
    case QFmt::q4_1:
      return DUET_Q4_1_BYTES;
    case QFmt::q5_0:
      return DUET_Q5_0_BYTES;
    case QFmt::q5_1:
      return DUET_Q5_1_BYTES;
    case QFmt::q2_k:
      return DUET_Q2_K_BYTES;
    case QFmt::q3_k:
      return DUET_Q3_K_BYTES;
    case QFmt::q4_k:
      return DUET_Q4_K_BYTES;
    case QFmt::q5_k:
      return DUET_Q5_K_BYTES;
    case QFmt::q6_k:
      return DUET_Q6_K_BYTES;
    case QFmt::q4_z:
      return DUET_Q4_Z_BYTES;
  }
  return 0;
}

// The nibble of element e (< 32) in the 16 bytes at qs: low nibbles hold 0..15, high 16..31.
DUET_DEV int q_nib32(const uint8_t* qs, int e) {
  return e < 16 ? qs[e] & 0xF : qs[e - 16] >> 4;
}

// Byte i of a block's packed scales (sc), for the decoders of duet/block_layout.h.
#define DUET_SCALE_BYTE(i) sc[i]

// The 6-bit scale and min of sub-block s (of 8) of q4_k and q5_k, from the 12 bytes at sc.
DUET_DEV void q_scale_min_k4(const uint8_t* sc, int s, int& scale, int& min) {
  scale = DUET_Q4_K_SCALE(DUET_SCALE_BYTE, s);
  min = DUET_Q4_K_MIN(DUET_SCALE_BYTE, s);
}
// The scale of sub-block s (of 16) of q3_k, from the 12 bytes at sc, without its offset of 32.
DUET_DEV int q_scale_k3(const uint8_t* sc, int s) {
  return DUET_Q3_K_SCALE(DUET_SCALE_BYTE, s) - 32;
}
#undef DUET_SCALE_BYTE

// Elements [32 g, 32 g + 32) of the block at b.
DUET_DEV void q_block32(QFmt f, const uint8_t* b, int g, float (&w)[32]) {
  switch (f) {
    case QFmt::q8_0: {
      const float d = qf16(b + DUET_Q8_0_D);
      DUET_UNROLL for (int e = 0; e < 32; ++e) w[e] =
          d * static_cast<float>(static_cast<int8_t>(b[DUET_Q8_0_QS + e]));
      return;
    }
    case QFmt::q4_0:
    case QFmt::q4_1:
    case QFmt::q4_z: {
      const float d = qf16(b);
      const float m = f == QFmt::q4_0   ? -8.f * d
                      : f == QFmt::q4_1 ? qf16(b + DUET_Q4_1_M)
                                        : -static_cast<float>(b[DUET_Q4_Z_Z] & 0xF) * d;
      const uint8_t* qs = b + (f == QFmt::q4_0 ? DUET_Q4_0_QS : DUET_Q4_1_QS);
      DUET_UNROLL for (int e = 0; e < 32; ++e) w[e] =
          fmaf(d, static_cast<float>(q_nib32(qs, e)), m);
      return;
    }
    case QFmt::q5_0:
    case QFmt::q5_1: {
      const bool one = f == QFmt::q5_1;
      const float d = qf16(b);
      const float m = one ? qf16(b + DUET_Q5_1_M) : -16.f * d;
      const uint8_t* h = b + (one ? DUET_Q5_1_QH : DUET_Q5_0_QH);
      const uint32_t qh = h[0] | (h[1] << 8) | (h[2] << 16) | (uint32_t(h[3]) << 24);
      const uint8_t* qs = b + (one ? DUET_Q5_1_QS : DUET_Q5_0_QS);
      DUET_UNROLL for (int e = 0; e < 32; ++e) w[e] =
          fmaf(d, static_cast<float>(q_nib32(qs, e) | ((qh >> e) & 1u) << 4), m);
      return;
    }
    case QFmt::q4_k:
    case QFmt::q5_k: {
      const bool five = f == QFmt::q5_k;
      int sc = 0, mn = 0;
      q_scale_min_k4(b + DUET_Q4_K_SCALES, g, sc, mn);
      const float d = qf16(b + DUET_Q4_K_D) * static_cast<float>(sc);
      const float m = -qf16(b + DUET_Q4_K_DMIN) * static_cast<float>(mn);
      const uint8_t* qs = b + (five ? DUET_Q5_K_QS : DUET_Q4_K_QS) + 32 * (g / 2);
      const int shift = (g & 1) * 4;
      DUET_UNROLL for (int l = 0; l < 32; ++l) {
        int q = (qs[l] >> shift) & 0xF;
        if (five) q |= ((b[DUET_Q5_K_QH + l] >> g) & 1) << 4;
        w[l] = fmaf(d, static_cast<float>(q), m);
      }
      return;
    }
    case QFmt::q6_k: {
      const int h = g / 4, j = g % 4;
      const float d = qf16(b + DUET_Q6_K_D);
      const float d0 = d * static_cast<float>(static_cast<int8_t>(b[DUET_Q6_K_SCALES + 2 * g]));
      const float d1 = d * static_cast<float>(static_cast<int8_t>(b[DUET_Q6_K_SCALES + 2 * g + 1]));
      const uint8_t* ql = b + DUET_Q6_K_QL + 64 * h + 32 * (j % 2);
      const uint8_t* qh = b + DUET_Q6_K_QH + 32 * h;
      const int shift = (j / 2) * 4;
      DUET_UNROLL for (int l = 0; l < 32; ++l) {
        const int q = ((ql[l] >> shift) & 0xF) | ((qh[l] >> (2 * j)) & 3) << 4;
        w[l] = (l < 16 ? d0 : d1) * static_cast<float>(q - 32);
      }
      return;
    }
    case QFmt::q2_k: {
      const int h = g / 4, j = g % 4;
      const float d = qf16(b + DUET_Q2_K_D), dmin = qf16(b + DUET_Q2_K_DMIN);
      const uint8_t* qs = b + DUET_Q2_K_QS + 32 * h;
      DUET_UNROLL for (int l = 0; l < 32; ++l) {
        const uint8_t sc = b[DUET_Q2_K_SCALES + 2 * g + l / 16];
        w[l] = fmaf(d * static_cast<float>(sc & 0xF), static_cast<float>((qs[l] >> (2 * j)) & 3),
                    -dmin * static_cast<float>(sc >> 4));
      }
      return;
    }
    case QFmt::q3_k: {
      const int h = g / 4, j = g % 4;
      const float d = qf16(b + DUET_Q3_K_D);
      const uint8_t* sc = b + DUET_Q3_K_SCALES;
      float ds[2];
      for (int i = 0; i < 2; ++i) ds[i] = d * static_cast<float>(q_scale_k3(sc, 2 * g + i));
      const uint8_t* qs = b + DUET_Q3_K_QS + 32 * h;
      const uint8_t* hm = b + DUET_Q3_K_HMASK;
      DUET_UNROLL for (int l = 0; l < 32; ++l) {
        const int q = ((qs[l] >> (2 * j)) & 3) - (((hm[l] >> (4 * h + j)) & 1) ? 0 : 4);
        w[l] = ds[l / 16] * static_cast<float>(q);
      }
      return;
    }
  }
}

DUET_DEV_END
