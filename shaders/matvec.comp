// Mat-vec for GPUs (tier "matvec"): y[.., m, n] = sum_k a[.., m, k] w[n, k] for a few rows m
// (decode, M = 1..8), the weight contiguous along K (stored [N, K], as checkpoints store it).
//
// A workgroup owns RW weight rows and MR activation rows, and all of its invocations split K:
// invocation t takes the rows' pieces t, t + T, t + 2T, ... (T invocations), a piece being 16
// bytes of a float weight (4 f32 or 8 16-bit values) or 8 elements of a block format (a quarter
// of a 32-element group, decoded in registers by quant_piece.glsl). So neighbouring invocations
// read neighbouring bytes, of the weight and of the activations alike (coalesced loads), each
// invocation has RW rows' loads in flight at once, each activation read serves the RW rows, and
// the grid has N / RW workgroups of T invocations (enough bytes in flight to stream the weight at
// the memory's speed). Each invocation keeps one partial sum per weight and activation row; at
// the end the workgroup adds them up: with SMEM_REDUCE undefined by subgroupAdd in each subgroup
// (the device has subgroup arithmetic) and then across the subgroups in shared memory, with it by
// a tree in shared memory. The activations (MR rows) are small and come from the cache.
//
// Variants: T_<activation dtype> and either W_FLOAT (weight of the same dtype) or Q_<format>.
// GROUP (block formats only): up to three weights that multiply the same activations (a decode
// step's q, k and v; gate and up) in one dispatch, the grid's workgroups along x taken by member
// 0, then 1, then 2 (P.u3.z and P.u3.w: where members 1 and 2 start). Member m's weight is at
// binding 3 + m; its output at binding 1, 6 or 11 with descriptor td[0], td[2] or td[3]; its
// weight's row 0 and row pitch in P.u2.xy, P.u2.zw, P.u3.xy. The member is the same for every
// invocation of a workgroup, so its branches are uniform.
#version 450
#extension GL_GOOGLE_include_directive : require
#ifndef SMEM_REDUCE
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"
#include "texel.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint RW = 1;    // weight rows per workgroup, streamed together
layout(constant_id = 2) const uint AVEC = 0;  // activations read 16 bytes at a time
layout(constant_id = 3) const uint WVEC = 0;  // float weights read 16 bytes at a time
// Activation rows per workgroup (1, 2, 4 or 8): the rows past M are skipped by branches uniform
// in the workgroup, so that one pipeline serves every batch of MR/2 + 1 .. MR rows.
layout(constant_id = 4) const uint MR = 1;
// The most subgroups a workgroup can have (its size over the device's smallest subgroup): the
// size of the shared memory the subgroups' sums meet in; 1: one subgroup, no shared memory.
layout(constant_id = 5) const uint NSG = 1;

TENSOR(1, , y)
layout(std430, set = 0, binding = 2) readonly buffer A4 { uvec4 a4[]; };
#if defined(W_FLOAT)
layout(std430, set = 0, binding = 3) readonly buffer W4 { uvec4 w4[]; };
#elif defined(GROUP)
layout(std430, set = 0, binding = 3) readonly buffer Wq0 { uint wq0[]; };
layout(std430, set = 0, binding = 4) readonly buffer Wq1 { uint wq1[]; };
layout(std430, set = 0, binding = 5) readonly buffer Wq2 { uint wq2[]; };
TENSOR(6, , y1)
TENSOR(11, , y2)
uint member = 0u;  // this workgroup's member of the group
uint qword(uint i) {
  if (member == 0u) return wq0[i];
  if (member == 1u) return wq1[i];
  return wq2[i];
}
#define QWORD(i) qword(i)
#include "quant_piece.glsl"
#else
layout(std430, set = 0, binding = 3) readonly buffer Wq { uint wq[]; };
#define QWORD(i) wq[i]
#include "quant_piece.glsl"
#endif

#ifdef GROUP
// The member's output descriptor, and its element yo.
#define YD (member == 0u ? 0 : member == 1u ? 2 : 3)
void store_y(uint yo, float v) {
  if (member == 0u)
    y[yo] = STOREF(v);
  else if (member == 1u)
    y1[yo] = STOREF(v);
  else
    y2[yo] = STOREF(v);
}
float load_y(uint yo) {
  return 0.0;  // a group never accumulates
}
#else
#define YD 0
void store_y(uint yo, float v) {
  y[yo] = STOREF(v);
}
float load_y(uint yo) {
  return LOADF(y[yo]);
}
#endif

#ifdef SMEM_REDUCE
shared float partial[gl_WorkGroupSize.x];
#else
shared float partial[NSG * RW * MR];
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
#ifdef GROUP
  const uint gx = gl_WorkGroupID.x;
  member = gx < P.u3.z ? 0u : gx < P.u3.w ? 1u : 2u;
  const uint wg_x = gx - (member == 0u ? 0u : member == 1u ? P.u3.z : P.u3.w);
  const uvec2 wrow = member == 0u ? P.u2.xy : member == 1u ? P.u2.zw : P.u3.xy;
#else
  const uint wg_x = gl_WorkGroupID.x;
  const uvec2 wrow = P.u2.xy;
#endif
#ifdef GROUP
  const uint N = P.td[YD].shape.w;
#else
  const uint N = P.u.y;
#endif
  const uint M = P.u.x, K = P.u.z;
  const uint batch = gl_WorkGroupID.z;
  const uint b1 = P.td[YD].shape.y;
  const uint i0 = batch / b1, i1 = batch % b1;
  const uint a_base = P.td[1].offset + i0 * P.td[1].stride.x + i1 * P.td[1].stride.y;
  const uint sam = P.td[1].stride.z, sak = P.td[1].stride.w;
  const uint m0 = gl_WorkGroupID.y * MR;
  const uint mr = min(M - m0, MR);
  const uint t = gl_LocalInvocationID.x, T = gl_WorkGroupSize.x;
  // (ar: rows past M point at row M - 1, never read.)
  uint ar[MR];
  [[unroll]] for (uint i = 0u; i < MR; ++i) ar[i] = a_base + min(m0 + i, M - 1u) * sam;
  const uint n0 = wg_x * RW;
  // Rows past N read row N - 1 (never stored): no branch in the loop.
  uint nr[RW];
  [[unroll]] for (uint j = 0u; j < RW; ++j) nr[j] = min(n0 + j, N - 1u);
  float acc[RW * MR];
  [[unroll]] for (uint i = 0u; i < RW * MR; ++i) acc[i] = 0.0;

#if defined(W_FLOAT)
  uint w_base[RW];
  [[unroll]] for (uint j = 0u; j < RW; ++j)
    w_base[j] = P.td[2].offset + i0 * P.td[2].stride.x + i1 * P.td[2].stride.y +
                nr[j] * P.td[2].stride.z;
  if (WVEC != 0u && AVEC != 0u) {
    // K, every row start and both offsets are multiples of VEC.
    for (uint k = t * VEC; k < K; k += T * VEC) {
      float w[RW][VEC];
      [[unroll]] for (uint j = 0u; j < RW; ++j) unpack_vec(w4[(w_base[j] + k) / VEC], w[j]);
      [[unroll]] for (uint i = 0u; i < MR; ++i) {
        if (i < mr) {
          float a[VEC];
          unpack_vec(a4[(ar[i] + k) / VEC], a);
          [[unroll]] for (uint j = 0u; j < RW; ++j)
            [[unroll]] for (uint e = 0u; e < VEC; ++e)
              acc[j * MR + i] = fma(a[e], w[j][e], acc[j * MR + i]);
        }
      }
    }
  } else {
    const uint swk = P.td[2].stride.w;
    for (uint k = t; k < K; k += T) {
      float w[RW];
      [[unroll]] for (uint j = 0u; j < RW; ++j) {
        const uint we = w_base[j] + k * swk;
        w[j] = elem(w4[we / VEC], we);
      }
      [[unroll]] for (uint i = 0u; i < MR; ++i) {
        if (i < mr) {
          const float a = a_at(ar[i] + k * sak);
          [[unroll]] for (uint j = 0u; j < RW; ++j) acc[j * MR + i] = fma(a, w[j], acc[j * MR + i]);
        }
      }
    }
  }
#else
  uint w_row[RW];
  [[unroll]] for (uint j = 0u; j < RW; ++j) w_row[j] = wrow.x + nr[j] * wrow.y;
  // Piece q of a row: elements [8 q, 8 q + 8), in block (8 q) / QK, group (8 q % QK) / 32.
  for (uint q = t; q < K / 8u; q += T) {
    const uint k = q * 8u;
    const uint at = (k / QK) * QB, g = (k % QK) / 32u, p = q & 3u;
    float w[RW][8];
    vec2 dm[RW];
    [[unroll]] for (uint j = 0u; j < RW; ++j) qpiece(w_row[j] + at, g, p, w[j], dm[j]);
    [[unroll]] for (uint i = 0u; i < MR; ++i) {
      if (i < mr) {  // uniform in the workgroup
        float a[8];
        if (AVEC != 0u) {
          [[unroll]] for (uint c = 0u; c < 8u; c += VEC) {
            float v[VEC];
            unpack_vec(a4[(ar[i] + k + c) / VEC], v);
            [[unroll]] for (uint e = 0u; e < VEC; ++e) a[c + e] = v[e];
          }
        } else {
          [[unroll]] for (uint c = 0u; c < 8u; ++c) a[c] = a_at(ar[i] + (k + c) * sak);
        }
#ifdef Q_MIN
        float sa = 0.0;
        [[unroll]] for (uint c = 0u; c < 8u; ++c) sa += a[c];
#endif
        // Each row's piece: the activations times its codes, then its scale (and minimum).
        [[unroll]] for (uint j = 0u; j < RW; ++j) {
          float s = 0.0;
          [[unroll]] for (uint c = 0u; c < 8u; ++c) s = fma(a[c], w[j][c], s);
          float r = fma(dm[j].x, s, acc[j * MR + i]);
#ifdef Q_MIN
          r = fma(dm[j].y, sa, r);
#endif
          acc[j * MR + i] = r;
        }
      }
    }
  }
#endif

  const uvec4 ys = P.td[YD].stride;
  const uint y_base = P.td[YD].offset + i0 * ys.x + i1 * ys.y;
#ifdef SMEM_REDUCE
  [[unroll]] for (uint o = 0u; o < RW * MR; ++o) {
    const uint j = o / MR, i = o % MR;
    if (i >= mr) continue;  // uniform in the workgroup
    partial[t] = acc[o];
    barrier();
    for (uint s = T / 2u; s > 0u; s >>= 1) {
      if (t < s) partial[t] += partial[t + s];
      barrier();
    }
    if (t == 0u && n0 + j < N) {
      const uint yo = y_base + (m0 + i) * ys.z + (n0 + j) * ys.w;
      float v = partial[0];
      if (P.u.w != 0u) v += load_y(yo);
      store_y(yo, v);
    }
    barrier();
  }
#else
  // Each subgroup's sums, then (more than one subgroup) the workgroup's through shared memory.
  [[unroll]] for (uint o = 0u; o < RW * MR; ++o) {
    if (o % MR < mr) {  // uniform in the workgroup
      acc[o] = subgroupAdd(acc[o]);
      if (NSG > 1u && gl_SubgroupInvocationID == 0u) partial[gl_SubgroupID * (RW * MR) + o] = acc[o];
    }
  }
  if (NSG > 1u) barrier();
  for (uint o = t; o < RW * MR; o += T) {
    const uint j = o / MR, i = o % MR;
    if (i >= mr || n0 + j >= N) continue;
    float v = 0.0;
    if (NSG > 1u) {
      for (uint s = 0u; s < gl_NumSubgroups; ++s) v += partial[s * (RW * MR) + o];
    } else {
      [[unroll]] for (uint c = 0u; c < RW * MR; ++c)
        if (c == o) v = acc[c];
    }
    const uint yo = y_base + (m0 + i) * ys.z + (n0 + j) * ys.w;
    if (P.u.w != 0u) v += load_y(yo);
    store_y(yo, v);
  }
#endif
}
