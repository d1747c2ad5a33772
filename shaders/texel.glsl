// Operands read through uniform texel buffers (bindings 7..10), for the "register_blocked" kernels. On a
// CPU device (lavapipe) a texel fetch is one vector gather over the invocations of a subgroup,
// where a storage-buffer read is a loop over them: 2-4x cheaper per element, measured.
//
// Vector mode: R32G32B32A32_UINT texels, VEC elements each (4 f32, or 8 16-bit values packed two
// per word). Scalar mode: R32_UINT (f32) or R16_UINT (f16, bf16) texels, one element each.
// Conversions are exact: f16 through unpackHalf2x16 (f16 -> f32 never rounds), bf16 by a shift.

#if defined(T_f32)
#define VEC 4u
void unpack_vec(uvec4 w, out float v[VEC]) {
  v[0] = uintBitsToFloat(w.x);
  v[1] = uintBitsToFloat(w.y);
  v[2] = uintBitsToFloat(w.z);
  v[3] = uintBitsToFloat(w.w);
}
uvec4 pack_vec(float v[VEC]) {
  return floatBitsToUint(vec4(v[0], v[1], v[2], v[3]));
}
float unpack_one(uint w) {
  return uintBitsToFloat(w);
}
#else
#define VEC 8u
#if defined(T_f16)
vec2 unpack_pair(uint w) {
  return unpackHalf2x16(w);
}
float unpack_one(uint w) {
  return unpackHalf2x16(w).x;
}
uint to_bits(float v) {
  return f32_to_f16(v);
}
#else
vec2 unpack_pair(uint w) {
  return vec2(uintBitsToFloat(w << 16), uintBitsToFloat(w & 0xffff0000u));
}
float unpack_one(uint w) {
  return uintBitsToFloat(w << 16);
}
uint to_bits(float v) {
  return f32_to_bf16(v);
}
#endif
// VEC values rounded to the storage type (exactly, round to nearest even: common.glsl) and packed
// two per word, the first in the low half.
uvec4 pack_vec(float v[VEC]) {
  uvec4 w;
  [[unroll]] for (uint k = 0u; k < 4u; ++k)
    w[k] = to_bits(v[2u * k]) | (to_bits(v[2u * k + 1u]) << 16);
  return w;
}
void unpack_vec(uvec4 w, out float v[VEC]) {
  vec2 p0 = unpack_pair(w.x), p1 = unpack_pair(w.y), p2 = unpack_pair(w.z), p3 = unpack_pair(w.w);
  v[0] = p0.x;
  v[1] = p0.y;
  v[2] = p1.x;
  v[3] = p1.y;
  v[4] = p2.x;
  v[5] = p2.y;
  v[6] = p3.x;
  v[7] = p3.y;
}
#endif

// Declares texel binding `b` (7..10) as `name`.
#define TEXELS(b, name) layout(set = 0, binding = b) uniform usamplerBuffer name;
// VEC elements starting at element e (a multiple of VEC), and one element at e.
#define FETCH_VEC(name, e, out_) unpack_vec(texelFetch(name, int((e) / VEC)), out_)
#define FETCH_ONE(name, e) unpack_one(texelFetch(name, int(e)).x)
