// Flash attention for GPUs at decode (tier "flash", family attention_decode): few query rows (the
// MR rows of one KV head: its query heads at one or a few positions) against a long cache, the
// keys split across workgroups (z) so that every compute unit streams its share of K and V once.
//
// A workgroup of NT invocations takes tiles of NT keys. Scores: invocation t takes key k0 + t and
// dots its K row (read 16 bytes at a time where KVEC) with the MR query rows, which sit in shared
// memory; the tile's row maxima and sums meet through subgroupMax/subgroupAdd and one slot per
// subgroup (so nothing depends on the subgroup's size). Values: the invocations split into key
// groups of NDC invocations, each holding VEC consecutive output columns of all MR rows in f32
// registers and reading its VEC values of a V row 16 bytes at a time (VVEC): neighbouring
// invocations read neighbouring bytes. The key groups' sums meet in shared memory at the end.
// Storage is f32, f16 or bf16; scores, softmax and sums are f32. With several splits each
// workgroup writes an unnormalised partial result (sum, max, denominator) that
// attention_combine.comp merges.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"
#include "scalar.glsl"
#include "texel.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint MR = 1;     // query rows per workgroup (1, 2, 4 or 8)
layout(constant_id = 2) const uint HD = 64;    // head dim
layout(constant_id = 3) const uint KVEC = 0;   // K rows read 16 bytes at a time
layout(constant_id = 4) const uint VVEC = 0;   // V rows read 16 bytes at a time
const uint NT = gl_WorkGroupSize.x;            // keys per tile
const uint NDC = (HD + VEC - 1u) / VEC;        // column chunks of VEC per row
const uint KG = NT / NDC;                      // key groups (the host keeps NDC <= NT)
const uint HD4 = (HD + 3u) / 4u;               // a query row in vec4s

TENSOR(1, writeonly, y)
TENSOR(2, readonly, q)
TENSOR(3, readonly, k)
TENSOR(4, readonly, v)
TENSOR(5, readonly, mask_t)
TENSOR_F32(5, readonly, mask_f)
layout(std430, set = 0, binding = 3) readonly buffer K4 { uvec4 k4[]; };
layout(std430, set = 0, binding = 4) readonly buffer V4 { uvec4 v4[]; };
layout(std430, set = 0, binding = 6) writeonly buffer Scratch { float part[]; };

shared vec4 Qs[MR * HD4];  // read 16 bytes at a time, the same address for every invocation
shared float Ps[MR * NT];
shared float red_max[MR * NT];  // one slot per subgroup and row
shared float red_sum[MR * NT];
shared float red_o[NT * VEC];

// P.u: Lq, Lk, G (query heads per KV head), rows (G * Lq).
// P.u2: causal, has mask, mask is f32, splits. P.u3.x: keys per split. P.f.x: scale.
void main() {
  const uint Lq = P.u.x, G = P.u.z, rows = P.u.w;
  uint Lk = P.u.y;
  if (has_runtime_scalar()) {
    int n = runtime_scalar();
    if (n < 0 || n > int(Lk)) {
      if (gl_LocalInvocationID.x == 0u && gl_WorkGroupID == uvec3(0u)) report_bad_value(n);
      n = clamp(n, 0, int(Lk));
    }
    Lk = uint(n);
  }
  const bool causal = P.u2.x != 0u, has_mask = P.u2.y != 0u, mask_f32 = P.u2.z != 0u;
  const uint splits = P.u2.w, chunk = P.u3.x;
  const uint t = gl_LocalInvocationID.x;
  const uint r0 = gl_WorkGroupID.x * MR;
  const uint bh = gl_WorkGroupID.y, split = gl_WorkGroupID.z;
  const uint Hkv = P.td[2].shape.y;
  const uint b = bh / Hkv, hkv = bh % Hkv;
  const uvec4 qs = P.td[1].stride, ks = P.td[2].stride, vs = P.td[3].stride, ms = P.td[4].stride;
  const uint kb = P.td[2].offset + b * ks.x + hkv * ks.y;
  const uint vb = P.td[3].offset + b * vs.x + hkv * vs.y;

  for (uint e = t; e < MR * HD4; e += NT) {
    const uint r = e / HD4, row = r0 + r;
    vec4 val = vec4(0.0);
    if (row < rows) {
      const uint hq = hkv * G + row / Lq, i = row % Lq;
      const uint qo = P.td[1].offset + b * qs.x + hq * qs.y + i * qs.z;
      [[unroll]] for (uint c = 0u; c < 4u; ++c) {
        const uint d = (e % HD4) * 4u + c;
        if (d < HD) val[c] = LOADF(q[qo + d * qs.w]);
      }
    }
    Qs[e] = val;
  }

  // The keys this workgroup sees: its split's, up to the last one its last row may see.
  const uint kbeg = split * chunk;
  uint kend = min(Lk, kbeg + chunk);
  if (causal) {
    const uint last = min(r0 + MR, rows) - 1u;
    const uint imax = (r0 / Lq == last / Lq) ? last % Lq : Lq - 1u;
    kend = min(kend, uint(max(int(imax) + int(Lk) - int(Lq) + 1, 0)));
  }
  // Each row's query position, and the last key it sees (-1: none).
  int vis[MR];
  uint qh[MR], qi[MR];
  [[unroll]] for (uint r = 0u; r < MR; ++r) {
    const uint row = min(r0 + r, rows - 1u);
    qh[r] = hkv * G + row / Lq;
    qi[r] = row % Lq;
    vis[r] = r0 + r >= rows ? -1 : causal ? int(qi[r]) + int(Lk) - int(Lq) : int(Lk) - 1;
  }
  float m[MR], l[MR], o[MR * VEC];
  [[unroll]] for (uint r = 0u; r < MR; ++r) {
    m[r] = NEG_INF;
    l[r] = 0.0;
  }
  [[unroll]] for (uint e = 0u; e < MR * VEC; ++e) o[e] = 0.0;
  const uint dc = t % NDC, grp = t / NDC;  // this invocation's column chunk and key group
  const uint sg = gl_SubgroupID, nsg = gl_NumSubgroups;
  barrier();

  for (uint k0 = kbeg; k0 < kend; k0 += NT) {
    // Scores of key k0 + t.
    const uint j = k0 + t;
    float s[MR];
    [[unroll]] for (uint r = 0u; r < MR; ++r) s[r] = 0.0;
    if (j < kend) {
      if (KVEC != 0u) {
        const uint base = (kb + j * ks.z) / VEC;
        [[unroll]] for (uint c = 0u; c < HD / VEC; ++c) {
          float kv[VEC];
          unpack_vec(k4[base + c], kv);
          [[unroll]] for (uint r = 0u; r < MR; ++r)
            [[unroll]] for (uint e4 = 0u; e4 < VEC / 4u; ++e4) {
              const vec4 qv = Qs[r * HD4 + (c * VEC) / 4u + e4];
              [[unroll]] for (uint e = 0u; e < 4u; ++e)
                s[r] = fma(qv[e], kv[e4 * 4u + e], s[r]);
            }
        }
      } else {
        [[dont_unroll]] for (uint d = 0u; d < HD; ++d) {
          const float kv = LOADF(k[kb + j * ks.z + d * ks.w]);
          [[unroll]] for (uint r = 0u; r < MR; ++r) s[r] = fma(Qs[r * HD4 + d / 4u][d % 4u], kv, s[r]);
        }
      }
    }
    [[unroll]] for (uint r = 0u; r < MR; ++r) {
      if (j < kend && int(j) <= vis[r]) {
        s[r] *= P.f.x;
        if (has_mask) {
          const uint mo = P.td[4].offset + b * ms.x + qh[r] * ms.y + qi[r] * ms.z + j * ms.w;
          s[r] += mask_f32 ? mask_f[mo] : LOADF(mask_t[mo]);
        }
      } else {
        s[r] = NEG_INF;
      }
      const float mx = subgroupMax(s[r]);
      if (gl_SubgroupInvocationID == 0u) red_max[sg * MR + r] = mx;
    }
    barrier();
    float alpha[MR];
    [[unroll]] for (uint r = 0u; r < MR; ++r) {
      float mx = m[r];
      for (uint i = 0u; i < nsg; ++i) mx = max(mx, red_max[i * MR + r]);
      float p = 0.0;
      alpha[r] = 1.0;
      if (mx != NEG_INF) {
        alpha[r] = m[r] == NEG_INF ? 0.0 : exp(m[r] - mx);
        p = s[r] == NEG_INF ? 0.0 : exp(s[r] - mx);
      }
      m[r] = mx;
      Ps[r * NT + t] = p;
      const float sum = subgroupAdd(p);
      if (gl_SubgroupInvocationID == 0u) red_sum[sg * MR + r] = sum;
    }
    barrier();
    [[unroll]] for (uint r = 0u; r < MR; ++r) {
      float sum = 0.0;
      for (uint i = 0u; i < nsg; ++i) sum += red_sum[i * MR + r];
      l[r] = l[r] * alpha[r] + sum;
      [[unroll]] for (uint e = 0u; e < VEC; ++e) o[r * VEC + e] *= alpha[r];
    }
    // Values: key group grp takes keys grp, grp + KG, ... of the tile.
    const uint nk = min(NT, kend - k0);
    if (grp < KG) {
      for (uint jj = grp; jj < nk; jj += KG) {
        float vv[VEC];
        if (VVEC != 0u) {
          unpack_vec(v4[(vb + (k0 + jj) * vs.z) / VEC + dc], vv);
        } else {
          [[unroll]] for (uint e = 0u; e < VEC; ++e) {
            const uint d = dc * VEC + e;
            vv[e] = d < HD ? LOADF(v[vb + (k0 + jj) * vs.z + d * vs.w]) : 0.0;
          }
        }
        [[unroll]] for (uint r = 0u; r < MR; ++r) {
          const float p = Ps[r * NT + jj];
          [[unroll]] for (uint e = 0u; e < VEC; ++e) o[r * VEC + e] = fma(p, vv[e], o[r * VEC + e]);
        }
      }
    }
    barrier();
  }

  // The key groups' sums, row by row; then the output (or this split's partial result).
  [[unroll]] for (uint r = 0u; r < MR; ++r) {
    const uint row = r0 + r;
    if (row >= rows) break;  // uniform in the workgroup
    if (grp < KG)
      [[unroll]] for (uint e = 0u; e < VEC; ++e) red_o[t * VEC + e] = o[r * VEC + e];
    barrier();
    if (t < NDC) {
      [[unroll]] for (uint e = 0u; e < VEC; ++e) {
        const uint d = t * VEC + e;
        if (d >= HD) break;
        float acc = 0.0;
        for (uint g = 0u; g < KG; ++g) acc += red_o[(g * NDC + t) * VEC + e];
        if (splits == 1u) {
          y[P.td[0].offset + (bh * rows + row) * HD + d] = STOREF(l[r] > 0.0 ? acc / l[r] : 0.0);
        } else {
          const uint base = ((bh * splits + split) * rows + row) * (HD + 2u);
          part[base + d] = acc;
          if (d == 0u) {
            part[base + HD] = m[r];
            part[base + HD + 1u] = l[r];
          }
        }
      }
    }
    barrier();
  }
}
