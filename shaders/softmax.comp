// Softmax over the last dim of x * scale + mask, one workgroup per row. A row whose entries are
// all -inf becomes zeros (as the reference defines it).
//
// With VECTOR (softmax_vec_*, CPU devices, no mask, dense rows of whole 16-byte texels): one
// invocation per row, reading x through a texel view (binding 7) and writing 16-byte stores; no
// shared memory and no barriers (docs/vulkan.md, why).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;

#ifdef VECTOR
#include "texel.glsl"
layout(std430, set = 0, binding = 1) writeonly buffer BufV1 { uvec4 yv[]; };
TEXELS(7, tx)

void main() {
  uint n = P.u.x, nt = n / VEC;
  uint row = GROUP_INDEX * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  if (row >= P.td[0].numel / n) return;
  uint xb = P.td[1].offset + row * n, yb = P.td[0].offset / VEC + row * nt;
  float scale = P.f.x;
  float v[VEC], m[VEC], s[VEC];
  [[unroll]] for (uint k = 0u; k < VEC; ++k) m[k] = NEG_INF;
  for (uint j = 0u; j < nt; ++j) {
    FETCH_VEC(tx, xb + j * VEC, v);
    [[unroll]] for (uint k = 0u; k < VEC; ++k) m[k] = max(m[k], v[k] * scale);
  }
  float mx = m[0];
  [[unroll]] for (uint k = 1u; k < VEC; ++k) mx = max(mx, m[k]);
  [[unroll]] for (uint k = 0u; k < VEC; ++k) s[k] = 0.0;
  if (mx != NEG_INF)
    for (uint j = 0u; j < nt; ++j) {
      FETCH_VEC(tx, xb + j * VEC, v);
      [[unroll]] for (uint k = 0u; k < VEC; ++k) s[k] += exp(v[k] * scale - mx);
    }
  float sum = 0.0;
  [[unroll]] for (uint k = 0u; k < VEC; ++k) sum += s[k];
  float inv = mx == NEG_INF ? 0.0 : 1.0 / sum;
  for (uint j = 0u; j < nt; ++j) {
    FETCH_VEC(tx, xb + j * VEC, v);
    [[unroll]] for (uint k = 0u; k < VEC; ++k)
      v[k] = mx == NEG_INF ? 0.0 : exp(v[k] * scale - mx) * inv;
    yv[yb + j] = pack_vec(v);
  }
}
#else
TENSOR(1, writeonly, y)
TENSOR(2, readonly, x)
TENSOR(3, readonly, mask_t)
TENSOR_F32(3, readonly, mask_f)

shared float red[gl_WorkGroupSize.x];

// P.u.x: row length N; P.u.y: has mask; P.u.z: mask is f32. P.f.x: scale.
float value(uint i) {
  float v = LOADF(x[toff(1, i)]) * P.f.x;
  if (P.u.y != 0u) {
    uint m = toff(2, i);
    v += P.u.z != 0u ? mask_f[m] : LOADF(mask_t[m]);
  }
  return v;
}

float reduce(float v, bool is_max) {
  uint t = gl_LocalInvocationID.x;
  red[t] = v;
  barrier();
  for (uint s = gl_WorkGroupSize.x / 2u; s > 0u; s >>= 1u) {
    if (t < s) red[t] = is_max ? max(red[t], red[t + s]) : red[t] + red[t + s];
    barrier();
  }
  float r = red[0];
  barrier();
  return r;
}

void main() {
  uint n = P.u.x;
  uint row = GROUP_INDEX;
  uint rows = P.td[0].numel / n;
  if (row >= rows) return;
  uint base = row * n;
  uint t = gl_LocalInvocationID.x;
  float mx = NEG_INF;
  for (uint j = t; j < n; j += gl_WorkGroupSize.x) mx = max(mx, value(base + j));
  mx = reduce(mx, true);
  float sum = 0.0;
  if (mx != NEG_INF)
    for (uint j = t; j < n; j += gl_WorkGroupSize.x) sum += exp(value(base + j) - mx);
  sum = reduce(sum, false);
  float inv = mx == NEG_INF ? 0.0 : 1.0 / sum;
  for (uint j = t; j < n; j += gl_WorkGroupSize.x) {
    float e = mx == NEG_INF ? 0.0 : exp(value(base + j) - mx) * inv;
    y[toff(0, base + j)] = STOREF(e);
  }
}
#endif
