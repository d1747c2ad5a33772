// Activations quantized to q8 blocks for the int_dot kernels: per 32 consecutive values along K
// of a row, 32 int8 round(x * 127 / amax), the scale amax / 127 and the sums of the two halves
// of 16 (the formats' offset terms: q4_0's -8, the K-quants' mins, q4_z's zero points). A block
// is three 16-byte texels: the 32 bytes (element 4i + c in byte c of word i), then the scale's
// bits and the sums as two int16, two words of zeros.
//
// PAIRS = 1 (for matmul_qdot.comp's SWAR form on devices that emulate OpSDot): a block is five
// texels instead: for each group of four values a0..a3, the words (a0 << 16) + a2 and
// (a1 << 16) + a3 as signed integers (eight of each), then the scale and sums.
//
// Variants: T_<activation dtype>. AVEC: activations read VEC elements per fetch (dense along K,
// aligned); otherwise one element per fetch, any strides.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "texel.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint AVEC = 0;
layout(constant_id = 2) const uint PAIRS = 0;

layout(std430, set = 0, binding = 1) writeonly buffer QA { uvec4 qa[]; };
TEXELS(7, ta)

// td[1]: a as [B0, B1, M, K] (offset in elements from the start of its texel view). P.u.x: K.
// Invocation i quantizes block i % (K / 32) of row i / (K / 32), rows batch-major.
void main() {
  const uint K = P.u.x, KB = K / 32u;
  const uint M = P.td[1].shape.z, b1 = P.td[1].shape.y;
  const uint n = P.td[1].numel / 32u;
  const uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x;
  const uvec4 st = P.td[1].stride;
  for (uint i = GROUP_INDEX * gl_WorkGroupSize.x + gl_LocalInvocationID.x; i < n; i += stride) {
    const uint r = i / KB, k = (i % KB) * 32u;
    const uint batch = r / M, m = r % M;
    const uint row = P.td[1].offset + (batch / b1) * st.x + (batch % b1) * st.y + m * st.z;
    float a[32];
    if (AVEC != 0u) {
      [[unroll]] for (uint c = 0u; c < 32u; c += VEC) {
        float v[VEC];
        FETCH_VEC(ta, row + k + c, v);
        [[unroll]] for (uint e = 0u; e < VEC; ++e) a[c + e] = v[e];
      }
    } else {
      [[unroll]] for (uint c = 0u; c < 32u; ++c) a[c] = FETCH_ONE(ta, row + (k + c) * st.w);
    }
    float amax = 0.0;
    [[unroll]] for (uint c = 0u; c < 32u; ++c) amax = max(amax, abs(a[c]));
    const float d = amax / 127.0, inv = amax > 0.0 ? 127.0 / amax : 0.0;
    uint w[8], e[8], o[8];
    int s0 = 0, s1 = 0;
    [[unroll]] for (uint j = 0u; j < 8u; ++j) {
      int q[4];
      [[unroll]] for (uint c = 0u; c < 4u; ++c) {
        q[c] = int(clamp(round(a[4u * j + c] * inv), -127.0, 127.0));
        if (j < 4u)
          s0 += q[c];
        else
          s1 += q[c];
      }
      w[j] = uint(q[0] & 0xff) | (uint(q[1] & 0xff) << 8) | (uint(q[2] & 0xff) << 16) |
             (uint(q[3] & 0xff) << 24);
      e[j] = uint(q[0] * 65536 + q[2]);
      o[j] = uint(q[1] * 65536 + q[3]);
    }
    const uvec4 meta = uvec4(floatBitsToUint(d), uint(s0 & 0xffff) | (uint(s1) << 16), 0u, 0u);
    if (PAIRS != 0u) {
      qa[5u * i] = uvec4(e[0], e[1], e[2], e[3]);
      qa[5u * i + 1u] = uvec4(e[4], e[5], e[6], e[7]);
      qa[5u * i + 2u] = uvec4(o[0], o[1], o[2], o[3]);
      qa[5u * i + 3u] = uvec4(o[4], o[5], o[6], o[7]);
      qa[5u * i + 4u] = meta;
    } else {
      qa[3u * i] = uvec4(w[0], w[1], w[2], w[3]);
      qa[3u * i + 1u] = uvec4(w[4], w[5], w[6], w[7]);
      qa[3u * i + 2u] = meta;
    }
  }
}
