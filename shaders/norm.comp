// rmsnorm (MODE 0) and layernorm (MODE 1) over the last dim, one workgroup per row. Layernorm
// takes the mean first and then the variance around it (two passes, no cancellation).
//
// With VECTOR (norm_vec_*, CPU devices, dense rows of whole 16-byte texels): one invocation per
// row, x, weight and bias through texel views (bindings 7-9), VEC partial sums, 16-byte stores.
//
// With ADD (norm_add_*, norm_vec_add_*: the residual add before an rmsnorm, folded into it,
// DUET_VULKAN_FUSE_ADD_NORM) x is the sum of two tensors of its shape, a (td[3]) and b (td[4]),
// rounded to x's dtype as the add's kernel rounds it: the first pass writes it to x (binding 2,
// the add's output) and every pass adds a and b again, so no invocation reads what another
// wrote. The output may be a or b itself: an invocation reads each element it writes before it
// writes it, and no other reads it. No bias.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint MODE = 0;

#ifdef VECTOR
#include "texel.glsl"
layout(std430, set = 0, binding = 1) writeonly buffer BufV1 { uvec4 yv[]; };
TEXELS(7, tx)
TEXELS(8, tw)
TEXELS(9, tb)
#ifdef ADD
// a at texel binding 7 (tx), b at 9 (tb); the sum stored at binding 2.
layout(std430, set = 0, binding = 2) writeonly buffer BufV2 { uvec4 sv[]; };
void fetch_x(uint row, uint j, out float v[VEC]) {
  float b[VEC];
  FETCH_VEC(tx, P.td[3].offset + row * P.u.x + j * VEC, v);
  FETCH_VEC(tb, P.td[4].offset + row * P.u.x + j * VEC, b);
  [[unroll]] for (uint k = 0u; k < VEC; ++k) v[k] = LOADF(STOREF(v[k] + b[k]));
}
#else
void fetch_x(uint row, uint j, out float v[VEC]) {
  FETCH_VEC(tx, P.td[1].offset + row * P.u.x + j * VEC, v);
}
#endif

float total(float s[VEC]) {
  float t = 0.0;
  [[unroll]] for (uint k = 0u; k < VEC; ++k) t += s[k];
  return t;
}

void main() {
  uint n = P.u.x, nt = n / VEC;
  uint row = GROUP_INDEX * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  if (row >= P.td[0].numel / n) return;
  uint yb = P.td[0].offset / VEC + row * nt;
  float v[VEC], s[VEC];
  float mean = 0.0;
  if (MODE == 1u) {
    [[unroll]] for (uint k = 0u; k < VEC; ++k) s[k] = 0.0;
    for (uint j = 0u; j < nt; ++j) {
      fetch_x(row, j, v);
      [[unroll]] for (uint k = 0u; k < VEC; ++k) s[k] += v[k];
    }
    mean = total(s) / float(n);
  }
  [[unroll]] for (uint k = 0u; k < VEC; ++k) s[k] = 0.0;
  for (uint j = 0u; j < nt; ++j) {
    fetch_x(row, j, v);
#ifdef ADD
    sv[P.td[1].offset / VEC + row * nt + j] = pack_vec(v);
#endif
    [[unroll]] for (uint k = 0u; k < VEC; ++k) s[k] += (v[k] - mean) * (v[k] - mean);
  }
  float inv = inversesqrt(total(s) / float(n) + P.f.x);
  float a[VEC];
  for (uint j = 0u; j < nt; ++j) {
    fetch_x(row, j, v);
    [[unroll]] for (uint k = 0u; k < VEC; ++k) v[k] = (v[k] - mean) * inv;
    if (P.u.y != 0u) {
      FETCH_VEC(tw, P.td[2].offset + j * VEC, a);
      [[unroll]] for (uint k = 0u; k < VEC; ++k) v[k] *= a[k];
    }
    if (P.u.z != 0u) {
      FETCH_VEC(tb, P.td[3].offset + j * VEC, a);
      [[unroll]] for (uint k = 0u; k < VEC; ++k) v[k] += a[k];
    }
    yv[yb + j] = pack_vec(v);
  }
}
#else
TENSOR(1, writeonly, y)
TENSOR(3, readonly, w)
#ifdef ADD
TENSOR(2, writeonly, x)
TENSOR(4, readonly, xa)
TENSOR(5, readonly, xb)
float load_x(uint i) {
  return LOADF(STOREF(LOADF(xa[toff(3, i)]) + LOADF(xb[toff(4, i)])));
}
#else
TENSOR(2, readonly, x)
TENSOR(4, readonly, bias)
float load_x(uint i) {
  return LOADF(x[toff(1, i)]);
}
#endif

shared float red[gl_WorkGroupSize.x];

float reduce_sum(float v) {
  uint t = gl_LocalInvocationID.x;
  red[t] = v;
  barrier();
  for (uint s = gl_WorkGroupSize.x / 2u; s > 0u; s >>= 1u) {
    if (t < s) red[t] += red[t + s];
    barrier();
  }
  float r = red[0];
  barrier();
  return r;
}

// P.u.x: N; P.u.y: has weight; P.u.z: has bias. P.f.x: eps.
void main() {
  uint n = P.u.x;
  uint row = GROUP_INDEX;
  if (row >= P.td[0].numel / n) return;
  uint base = row * n;
  uint t = gl_LocalInvocationID.x;
  float mean = 0.0;
  if (MODE == 1u) {
    float s = 0.0;
    for (uint j = t; j < n; j += gl_WorkGroupSize.x) s += load_x(base + j);
    mean = reduce_sum(s) / float(n);
  }
  float ss = 0.0;
  for (uint j = t; j < n; j += gl_WorkGroupSize.x) {
    const float xv = load_x(base + j);
#ifdef ADD
    x[toff(1, base + j)] = STOREF(xv);
#endif
    float d = xv - mean;
    ss += d * d;
  }
  float inv = inversesqrt(reduce_sum(ss) / float(n) + P.f.x);
  for (uint j = t; j < n; j += gl_WorkGroupSize.x) {
    float v = (load_x(base + j) - mean) * inv;
    if (P.u.y != 0u) v *= LOADF(w[toff(2, j)]);
#ifndef ADD
    if (P.u.z != 0u) v += LOADF(bias[toff(3, j)]);
#endif
    y[toff(0, base + j)] = STOREF(v);
  }
}
#endif
