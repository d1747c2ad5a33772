// Block-quantized weights read in the shader: every format of duet/block_layout.h decoded 32
// elements at a time, straight from the compressed bytes (the weight is never expanded in device
// memory). The including shader defines QWORD(i), the i-th 32-bit little-endian word of the
// weight's view, and one of Q_q8_0 .. Q_q4_z. Blocks start on even bytes (every format's block
// size is even), so any field is read with at most two word fetches.
//
// qblock32(A, g, w): the 32 elements [32 g, 32 g + 32) of the block at byte A, as f32. The scale
// arithmetic is done in f32 (f16 fields widen exactly); each value is the exact dequantization
// d * q (+ m) of the reference, up to the one or two f32 roundings of the products.
#include "duet/block_layout.h"

// The 32-bit word at byte a (a even).
uint qrd32(uint a) {
  const uint w = a >> 2;
  const uint lo = QWORD(w);
  if ((a & 2u) == 0u) return lo;
  return (lo >> 16) | (QWORD(w + 1u) << 16);
}
uint qrd16(uint a) {
  return (QWORD(a >> 2) >> ((a & 2u) * 8u)) & 0xffffu;
}
uint qrd8(uint a) {
  return (QWORD(a >> 2) >> ((a & 3u) * 8u)) & 0xffu;
}
float qf16(uint a) {
  return unpackHalf2x16(qrd16(a)).x;
}
// 32 bytes from byte a (a even), four per word: eight word fetches, or nine shifted by two bytes
// where a is not a multiple of 4 (eight reads through qrd32 would fetch sixteen words then). No
// word past the last byte is read.
void qbytes32(uint a, out uint b[8]) {
  const uint w = a >> 2;
  const bool odd = (a & 2u) != 0u;
  uint lo = QWORD(w);
  [[unroll]] for (uint i = 0u; i < 8u; ++i) {
    const uint hi = odd || i < 7u ? QWORD(w + i + 1u) : 0u;
    b[i] = odd ? (lo >> 16) | (hi << 16) : lo;
    lo = hi;
  }
}
// 16 bytes from byte a (a even), as qbytes32.
void qbytes16(uint a, out uint b[4]) {
  const uint w = a >> 2;
  const bool odd = (a & 2u) != 0u;
  uint lo = QWORD(w);
  [[unroll]] for (uint i = 0u; i < 4u; ++i) {
    const uint hi = odd || i < 3u ? QWORD(w + i + 1u) : 0u;
    b[i] = odd ? (lo >> 16) | (hi << 16) : lo;
    lo = hi;
  }
}
uint qbyte(uint b[8], uint l) {
  return (b[l >> 2] >> ((l & 3u) * 8u)) & 0xffu;
}

#if defined(Q_q8_0)
#define QK uint(DUET_Q8_0_ELEMS)
#define QB uint(DUET_Q8_0_BYTES)
void qblock32(uint A, uint g, out float w[32]) {
  const float d = qf16(A + DUET_Q8_0_D);
  [[unroll]] for (uint i = 0u; i < 8u; ++i) {
    const int x = int(qrd32(A + DUET_Q8_0_QS + 4u * i));
    [[unroll]] for (uint c = 0u; c < 4u; ++c) w[4u * i + c] = d * float(bitfieldExtract(x, int(8u * c), 8));
  }
}
#elif defined(Q_q4_0) || defined(Q_q4_1) || defined(Q_q4_z)
#define QK uint(DUET_Q4_0_ELEMS)
#if defined(Q_q4_0)
#define QB uint(DUET_Q4_0_BYTES)
#define QS_AT uint(DUET_Q4_0_QS)
#elif defined(Q_q4_1)
#define QB uint(DUET_Q4_1_BYTES)
#define QS_AT uint(DUET_Q4_1_QS)
#else
#define QB uint(DUET_Q4_Z_BYTES)
#define QS_AT uint(DUET_Q4_Z_QS)
#endif
void qblock32(uint A, uint g, out float w[32]) {
  const float d = qf16(A);
#if defined(Q_q4_0)
  const float m = -8.0 * d;
#elif defined(Q_q4_1)
  const float m = qf16(A + DUET_Q4_1_M);
#else
  const float m = -float(qrd8(A + DUET_Q4_Z_Z) & 0xfu) * d;
#endif
  [[unroll]] for (uint i = 0u; i < 4u; ++i) {
    const uint x = qrd32(A + QS_AT + 4u * i);
    [[unroll]] for (uint c = 0u; c < 4u; ++c) {
      w[4u * i + c] = fma(d, float((x >> (8u * c)) & 0xfu), m);
      w[16u + 4u * i + c] = fma(d, float((x >> (8u * c + 4u)) & 0xfu), m);
    }
  }
}
#elif defined(Q_q5_0) || defined(Q_q5_1)
#define QK uint(DUET_Q5_0_ELEMS)
#if defined(Q_q5_0)
#define QB uint(DUET_Q5_0_BYTES)
#define QH_AT uint(DUET_Q5_0_QH)
#define QS_AT uint(DUET_Q5_0_QS)
#else
#define QB uint(DUET_Q5_1_BYTES)
#define QH_AT uint(DUET_Q5_1_QH)
#define QS_AT uint(DUET_Q5_1_QS)
#endif
void qblock32(uint A, uint g, out float w[32]) {
  const float d = qf16(A);
#if defined(Q_q5_0)
  const float m = -16.0 * d;
#else
  const float m = qf16(A + DUET_Q5_1_M);
#endif
  const uint qh = qrd32(A + QH_AT);
  [[unroll]] for (uint i = 0u; i < 4u; ++i) {
    const uint x = qrd32(A + QS_AT + 4u * i);
    [[unroll]] for (uint c = 0u; c < 4u; ++c) {
      const uint e = 4u * i + c;
      const uint lo = ((x >> (8u * c)) & 0xfu) | (((qh >> e) & 1u) << 4);
      const uint hi = ((x >> (8u * c + 4u)) & 0xfu) | (((qh >> (e + 16u)) & 1u) << 4);
      w[e] = fma(d, float(lo), m);
      w[16u + e] = fma(d, float(hi), m);
    }
  }
}
#elif defined(Q_q4_k) || defined(Q_q5_k)
#define QK uint(DUET_QK_K)
#if defined(Q_q4_k)
#define QB uint(DUET_Q4_K_BYTES)
#define QS_AT uint(DUET_Q4_K_QS)
#else
#define QB uint(DUET_Q5_K_BYTES)
#define QS_AT uint(DUET_Q5_K_QS)
#endif
// The 6-bit scale and min of sub-block g (0..7) from the 12 scale bytes at byte S
// (duet/block_layout.h).
#define QK_SCALE_BYTE(i) qrd8(S + (i))
void qk_scale_min(uint S, uint g, out uint sc, out uint mn) {
  sc = DUET_Q4_K_SCALE(QK_SCALE_BYTE, g);
  mn = DUET_Q4_K_MIN(QK_SCALE_BYTE, g);
}
void qblock32(uint A, uint g, out float w[32]) {
  uint sc, mn;
  qk_scale_min(A + 4u, g, sc, mn);
  const float d = qf16(A) * float(sc);
  const float m = -qf16(A + 2u) * float(mn);
  uint q[8];
  qbytes32(A + QS_AT + 32u * (g >> 1), q);
  const uint shift = (g & 1u) * 4u;
#if defined(Q_q5_k)
  uint h[8];
  qbytes32(A + DUET_Q5_K_QH, h);
#endif
  [[unroll]] for (uint l = 0u; l < 32u; ++l) {
    uint v = (qbyte(q, l) >> shift) & 0xfu;
#if defined(Q_q5_k)
    v |= ((qbyte(h, l) >> g) & 1u) << 4;
#endif
    w[l] = fma(d, float(v), m);
  }
}
#elif defined(Q_q6_k)
#define QK uint(DUET_QK_K)
#define QB uint(DUET_Q6_K_BYTES)
void qblock32(uint A, uint g, out float w[32]) {
  const uint h = g >> 2, j = g & 3u;
  const float d = qf16(A + DUET_Q6_K_D);
  const uint s2 = qrd16(A + DUET_Q6_K_SCALES + 2u * g);  // the scales of e / 16 = 2g, 2g + 1
  const float d0 = d * float(bitfieldExtract(int(s2), 0, 8));
  const float d1 = d * float(bitfieldExtract(int(s2), 8, 8));
  uint ql[8], qh[8];
  qbytes32(A + DUET_Q6_K_QL + 64u * h + 32u * (j & 1u), ql);
  qbytes32(A + DUET_Q6_K_QH + 32u * h, qh);
  const uint shift = (j >> 1) * 4u;
  [[unroll]] for (uint l = 0u; l < 32u; ++l) {
    const uint v = ((qbyte(ql, l) >> shift) & 0xfu) | (((qbyte(qh, l) >> (2u * j)) & 3u) << 4);
    w[l] = (l < 16u ? d0 : d1) * float(int(v) - 32);
  }
}
#elif defined(Q_q2_k)
#define QK uint(DUET_QK_K)
#define QB uint(DUET_Q2_K_BYTES)
void qblock32(uint A, uint g, out float w[32]) {
  const uint h = g >> 2, j = g & 3u;
  const float d = qf16(A + DUET_Q2_K_D), dmin = qf16(A + DUET_Q2_K_DMIN);
  const uint s2 = qrd16(A + DUET_Q2_K_SCALES + 2u * g);
  const float d0 = d * float(s2 & 0xfu), m0 = -dmin * float((s2 >> 4) & 0xfu);
  const float d1 = d * float((s2 >> 8) & 0xfu), m1 = -dmin * float((s2 >> 12) & 0xfu);
  uint q[8];
  qbytes32(A + DUET_Q2_K_QS + 32u * h, q);
  [[unroll]] for (uint l = 0u; l < 32u; ++l) {
    const float v = float((qbyte(q, l) >> (2u * j)) & 3u);
    w[l] = l < 16u ? fma(d0, v, m0) : fma(d1, v, m1);
  }
}
#elif defined(Q_q3_k)
#define QK uint(DUET_QK_K)
#define QB uint(DUET_Q3_K_BYTES)
// The 6-bit scale of sub-block s (0..15), before its offset of 32 (duet/block_layout.h).
#define Q3_SCALE_BYTE(i) qrd8(S + (i))
uint q3_scale(uint S, uint s) {
  return DUET_Q3_K_SCALE(Q3_SCALE_BYTE, s);
}
void qblock32(uint A, uint g, out float w[32]) {
  const uint h = g >> 2, j = g & 3u;
  const float d = qf16(A + DUET_Q3_K_D);
  const float d0 = d * float(int(q3_scale(A + DUET_Q3_K_SCALES, 2u * g)) - 32);
  const float d1 = d * float(int(q3_scale(A + DUET_Q3_K_SCALES, 2u * g + 1u)) - 32);
  uint q[8], hm[8];
  qbytes32(A + DUET_Q3_K_QS + 32u * h, q);
  qbytes32(A + DUET_Q3_K_HMASK, hm);
  [[unroll]] for (uint l = 0u; l < 32u; ++l) {
    const int v = int((qbyte(q, l) >> (2u * j)) & 3u) - (((qbyte(hm, l) >> (4u * h + j)) & 1u) == 0u ? 4 : 0);
    w[l] = (l < 16u ? d0 : d1) * float(v);
  }
}
#endif
