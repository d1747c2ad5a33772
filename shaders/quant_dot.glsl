// Block-quantized weights in integer form, for the int_dot kernels: the 32 elements of group g of
// the block at byte A as 8 words of packed signed bytes (element 4i + c in byte c of word i, the
// activations' q8 order), with per half of 16 elements a scale and an offset coefficient:
//
//   sum_e w[e] a[e] = da * sum_h (sc[h] * dot_h(q, qa) + mn[h] * sum_h(qa))
//
// for activations a = da * qa (q8, quantize_q8.comp). Every format's integers fit a signed byte
// as stored or shifted (q6_k 0..63, q3_k -4..3), so one signed dot product (OpSDot) serves all.
// Included after quant.glsl (QWORD, qrd32, QK, QB, the scale helpers). QHALVES is 2 for formats
// with a scale per 16 elements, else 1 (sc.x = sc.y, mn.x = mn.y).
//
// glslang 12 (Debian 12) predates GL_EXT_integer_dot_product: the instructions of
// SPV_KHR_integer_dot_product are declared through GL_EXT_spirv_intrinsics, the SPIR-V glslang
// 14's dotPacked4x8EXT emits.
#extension GL_EXT_spirv_intrinsics : require

// OpSDot (4450): the sum of the products of the four signed bytes of a and b. Capabilities
// DotProduct (6019) and DotProductInput4x8BitPacked (6018); the literal 0 is
// PackedVectorFormat4x8Bit.
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018],
                  id = 4450) int sdot4_(uint a, uint b, spirv_literal int packed_format);
#define SDOT4(a, b) sdot4_(a, b, 0)

// Byte c of the result: bit c of the 4-bit value b (for the fifth bit of q5 formats).
uint spread4(uint b) {
  return (b & 1u) | ((b & 2u) << 7) | ((b & 4u) << 14) | ((b & 8u) << 21);
}

#if defined(Q_q3_k) || defined(Q_q6_k) || defined(Q_q2_k)
#define QHALVES 2
#else
#define QHALVES 1
#endif

#if defined(Q_q8_0)
void qint32(uint A, uint g, out uint q[8], out vec2 sc, out vec2 mn) {
  const float d = qf16(A + DUET_Q8_0_D);
  qbytes32(A + DUET_Q8_0_QS, q);
  sc = vec2(d);
  mn = vec2(0.0);
}
#elif defined(Q_q4_0) || defined(Q_q4_1) || defined(Q_q4_z)
void qint32(uint A, uint g, out uint q[8], out vec2 sc, out vec2 mn) {
  const float d = qf16(A);
#if defined(Q_q4_0)
  const float m = -8.0 * d;
#elif defined(Q_q4_1)
  const float m = qf16(A + DUET_Q4_1_M);
#else
  const float m = -float(qrd8(A + DUET_Q4_Z_Z) & 0xfu) * d;
#endif
  uint x[4];
  qbytes16(A + QS_AT, x);
  [[unroll]] for (uint i = 0u; i < 4u; ++i) {
    q[i] = x[i] & 0x0f0f0f0fu;
    q[4u + i] = (x[i] >> 4) & 0x0f0f0f0fu;
  }
  sc = vec2(d);
  mn = vec2(m);
}
#elif defined(Q_q5_0) || defined(Q_q5_1)
void qint32(uint A, uint g, out uint q[8], out vec2 sc, out vec2 mn) {
  const float d = qf16(A);
#if defined(Q_q5_0)
  const float m = -16.0 * d;
#else
  const float m = qf16(A + DUET_Q5_1_M);
#endif
  const uint qh = qrd32(A + QH_AT);
  uint x[4];
  qbytes16(A + QS_AT, x);
  [[unroll]] for (uint i = 0u; i < 4u; ++i) {
    q[i] = (x[i] & 0x0f0f0f0fu) | (spread4((qh >> (4u * i)) & 0xfu) << 4);
    q[4u + i] = ((x[i] >> 4) & 0x0f0f0f0fu) | (spread4((qh >> (16u + 4u * i)) & 0xfu) << 4);
  }
  sc = vec2(d);
  mn = vec2(m);
}
#elif defined(Q_q4_k) || defined(Q_q5_k)
void qint32(uint A, uint g, out uint q[8], out vec2 sc, out vec2 mn) {
  uint s, m;
  qk_scale_min(A + 4u, g, s, m);
  const uint shift = (g & 1u) * 4u;
  qbytes32(A + QS_AT + 32u * (g >> 1), q);
#if defined(Q_q5_k)
  uint h[8];
  qbytes32(A + DUET_Q5_K_QH, h);
#endif
  [[unroll]] for (uint i = 0u; i < 8u; ++i) {
    q[i] = (q[i] >> shift) & 0x0f0f0f0fu;
#if defined(Q_q5_k)
    q[i] |= ((h[i] >> g) & 0x01010101u) << 4;
#endif
  }
  sc = vec2(qf16(A) * float(s));
  mn = vec2(-qf16(A + 2u) * float(m));
}
#elif defined(Q_q6_k)
void qint32(uint A, uint g, out uint q[8], out vec2 sc, out vec2 mn) {
  const uint h = g >> 2, j = g & 3u;
  const float d = qf16(A + DUET_Q6_K_D);
  const uint s2 = qrd16(A + DUET_Q6_K_SCALES + 2u * g);
  sc = d * vec2(float(bitfieldExtract(int(s2), 0, 8)), float(bitfieldExtract(int(s2), 8, 8)));
  mn = -32.0 * sc;
  const uint shift = (j >> 1) * 4u;
  uint hb[8];
  qbytes32(A + DUET_Q6_K_QL + 64u * h + 32u * (j & 1u), q);
  qbytes32(A + DUET_Q6_K_QH + 32u * h, hb);
  [[unroll]] for (uint i = 0u; i < 8u; ++i)
    q[i] = ((q[i] >> shift) & 0x0f0f0f0fu) | (((hb[i] >> (2u * j)) & 0x03030303u) << 4);
}
#elif defined(Q_q2_k)
void qint32(uint A, uint g, out uint q[8], out vec2 sc, out vec2 mn) {
  const uint h = g >> 2, j = g & 3u;
  const float d = qf16(A + DUET_Q2_K_D), dmin = qf16(A + DUET_Q2_K_DMIN);
  const uint s2 = qrd16(A + DUET_Q2_K_SCALES + 2u * g);
  sc = d * vec2(float(s2 & 0xfu), float((s2 >> 8) & 0xfu));
  mn = -dmin * vec2(float((s2 >> 4) & 0xfu), float((s2 >> 12) & 0xfu));
  qbytes32(A + DUET_Q2_K_QS + 32u * h, q);
  [[unroll]] for (uint i = 0u; i < 8u; ++i) q[i] = (q[i] >> (2u * j)) & 0x03030303u;
}
#elif defined(Q_q3_k)
void qint32(uint A, uint g, out uint q[8], out vec2 sc, out vec2 mn) {
  const uint h = g >> 2, j = g & 3u;
  const float d = qf16(A + DUET_Q3_K_D);
  sc = d * vec2(float(int(q3_scale(A + DUET_Q3_K_SCALES, 2u * g)) - 32),
                float(int(q3_scale(A + DUET_Q3_K_SCALES, 2u * g + 1u)) - 32));
  mn = vec2(0.0);
  uint hm[8];
  qbytes32(A + DUET_Q3_K_QS + 32u * h, q);
  qbytes32(A + DUET_Q3_K_HMASK, hm);
  [[unroll]] for (uint i = 0u; i < 8u; ++i) {
    const uint lo = (q[i] >> (2u * j)) & 0x03030303u;
    const uint hi = (hm[i] >> (4u * h + j)) & 0x01010101u;
    q[i] = lo + (hi ^ 0x01010101u) * 0xfcu;  // q - 4 where the high bit is clear, as a byte
  }
}
#endif

// The sum of the products of the 4 bytes of w (each 0..63) and the signed bytes a0..a3 given as
// e = (a0 << 16) + a2, o = (a1 << 16) + a3 (quantize_q8.comp's PAIRS form), by two 32-bit
// multiplies: (w0 + w2 2^16)(a0 2^16 + a2) holds w0 a0 + w2 a2 in bits 16..31, below it w0 a2
// (|.| < 2^15, taken out by the rounding shift), above it w2 a0 2^32 (gone mod 2^32). For devices
// that emulate OpSDot byte by byte (lavapipe): about a third of the instructions.
int swar_dot4(uint w, uint e, uint o) {
  const int we = int(w & 0x00ff00ffu), wo = int((w >> 8) & 0x00ff00ffu);
  return ((we * int(e) + 0x8000) >> 16) + ((wo * int(o) + 0x8000) >> 16);
}

// One group: the weight's integers q with their scales and offsets against an activation block
// (its 8 words qa, or with SWAR its 16 pair words, scale da and the sums of its two halves s).
float qdot32(uint q[8], vec2 sc, vec2 mn, uint qa[16], float da, ivec2 s) {
  int d0 = 0, d1 = 0;
  [[unroll]] for (uint i = 0u; i < 4u; ++i) {
    if (SWAR != 0u) {
      d0 += swar_dot4(q[i], qa[i], qa[8u + i]);
      d1 += swar_dot4(q[4u + i], qa[4u + i], qa[12u + i]);
    } else {
      d0 += SDOT4(q[i], qa[i]);
      d1 += SDOT4(q[4u + i], qa[4u + i]);
    }
  }
#if QHALVES == 2
  return da * (sc.x * float(d0) + sc.y * float(d1) + mn.x * float(s.x) + mn.y * float(s.y));
#else
  return da * (sc.x * float(d0 + d1) + mn.x * float(s.x + s.y));
#endif
}
