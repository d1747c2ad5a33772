// Rows out of a block-quantized table, dequantized: embedding (out[r, :] = table[ids[r], :], f32)
// and, with IDS = 0, cast (out[r, :] = table[r, :], in the variant's float dtype). Each
// invocation decodes one group of 32 elements of a row from the compressed bytes (quant.glsl),
// read through a uniform texel buffer of 32-bit words, and rounds each value once to the output.
// The table may be bound as a window of rows [v0, v1), as embedding.comp does; an id outside
// [0, V) writes zeros and is reported through the error buffer.
#version 450
#extension GL_GOOGLE_include_directive : require
#if !defined(T_f16) && !defined(T_bf16)
#define T_f32
#endif
#include "common.glsl"
#include "texel.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint IDS = 1;  // 0: row r of the view is output row r (cast)

TENSOR(1, writeonly, y)
layout(std430, set = 0, binding = 3) readonly buffer Ids { int ids[]; };
layout(std430, set = 0, binding = 4) buffer Errors { uint err[]; };
TEXELS(7, tw)

#define QWORD(i) texelFetch(tw, int(i)).x
#include "quant.glsl"

// P.u.x: D; P.u.y: v0; P.u.z: v1; P.u.w: V. P.u2.x: error slot; P.u2.y: last window (reports);
// P.u2.z: ids in [-V, 0) count from the end (negative_ids).
// P.u3.x: byte of row v0 in the view; P.u3.y: bytes from one row to the next. td[0]: the dense
// output [rows, D]; td[2]: the ids.
void main() {
  const uint D = P.u.x, groups = D / 32u;
  const uint n = (P.td[0].numel / D) * groups;
  const int v0 = int(P.u.y), v1 = int(P.u.z), V = int(P.u.w);
  const uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x;
  for (uint i = GROUP_INDEX * gl_WorkGroupSize.x + gl_LocalInvocationID.x; i < n; i += stride) {
    const uint r = i / groups, e0 = (i % groups) * 32u;
    const int v = IDS != 0u ? ids[toff(2, r)] : v0 + int(r);
    const int id = P.u2.z != 0u && v < 0 ? v + V : v;
    const uint o = P.td[0].offset + r * D + e0;
    if (id < 0 || id >= V) {
      if (P.u2.y != 0u) {
        for (uint l = 0u; l < 32u; ++l) y[o + l] = STOREF(0.0);
        if (e0 == 0u) {
          atomicMax(err[2u * P.u2.x], 1u);
          err[2u * P.u2.x + 1u] = uint(v);
        }
      }
    } else if (id >= v0 && id < v1) {
      float w[32];
      qblock32(P.u3.x + uint(id - v0) * P.u3.y + (e0 / QK) * QB, (e0 % QK) / 32u, w);
      [[unroll]] for (uint l = 0u; l < 32u; ++l) y[o + l] = STOREF(w[l]);
    }
  }
}
