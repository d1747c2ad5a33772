// Activations quantized to q8 blocks for the int_dot kernels: per 32 consecutive values along K
// of a row, 32 int8 round(x * 127 / amax), the scale amax / 127 and the sums of the two halves
// of 16 (the formats' offset terms: q4_0's -8, the K-quants' mins, q4_z's zero points). A block
// is three 16-byte texels: the 32 bytes (element 4i + c in byte c of word i), then the scale's
// bits and the sums as two int16, two words of zeros.
//
// Variants: T_<activation dtype>. AVEC: activations read VEC elements per fetch (dense along K,
// aligned); otherwise one element per fetch, any strides.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "texel.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint AVEC = 0;

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
    uint w[8];
    int s0 = 0, s1 = 0;
    [[unroll]] for (uint j = 0u; j < 8u; ++j) {
      uint word = 0u;
      [[unroll]] for (uint c = 0u; c < 4u; ++c) {
        const int q = int(clamp(round(a[4u * j + c] * inv), -127.0, 127.0));
        word |= uint(q & 0xff) << (8u * c);
        if (j < 4u)
          s0 += q;
        else
          s1 += q;
      }
      w[j] = word;
    }
    qa[3u * i] = uvec4(w[0], w[1], w[2], w[3]);
    qa[3u * i + 1u] = uvec4(w[4], w[5], w[6], w[7]);
    qa[3u * i + 2u] = uvec4(floatBitsToUint(d), uint(s0 & 0xffff) | (uint(s1) << 16), 0u, 0u);
  }
}
