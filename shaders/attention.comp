// Flash-style attention: a workgroup takes BR query rows of one KV head (the rows of all query
// heads that share it, so GQA reads each K/V tile once for the whole group), streams BC-key tiles
// of K and V through shared memory, and keeps an online softmax (running max and sum in f32) with
// the output accumulators in registers. Causal masking is aligned to the end of the keys and
// skips tiles past the last visible key. With several splits (decoding: few rows, many keys) each
// workgroup z takes one chunk of keys and writes unnormalised partial results that
// attention_combine.comp merges.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "scalar.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BR = 16;
layout(constant_id = 2) const uint BC = 32;
layout(constant_id = 3) const uint HD = 64;
const uint OPT = (BR * HD + gl_WorkGroupSize.x - 1u) / gl_WorkGroupSize.x;
// K rows padded by one float: the invocations scoring neighbouring keys read one bank each
// instead of all the same bank (a row of HD floats is a multiple of the 32 banks).
const uint KS = HD + 1u;

TENSOR(1, writeonly, y)
TENSOR(2, readonly, q)
TENSOR(3, readonly, k)
TENSOR(4, readonly, v)
TENSOR(5, readonly, mask_t)
TENSOR_F32(5, readonly, mask_f)
layout(std430, set = 0, binding = 6) writeonly buffer Scratch { float part[]; };

shared float Qs[BR * HD];
shared float Ks[BC * KS];
shared float Vs[BC * HD];
shared float Ss[BR * BC];
shared float m_s[BR];
shared float l_s[BR];
shared float alpha_s[BR];

// P.u: Lq, Lk, G (query heads per KV head), rows (G * Lq).
// P.u2: causal, has mask, mask is f32, splits. P.u3.x: keys per split. P.f.x: scale.
void main() {
  const uint Lq = P.u.x, G = P.u.z, rows = P.u.w;
  // The valid keys: the run-time key count (a cache holding fewer than its capacity), or all.
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
  const uint NT = gl_WorkGroupSize.x;
  const uint t = gl_LocalInvocationID.x;
  const uint r0 = gl_WorkGroupID.x * BR;
  const uint bh = gl_WorkGroupID.y;
  const uint split = gl_WorkGroupID.z;
  const uint Hkv = P.td[2].shape.y;
  const uint b = bh / Hkv, hkv = bh % Hkv;
  const uvec4 qs = P.td[1].stride, ks = P.td[2].stride, vs = P.td[3].stride, ms = P.td[4].stride;

  for (uint e = t; e < BR * HD; e += NT) {
    uint r = e / HD, d = e % HD, row = r0 + r;
    float val = 0.0;
    if (row < rows) {
      uint hq = hkv * G + row / Lq, i = row % Lq;
      val = LOADF(q[P.td[1].offset + b * qs.x + hq * qs.y + i * qs.z + d * qs.w]);
    }
    Qs[e] = val;
  }
  if (t < BR) {
    m_s[t] = NEG_INF;
    l_s[t] = 0.0;
  }
  float o[OPT];
  [[unroll]] for (uint j = 0u; j < OPT; ++j) o[j] = 0.0;

  uint kbeg = split * chunk;
  uint kend = min(Lk, kbeg + chunk);
  if (causal) {
    uint last = min(r0 + BR, rows) - 1u;
    uint imax = (r0 / Lq == last / Lq) ? last % Lq : Lq - 1u;
    int lim = int(imax) + int(Lk) - int(Lq) + 1;
    kend = min(kend, uint(max(lim, 0)));
  }
  barrier();

  for (uint k0 = kbeg; k0 < kend; k0 += BC) {
    for (uint e = t; e < BC * HD; e += NT) {
      uint c = e / HD, d = e % HD, j = k0 + c;
      bool in_range = j < kend;
      Ks[c * KS + d] = in_range ? LOADF(k[P.td[2].offset + b * ks.x + hkv * ks.y + j * ks.z + d * ks.w]) : 0.0;
      Vs[e] = in_range ? LOADF(v[P.td[3].offset + b * vs.x + hkv * vs.y + j * vs.z + d * vs.w]) : 0.0;
    }
    barrier();
    for (uint e = t; e < BR * BC; e += NT) {
      uint r = e / BC, c = e % BC, row = r0 + r, j = k0 + c;
      float s = NEG_INF;
      if (row < rows && j < kend) {
        uint hq = hkv * G + row / Lq, i = row % Lq;
        if (!causal || int(j) <= int(i) + int(Lk) - int(Lq)) {
          float acc = 0.0;
          [[unroll]] for (uint d = 0u; d < HD; ++d) acc = fma(Qs[r * HD + d], Ks[c * KS + d], acc);
          s = acc * P.f.x;
          if (has_mask) {
            uint mo = P.td[4].offset + b * ms.x + hq * ms.y + i * ms.z + j * ms.w;
            s += mask_f32 ? mask_f[mo] : LOADF(mask_t[mo]);
          }
        }
      }
      Ss[e] = s;
    }
    barrier();
    if (t < BR) {
      float mold = m_s[t], mx = mold;
      for (uint c = 0u; c < BC; ++c) mx = max(mx, Ss[t * BC + c]);
      float alpha = 1.0, sum = 0.0;
      if (mx != NEG_INF) {
        alpha = mold == NEG_INF ? 0.0 : exp(mold - mx);
        for (uint c = 0u; c < BC; ++c) {
          float p = exp(Ss[t * BC + c] - mx);
          Ss[t * BC + c] = p;
          sum += p;
        }
      } else {
        for (uint c = 0u; c < BC; ++c) Ss[t * BC + c] = 0.0;
      }
      m_s[t] = mx;
      l_s[t] = l_s[t] * alpha + sum;
      alpha_s[t] = alpha;
    }
    barrier();
    [[unroll]] for (uint jo = 0u; jo < OPT; ++jo) {
      uint e = t + jo * NT;
      if (e < BR * HD) {
        uint r = e / HD, d = e % HD;
        float acc = o[jo] * alpha_s[r];
        for (uint c = 0u; c < BC; ++c) acc = fma(Ss[r * BC + c], Vs[c * HD + d], acc);
        o[jo] = acc;
      }
    }
    barrier();
  }

  [[unroll]] for (uint jo = 0u; jo < OPT; ++jo) {
    uint e = t + jo * NT;
    uint r = e / HD, d = e % HD, row = r0 + r;
    if (e >= BR * HD || row >= rows) continue;
    if (splits == 1u) {
      float l = l_s[r];
      y[P.td[0].offset + (bh * rows + row) * HD + d] = STOREF(l > 0.0 ? o[jo] / l : 0.0);
    } else {
      uint base = ((bh * splits + split) * rows + row) * (HD + 2u);
      part[base + d] = o[jo];
      if (d == 0u) {
        part[base + HD] = m_s[r];
        part[base + HD + 1u] = l_s[r];
      }
    }
  }
}
