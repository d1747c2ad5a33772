// Matmul with a block-quantized weight (tier "register_blocked"): y[.., M, N] = a[.., M, K] *
// w[N, K]^T, the weight read in its blocks through a uniform texel buffer of 32-bit words and
// dequantized in registers 32 elements at a time (quant.glsl); it is never expanded in memory.
// Each invocation accumulates a TM x TN block of outputs in f32: per 32-element step it decodes
// TN weight groups once and fetches TM x 32 activations once, then does TM * TN * 32 FMAs. TM = 1
// is the decode (mat-vec) shape: every weight byte is fetched once. On a CPU device (lavapipe) a
// texel fetch is one vector gather over the invocations, where a storage-buffer read is a loop.
//
// Variants: T_<activation dtype> x Q_<weight format>. AVEC: activations read VEC elements per
// fetch (dense along K, aligned); otherwise one element per fetch, any strides.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "texel.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TM = 1;
layout(constant_id = 2) const uint TN = 4;
layout(constant_id = 3) const uint AVEC = 0;

TENSOR(1, , y)
TEXELS(7, ta)
TEXELS(8, tw)

#define QWORD(i) texelFetch(tw, int(i)).x
#include "quant.glsl"

// 32 activations of the row starting at element `row`, from element k on.
void load_row(uint row, uint k, uint sak, out float a[32]) {
  if (AVEC != 0u) {
    [[unroll]] for (uint c = 0u; c < 32u; c += VEC) {
      float v[VEC];
      FETCH_VEC(ta, row + k + c, v);
      [[unroll]] for (uint e = 0u; e < VEC; ++e) a[c + e] = v[e];
    }
  } else {
    [[unroll]] for (uint c = 0u; c < 32u; ++c) a[c] = FETCH_ONE(ta, row + (k + c) * sak);
  }
}

float dot32(float a[32], float w[32]) {
  float s = 0.0;
  [[unroll]] for (uint c = 0u; c < 32u; ++c) s = fma(a[c], w[c], s);
  return s;
}

// td[0]: the dense output [B0, B1, M, N]; td[1]: a as [B0, B1, M, K] (offset in elements from
// the start of its texel view). P.u: M, N, K, accumulate. P.u2.x: byte of weight row 0 in its
// view; P.u2.y: bytes from one weight row to the next.
void main() {
  const uint M = P.u.x, N = P.u.y, K = P.u.z;
  const uint batch = gl_WorkGroupID.z;
  const uint b1 = P.td[0].shape.y;
  const uint i0 = batch / b1, i1 = batch % b1;
  const uint a_base = P.td[1].offset + i0 * P.td[1].stride.x + i1 * P.td[1].stride.y;
  const uint sam = P.td[1].stride.z, sak = P.td[1].stride.w;
  const uint m0 = gl_WorkGroupID.y * TM;
  const uint n0 = (gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_LocalInvocationID.x) * TN;

  // Rows and columns past the end read the last one; their results are not stored.
  uint ar[TM];
  [[unroll]] for (uint i = 0u; i < TM; ++i) ar[i] = a_base + min(m0 + i, M - 1u) * sam;
  uint wr[TN];
  [[unroll]] for (uint j = 0u; j < TN; ++j) wr[j] = P.u2.x + min(n0 + j, N - 1u) * P.u2.y;
  float acc[TM][TN];
  [[unroll]] for (uint i = 0u; i < TM; ++i)
    [[unroll]] for (uint j = 0u; j < TN; ++j) acc[i][j] = 0.0;

  // Per step of 32 along K: each weight group decoded once, each activation row fetched once.
  // Decode (TM <= 2) keeps the activations in registers and streams the weight groups; larger
  // blocks keep the TN decoded groups and stream the activation rows (registers: TN x 32
  // weights, 32 activations and TM x TN sums).
  for (uint k = 0u; k < K; k += 32u) {
    const uint blk = (k / QK) * QB, g = (k % QK) / 32u;
    if (TM <= 2u) {
      float a[TM][32];
      [[unroll]] for (uint i = 0u; i < TM; ++i) load_row(ar[i], k, sak, a[i]);
      [[unroll]] for (uint j = 0u; j < TN; ++j) {
        float w[32];
        qblock32(wr[j] + blk, g, w);
        [[unroll]] for (uint i = 0u; i < TM; ++i) acc[i][j] += dot32(a[i], w);
      }
    } else {
      float w[TN][32];
      [[unroll]] for (uint j = 0u; j < TN; ++j) qblock32(wr[j] + blk, g, w[j]);
      [[unroll]] for (uint i = 0u; i < TM; ++i) {
        float a[32];
        load_row(ar[i], k, sak, a);
        [[unroll]] for (uint j = 0u; j < TN; ++j) acc[i][j] += dot32(a, w[j]);
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
