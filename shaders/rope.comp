// Rotary position embedding of x[B, H, L, D]. Row l of the bound slice is at position
// P.u2.x + pos + l, pos being the run-time scalar when there is one. The cos and sin of a position
// p come from a table the host computes once in double per (theta, rotated dims), binding 3: the
// rotations by each byte of p, [3][256][rope_dims / 2] pairs, multiplied here (two complex
// products in f32, within a few 1e-7). So the table never depends on the position, and positions
// up to 2^24 keep their accuracy; a position outside [0, 2^24) is reported as an error.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "scalar.glsl"

layout(local_size_x_id = 0) in;

TENSOR(1, writeonly, y)
TENSOR(2, readonly, x)
layout(std430, set = 0, binding = 3) readonly buffer Table { vec2 cs[]; };

vec2 cmul(vec2 a, vec2 b) {
  return vec2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

// P.u.x: D; P.u.y: rope_dims; P.u.z: mode (0 neox, 1 gptj); P.u.w: L. P.u2.x: the position of
// the bound slice's first row before pos is added.
void main() {
  uint n = P.td[0].numel;
  uint D = P.u.x, rd = P.u.y, half_rd = rd / 2u, L = P.u.w;
  bool gptj = P.u.z != 0u;
  int first = int(P.u2.x) + (has_runtime_scalar() ? runtime_scalar() : 0);
  if (first < 0 || first > (1 << 24) - int(L)) {
    if (GROUP_INDEX == 0u && gl_LocalInvocationID.x == 0u) report_bad_value(first);
    return;
  }
  uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x;
  for (uint i = GROUP_INDEX * gl_WorkGroupSize.x + gl_LocalInvocationID.x; i < n; i += stride) {
    uint d = i % D;
    uint row = i / D;
    float v = LOADF(x[toff(1, i)]);
    if (d < rd) {
      uint pair = gptj ? d / 2u : (d < half_rd ? d : d - half_rd);
      bool first_of_pair = gptj ? (d % 2u) == 0u : d < half_rd;
      uint other = gptj ? (first_of_pair ? d + 1u : d - 1u)
                        : (first_of_pair ? d + half_rd : d - half_rd);
      float o = LOADF(x[toff(1, row * D + other)]);
      uint p = uint(first) + row % L;
      vec2 c = cmul(cmul(cs[(p & 255u) * half_rd + pair],
                         cs[(256u + ((p >> 8) & 255u)) * half_rd + pair]),
                    cs[(512u + (p >> 16)) * half_rd + pair]);
      v = first_of_pair ? v * c.x - o * c.y : o * c.y + v * c.x;
    }
    y[toff(0, i)] = STOREF(v);
  }
}
