// Dense conversion between the float types (f32, f16, bf16), 8 elements per invocation: the
// variant convert_vec_<S>_<D> that CPU devices get when both tensors are dense, start on 16 bytes
// and hold a multiple of 8 elements (docs/vulkan.md). The source is read through a texel view of
// 16-byte texels (binding 7: two texels of f32 or one of 16-bit values); the destination is
// written as 16-byte words. Rounding as in convert.comp (nearest even, exact); a copy moves bits.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 1) writeonly buffer Dst { uvec4 dst[]; };
layout(set = 0, binding = 7) uniform usamplerBuffer src;

#if defined(S_f32)
#define S_TEXELS 2u
#else
#define S_TEXELS 1u
#endif
#if defined(D_f32)
#define D_WORDS 2u
#else
#define D_WORDS 1u
#endif

// One 32-bit word of two 16-bit values, low half first, as two f32.
vec2 widen(uint w) {
#if defined(S_f16)
  return unpackHalf2x16(w);  // f16 -> f32 is exact
#else
  return vec2(uintBitsToFloat(w << 16), uintBitsToFloat(w & 0xffff0000u));
#endif
}

uint narrow(float v) {
#if defined(D_f16)
  return f32_to_f16(v);
#else
  return f32_to_bf16(v);
#endif
}

void main() {
  uint n = P.td[0].numel / 8u;
  uint s0 = P.td[1].offset / (8u / S_TEXELS);  // texel index of the first element
  uint d0 = P.td[0].offset / (8u / D_WORDS);   // 16-byte word index of the first element
  uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x;
  for (uint i = GROUP_INDEX * gl_WorkGroupSize.x + gl_LocalInvocationID.x; i < n; i += stride) {
#if (defined(S_f32) && defined(D_f32)) || (defined(S_f16) && defined(D_f16)) || \
    (defined(S_bf16) && defined(D_bf16))
    [[unroll]] for (uint k = 0u; k < S_TEXELS; ++k)
      dst[d0 + i * D_WORDS + k] = texelFetch(src, int(s0 + i * S_TEXELS + k));
#else
    float f[8];
#if defined(S_f32)
    uvec4 a = texelFetch(src, int(s0 + 2u * i)), b = texelFetch(src, int(s0 + 2u * i + 1u));
    f[0] = uintBitsToFloat(a.x);
    f[1] = uintBitsToFloat(a.y);
    f[2] = uintBitsToFloat(a.z);
    f[3] = uintBitsToFloat(a.w);
    f[4] = uintBitsToFloat(b.x);
    f[5] = uintBitsToFloat(b.y);
    f[6] = uintBitsToFloat(b.z);
    f[7] = uintBitsToFloat(b.w);
#else
    uvec4 a = texelFetch(src, int(s0 + i));
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
      vec2 p = widen(a[k]);
      f[2u * k] = p.x;
      f[2u * k + 1u] = p.y;
    }
#endif
#if defined(D_f32)
    dst[d0 + 2u * i] = floatBitsToUint(vec4(f[0], f[1], f[2], f[3]));
    dst[d0 + 2u * i + 1u] = floatBitsToUint(vec4(f[4], f[5], f[6], f[7]));
#else
    uvec4 w;
    [[unroll]] for (uint k = 0u; k < 4u; ++k)
      w[k] = narrow(f[2u * k]) | (narrow(f[2u * k + 1u]) << 16);
    dst[d0 + i] = w;
#endif
#endif
  }
}
