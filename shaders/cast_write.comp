// A cast of rows (f32) to an f16 or bf16 KV cache's dtype, and the write_slice in place of the
// cast's output into the cache after it, in one dispatch (DUET_VULKAN_FUSE_ROPE_WRITE: the
// planner inserts the cast before each cache write of an f16 or bf16 cache): each element is
// rounded once (as convert.comp rounds it), stored to the cast's output and to its cache row.
// The write's offset is the run-time scalar; a bad one is reported as write_slice.comp reports
// it, and the cast's output is written all the same (as the cast alone would write it).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "scalar.glsl"

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 1) writeonly buffer Dst { uint16_t dst[]; };
layout(std430, set = 0, binding = 2) readonly buffer Src { float src[]; };
layout(std430, set = 0, binding = 3) writeonly buffer Out { uint16_t cast_out[]; };

#if defined(D_f16)
#define CBITS(v) f32_to_f16(v)
#else
#define CBITS(v) f32_to_bf16(v)
#endif

// td[0] the cache, td[1] the cast's input, td[2] its output. P.u: len * inner (elements per
// outer index), cap, inner, start; P.u2.x: len.
void main() {
  const uint chunk = P.u.x, cap = P.u.y, inner = P.u.z, len = P.u2.x;
  const int s = int(P.u.w) + (has_runtime_scalar() ? runtime_scalar() : 0);
  const bool ok = s >= 0 && s <= int(cap) - int(len);
  if (!ok && GROUP_INDEX == 0u && gl_LocalInvocationID.x == 0u) report_bad_value(s);
  const uint n = P.td[1].numel;
  const uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x;
  for (uint i = GROUP_INDEX * gl_WorkGroupSize.x + gl_LocalInvocationID.x; i < n; i += stride) {
    const uint v = CBITS(src[toff(1, i)]);
    cast_out[toff(2, i)] = uint16_t(v);
    if (ok) dst[P.td[0].offset + (i / chunk * cap + uint(s)) * inner + i % chunk] = uint16_t(v);
  }
}
