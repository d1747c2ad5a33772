// write_slice: copies x into the slice [s, s + len) of the output's axis, s = P.u.w + pos (pos:
// the run-time scalar, when there is one). The output is dense, seen as [outer, cap, inner]; x is
// read through its descriptor. Elements are copied as they are stored (E_32, E_16, E_8: the
// element size; the planner casts x to the output's dtype first). A slice outside [0, cap) writes
// nothing and is reported as an error.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "scalar.glsl"

layout(local_size_x_id = 0) in;

#if defined(E_32)
#define ETYPE uint
#elif defined(E_16)
#define ETYPE uint16_t
#else
#define ETYPE uint8_t
#endif

layout(std430, set = 0, binding = 1) writeonly buffer Dst { ETYPE dst[]; };
layout(std430, set = 0, binding = 2) readonly buffer Src { ETYPE src[]; };

// P.u.x: len * inner (elements of x per outer index); P.u.y: cap; P.u.z: inner; P.u.w: start.
// P.u2.x: len.
void main() {
  uint chunk = P.u.x, cap = P.u.y, inner = P.u.z, len = P.u2.x;
  int s = int(P.u.w) + (has_runtime_scalar() ? runtime_scalar() : 0);
  if (s < 0 || s > int(cap) - int(len)) {
    if (GROUP_INDEX == 0u && gl_LocalInvocationID.x == 0u) report_bad_value(s);
    return;
  }
  uint n = P.td[1].numel;
  uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x;
  for (uint i = GROUP_INDEX * gl_WorkGroupSize.x + gl_LocalInvocationID.x; i < n; i += stride) {
    uint o = i / chunk, r = i % chunk;
    dst[P.td[0].offset + (o * cap + uint(s)) * inner + r] = src[toff(1, i)];
  }
}
