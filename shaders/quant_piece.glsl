// Block-quantized weights decoded eight elements at a time, for the mat-vec (matvec.comp): every
// format of duet/block_layout.h, straight from the compressed bytes. The including shader
// defines QWORD(i), the i-th 32-bit little-endian word of the weight's view, and one of
// Q_q8_0 .. Q_q4_z.
//
// qpiece(A, g, p, w): elements [32 g + 8 p, 32 g + 8 p + 8) of the block at byte A (A even), as
// f32, the exact dequantization d * q (+ m) of the reference up to the one or two f32 roundings
// of the products. A piece is small on purpose: four neighbouring invocations decode one
// 32-element group, so that a subgroup's loads cover neighbouring bytes of the weight (and the
// activations they multiply) instead of one block each, 18 or more bytes apart.
//
// Fields start on even bytes (every block size is even), so a field of n words is read as the
// n (aligned) or n + 1 (2 bytes off) aligned words around it, joined by funnel shifts: the loads
// are unconditional (no load inside a branch that differs between neighbouring invocations,
// whose blocks alternate between the two alignments), and a word is read only if it holds a byte
// of the field, so nothing is read past the weight's last byte.
#include "duet/block_layout.h"

// The word at byte a (a even).
uint qw1(uint a) {
  const uint w = a >> 2;
  const bool odd = (a & 2u) != 0u;
  const uint x0 = QWORD(w), x1 = QWORD(odd ? w + 1u : w);
  return odd ? (x0 >> 16) | (x1 << 16) : x0;
}
// Two words from byte a (a even).
void qw2(uint a, out uint b[2]) {
  const uint w = a >> 2;
  const bool odd = (a & 2u) != 0u;
  const uint x0 = QWORD(w), x1 = QWORD(w + 1u), x2 = QWORD(odd ? w + 2u : w + 1u);
  b[0] = odd ? (x0 >> 16) | (x1 << 16) : x0;
  b[1] = odd ? (x1 >> 16) | (x2 << 16) : x1;
}
// Three words from byte a (a even).
void qw3(uint a, out uint b[3]) {
  const uint w = a >> 2;
  const bool odd = (a & 2u) != 0u;
  const uint x0 = QWORD(w), x1 = QWORD(w + 1u), x2 = QWORD(w + 2u);
  const uint x3 = QWORD(odd ? w + 3u : w + 2u);
  b[0] = odd ? (x0 >> 16) | (x1 << 16) : x0;
  b[1] = odd ? (x1 >> 16) | (x2 << 16) : x1;
  b[2] = odd ? (x2 >> 16) | (x3 << 16) : x2;
}
uint qrd8(uint a) {
  return (QWORD(a >> 2) >> ((a & 3u) * 8u)) & 0xffu;
}
float qf16(uint a) {
  return unpackHalf2x16(QWORD(a >> 2) >> ((a & 2u) * 8u)).x;
}
// Byte i (< 12) of three words, by selects (an index into a register array that is not a
// constant can put the array in memory).
uint qbyte3(uint s0, uint s1, uint s2, uint i) {
  const uint x = i < 4u ? s0 : (i < 8u ? s1 : s2);
  return (x >> ((i & 3u) * 8u)) & 0xffu;
}

#if defined(Q_q8_0)
#define QK uint(DUET_Q8_0_ELEMS)
#define QB uint(DUET_Q8_0_BYTES)
void qpiece(uint A, uint g, uint p, out float w[8]) {
  const float d = qf16(A + DUET_Q8_0_D);
  uint b[2];
  qw2(A + DUET_Q8_0_QS + 8u * p, b);
  [[unroll]] for (uint i = 0u; i < 2u; ++i)
    [[unroll]] for (uint c = 0u; c < 4u; ++c)
      w[4u * i + c] = d * float(bitfieldExtract(int(b[i]), int(8u * c), 8));
}
#elif defined(Q_q4_0) || defined(Q_q4_1) || defined(Q_q4_z) || defined(Q_q5_0) || defined(Q_q5_1)
#define QK 32u
#if defined(Q_q4_0)
#define QB uint(DUET_Q4_0_BYTES)
#define QS_AT uint(DUET_Q4_0_QS)
#elif defined(Q_q4_1)
#define QB uint(DUET_Q4_1_BYTES)
#define QS_AT uint(DUET_Q4_1_QS)
#elif defined(Q_q4_z)
#define QB uint(DUET_Q4_Z_BYTES)
#define QS_AT uint(DUET_Q4_Z_QS)
#elif defined(Q_q5_0)
#define QB uint(DUET_Q5_0_BYTES)
#define QS_AT uint(DUET_Q5_0_QS)
#define QH_AT uint(DUET_Q5_0_QH)
#else
#define QB uint(DUET_Q5_1_BYTES)
#define QS_AT uint(DUET_Q5_1_QS)
#define QH_AT uint(DUET_Q5_1_QH)
#endif
// Element e of a block: the low nibble of quant byte e (e < 16) or the high nibble of byte
// e - 16; the five-bit formats add bit e of qh as the fifth bit.
void qpiece(uint A, uint g, uint p, out float w[8]) {
#if defined(Q_q4_0) || defined(Q_q5_0)
  const float d = qf16(A);
#if defined(Q_q5_0)
  const float m = -16.0 * d;
#else
  const float m = -8.0 * d;
#endif
#else
  // d and, next to it, the minimum (q4_1, q5_1) or the zero point's byte (q4_z).
  const uint dm = qw1(A);
  const float d = unpackHalf2x16(dm).x;
#if defined(Q_q4_z)
  const float m = -float((dm >> 16) & 0xfu) * d;
#else
  const float m = unpackHalf2x16(dm >> 16).x;
#endif
#endif
  uint b[2];
  qw2(A + QS_AT + 8u * (p & 1u), b);
  const uint sh = (p >> 1) * 4u;
#if defined(QH_AT)
  const uint hb = (qw1(A + QH_AT) >> (8u * p)) & 0xffu;
#endif
  [[unroll]] for (uint i = 0u; i < 2u; ++i)
    [[unroll]] for (uint c = 0u; c < 4u; ++c) {
      uint v = (b[i] >> (8u * c + sh)) & 0xfu;
#if defined(QH_AT)
      v |= ((hb >> (4u * i + c)) & 1u) << 4;
#endif
      w[4u * i + c] = fma(d, float(v), m);
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
// Group g: the nibbles (low for even g, high for odd) of quant bytes 32 (g / 2) ..; its 6-bit
// scale and min from the 12 scale bytes (duet/block_layout.h); q5_k: bit g of qh byte l is the
// fifth bit of element l.
void qpiece(uint A, uint g, uint p, out float w[8]) {
  const vec2 dm = unpackHalf2x16(qw1(A + DUET_Q4_K_D));
  uint s[3];
  qw3(A + DUET_Q4_K_SCALES, s);
#define QK_SCALE_BYTE(i) qbyte3(s[0], s[1], s[2], (i))
  const float d = dm.x * float(DUET_Q4_K_SCALE(QK_SCALE_BYTE, g));
  const float m = -dm.y * float(DUET_Q4_K_MIN(QK_SCALE_BYTE, g));
#undef QK_SCALE_BYTE
  uint b[2];
  qw2(A + QS_AT + 32u * (g >> 1) + 8u * p, b);
  const uint sh = (g & 1u) * 4u;
#if defined(Q_q5_k)
  uint h[2];
  qw2(A + DUET_Q5_K_QH + 8u * p, h);
#endif
  [[unroll]] for (uint i = 0u; i < 2u; ++i)
    [[unroll]] for (uint c = 0u; c < 4u; ++c) {
      uint v = (b[i] >> (8u * c + sh)) & 0xfu;
#if defined(Q_q5_k)
      v |= ((h[i] >> (8u * c + g)) & 1u) << 4;
#endif
      w[4u * i + c] = fma(d, float(v), m);
    }
}
#elif defined(Q_q6_k)
#define QK uint(DUET_QK_K)
#define QB uint(DUET_Q6_K_BYTES)
// Group g = 4 h + j: the nibbles (low for j < 2) of ql bytes 64 h + 32 (j % 2) ..., bits 2 j of
// qh bytes 32 h ..., minus 32; an int8 scale per 16 elements.
void qpiece(uint A, uint g, uint p, out float w[8]) {
  const uint h = g >> 2, j = g & 3u;
  const float d = qf16(A + DUET_Q6_K_D) *
                  float(bitfieldExtract(int(qrd8(A + DUET_Q6_K_SCALES + 2u * g + (p >> 1))), 0, 8));
  uint ql[2], qh[2];
  qw2(A + DUET_Q6_K_QL + 64u * h + 32u * (j & 1u) + 8u * p, ql);
  qw2(A + DUET_Q6_K_QH + 32u * h + 8u * p, qh);
  const uint sh = (j >> 1) * 4u;
  [[unroll]] for (uint i = 0u; i < 2u; ++i)
    [[unroll]] for (uint c = 0u; c < 4u; ++c) {
      const uint v = ((ql[i] >> (8u * c + sh)) & 0xfu) | (((qh[i] >> (8u * c + 2u * j)) & 3u) << 4);
      w[4u * i + c] = d * float(int(v) - 32);
    }
}
#elif defined(Q_q2_k)
#define QK uint(DUET_QK_K)
#define QB uint(DUET_Q2_K_BYTES)
// Group g = 4 h + j: bits 2 j of quant bytes 32 h ...; a 4-bit scale (low) and min (high) per 16
// elements.
void qpiece(uint A, uint g, uint p, out float w[8]) {
  const uint h = g >> 2, j = g & 3u;
  const vec2 dm = unpackHalf2x16(qw1(A + DUET_Q2_K_D));  // d, then dmin
  const uint sb = qrd8(A + DUET_Q2_K_SCALES + 2u * g + (p >> 1));
  const float d = dm.x * float(sb & 0xfu), m = -dm.y * float(sb >> 4);
  uint b[2];
  qw2(A + DUET_Q2_K_QS + 32u * h + 8u * p, b);
  [[unroll]] for (uint i = 0u; i < 2u; ++i)
    [[unroll]] for (uint c = 0u; c < 4u; ++c)
      w[4u * i + c] = fma(d, float((b[i] >> (8u * c + 2u * j)) & 3u), m);
}
#elif defined(Q_q3_k)
#define QK uint(DUET_QK_K)
#define QB uint(DUET_Q3_K_BYTES)
// Group g = 4 h + j: bits 2 j of quant bytes 32 h ..., minus 4 where bit 4 h + j of hmask byte l
// is clear; a 6-bit scale (offset 32) per 16 elements.
void qpiece(uint A, uint g, uint p, out float w[8]) {
  const uint h = g >> 2, j = g & 3u;
  uint s[3];
  qw3(A + DUET_Q3_K_SCALES, s);
#define Q3_SCALE_BYTE(i) qbyte3(s[0], s[1], s[2], (i))
  const uint sub = 2u * g + (p >> 1);
  const float d = qf16(A + DUET_Q3_K_D) * float(int(DUET_Q3_K_SCALE(Q3_SCALE_BYTE, sub)) - 32);
#undef Q3_SCALE_BYTE
  uint b[2], hm[2];
  qw2(A + DUET_Q3_K_QS + 32u * h + 8u * p, b);
  qw2(A + DUET_Q3_K_HMASK + 8u * p, hm);
  [[unroll]] for (uint i = 0u; i < 2u; ++i)
    [[unroll]] for (uint c = 0u; c < 4u; ++c) {
      const int v = int((b[i] >> (8u * c + 2u * j)) & 3u) -
                    (((hm[i] >> (8u * c + 4u * h + j)) & 1u) == 0u ? 4 : 0);
      w[4u * i + c] = d * float(v);
    }
}
#endif
