// Matmul with a block-quantized weight through shared memory (tier "tiled", the GPU family):
// y[.., M, N] = a[.., M, K] * w[N, K]^T. A workgroup computes a BM x BN block of outputs; per
// step of 32 along K it stages BM x 32 activations and BN weight groups of 32, dequantized once
// from the compressed blocks (quant.glsl, the weight read from a storage buffer of 32-bit words),
// in shared memory, and each invocation accumulates a TM x TN register block from them in f32.
// The weight is never expanded in device memory: the shared tile holds 32 columns of it.
//
// Variants: T_<activation dtype> x Q_<weight format>. The tile (BM, BN, TM, TN) comes from the
// device's shared memory and workgroup limits (backends/vulkan/rules.cpp).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint TM = 4;
layout(constant_id = 4) const uint TN = 4;

TENSOR(1, , y)
TENSOR(2, readonly, a)
layout(std430, set = 0, binding = 3) readonly buffer Wq { uint wq[]; };

#define QWORD(i) wq[i]
#include "quant.glsl"

shared float sa[32 * BM];  // [k][m]
shared float sw[32 * BN];  // [k][n]

// td[0]: the dense output [B0, B1, M, N]; td[1]: a as [B0, B1, M, K] (offset in elements from its
// window). P.u: M, N, K, accumulate. P.u2.x: word of weight row 0 in its window times 4 (bytes);
// P.u2.y: bytes from one weight row to the next.
void main() {
  const uint M = P.u.x, N = P.u.y, K = P.u.z;
  const uint NT = gl_WorkGroupSize.x, tid = gl_LocalInvocationID.x;
  const uint batch = gl_WorkGroupID.z;
  const uint b1 = P.td[0].shape.y;
  const uint i0 = batch / b1, i1 = batch % b1;
  const uint a_base = P.td[1].offset + i0 * P.td[1].stride.x + i1 * P.td[1].stride.y;
  const uint sam = P.td[1].stride.z, sak = P.td[1].stride.w;
  const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
  const uint cols = BN / TN;
  const uint tx = tid % cols, ty = tid / cols;

  float acc[TM][TN];
  [[unroll]] for (uint i = 0u; i < TM; ++i)
    [[unroll]] for (uint j = 0u; j < TN; ++j) acc[i][j] = 0.0;

  for (uint k = 0u; k < K; k += 32u) {
    // Stage the activations (rows past M read the last row; never stored).
    for (uint e = tid; e < 32u * BM; e += NT) {
      const uint r = e / 32u, c = e % 32u;
      sa[c * BM + r] = LOADF(a[a_base + min(m0 + r, M - 1u) * sam + (k + c) * sak]);
    }
    // Dequantize BN weight groups of 32, one per invocation at a time.
    const uint blk = (k / QK) * QB, g = (k % QK) / 32u;
    for (uint j = tid; j < BN; j += NT) {
      float w[32];
      qblock32(P.u2.x + min(n0 + j, N - 1u) * P.u2.y + blk, g, w);
      [[unroll]] for (uint c = 0u; c < 32u; ++c) sw[c * BN + j] = w[c];
    }
    barrier();
    for (uint c = 0u; c < 32u; ++c) {
      float av[TM], wv[TN];
      [[unroll]] for (uint i = 0u; i < TM; ++i) av[i] = sa[c * BM + ty * TM + i];
      [[unroll]] for (uint j = 0u; j < TN; ++j) wv[j] = sw[c * BN + tx * TN + j];
      [[unroll]] for (uint i = 0u; i < TM; ++i)
        [[unroll]] for (uint j = 0u; j < TN; ++j) acc[i][j] = fma(av[i], wv[j], acc[i][j]);
    }
    barrier();
  }

  const uvec4 ys = P.td[0].stride;
  const uint y_base = P.td[0].offset + i0 * ys.x + i1 * ys.y;
  [[unroll]] for (uint i = 0u; i < TM; ++i) {
    const uint gm = m0 + ty * TM + i;
    if (gm >= M) continue;
    [[unroll]] for (uint j = 0u; j < TN; ++j) {
      const uint gn = n0 + tx * TN + j;
      if (gn >= N) continue;
      const uint o = y_base + gm * ys.z + gn * ys.w;
      float v = acc[i][j];
      if (P.u.w != 0u) v += LOADF(y[o]);
      y[o] = STOREF(v);
    }
  }
}
