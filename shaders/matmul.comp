// Tiled GEMM (tier "tiled", the GPU family without cooperative matrices): each workgroup computes
// a BM x BN tile of one batch entry, staging BK-deep slices of A and B in shared memory; each
// invocation accumulates a TM x TN register block of adjacent rows and columns. The slices are
// stored k-major ([k][m] and [k][n]) as vec4 rows padded by one vec4, so that an invocation reads
// its TM (TN) operands as TM/4 (TN/4) 16-byte loads per step of k (four multiply-adds per float
// read where the blocks are 8 x 8), and the staging stores of neighbouring invocations fall in
// different banks. 16-bit operands widen exactly (unpackHalf2x16, a shift for bf16). Tile sizes
// are specialization constants chosen by the rules from the device's shared memory and
// workgroup limits; TM and TN are 1, 2 or multiples of 4.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "texel.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 16;
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;

TENSOR(1, , y)
TENSOR(2, readonly, a)
TENSOR(3, readonly, b)

// Rows of the slices in vec4s: BM / 4 (at least 1) plus one of padding.
const uint SA = (BM + 3u) / 4u + 1u;
const uint SB = (BN + 3u) / 4u + 1u;
shared vec4 As[BK * SA];  // [k][m]
shared vec4 Bs[BK * SB];  // [k][n]

#if defined(T_f32)
#define LOADX(x) (x)
#else
#define LOADX(x) unpack_one(uint(x))
#endif

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
  const uint CN = BN / TN;
  const uint rm = (t / CN) * TM, rn = (t % CN) * TN;  // this invocation's block in the tile
  // Walk each operand in its own contiguous direction, so loads from memory are coalesced.
  const bool a_k_fast = sak == 1u;
  const bool b_n_fast = sbn == 1u || sbk != 1u;

  float acc[TM * TN];
  [[unroll]] for (uint i = 0u; i < TM * TN; ++i) acc[i] = 0.0;

  for (uint k0 = 0u; k0 < K; k0 += BK) {
    for (uint e = t; e < BM * BK; e += NT) {
      const uint kk = a_k_fast ? e % BK : e / BM;
      const uint mm = a_k_fast ? e / BK : e % BM;
      const uint gm = m0 + mm, gk = k0 + kk;
      As[kk * SA + mm / 4u][mm % 4u] =
          (gm < M && gk < K) ? LOADX(a[a_base + gm * sam + gk * sak]) : 0.0;
    }
    for (uint e = t; e < BN * BK; e += NT) {
      const uint nn = b_n_fast ? e % BN : e / BK;
      const uint kk = b_n_fast ? e / BN : e % BK;
      const uint gn = n0 + nn, gk = k0 + kk;
      Bs[kk * SB + nn / 4u][nn % 4u] =
          (gn < N && gk < K) ? LOADX(b[b_base + gk * sbk + gn * sbn]) : 0.0;
    }
    barrier();
    [[unroll]] for (uint kk = 0u; kk < BK; ++kk) {
      float av[TM], bv[TN];
      if (TM % 4u == 0u) {
        [[unroll]] for (uint i = 0u; i < TM; i += 4u) {
          const vec4 v = As[kk * SA + (rm + i) / 4u];
          av[i] = v.x;
          av[i + 1u] = v.y;
          av[i + 2u] = v.z;
          av[i + 3u] = v.w;
        }
      } else {
        [[unroll]] for (uint i = 0u; i < TM; ++i) av[i] = As[kk * SA + (rm + i) / 4u][(rm + i) % 4u];
      }
      if (TN % 4u == 0u) {
        [[unroll]] for (uint j = 0u; j < TN; j += 4u) {
          const vec4 v = Bs[kk * SB + (rn + j) / 4u];
          bv[j] = v.x;
          bv[j + 1u] = v.y;
          bv[j + 2u] = v.z;
          bv[j + 3u] = v.w;
        }
      } else {
        [[unroll]] for (uint j = 0u; j < TN; ++j) bv[j] = Bs[kk * SB + (rn + j) / 4u][(rn + j) % 4u];
      }
      [[unroll]] for (uint i = 0u; i < TM; ++i)
        [[unroll]] for (uint j = 0u; j < TN; ++j) acc[i * TN + j] = fma(av[i], bv[j], acc[i * TN + j]);
    }
    barrier();
  }

  const uvec4 ys = P.td[0].stride;
  const uint y_base = P.td[0].offset + i0 * ys.x + i1 * ys.y;
  [[unroll]] for (uint i = 0u; i < TM; ++i) {
    const uint gm = m0 + rm + i;
    if (gm >= M) continue;
    [[unroll]] for (uint j = 0u; j < TN; ++j) {
      const uint gn = n0 + rn + j;
      if (gn >= N) continue;
      const uint o = y_base + gm * ys.z + gn * ys.w;
      float v = acc[i * TN + j];
      if (P.u.w != 0u) v += LOADF(y[o]);
      y[o] = STOREF(v);
    }
  }
}
