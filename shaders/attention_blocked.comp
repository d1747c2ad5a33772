// Attention without shared memory (tier "register_blocked"), for devices where a workgroup is one CPU
// core running its invocations as SIMD lanes (lavapipe). Each invocation keeps R query rows (of
// the query heads sharing one KV head) and their outputs in registers, and streams its own keys:
// the workgroup's LR x LK invocations split the rows LR ways and the keys LK ways (key j goes to
// lane j mod LK), and the dispatch splits the keys `splits` ways more (z). Per key an invocation
// fetches K and V once (texel buffers: texel.glsl) for R * D multiply-adds each, and keeps an
// online softmax per row in f32, rescaled once per T keys.
//
// Every read is a texel fetch and the results are written as vectors: on lavapipe each scalar
// storage-buffer access becomes a loop over the lanes, and a few hundred of them unrolled make
// LLVM's compile time explode (measured: 30 s for one pipeline).
//
// With LK * splits == 1 the invocation writes the output; otherwise it writes its unnormalised
// partial result (sum, max, denominator) per row, and attention_combine.comp merges them.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "scalar.glsl"
#include "texel.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint R = 8;     // rows per invocation
layout(constant_id = 2) const uint LR = 1;    // invocations along rows
layout(constant_id = 3) const uint HD = 64;   // head dim
layout(constant_id = 4) const uint QVEC = 0;  // Q read VEC elements per fetch (else one)
layout(constant_id = 5) const uint KVEC = 0;  // the same for K
layout(constant_id = 6) const uint VVEC = 0;  // and V
layout(constant_id = 7) const uint MASK = 0;  // 0: none, 1: f32 mask, 2: mask of the storage type
layout(constant_id = 8) const uint OVEC = 0;  // output written VEC elements at a time (else one)
const uint LK = gl_WorkGroupSize.x / LR;      // invocations along keys
const uint T = 4u;                            // keys per softmax rescale
const uint HDV = (HD + VEC - 1u) / VEC;
const uint HD4 = (HD + 3u) / 4u;
const float LOG2E = 1.4426950408889634;

TENSOR(1, writeonly, y)
#if defined(T_f32)
layout(std430, set = 0, binding = 1) writeonly buffer Y4 { vec4 y4[]; };
#else
layout(std430, set = 0, binding = 1) writeonly buffer Y4 { uvec4 y4[]; };
#endif
layout(std430, set = 0, binding = 6) writeonly buffer Scratch { vec4 part4[]; };
TEXELS(7, tk)
TEXELS(8, tv)
TEXELS(9, tq)
TEXELS(10, tm)

// HD elements of one row from texel binding `tex`, starting at element `e` with stride `ds`.
#define FETCH_ROW(tex, vec_mode, e, ds, out_)                                   \
  if (vec_mode != 0u) {                                                         \
    [[unroll]] for (uint w = 0u; w < HDV; ++w) {                                \
      float t_[VEC];                                                            \
      FETCH_VEC(tex, (e) + w * VEC, t_);                                        \
      [[unroll]] for (uint c = 0u; c < VEC; ++c)                                \
        if (w * VEC + c < HD) out_[w * VEC + c] = t_[c];                        \
    }                                                                           \
  } else {                                                                      \
    [[unroll]] for (uint d = 0u; d < HD; ++d) out_[d] = FETCH_ONE(tex, (e) + d * (ds)); \
  }

// Two values as they are stored, packed into one word (16-bit types).
#if defined(T_f16)
uint pack2(float a, float b) {
  return f32_to_f16(a) | (f32_to_f16(b) << 16);
}
#elif defined(T_bf16)
uint pack2(float a, float b) {
  return f32_to_bf16(a) | (f32_to_bf16(b) << 16);
}
#endif

// P.u: Lq, Lk, G (query heads per KV head), rows (G * Lq). P.u2: causal, -, -, partials per row
// (LK * splits). P.u3.x: keys per split, P.u3.z: floats per partial (4 * (HD4 + 1)). P.f.x: scale.
// td[0] output, td[1] q, td[2] k, td[3] v, td[4] mask (offsets of q, k, v and the mask count
// from their texel views).
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
  const bool causal = P.u2.x != 0u;
  const uint parts = P.u2.w, chunk = P.u3.x, PS = P.u3.z;
  const uint t = gl_LocalInvocationID.x;
  const uint lr = t % LR, lk = t / LR;
  const uint bh = gl_WorkGroupID.y;
  const uint split = gl_WorkGroupID.z;
  const uint Hkv = P.td[2].shape.y;
  const uint b = bh / Hkv, hkv = bh % Hkv;
  const uvec4 qs = P.td[1].stride, ks = P.td[2].stride, vs = P.td[3].stride, ms = P.td[4].stride;
  const uint r0 = gl_WorkGroupID.x * (LR * R) + lr * R;
  // Softmax in base 2: scores carry log2(e), so exp2 replaces exp.
  const float scale2 = P.f.x * LOG2E;

  // This invocation's rows (past the end: the last row, not stored) and their queries, scaled.
  uint hq[R], qi[R];
  float qr[R][HD];
  [[unroll]] for (uint p = 0u; p < R; ++p) {
    uint row = min(r0 + p, rows - 1u);
    hq[p] = hkv * G + row / Lq;
    qi[p] = row % Lq;
    FETCH_ROW(tq, QVEC, P.td[1].offset + b * qs.x + hq[p] * qs.y + qi[p] * qs.z, qs.w, qr[p])
    [[unroll]] for (uint d = 0u; d < HD; ++d) qr[p][d] *= scale2;
  }

  // This split's keys, and (causal) none past the last one any row of the workgroup sees: the
  // same bounds in every invocation.
  uint kbeg = split * chunk;
  uint kend = min(Lk, kbeg + chunk);
  if (causal) {
    uint w0 = gl_WorkGroupID.x * (LR * R);
    uint last = min(w0 + LR * R, rows) - 1u;
    uint first = min(w0, rows - 1u);
    uint imax = (first / Lq == last / Lq) ? last % Lq : Lq - 1u;
    int lim = int(imax) + int(Lk) - int(Lq) + 1;
    kend = min(kend, uint(max(lim, 0)));
  }
  const uint k_base = P.td[2].offset + b * ks.x + hkv * ks.y;
  const uint v_base = P.td[3].offset + b * vs.x + hkv * vs.y;

  float o[R][HD], m[R], l[R];
  [[unroll]] for (uint p = 0u; p < R; ++p) {
    m[p] = NEG_INF;
    l[p] = 0.0;
    [[unroll]] for (uint d = 0u; d < HD; ++d) o[p][d] = 0.0;
  }

  // Keys kbeg + lk, kbeg + lk + LK, ...: T per step.
  const uint per_lane = kend > kbeg ? (kend - kbeg + LK - 1u) / LK : 0u;
  for (uint j0 = 0u; j0 < per_lane; j0 += T) {
    float s[T][R];
    uint jj[T];
    [[unroll]] for (uint u = 0u; u < T; ++u) {
      uint j = kbeg + lk + (j0 + u) * LK;
      jj[u] = min(j, kend - 1u);
      float kr[HD];
      FETCH_ROW(tk, KVEC, k_base + jj[u] * ks.z, ks.w, kr)
      [[unroll]] for (uint p = 0u; p < R; ++p) {
        float acc = 0.0;
        [[unroll]] for (uint d = 0u; d < HD; ++d) acc = fma(qr[p][d], kr[d], acc);
        if (MASK != 0u) {
          uint mo = P.td[4].offset + b * ms.x + hq[p] * ms.y + qi[p] * ms.z + jj[u] * ms.w;
          uint mw = texelFetch(tm, int(mo)).x;
          acc += (MASK == 1u ? uintBitsToFloat(mw) : unpack_one(mw)) * LOG2E;
        }
        bool visible = j < kend && (!causal || int(j) <= int(qi[p]) + int(Lk) - int(Lq));
        s[u][p] = visible ? acc : NEG_INF;
      }
    }
    // Online softmax per row: the outputs are rescaled once per T keys, as the T values are
    // added (each output read and written once per step).
    float alpha[R];
    [[unroll]] for (uint p = 0u; p < R; ++p) {
      float mx = m[p];
      [[unroll]] for (uint u = 0u; u < T; ++u) mx = max(mx, s[u][p]);
      alpha[p] = mx == NEG_INF ? 1.0 : (m[p] == NEG_INF ? 0.0 : exp2(m[p] - mx));
      float sum = 0.0;
      [[unroll]] for (uint u = 0u; u < T; ++u) {
        float e = mx == NEG_INF ? 0.0 : exp2(s[u][p] - mx);
        s[u][p] = e;
        sum += e;
      }
      m[p] = mx;
      l[p] = l[p] * alpha[p] + sum;
    }
    float vr[T][HD];
    [[unroll]] for (uint u = 0u; u < T; ++u) FETCH_ROW(tv, VVEC, v_base + jj[u] * vs.z, vs.w, vr[u])
    [[unroll]] for (uint p = 0u; p < R; ++p)
      [[unroll]] for (uint d = 0u; d < HD; ++d) {
        float acc = o[p][d] * alpha[p];
        [[unroll]] for (uint u = 0u; u < T; ++u) acc = fma(s[u][p], vr[u][d], acc);
        o[p][d] = acc;
      }
  }

  [[unroll]] for (uint p = 0u; p < R; ++p) {
    uint row = r0 + p;
    if (row >= rows) continue;
    if (parts == 1u) {
      float inv = l[p] > 0.0 ? 1.0 / l[p] : 0.0;
      uint yo = P.td[0].offset + (bh * rows + row) * HD;
      if (OVEC != 0u) {
        [[unroll]] for (uint w = 0u; w < HDV; ++w) {
          uint d = w * VEC;
#if defined(T_f32)
          y4[yo / 4u + w] = vec4(o[p][d], o[p][d + 1u], o[p][d + 2u], o[p][d + 3u]) * inv;
#else
          y4[yo / 8u + w] = uvec4(pack2(o[p][d] * inv, o[p][d + 1u] * inv),
                                  pack2(o[p][d + 2u] * inv, o[p][d + 3u] * inv),
                                  pack2(o[p][d + 4u] * inv, o[p][d + 5u] * inv),
                                  pack2(o[p][d + 6u] * inv, o[p][d + 7u] * inv));
#endif
        }
      } else {
        [[unroll]] for (uint d = 0u; d < HD; ++d) y[yo + d] = STOREF(o[p][d] * inv);
      }
    } else {
      // Partials of PS = 4 * (HD4 + 1) floats: the sum (padded to a multiple of 4), then the max
      // (natural log) and the denominator.
      uint base = ((bh * parts + split * LK + lk) * rows + row) * PS / 4u;
      [[unroll]] for (uint w = 0u; w < HD4; ++w) {
        uint d = w * 4u;
        part4[base + w] = vec4(o[p][min(d, HD - 1u)], o[p][min(d + 1u, HD - 1u)],
                               o[p][min(d + 2u, HD - 1u)], o[p][min(d + 3u, HD - 1u)]);
      }
      part4[base + HD4] = vec4(m[p] == NEG_INF ? NEG_INF : m[p] * 0.6931471805599453, l[p], 0.0, 0.0);
    }
  }
}
