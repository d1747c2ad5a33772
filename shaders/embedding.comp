// Embedding: out[r, :] = table[ids[r], :]. The table may be bound as a window of rows [v0, v1)
// (tables larger than one binding run as several dispatches); rows outside the window are left
// to the dispatch that holds them. An id outside [0, V) ([-V, V) with negative ids) writes zeros and is reported through the
// error buffer, which the host turns into an error at synchronize().
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;

TENSOR(1, writeonly, y)
TENSOR(2, readonly, table)
layout(std430, set = 0, binding = 3) readonly buffer Ids { int ids[]; };
layout(std430, set = 0, binding = 4) buffer Errors { uint err[]; };

// P.u.x: D; P.u.y: v0; P.u.z: v1; P.u.w: V. P.u2.x: error slot; P.u2.y: last window (reports);
// P.u2.z: ids in [-V, 0) count from the end (negative_ids).
void main() {
  uint n = P.td[0].numel;
  uint D = P.u.x;
  int v0 = int(P.u.y), v1 = int(P.u.z), V = int(P.u.w);
  uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x;
  for (uint i = GROUP_INDEX * gl_WorkGroupSize.x + gl_LocalInvocationID.x; i < n; i += stride) {
    uint r = i / D, d = i % D;
    int v = ids[toff(2, r)];
    int id = P.u2.z != 0u && v < 0 ? v + V : v;
    if (id < 0 || id >= V) {
      if (P.u2.y != 0u) {
        y[toff(0, i)] = STYPE(0);
        if (d == 0u) {
          atomicMax(err[2u * P.u2.x], 1u);
          err[2u * P.u2.x + 1u] = uint(v);
        }
      }
    } else if (id >= v0 && id < v1) {
      y[toff(0, i)] = table[P.td[1].offset + uint(id - v0) * P.td[1].stride.z +
                                    d * P.td[1].stride.w];
    }
  }
}
