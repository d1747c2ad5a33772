// GEMM on cooperative matrices (tier "coopmat"): y[.., M, N] = a[.., M, K] b[.., K, N], f16
// operands and f32 accumulation on the device's matrix units (16x16x16, coopmat.glsl).
//
// A workgroup computes a TILE x TILE block of y. Per step of BK = 32 along K it stages A's
// TILE x 32 slice and B's 32 x TILE slice in shared memory as f16 ([m][k] and [n][k], rows padded
// against bank conflicts), zero outside M, N and K; its subgroups then multiply the slices into
// accumulators: four quadrants of TILE/2 x TILE/2, each held by one subgroup as (TILE/32)^2 16x16
// matrices. A device whose subgroups are fewer than four per workgroup runs the quadrants in
// passes. The results leave through shared memory, one 16x16 matrix at a time, and are written
// with bounds checks (and converted to y's dtype), so any M, N and K work.
//
// Variants: T_<activation dtype> with W_FLOAT (b of the same dtype, f16 only) or Q_<format> (b
// is a block-quantized weight w[N, K]: each 32-element group of a row decoded by quant.glsl into
// the shared slice, never expanded in memory). TILE: 64 or 128.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#include "common.glsl"
#include "texel.glsl"
#include "coopmat.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint AVEC = 0;  // a read VEC elements at a time along K
layout(constant_id = 2) const uint BVEC = 0;  // (float b) b read VEC elements at a time along K

#define BK 32u
#define SK (BK + 8u)              // row stride of the staged slices, in f16 elements
#define HALF (TILE / 2u)          // a quadrant's side
#define FR (HALF / 16u)           // 16x16 matrices along a quadrant's side

TENSOR(1, , y)
TENSOR(2, readonly, a)
layout(std430, set = 0, binding = 2) readonly buffer A4 { uvec4 a4[]; };
#if defined(W_FLOAT)
TENSOR(3, readonly, b)
layout(std430, set = 0, binding = 3) readonly buffer B4 { uvec4 b4[]; };
#else
layout(std430, set = 0, binding = 3) readonly buffer Wq { uint wq[]; };
#define QWORD(i) wq[i]
#include "quant.glsl"
#endif

shared float16_t sa[TILE * SK];  // A's slice, [m][k]
shared float16_t sb[TILE * SK];  // B's slice, [n][k]
shared float sc[4u * 256u];      // one 16x16 result per subgroup on its way out

// One stored element as f16 (16-bit values widened exactly by texel.glsl's unpack_one first).
#if defined(T_f32)
#define TO_HALF(x) float16_t(x)
#else
#define TO_HALF(x) float16_t(unpack_one(uint(x)))
#endif

// td[0]: y [B0, B1, M, N]; td[1]: a [B0, B1, M, K]; td[2] (float b): b [B0, B1, K, N]. Offsets in
// elements from each window. P.u: M, N, K, accumulate. Block formats: P.u2.x the byte of weight
// row 0 in its window, P.u2.y the bytes from one row to the next.
void main() {
  const uint M = P.u.x, N = P.u.y, K = P.u.z;
  const uint NT = gl_WorkGroupSize.x, tid = gl_LocalInvocationID.x;
  const uint batch = gl_WorkGroupID.z;
  const uint b1 = P.td[0].shape.y;
  const uint i0 = batch / b1, i1 = batch % b1;
  const uint a_base = P.td[1].offset + i0 * P.td[1].stride.x + i1 * P.td[1].stride.y;
  const uint sam = P.td[1].stride.z, sak = P.td[1].stride.w;
  const bool a_k_fast = sak == 1u;
#if defined(W_FLOAT)
  const uint b_base = P.td[2].offset + i0 * P.td[2].stride.x + i1 * P.td[2].stride.y;
  const uint sbk = P.td[2].stride.z, sbn = P.td[2].stride.w;
  const bool b_k_fast = sbk == 1u && sbn != 1u;
#endif
  const uint m0 = gl_WorkGroupID.y * TILE, n0 = gl_WorkGroupID.x * TILE;
  const uint sg = gl_SubgroupID, nsg = gl_NumSubgroups;
  const uint passes = (4u + nsg - 1u) / nsg;

  for (uint pass = 0u; pass < passes; ++pass) {
    const uint q = sg + pass * nsg;  // this subgroup's quadrant (none when q >= 4)
    const uint qm = (q >> 1) * HALF, qn = (q & 1u) * HALF;
    CM_C acc[FR * FR];
    [[unroll]] for (uint f = 0u; f < FR * FR; ++f) acc[f] = cm_fill_c(0.0);

    for (uint k0 = 0u; k0 < K; k0 += BK) {
      // A's slice.
      if (AVEC != 0u) {
        for (uint e = tid; e < TILE * (BK / VEC); e += NT) {
          const uint mm = e / (BK / VEC), kk = (e % (BK / VEC)) * VEC;
          const uint gm = m0 + mm, gk = k0 + kk;
          float v[VEC];
          if (gm < M && gk < K) {
            unpack_vec(a4[(a_base + gm * sam + gk) / VEC], v);
          } else {
            [[unroll]] for (uint c = 0u; c < VEC; ++c) v[c] = 0.0;
          }
          [[unroll]] for (uint c = 0u; c < VEC; ++c) sa[mm * SK + kk + c] = float16_t(v[c]);
        }
      } else {
        for (uint e = tid; e < TILE * BK; e += NT) {
          const uint mm = a_k_fast ? e / BK : e % TILE, kk = a_k_fast ? e % BK : e / TILE;
          const uint gm = m0 + mm, gk = k0 + kk;
          sa[mm * SK + kk] =
              gm < M && gk < K ? TO_HALF(a[a_base + gm * sam + gk * sak]) : float16_t(0.0);
        }
      }
      // B's slice, transposed: [n][k].
#if defined(W_FLOAT)
      if (BVEC != 0u) {
        for (uint e = tid; e < TILE * (BK / VEC); e += NT) {
          const uint nn = e / (BK / VEC), kk = (e % (BK / VEC)) * VEC;
          const uint gn = n0 + nn, gk = k0 + kk;
          float v[VEC];
          if (gn < N && gk < K) {
            unpack_vec(b4[(b_base + gn * sbn + gk) / VEC], v);
          } else {
            [[unroll]] for (uint c = 0u; c < VEC; ++c) v[c] = 0.0;
          }
          [[unroll]] for (uint c = 0u; c < VEC; ++c) sb[nn * SK + kk + c] = float16_t(v[c]);
        }
      } else {
        for (uint e = tid; e < TILE * BK; e += NT) {
          const uint nn = b_k_fast ? e / BK : e % TILE, kk = b_k_fast ? e % BK : e / TILE;
          const uint gn = n0 + nn, gk = k0 + kk;
          sb[nn * SK + kk] =
              gn < N && gk < K ? TO_HALF(b[b_base + gk * sbk + gn * sbn]) : float16_t(0.0);
        }
      }
#else
      // One 32-element group of each weight row (K is a multiple of 32 for every format).
      for (uint nn = tid; nn < TILE; nn += NT) {
        const uint gn = n0 + nn;
        float w[32];
        if (gn < N) {
          qblock32(P.u2.x + gn * P.u2.y + (k0 / QK) * QB, (k0 % QK) / 32u, w);
        } else {
          [[unroll]] for (uint c = 0u; c < 32u; ++c) w[c] = 0.0;
        }
        [[unroll]] for (uint c = 0u; c < 32u; ++c) sb[nn * SK + c] = float16_t(w[c]);
      }
#endif
      barrier();
      if (q < 4u) {
        [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
          CM_A am[FR];
          [[unroll]] for (uint i = 0u; i < FR; ++i)
            am[i] = cm_load_a(sa[(qm + 16u * i) * SK + kk], CM_ROW_MAJOR, SK);
          [[unroll]] for (uint j = 0u; j < FR; ++j) {
            // B (k, n) is sb[n * SK + k]: column-major.
            const CM_B bm = cm_load_b(sb[(qn + 16u * j) * SK + kk], CM_COLUMN_MAJOR, SK);
            [[unroll]] for (uint i = 0u; i < FR; ++i)
              acc[i * FR + j] = cm_muladd(am[i], bm, acc[i * FR + j]);
          }
        }
      }
      barrier();
    }

    if (q < 4u) {
      const uvec4 ys = P.td[0].stride;
      const uint y_base = P.td[0].offset + i0 * ys.x + i1 * ys.y;
      const uint lane = gl_SubgroupInvocationID, lanes = gl_SubgroupSize;
      [[unroll]] for (uint f = 0u; f < FR * FR; ++f) {
        cm_store_c(sc[sg * 256u], acc[f], CM_ROW_MAJOR, 16u);
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        const uint rm = m0 + qm + 16u * (f / FR), rn = n0 + qn + 16u * (f % FR);
        for (uint e = lane; e < 256u; e += lanes) {
          const uint gm = rm + e / 16u, gn = rn + e % 16u;
          if (gm < M && gn < N) {
            const uint o = y_base + gm * ys.z + gn * ys.w;
            float v = sc[sg * 256u + e];
            if (P.u.w != 0u) v += LOADF(y[o]);
            y[o] = STOREF(v);
          }
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();
      }
    }
  }
}
