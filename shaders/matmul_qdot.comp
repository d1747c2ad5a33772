// Matmul with a block-quantized weight by integer dot products (tier "int_dot"): y[.., M, N] =
// a[.., M, K] * w[N, K]^T, with a quantized to q8 blocks beforehand (quantize_q8.comp) and w
// read in its blocks through a uniform texel buffer of 32-bit words, unpacked into packed signed
// bytes (quant_dot.glsl) and multiplied four bytes at a time by OpSDot
// (VK_KHR_shader_integer_dot_product). Each invocation accumulates a TM x TN block of outputs in
// f32, one scale multiply per group of 32: TM = 1 is the decode (mat-vec) shape, every weight
// byte fetched once; larger TM unpacks each weight group once for TM activation rows.
//
// Variants: T_<output dtype> x Q_<weight format>. SWAR (below) replaces OpSDot by 32-bit multiplies
// of byte pairs where the device only emulates it.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TM = 1;
layout(constant_id = 2) const uint TN = 4;
// 1: the activations in quantize_q8.comp's PAIRS form and the products by swar_dot4 (weights of
// 0..63: every format but q8_0 and q3_k), for devices that emulate OpSDot.
layout(constant_id = 3) const uint SWAR = 0;

TENSOR(1, , y)
layout(set = 0, binding = 7) uniform usamplerBuffer tq;  // q8 activation blocks, 3 texels each
layout(set = 0, binding = 8) uniform usamplerBuffer tw;  // the weight, 32-bit words

#define QWORD(i) texelFetch(tw, int(i)).x
#include "quant.glsl"
#include "quant_dot.glsl"

// Texels per activation block.
#define QAT (SWAR != 0u ? 5u : 3u)

void load_block(uint t, out uint qa[16], out float da, out ivec2 s) {
  const uvec4 a0 = texelFetch(tq, int(t)), a1 = texelFetch(tq, int(t + 1u));
  qa[0] = a0.x, qa[1] = a0.y, qa[2] = a0.z, qa[3] = a0.w;
  qa[4] = a1.x, qa[5] = a1.y, qa[6] = a1.z, qa[7] = a1.w;
  uvec4 m = texelFetch(tq, int(t + 2u));
  if (SWAR != 0u) {
    const uvec4 a3 = texelFetch(tq, int(t + 3u));
    qa[8] = m.x, qa[9] = m.y, qa[10] = m.z, qa[11] = m.w;
    qa[12] = a3.x, qa[13] = a3.y, qa[14] = a3.z, qa[15] = a3.w;
    m = texelFetch(tq, int(t + 4u));
  } else {
    [[unroll]] for (uint i = 8u; i < 16u; ++i) qa[i] = 0u;
  }
  da = uintBitsToFloat(m.x);
  s = ivec2(bitfieldExtract(int(m.y), 0, 16), bitfieldExtract(int(m.y), 16, 16));
}

// td[0]: the dense output [B0, B1, M, N]. P.u: M, N, K, accumulate. P.u2.x: byte of weight row 0
// in its view; P.u2.y: bytes from one weight row to the next. The activation blocks: K / 32 per
// row, rows batch-major, from texel 0, QAT texels each.
void main() {
  const uint M = P.u.x, N = P.u.y, K = P.u.z, KB = K / 32u;
  const uint batch = gl_WorkGroupID.z;
  const uint b1 = P.td[0].shape.y;
  const uint i0 = batch / b1, i1 = batch % b1;
  const uint m0 = gl_WorkGroupID.y * TM;
  const uint n0 = (gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_LocalInvocationID.x) * TN;

  // Rows and columns past the end read the last one; their results are not stored.
  uint ar[TM];
  [[unroll]] for (uint i = 0u; i < TM; ++i) ar[i] = (batch * M + min(m0 + i, M - 1u)) * KB * QAT;
  uint wr[TN];
  [[unroll]] for (uint j = 0u; j < TN; ++j) wr[j] = P.u2.x + min(n0 + j, N - 1u) * P.u2.y;
  float acc[TM][TN];
  [[unroll]] for (uint i = 0u; i < TM; ++i)
    [[unroll]] for (uint j = 0u; j < TN; ++j) acc[i][j] = 0.0;

  for (uint kb = 0u; kb < KB; ++kb) {
    const uint k = 32u * kb, blk = (k / QK) * QB, g = (k % QK) / 32u;
    if (TM <= 2u) {
      // Decode: the activation blocks in registers, the weight groups streamed.
      uint qa[TM][16];
      float da[TM];
      ivec2 s[TM];
      [[unroll]] for (uint i = 0u; i < TM; ++i) load_block(ar[i] + QAT * kb, qa[i], da[i], s[i]);
      [[unroll]] for (uint j = 0u; j < TN; ++j) {
        uint q[8];
        vec2 sc, mn;
        qint32(wr[j] + blk, g, q, sc, mn);
        [[unroll]] for (uint i = 0u; i < TM; ++i) acc[i][j] += qdot32(q, sc, mn, qa[i], da[i], s[i]);
      }
    } else {
      // Prefill: the TN unpacked weight groups in registers, the activation blocks streamed.
      uint q[TN][8];
      vec2 sc[TN], mn[TN];
      [[unroll]] for (uint j = 0u; j < TN; ++j) qint32(wr[j] + blk, g, q[j], sc[j], mn[j]);
      [[unroll]] for (uint i = 0u; i < TM; ++i) {
        uint qa[16];
        float da;
        ivec2 s;
        load_block(ar[i] + QAT * kb, qa, da, s);
        [[unroll]] for (uint j = 0u; j < TN; ++j) acc[i][j] += qdot32(q[j], sc[j], mn[j], qa, da, s);
      }
    }
  }

  const uvec4 ys = P.td[0].stride;
  const uint y_base = P.td[0].offset + i0 * ys.x + i1 * ys.y;
  [[unroll]] for (uint i = 0u; i < TM; ++i) {
    uint gm = m0 + i;
    if (gm >= M) continue;
    [[unroll]] for (uint j = 0u; j < TN; ++j) {
      uint gn = n0 + j;
      if (gn >= N) continue;
      uint o = y_base + gm * ys.z + gn * ys.w;
      float v = acc[i][j];
      if (P.u.w != 0u) v += LOADF(y[o]);
      y[o] = STOREF(v);
    }
  }
}
