// Merges the split-K partial results of attention.comp: per output element, rescales each
// split's unnormalised sum by exp(m_split - m) and divides by the merged softmax sum.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;

TENSOR(1, writeonly, y)
layout(std430, set = 0, binding = 6) readonly buffer Scratch { float part[]; };

// P.u.w: rows per KV head; P.u2.w: partials per row; P.u3.y: head dim; P.u3.z: floats per partial
// (0: head dim + 2); P.u3.w: where its max and denominator are (0: after the head dim).
void main() {
  const uint rows = P.u.w, splits = P.u2.w, HD = P.u3.y;
  const uint PS = P.u3.z != 0u ? P.u3.z : HD + 2u;
  const uint MO = P.u3.w != 0u ? P.u3.w : HD;
  uint n = P.td[0].numel;
  uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x;
  for (uint i = GROUP_INDEX * gl_WorkGroupSize.x + gl_LocalInvocationID.x; i < n; i += stride) {
    uint d = i % HD, row = (i / HD) % rows, bh = i / (HD * rows);
    float m = NEG_INF;
    for (uint s = 0u; s < splits; ++s)
      m = max(m, part[((bh * splits + s) * rows + row) * PS + MO]);
    float num = 0.0, den = 0.0;
    if (m != NEG_INF) {
      for (uint s = 0u; s < splits; ++s) {
        uint base = ((bh * splits + s) * rows + row) * PS;
        float ms = part[base + MO];
        if (ms == NEG_INF) continue;
        float w = exp(ms - m);
        num += part[base + d] * w;
        den += part[base + MO + 1u] * w;
      }
    }
    y[P.td[0].offset + i] = STOREF(den > 0.0 ? num / den : 0.0);
  }
}
