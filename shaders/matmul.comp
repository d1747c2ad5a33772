// Tiled GEMM: each workgroup computes a BM x BN tile of one batch entry, staging BK-deep slices
// of A and B in shared memory; each invocation accumulates a TM x TN register block (rows and
// columns interleaved by BM/TM and BN/TN, so neighbouring invocations touch neighbouring
// addresses). Tile sizes are specialization constants chosen by the rules from the device's
// shared memory and workgroup limits.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 16;
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;

TENSOR(1, , y)
TENSOR(2, readonly, a)
TENSOR(3, readonly, b)

shared float As[BK * BM];  // [k][m]
shared float Bs[BK * BN];  // [k][n]

// td[1]: A as logical [B0, B1, M, K]; td[2]: B as [B0, B1, K, N] (strides carry transposition
// and batch broadcast); td[0]: the dense output [B0, B1, M, N].
// P.u.x: M, P.u.y: N, P.u.z: K, P.u.w: accumulate into the output (K split in windows).
void main() {
  const uint M = P.u.x, N = P.u.y, K = P.u.z;
  const uint NT = gl_WorkGroupSize.x;
  const uint batch = gl_WorkGroupID.z;
  const uint b1 = P.td[0].shape.y;
  const uint i0 = batch / b1, i1 = batch % b1;
  const uint a_base = P.td[1].offset + i0 * P.td[1].stride.x + i1 * P.td[1].stride.y;
  const uint b_base = P.td[2].offset + i0 * P.td[2].stride.x + i1 * P.td[2].stride.y;
  const uint sam = P.td[1].stride.z, sak = P.td[1].stride.w;
  const uint sbk = P.td[2].stride.z, sbn = P.td[2].stride.w;
  const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
  const uint t = gl_LocalInvocationID.x;
  const uint CM = BM / TM, CN = BN / TN;
  const uint tn = t % CN, tm = t / CN;
  // Walk the operand in its own contiguous direction, so loads from memory are coalesced.
  const bool a_k_fast = sak == 1u;
  const bool b_n_fast = sbn == 1u || sbk != 1u;

  float acc[TM * TN];
  [[unroll]] for (uint i = 0u; i < TM * TN; ++i) acc[i] = 0.0;

  for (uint k0 = 0u; k0 < K; k0 += BK) {
    for (uint e = t; e < BM * BK; e += NT) {
      uint kk = a_k_fast ? e % BK : e / BM;
      uint mm = a_k_fast ? e / BK : e % BM;
      uint gm = m0 + mm, gk = k0 + kk;
      As[kk * BM + mm] = (gm < M && gk < K) ? LOADF(a[a_base + gm * sam + gk * sak]) : 0.0;
    }
    for (uint e = t; e < BN * BK; e += NT) {
      uint nn = b_n_fast ? e % BN : e / BK;
      uint kk = b_n_fast ? e / BN : e % BK;
      uint gn = n0 + nn, gk = k0 + kk;
      Bs[kk * BN + nn] = (gn < N && gk < K) ? LOADF(b[b_base + gk * sbk + gn * sbn]) : 0.0;
    }
    barrier();
    [[unroll]] for (uint kk = 0u; kk < BK; ++kk) {
      float av[TM], bv[TN];
      [[unroll]] for (uint i = 0u; i < TM; ++i) av[i] = As[kk * BM + tm + i * CM];
      [[unroll]] for (uint j = 0u; j < TN; ++j) bv[j] = Bs[kk * BN + tn + j * CN];
      [[unroll]] for (uint i = 0u; i < TM; ++i)
        [[unroll]] for (uint j = 0u; j < TN; ++j) acc[i * TN + j] = fma(av[i], bv[j], acc[i * TN + j]);
    }
    barrier();
  }

  const uvec4 ys = P.td[0].stride;
  const uint y_base = P.td[0].offset + i0 * ys.x + i1 * ys.y;
  [[unroll]] for (uint i = 0u; i < TM; ++i) {
    uint gm = m0 + tm + i * CM;
    if (gm >= M) continue;
    [[unroll]] for (uint j = 0u; j < TN; ++j) {
      uint gn = n0 + tn + j * CN;
      if (gn >= N) continue;
      uint o = y_base + gm * ys.z + gn * ys.w;
      float v = acc[i * TN + j];
      if (P.u.w != 0u) v += LOADF(y[o]);
      y[o] = STOREF(v);
    }
  }
}
