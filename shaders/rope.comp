// Rotary position embedding of x[B, H, L, D]. The host computes cos/sin of every (row position,
// pair) in double (binding 3, [L][rope_dims/2] pairs), so long positions lose no accuracy.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;

TENSOR(1, writeonly, y)
TENSOR(2, readonly, x)
layout(std430, set = 0, binding = 3) readonly buffer Table { vec2 cs[]; };

// P.u.x: D; P.u.y: rope_dims; P.u.z: mode (0 neox, 1 gptj); P.u.w: L.
void main() {
  uint n = P.td[0].numel;
  uint D = P.u.x, rd = P.u.y, half_rd = rd / 2u, L = P.u.w;
  bool gptj = P.u.z != 0u;
  uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x;
  for (uint i = GROUP_INDEX * gl_WorkGroupSize.x + gl_LocalInvocationID.x; i < n; i += stride) {
    uint d = i % D;
    uint row = i / D;
    float v = LOADF(x[toff(1, i)]);
    if (d < rd) {
      uint pair = gptj ? d / 2u : (d < half_rd ? d : d - half_rd);
      bool first = gptj ? (d % 2u) == 0u : d < half_rd;
      uint other = gptj ? (first ? d + 1u : d - 1u) : (first ? d + half_rd : d - half_rd);
      float o = LOADF(x[toff(1, row * D + other)]);
      vec2 c = cs[(row % L) * half_rd + pair];
      v = first ? v * c.x - o * c.y : o * c.y + v * c.x;
    }
    y[toff(0, i)] = STOREF(v);
  }
}
