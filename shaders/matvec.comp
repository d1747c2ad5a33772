// Mat-vec for GPUs (tier "matvec"): y[.., m, n] = sum_k a[.., m, k] w[n, k] for a few rows m
// (decode, M = 1..8), the weight contiguous along K (stored [N, K], as checkpoints store it).
//
// A team of invocations shares one weight row: lane l reads the row's pieces l, l + T, l + 2T, ...
// (T lanes in the team), so neighbouring lanes read neighbouring bytes and the row is read once,
// 16 bytes per load (4 f32 or 8 16-bit values; one 32-element group of a block format, decoded in
// registers by quant.glsl); each lane keeps one partial sum per activation row, and the team adds
// them up at the end of the row. A team takes RT rows at once (RT loads in flight per lane and
// step, each activation read serving RT rows). With SMEM_REDUCE undefined a team is a subgroup and subgroupAdd
// reduces (the device has subgroup arithmetic); with it, the team is the whole workgroup and the
// sums meet in shared memory. The activations (MR rows) are small and come from the cache.
//
// Variants: T_<activation dtype> and either W_FLOAT (weight of the same dtype) or Q_<format>.
#version 450
#extension GL_GOOGLE_include_directive : require
#ifndef SMEM_REDUCE
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"
#include "texel.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint RW = 4;    // weight rows per workgroup
layout(constant_id = 2) const uint AVEC = 0;  // activations read 16 bytes at a time
layout(constant_id = 3) const uint WVEC = 0;  // float weights read 16 bytes at a time
// Activation rows per workgroup (1, 2, 4 or 8): the rows past M are skipped by branches uniform
// in the workgroup, so that one pipeline serves every batch of MR/2 + 1 .. MR rows.
layout(constant_id = 4) const uint MR = 1;
// Weight rows a team takes at once (RW is a multiple of it).
layout(constant_id = 5) const uint RT = 1;

TENSOR(1, , y)
layout(std430, set = 0, binding = 2) readonly buffer A4 { uvec4 a4[]; };
#if defined(W_FLOAT)
layout(std430, set = 0, binding = 3) readonly buffer W4 { uvec4 w4[]; };
#else
layout(std430, set = 0, binding = 3) readonly buffer Wq { uint wq[]; };
#define QWORD(i) wq[i]
#include "quant.glsl"
#endif

#ifdef SMEM_REDUCE
shared float partial[gl_WorkGroupSize.x];
#endif

// One element of a 16-byte-vector buffer by element index (any alignment).
float elem(uvec4 v, uint e) {
#if defined(T_f32)
  return uintBitsToFloat(v[e & 3u]);
#else
  const uint w = v[(e >> 1) & 3u];
  return unpack_one((e & 1u) != 0u ? w >> 16 : w & 0xffffu);
#endif
}
float a_at(uint e) {
  return elem(a4[e / VEC], e);
}

// td[0]: the output [B0, B1, M, N]; td[1]: a as [B0, B1, M, K]; td[2] (float weights): w as
// [B0, B1, N, K]. Offsets in elements from each window. P.u: M, N, K, accumulate. Block formats:
// P.u2.x the byte of weight row 0 in its window, P.u2.y the bytes from one row to the next.
void main() {
  const uint M = P.u.x, N = P.u.y, K = P.u.z;
  const uint batch = gl_WorkGroupID.z;
  const uint b1 = P.td[0].shape.y;
  const uint i0 = batch / b1, i1 = batch % b1;
  const uint a_base = P.td[1].offset + i0 * P.td[1].stride.x + i1 * P.td[1].stride.y;
  const uint sam = P.td[1].stride.z, sak = P.td[1].stride.w;
  const uint m0 = gl_WorkGroupID.y * MR;
  const uint mr = min(M - m0, MR);
  // (ar: rows past M point at row M - 1, never read.)
#ifdef SMEM_REDUCE
  const uint team = 0u, teams = 1u;
  const uint lane = gl_LocalInvocationID.x, T = gl_WorkGroupSize.x;
#else
  const uint team = gl_SubgroupID, teams = gl_NumSubgroups;
  const uint lane = gl_SubgroupInvocationID, T = gl_SubgroupSize;
#endif
  uint ar[MR];
  [[unroll]] for (uint i = 0u; i < MR; ++i) ar[i] = a_base + min(m0 + i, M - 1u) * sam;

  // A team takes RT weight rows at once: RT independent loads in flight per lane and step, and
  // each activation read serves RT rows.
  for (uint r0 = team * RT; r0 < RW; r0 += teams * RT) {
    const uint n0 = gl_WorkGroupID.x * RW + r0;
    // Uniform in the team: rows past N read row N - 1 (never stored) and still take part in the
    // reduction.
    uint nr[RT];
    [[unroll]] for (uint j = 0u; j < RT; ++j) nr[j] = min(n0 + j, N - 1u);
    float acc[RT * MR];
    [[unroll]] for (uint i = 0u; i < RT * MR; ++i) acc[i] = 0.0;
#if defined(W_FLOAT)
    uint w_base[RT];
    [[unroll]] for (uint j = 0u; j < RT; ++j)
      w_base[j] = P.td[2].offset + i0 * P.td[2].stride.x + i1 * P.td[2].stride.y +
                  nr[j] * P.td[2].stride.z;
    if (WVEC != 0u && AVEC != 0u) {
      // K, every row start and both offsets are multiples of VEC.
      for (uint k = lane * VEC; k < K; k += T * VEC) {
        float w[RT][VEC];
        [[unroll]] for (uint j = 0u; j < RT; ++j) unpack_vec(w4[(w_base[j] + k) / VEC], w[j]);
        [[unroll]] for (uint i = 0u; i < MR; ++i) {
          if (i < mr) {
            float a[VEC];
            unpack_vec(a4[(ar[i] + k) / VEC], a);
            [[unroll]] for (uint j = 0u; j < RT; ++j)
              [[unroll]] for (uint e = 0u; e < VEC; ++e)
                acc[j * MR + i] = fma(a[e], w[j][e], acc[j * MR + i]);
          }
        }
      }
    } else {
      const uint swk = P.td[2].stride.w;
      for (uint k = lane; k < K; k += T) {
        float w[RT];
        [[unroll]] for (uint j = 0u; j < RT; ++j) {
          const uint we = w_base[j] + k * swk;
          w[j] = elem(w4[we / VEC], we);
        }
        [[unroll]] for (uint i = 0u; i < MR; ++i) {
          if (i < mr) {
            const float a = a_at(ar[i] + k * sak);
            [[unroll]] for (uint j = 0u; j < RT; ++j) acc[j * MR + i] = fma(a, w[j], acc[j * MR + i]);
          }
        }
      }
    }
#else
    uint w_row[RT];
    [[unroll]] for (uint j = 0u; j < RT; ++j) w_row[j] = P.u2.x + nr[j] * P.u2.y;
    for (uint gi = lane; gi < K / 32u; gi += T) {
      const uint k = gi * 32u;
      float w[RT][32];
      [[unroll]] for (uint j = 0u; j < RT; ++j) qblock32(w_row[j] + (k / QK) * QB, (k % QK) / 32u, w[j]);
      [[unroll]] for (uint i = 0u; i < MR; ++i) {
        if (i >= mr) {
        } else if (AVEC != 0u) {
          [[unroll]] for (uint c = 0u; c < 32u; c += VEC) {
            float a[VEC];
            unpack_vec(a4[(ar[i] + k + c) / VEC], a);
            [[unroll]] for (uint j = 0u; j < RT; ++j)
              [[unroll]] for (uint e = 0u; e < VEC; ++e)
                acc[j * MR + i] = fma(a[e], w[j][c + e], acc[j * MR + i]);
          }
        } else {
          // Not unrolled: this rare path (activations not aligned, or strided) would cost CPU
          // devices seconds of compile time unrolled.
          [[dont_unroll]] for (uint c = 0u; c < 32u; ++c) {
            const float a = a_at(ar[i] + (k + c) * sak);
            [[unroll]] for (uint j = 0u; j < RT; ++j) acc[j * MR + i] = fma(a, w[j][c], acc[j * MR + i]);
          }
        }
      }
    }
#endif
    [[unroll]] for (uint j = 0u; j < RT; ++j) {
      const uint n = n0 + j;
      [[unroll]] for (uint i = 0u; i < MR; ++i) {
        if (i >= mr) break;
#ifdef SMEM_REDUCE
        partial[lane] = acc[j * MR + i];
        barrier();
        for (uint s = T / 2u; s > 0u; s >>= 1) {
          if (lane < s) partial[lane] += partial[lane + s];
          barrier();
        }
        const float sum = partial[0];
        barrier();
#else
        const float sum = subgroupAdd(acc[j * MR + i]);
#endif
        if (lane == 0u && n < N && i < mr) {
          const uvec4 ys = P.td[0].stride;
          const uint o = P.td[0].offset + i0 * ys.x + i1 * ys.y + (m0 + i) * ys.z + n * ys.w;
          float v = sum;
          if (P.u.w != 0u) v += LOADF(y[o]);
          y[o] = STOREF(v);
        }
      }
    }
  }
}
