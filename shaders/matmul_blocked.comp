// Register-blocked GEMM without shared memory (tier "register_blocked"), for devices where a workgroup is
// one CPU core running its invocations as SIMD lanes (lavapipe). Each invocation accumulates a
// TM x TN block of outputs in registers and reads A and B directly, through uniform texel buffers
// (texel.glsl): per step it fetches TM + TN texels and does TM * TN * (elements per texel)
// multiply-adds, so the fetches, not the arithmetic, are what the block sizes amortise.
//
// MODE 0: one element per fetch, any strides. MODE 1: VEC elements along K of both A and B (B
// stored [N, K], the usual weight layout). MODE 2: VEC along K of A and along N of B (B stored
// [K, N]). The host picks the mode from the operands' strides and alignment.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "texel.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TM = 8;
layout(constant_id = 2) const uint TN = 8;
layout(constant_id = 3) const uint MODE = 0;

TENSOR(1, , y)
TEXELS(7, ta)
TEXELS(8, tb)

// td[1]: A as logical [B0, B1, M, K]; td[2]: B as [B0, B1, K, N] (offsets count from the start of
// the texel views, in elements); td[0]: the dense output [B0, B1, M, N].
// P.u.x: M, P.u.y: N, P.u.z: K, P.u.w: accumulate into the output (K split in windows).
void main() {
  const uint M = P.u.x, N = P.u.y, K = P.u.z;
  const uint batch = gl_WorkGroupID.z;
  const uint b1 = P.td[0].shape.y;
  const uint i0 = batch / b1, i1 = batch % b1;
  const uint a_base = P.td[1].offset + i0 * P.td[1].stride.x + i1 * P.td[1].stride.y;
  const uint b_base = P.td[2].offset + i0 * P.td[2].stride.x + i1 * P.td[2].stride.y;
  const uint sam = P.td[1].stride.z, sak = P.td[1].stride.w;
  const uint sbk = P.td[2].stride.z, sbn = P.td[2].stride.w;
  const uint m0 = gl_WorkGroupID.y * TM;
  const uint n0 = (gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_LocalInvocationID.x) * TN;

  // Rows and columns past the end read the last one; their results are not stored.
  uint ar[TM];
  [[unroll]] for (uint i = 0u; i < TM; ++i) ar[i] = a_base + min(m0 + i, M - 1u) * sam;
  float acc[TM][TN];
  [[unroll]] for (uint i = 0u; i < TM; ++i)
    [[unroll]] for (uint j = 0u; j < TN; ++j) acc[i][j] = 0.0;

  if (MODE == 0u) {
    uint bc[TN];
    [[unroll]] for (uint j = 0u; j < TN; ++j) bc[j] = b_base + min(n0 + j, N - 1u) * sbn;
    for (uint k = 0u; k < K; ++k) {
      float a[TM], b[TN];
      [[unroll]] for (uint i = 0u; i < TM; ++i) a[i] = FETCH_ONE(ta, ar[i] + k * sak);
      [[unroll]] for (uint j = 0u; j < TN; ++j) b[j] = FETCH_ONE(tb, bc[j] + k * sbk);
      [[unroll]] for (uint i = 0u; i < TM; ++i)
        [[unroll]] for (uint j = 0u; j < TN; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
    }
  } else if (MODE == 1u) {
    uint bc[TN];
    [[unroll]] for (uint j = 0u; j < TN; ++j) bc[j] = b_base + min(n0 + j, N - 1u) * sbn;
    for (uint k = 0u; k < K; k += VEC) {
      float a[TM][VEC], b[TN][VEC];
      [[unroll]] for (uint i = 0u; i < TM; ++i) FETCH_VEC(ta, ar[i] + k, a[i]);
      [[unroll]] for (uint j = 0u; j < TN; ++j) FETCH_VEC(tb, bc[j] + k, b[j]);
      [[unroll]] for (uint i = 0u; i < TM; ++i)
        [[unroll]] for (uint j = 0u; j < TN; ++j)
          [[unroll]] for (uint c = 0u; c < VEC; ++c) acc[i][j] = fma(a[i][c], b[j][c], acc[i][j]);
    }
  } else {
    // Texels of VEC columns; those past the last one read the last one.
    const uint NT = (TN + VEC - 1u) / VEC;
    uint bc[NT];
    [[unroll]] for (uint t = 0u; t < NT; ++t) bc[t] = b_base + min(n0 + t * VEC, N - VEC);
    for (uint k = 0u; k < K; k += VEC) {
      float a[TM][VEC];
      [[unroll]] for (uint i = 0u; i < TM; ++i) FETCH_VEC(ta, ar[i] + k, a[i]);
      float b[VEC][NT][VEC];
      [[unroll]] for (uint c = 0u; c < VEC; ++c)
        [[unroll]] for (uint t = 0u; t < NT; ++t) FETCH_VEC(tb, bc[t] + (k + c) * sbk, b[c][t]);
      [[unroll]] for (uint i = 0u; i < TM; ++i)
        [[unroll]] for (uint j = 0u; j < TN; ++j)
          [[unroll]] for (uint c = 0u; c < VEC; ++c)
            acc[i][j] = fma(a[i][c], b[c][j / VEC][j % VEC], acc[i][j]);
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
