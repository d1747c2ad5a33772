// A rope whose output the next op writes into a KV cache (write_slice in place), and the write of
// V after it, in one dispatch (DUET_VULKAN_FUSE_ROPE_WRITE): each rotated element is stored to
// the rope's output, as rope.comp stores it, and to its row of the K cache, as write_slice.comp
// would copy it; the elements past the rope's are V's, copied into the V cache. All f32; the
// three ops read one run-time position (binding 11), each reports its own bad value (error slots
// P.rt.y: the rope's, P.rt.z: K's write, P.rt.w: V's).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "scalar.glsl"

layout(local_size_x_id = 0) in;

TENSOR(1, writeonly, y)
TENSOR(2, readonly, x)
layout(std430, set = 0, binding = 3) readonly buffer Table { vec2 cs[]; };
TENSOR(4, writeonly, kc)
TENSOR(5, readonly, vx)
TENSOR(6, writeonly, vc)

vec2 cmul(vec2 a, vec2 b) {
  return vec2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

void report(uint slot, int v) {
  atomicMax(rt_error[2u * slot], 1u);
  rt_error[2u * slot + 1u] = uint(v);
}

// td[0] y, td[1] x (the rope's), td[2] the K cache, td[3] V's rows, td[4] the V cache.
// P.u: D, rope_dims, mode (0 neox, 1 gptj), L. P.u2: the rope's first position, K's start, V's
// start, V's element count (0: no V write). P.u3: K's len * inner, cap, inner, len. P.f: V's
// len * inner, cap, inner, len (as bits).
void main() {
  const uint n = P.td[0].numel, nv = P.u2.w;
  const uint D = P.u.x, rd = P.u.y, half_rd = rd / 2u, L = P.u.w;
  const bool gptj = P.u.z != 0u;
  const uint kchunk = P.u3.x, kcap = P.u3.y, kinner = P.u3.z, klen = P.u3.w;
  const uvec4 vw = floatBitsToUint(P.f);
  const uint vchunk = vw.x, vcap = vw.y, vinner = vw.z, vlen = vw.w;
  const int pos = has_runtime_scalar() ? runtime_scalar() : 0;
  const int first = int(P.u2.x) + pos, sk = int(P.u2.y) + pos, sv = int(P.u2.z) + pos;
  const bool rope_ok = first >= 0 && first <= (1 << 24) - int(L);
  const bool k_ok = sk >= 0 && sk <= int(kcap) - int(klen);
  const bool v_ok = sv >= 0 && sv <= int(vcap) - int(vlen);
  if (GROUP_INDEX == 0u && gl_LocalInvocationID.x == 0u) {
    if (!rope_ok) report(P.rt.y, first);
    if (!k_ok) report(P.rt.z, sk);
    if (nv > 0u && !v_ok) report(P.rt.w, sv);
  }
  const uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x;
  for (uint i = GROUP_INDEX * gl_WorkGroupSize.x + gl_LocalInvocationID.x; i < n + nv;
       i += stride) {
    if (i >= n) {
      if (!v_ok) continue;
      const uint j = i - n, o = j / vchunk, r = j % vchunk;
      vc[P.td[4].offset + (o * vcap + uint(sv)) * vinner + r] = vx[toff(3, j)];
      continue;
    }
    if (!rope_ok) continue;
    const uint d = i % D, row = i / D;
    float v = x[toff(1, i)];
    if (d < rd) {
      const uint pair = gptj ? d / 2u : (d < half_rd ? d : d - half_rd);
      const bool first_of_pair = gptj ? (d % 2u) == 0u : d < half_rd;
      const uint other = gptj ? (first_of_pair ? d + 1u : d - 1u)
                              : (first_of_pair ? d + half_rd : d - half_rd);
      const float o = x[toff(1, row * D + other)];
      const uint p = uint(first) + row % L;
      const vec2 c = cmul(cmul(cs[(p & 255u) * half_rd + pair],
                               cs[(256u + ((p >> 8) & 255u)) * half_rd + pair]),
                          cs[(512u + (p >> 16)) * half_rd + pair]);
      v = first_of_pair ? v * c.x - o * c.y : o * c.y + v * c.x;
    }
    y[toff(0, i)] = v;
    if (k_ok) kc[P.td[2].offset + (i / kchunk * kcap + uint(sk)) * kinner + i % kchunk] = v;
  }
}
