// Reductions over any dims (reduce_sum, reduce_mean, reduce_max, reduce_min): one invocation per
// output element walks its slab of x through x's strides, accumulating in f32. The function is a
// specialization constant (DUET_RED_* of duet/eltwise.h).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "duet/eltwise.h"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint OP = 0u;

TENSOR(1, writeonly, y)
TENSOR(2, readonly, x)

// P.u.x: bit d set when dim d of x (rank 4, 0 the outermost) is reduced; P.u.y: elements per
// output element.
void main() {
  const uint n = P.td[0].numel, m = P.u.x;
  const uvec4 s = P.td[1].shape, st = P.td[1].stride;
  const uvec4 rs = uvec4((m & 1u) != 0u ? s.x : 1u, (m & 2u) != 0u ? s.y : 1u,
                         (m & 4u) != 0u ? s.z : 1u, (m & 8u) != 0u ? s.w : 1u);
  const uvec4 os = s / rs;  // the output's shape
  const uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x;
  for (uint i = GROUP_INDEX * gl_WorkGroupSize.x + gl_LocalInvocationID.x; i < n; i += stride) {
    uint o = i;
    const uint c3 = o % os.w;
    o /= os.w;
    const uint c2 = o % os.z;
    o /= os.z;
    const uint c1 = o % os.y;
    const uint c0 = o / os.y;
    const uint base = P.td[1].offset + c0 * st.x + c1 * st.y + c2 * st.z + c3 * st.w;
    float acc = OP == DUET_RED_MAX ? NEG_INF : OP == DUET_RED_MIN ? -NEG_INF : OP == DUET_RED_PROD ? 1.0 : 0.0;
    for (uint a0 = 0u; a0 < rs.x; ++a0)
      for (uint a1 = 0u; a1 < rs.y; ++a1)
        for (uint a2 = 0u; a2 < rs.z; ++a2)
          for (uint a3 = 0u; a3 < rs.w; ++a3) {
            const float v = LOADF(x[base + a0 * st.x + a1 * st.y + a2 * st.z + a3 * st.w]);
            if (OP == DUET_RED_MAX)
              acc = v > acc || isnan(v) ? v : acc;
            else if (OP == DUET_RED_MIN)
              acc = v < acc || isnan(v) ? v : acc;
            else if (OP == DUET_RED_PROD)
              acc *= v;
            else
              acc += v;
          }
    if (OP == DUET_RED_MEAN) acc /= float(P.u.y);
    y[toff(0, i)] = STOREF(acc);
  }
}
