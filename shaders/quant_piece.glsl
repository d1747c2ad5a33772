// Block-quantized weights decoded eight elements at a time, for the mat-vec (matvec.comp): every
// format of duet/block_layout.h, straight from the compressed bytes. The including shader
// defines QWORD(i), the i-th 32-bit little-endian word of the weight's view, and one of
// Q_q8_0 .. Q_q4_z.
//
// qpiece(A, g, p, q, dm): elements [32 g + 8 p, 32 g + 8 p + 8) of the block at byte A (A even)
// as weight e = dm.x * q[e] + dm.y: q[e] the element's integer code less the format's fixed
// offset (q4_0: nibble - 8), exact in f32, and dm the piece's scale and minimum (dm.y 0 where the
// format has none; Q_MIN is defined where it has one). The mat-vec multiplies the activations by
// q and scales the sum once per piece, an exact regrouping of the reference's d * q (+ m) up to
// f32 rounding. A piece is small on purpose: four neighbouring invocations decode one 32-element
// group, so that a subgroup's loads cover neighbouring bytes of the weight (and the activations
// they multiply) instead of one block each, 18 or more bytes apart.
//
// Codes become floats through their bits (qv): 2^23 + v is the word 0x4B000000 | v, less 2^23 and
// the offset in one exact subtraction; an integer-to-float conversion runs at a quarter of the
// arithmetic rate on many GPUs, and was one per weight element and row.
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
// v - off as a float, exactly, for v < 2^23 and a whole `off` below 2^23.
float qv(uint v, float off) {
  return uintBitsToFloat(v | 0x4B000000u) - (8388608.0 + off);
}

#if defined(Q_q8_0)
#define QK uint(DUET_Q8_0_ELEMS)
#define QB uint(DUET_Q8_0_BYTES)
void qpiece(uint A, uint g, uint p, out float q[8], out vec2 dm) {
  dm = vec2(qf16(A + DUET_Q8_0_D), 0.0);
  uint b[2];
  qw2(A + DUET_Q8_0_QS + 8u * p, b);
  // int8 q as (q + 128) = byte ^ 0x80.
  [[unroll]] for (uint i = 0u; i < 2u; ++i) {
    const uint u = b[i] ^ 0x80808080u;
    [[unroll]] for (uint c = 0u; c < 4u; ++c) q[4u * i + c] = qv((u >> (8u * c)) & 0xffu, 128.0);
  }
}
#elif defined(Q_q4_0) || defined(Q_q4_1) || defined(Q_q4_z) || defined(Q_q5_0) || defined(Q_q5_1)
#define QK 32u
#if defined(Q_q4_0)
#define QB uint(DUET_Q4_0_BYTES)
#define QS_AT uint(DUET_Q4_0_QS)
#elif defined(Q_q4_1)
#define QB uint(DUET_Q4_1_BYTES)
#define QS_AT uint(DUET_Q4_1_QS)
#define Q_MIN
#elif defined(Q_q4_z)
#define QB uint(DUET_Q4_Z_BYTES)
#define QS_AT uint(DUET_Q4_Z_QS)
#define Q_MIN
#elif defined(Q_q5_0)
#define QB uint(DUET_Q5_0_BYTES)
#define QS_AT uint(DUET_Q5_0_QS)
#define QH_AT uint(DUET_Q5_0_QH)
#else
#define QB uint(DUET_Q5_1_BYTES)
#define QS_AT uint(DUET_Q5_1_QS)
#define QH_AT uint(DUET_Q5_1_QH)
#define Q_MIN
#endif
// Element e of a block: the low nibble of quant byte e (e < 16) or the high nibble of byte
// e - 16; the five-bit formats add bit e of qh as the fifth bit. q4_0 and q5_0 are symmetric
// (offset 8 or 16, no minimum); q4_1 and q5_1 add their minimum, q4_z subtracts its zero point
// times d.
void qpiece(uint A, uint g, uint p, out float q[8], out vec2 dm) {
#if defined(Q_q4_0) || defined(Q_q5_0)
  dm = vec2(qf16(A), 0.0);
#else
  // d and, next to it, the minimum (q4_1, q5_1) or the zero point's byte (q4_z).
  const uint dmw = qw1(A);
  const float d = unpackHalf2x16(dmw).x;
#if defined(Q_q4_z)
  dm = vec2(d, -float((dmw >> 16) & 0xfu) * d);
#else
  dm = vec2(d, unpackHalf2x16(dmw >> 16).x);
#endif
#endif
#if defined(Q_q4_0)
  const float off = 8.0;
#elif defined(Q_q5_0)
  const float off = 16.0;
#else
  const float off = 0.0;
#endif
  uint b[2];
  qw2(A + QS_AT + 8u * (p & 1u), b);
  const uint sh = (p >> 1) * 4u;
#if defined(QH_AT)
  const uint hb = (qw1(A + QH_AT) >> (8u * p)) & 0xffu;
#endif
  [[unroll]] for (uint i = 0u; i < 2u; ++i) {
    const uint nib = (b[i] >> sh) & 0x0f0f0f0fu;  // four codes, one a byte
    [[unroll]] for (uint c = 0u; c < 4u; ++c) {
      uint v = (nib >> (8u * c)) & 0xffu;
#if defined(QH_AT)
      v |= ((hb >> (4u * i + c)) & 1u) << 4;
#endif
      q[4u * i + c] = qv(v, off);
    }
  }
}
#elif defined(Q_q4_k) || defined(Q_q5_k)
#define QK uint(DUET_QK_K)
#define Q_MIN
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
void qpiece(uint A, uint g, uint p, out float q[8], out vec2 dm) {
  const vec2 dd = unpackHalf2x16(qw1(A + DUET_Q4_K_D));
  uint s[3];
  qw3(A + DUET_Q4_K_SCALES, s);
#define QK_SCALE_BYTE(i) qbyte3(s[0], s[1], s[2], (i))
  dm = vec2(dd.x * float(DUET_Q4_K_SCALE(QK_SCALE_BYTE, g)),
            -dd.y * float(DUET_Q4_K_MIN(QK_SCALE_BYTE, g)));
#undef QK_SCALE_BYTE
  uint b[2];
  qw2(A + QS_AT + 32u * (g >> 1) + 8u * p, b);
  const uint sh = (g & 1u) * 4u;
#if defined(Q_q5_k)
  uint h[2];
  qw2(A + DUET_Q5_K_QH + 8u * p, h);
#endif
  [[unroll]] for (uint i = 0u; i < 2u; ++i) {
    const uint nib = (b[i] >> sh) & 0x0f0f0f0fu;
#if defined(Q_q5_k)
    const uint hi = ((h[i] >> g) & 0x01010101u) << 4;
#else
    const uint hi = 0u;
#endif
    const uint v4 = nib | hi;
    [[unroll]] for (uint c = 0u; c < 4u; ++c) q[4u * i + c] = qv((v4 >> (8u * c)) & 0xffu, 0.0);
  }
}
#elif defined(Q_q6_k)
#define QK uint(DUET_QK_K)
#define QB uint(DUET_Q6_K_BYTES)
// Group g = 4 h + j: the nibbles (low for j < 2) of ql bytes 64 h + 32 (j % 2) ..., bits 2 j of
// qh bytes 32 h ..., minus 32; an int8 scale per 16 elements.
void qpiece(uint A, uint g, uint p, out float q[8], out vec2 dm) {
  const uint h = g >> 2, j = g & 3u;
  dm = vec2(qf16(A + DUET_Q6_K_D) *
                float(bitfieldExtract(int(qrd8(A + DUET_Q6_K_SCALES + 2u * g + (p >> 1))), 0, 8)),
            0.0);
  uint ql[2], qh[2];
  qw2(A + DUET_Q6_K_QL + 64u * h + 32u * (j & 1u) + 8u * p, ql);
  qw2(A + DUET_Q6_K_QH + 32u * h + 8u * p, qh);
  const uint sh = (j >> 1) * 4u;
  [[unroll]] for (uint i = 0u; i < 2u; ++i) {
    const uint v4 = ((ql[i] >> sh) & 0x0f0f0f0fu) | (((qh[i] >> (2u * j)) & 0x03030303u) << 4);
    [[unroll]] for (uint c = 0u; c < 4u; ++c) q[4u * i + c] = qv((v4 >> (8u * c)) & 0xffu, 32.0);
  }
}
#elif defined(Q_q2_k)
#define QK uint(DUET_QK_K)
#define QB uint(DUET_Q2_K_BYTES)
#define Q_MIN
// Group g = 4 h + j: bits 2 j of quant bytes 32 h ...; a 4-bit scale (low) and min (high) per 16
// elements.
void qpiece(uint A, uint g, uint p, out float q[8], out vec2 dm) {
  const uint h = g >> 2, j = g & 3u;
  const vec2 dd = unpackHalf2x16(qw1(A + DUET_Q2_K_D));  // d, then dmin
  const uint sb = qrd8(A + DUET_Q2_K_SCALES + 2u * g + (p >> 1));
  dm = vec2(dd.x * float(sb & 0xfu), -dd.y * float(sb >> 4));
  uint b[2];
  qw2(A + DUET_Q2_K_QS + 32u * h + 8u * p, b);
  [[unroll]] for (uint i = 0u; i < 2u; ++i) {
    const uint v4 = (b[i] >> (2u * j)) & 0x03030303u;
    [[unroll]] for (uint c = 0u; c < 4u; ++c) q[4u * i + c] = qv((v4 >> (8u * c)) & 0xffu, 0.0);
  }
}
#elif defined(Q_q3_k)
#define QK uint(DUET_QK_K)
#define QB uint(DUET_Q3_K_BYTES)
// Group g = 4 h + j: bits 2 j of quant bytes 32 h ..., minus 4 where bit 4 h + j of hmask byte l
// is clear (so: the two bits plus 4 times the hmask bit, less 4); a 6-bit scale (offset 32) per
// 16 elements.
void qpiece(uint A, uint g, uint p, out float q[8], out vec2 dm) {
  const uint h = g >> 2, j = g & 3u;
  uint s[3];
  qw3(A + DUET_Q3_K_SCALES, s);
#define Q3_SCALE_BYTE(i) qbyte3(s[0], s[1], s[2], (i))
  const uint sub = 2u * g + (p >> 1);
  dm = vec2(qf16(A + DUET_Q3_K_D) * float(int(DUET_Q3_K_SCALE(Q3_SCALE_BYTE, sub)) - 32), 0.0);
#undef Q3_SCALE_BYTE
  uint b[2], hm[2];
  qw2(A + DUET_Q3_K_QS + 32u * h + 8u * p, b);
  qw2(A + DUET_Q3_K_HMASK + 8u * p, hm);
  [[unroll]] for (uint i = 0u; i < 2u; ++i) {
    const uint v4 =
        ((b[i] >> (2u * j)) & 0x03030303u) | (((hm[i] >> (4u * h + j)) & 0x01010101u) << 2);
    [[unroll]] for (uint c = 0u; c < 4u; ++c) q[4u * i + c] = qv((v4 >> (8u * c)) & 0xffu, 4.0);
  }
}
#endif
