// The generic tier's attention: SIMT, fp32 compute, any storage dtype (f32, f16, bf16, mixed:
// an f16 query against an f32 cache reads both as they are), strided views, any architecture.
// Two kernels, both FlashAttention-style (online softmax over key tiles, nothing of size Lk
// kept), rows packed as the tensor-core kernels pack them (the query heads of a GQA group times
// the queries, so a group's keys are read once for all its heads):
//   - gen_flash_kernel<DM, BM, BN>: prefill. A block of 128 threads owns BM rows of one (batch,
//     kv head); Q, K and V tiles in shared memory (fp32); thread (rg, cg) = (tid / 8, tid % 8)
//     computes S for rows rg*RT.. and keys cg, cg+8, ... (consecutive rows of K land on
//     consecutive 16-byte bank groups: no conflicts), the softmax reduces over the 8 threads of a
//     row group by shuffles, P goes through shared memory (over the dead K tile), and O for dims
//     4cg + 32i.. accumulates in registers. Head dims up to DM (zero-padded).
//   - gen_decode_kernel<DM, G>: few rows (decode, chunked decode). A block owns G rows of one
//     (batch, kv head) and one split of the keys; each warp takes chunks of 32 keys, a key per
//     lane for S (the queries broadcast from shared memory), then all lanes over the head dim
//     for O += P V (V rows read whole by the warp), online softmax per warp; the 4 warps merge at
//     the end. Splits write normalised partials for attention_combine.
// Both take exp2 of scores pre-scaled by log2(e).
#pragma once

#include "device/elem.h"
#include "device/params.h"
#include "device/prim.h"

DUET_DEV_BEGIN

inline constexpr float kLog2eGen = 1.4426950408889634f;
inline constexpr float kSimtInf = __builtin_huge_valf();

// The run-time key count (a bad one is reported, as generic.h's row kernel does).
DUET_DEV int simt_valid_keys(const int* kv_len, int Lk, unsigned long long* error) {
  if (!kv_len) return Lk;
  const int n = *kv_len;
  if (n >= 0 && n <= Lk) return n;
  if (tid() == 0) atomic_min_u64(error, uint32_t(n));
  return n < 0 ? 0 : Lk;
}

DUET_HD int max_i(int a, int b) {
  return a > b ? a : b;
}
DUET_HD int min_i(int a, int b) {
  return a < b ? a : b;
}

struct F4 {
  float x[4];
};

DUET_DEV F4 ld4s(const float* p) {  // 16-byte aligned shared memory
  const Vec16 v = load16(p);
  return F4{{ffrom(v.w[0]), ffrom(v.w[1]), ffrom(v.w[2]), ffrom(v.w[3])}};
}
DUET_DEV void st4s(float* p, const F4& f) {
  store16(p, Vec16{{fbits(f.x[0]), fbits(f.x[1]), fbits(f.x[2]), fbits(f.x[3])}});
}

// Four consecutive elements d..d+3 (last dim) of a strided view at `base`, as fp32; elements at
// or past `n` are 0. Dense rows take one vector load (16 bytes of f32, 8 of f16/bf16).
DUET_DEV F4 load4(const Strided& s, int64_t base, int d, int n) {
  F4 r = {{0.f, 0.f, 0.f, 0.f}};
  const int64_t i = base + int64_t(d) * s.stride[3];
  if (d + 4 <= n && s.stride[3] == 1 && i % 4 == 0) {
    if (s.dtype == Elt::f32) return ld4s(static_cast<const float*>(s.data) + i);
    if (s.dtype == Elt::f16 || s.dtype == Elt::bf16) {
      const auto* h = static_cast<const uint16_t*>(s.data) + i;
      const uint32_t a = load_u32(h), b = load_u32(h + 2);
      const uint16_t e[4] = {uint16_t(a), uint16_t(a >> 16), uint16_t(b), uint16_t(b >> 16)};
      DUET_UNROLL
      for (int k = 0; k < 4; ++k) r.x[k] = s.dtype == Elt::f16 ? h2f(e[k]) : b2f(e[k]);
      return r;
    }
  }
  DUET_UNROLL
  for (int k = 0; k < 4; ++k)
    if (d + k < n) r.x[k] = load_f32(s.data, s.dtype, i + k * s.stride[3]);
  return r;
}

// The rows a block's packed row r stands for: query head and position.
struct PackedRow {
  int head, pos;
};
DUET_DEV PackedRow packed_row(const GenAttnParams& p, int hkv, int r) {
  const int group = p.Hq / p.Hkv;
  const int rr = r < group * p.Lq ? r : 0;
  return {hkv * group + rr / p.Lq, rr % p.Lq};
}

template <int DM, int BM, int BN>
DUET_KERNEL_BOUNDED_MIN(128, 4)
gen_flash_kernel(const GenAttnParams p) {
  grid_dependency_sync();
  constexpr int RT = BM / 16;  // rows per thread
  constexpr int KT = BN / 8;   // keys per thread (cg, cg + 8, ...)
  constexpr int DT = DM / 8;   // O dims per thread (4cg + 32i + e)
  constexpr int QP = DM;       // Q pitch: rows are read broadcast
  constexpr int KP = DM + 4;   // K and V pitch: a row is 16 bytes past a bank group
  constexpr int PP = BM + 4;   // P pitch
  static_assert(DT % 4 == 0 && RT >= 1 && KT >= 1, "tile geometry");
  float* const qs = reinterpret_cast<float*>(smem());
  float* const ks = qs + BM * QP;
  float* const vs = ks + BN * KP;
  float* const ps = ks;  // P over the K tile, once S is done
  static_assert(BN * PP <= BN * KP, "P fits in the K tile");

  const int t = tid(), rg = t / 8, cg = t % 8;
  const int group = p.Hq / p.Hkv, rows = group * p.Lq;
  const int hkv = bid_y(), b = bid_z(), r0 = bid_x() * BM;
  const int D = p.D;
  const int Lk = simt_valid_keys(p.kv_len, p.Lk, p.error);
  const int off = Lk - p.Lq;

  // Q tile; the block's largest position bounds the causal key range.
  DUET_NO_UNROLL
  for (int e = t; e < BM * (DM / 4); e += 128) {
    const int row = e / (DM / 4), d = (e % (DM / 4)) * 4, r = r0 + row;
    F4 v = {{0.f, 0.f, 0.f, 0.f}};
    if (r < rows) {
      const PackedRow pr = packed_row(p, hkv, r);
      v = load4(p.q, b * p.q.stride[0] + pr.head * p.q.stride[1] + pr.pos * p.q.stride[2], d, D);
    }
    st4s(qs + row * QP + d, v);
  }
  int i_max = 0;
  for (int r = r0; r < r0 + BM && r < rows; ++r) i_max = max_i(i_max, packed_row(p, hkv, r).pos);
  const int kv_end = p.causal ? min_i(Lk, i_max + off + 1) : Lk;

  float o[RT][DT], m[RT], l[RT];
  DUET_UNROLL
  for (int r = 0; r < RT; ++r) {
    m[r] = -kSimtInf;
    l[r] = 0.f;
    DUET_UNROLL
    for (int d = 0; d < DT; ++d) o[r][d] = 0.f;
  }
  const float scale = p.scale * kLog2eGen;
  const int64_t kb = b * p.k.stride[0] + hkv * p.k.stride[1];
  const int64_t vb = b * p.v.stride[0] + hkv * p.v.stride[1];

  for (int j0 = 0; j0 < kv_end; j0 += BN) {
    sync();  // the previous tile's P and V are no longer read
    DUET_NO_UNROLL
    for (int e = t; e < BN * (DM / 4); e += 128) {
      const int key = e / (DM / 4), d = (e % (DM / 4)) * 4, j = j0 + key;
      const bool in = j < kv_end;
      st4s(ks + key * KP + d, in ? load4(p.k, kb + j * p.k.stride[2], d, D) : F4{});
      st4s(vs + key * KP + d, in ? load4(p.v, vb + j * p.v.stride[2], d, D) : F4{});
    }
    sync();

    // S = Q K^T for rows rg*RT + r, keys cg + 8c.
    float s[RT][KT];
    DUET_UNROLL
    for (int r = 0; r < RT; ++r) DUET_UNROLL
    for (int c = 0; c < KT; ++c) s[r][c] = 0.f;
    DUET_UNROLL
    for (int k = 0; k < DM; k += 4) {
      F4 q[RT], kv[KT];
      DUET_UNROLL
      for (int r = 0; r < RT; ++r) q[r] = ld4s(qs + (rg * RT + r) * QP + k);
      DUET_UNROLL
      for (int c = 0; c < KT; ++c) kv[c] = ld4s(ks + (cg + 8 * c) * KP + k);
      DUET_UNROLL
      for (int r = 0; r < RT; ++r) DUET_UNROLL
      for (int c = 0; c < KT; ++c) DUET_UNROLL
      for (int e = 0; e < 4; ++e) s[r][c] += q[r].x[e] * kv[c].x[e];
    }

    // Scale, mask, online softmax (the 8 threads of a row group hold the row's keys).
    DUET_UNROLL
    for (int r = 0; r < RT; ++r) {
      const int row = r0 + rg * RT + r;
      const PackedRow pr = packed_row(p, hkv, row);
      const int last = p.causal ? pr.pos + off : Lk - 1;
      const int64_t mrow =
          b * p.mask.stride[0] + pr.head * p.mask.stride[1] + pr.pos * p.mask.stride[2];
      float mx = -kSimtInf;
      DUET_UNROLL
      for (int c = 0; c < KT; ++c) {
        const int j = j0 + cg + 8 * c;
        float v = s[r][c] * scale;
        if (j >= kv_end || j > last) v = -kSimtInf;
        if (p.mask.data && v != -kSimtInf)
          v += load_f32(p.mask.data, p.mask.dtype, mrow + j * p.mask.stride[3]) * kLog2eGen;
        s[r][c] = v;
        mx = fmaxf(mx, v);
      }
      mx = fmaxf(mx, shfl_xor(mx, 1));
      mx = fmaxf(mx, shfl_xor(mx, 2));
      mx = fmaxf(mx, shfl_xor(mx, 4));
      const float m_new = fmaxf(m[r], mx);
      const float m_use = m_new == -kSimtInf ? 0.f : m_new;  // no key yet: stays at 0
      const float alpha = exp2_fast(m[r] - m_use);
      m[r] = m_new;
      float sum = 0.f;
      DUET_UNROLL
      for (int c = 0; c < KT; ++c) {
        s[r][c] = exp2_fast(s[r][c] - m_use);
        sum += s[r][c];
      }
      l[r] = l[r] * alpha + sum;  // this thread's part of the row; summed at the end
      DUET_UNROLL
      for (int d = 0; d < DT; ++d) o[r][d] *= alpha;
    }

    sync();  // every thread is done with the K tile: P goes over it
    DUET_UNROLL
    for (int c = 0; c < KT; ++c) {
      float* dst = ps + (cg + 8 * c) * PP + rg * RT;
      if constexpr (RT == 4) {
        st4s(dst, F4{{s[0][c], s[1][c], s[2][c], s[3][c]}});
      } else {
        DUET_UNROLL
        for (int r = 0; r < RT; ++r) store_u32(dst + r, fbits(s[r][c]));
      }
    }
    sync();

    // O += P V for dims 4cg + 32i + e.
    const int n = kv_end - j0 < BN ? kv_end - j0 : BN;
    DUET_NO_UNROLL
    for (int jj = 0; jj < n; ++jj) {
      float pr[RT];
      if constexpr (RT == 4) {
        const F4 f = ld4s(ps + jj * PP + rg * RT);
        DUET_UNROLL
        for (int r = 0; r < 4; ++r) pr[r] = f.x[r];
      } else {
        DUET_UNROLL
        for (int r = 0; r < RT; ++r) pr[r] = ffrom(load_u32(ps + jj * PP + rg * RT + r));
      }
      DUET_UNROLL
      for (int i = 0; i < DT / 4; ++i) {
        const F4 v = ld4s(vs + jj * KP + 4 * cg + 32 * i);
        DUET_UNROLL
        for (int r = 0; r < RT; ++r) DUET_UNROLL
        for (int e = 0; e < 4; ++e) o[r][4 * i + e] += pr[r] * v.x[e];
      }
    }
  }

  // Normalise and write: O[row][4cg + 32i + e].
  DUET_UNROLL
  for (int r = 0; r < RT; ++r) {
    float lt = l[r];
    lt += shfl_xor(lt, 1);
    lt += shfl_xor(lt, 2);
    lt += shfl_xor(lt, 4);
    const int row = r0 + rg * RT + r;
    if (row >= rows) continue;
    const PackedRow pr = packed_row(p, hkv, row);
    const float inv = lt > 0.f ? 1.f / lt : 0.f;  // no visible key: output 0
    const int64_t ob = ((int64_t(b) * p.Hq + pr.head) * p.Lq + pr.pos) * D;
    DUET_UNROLL
    for (int i = 0; i < DT / 4; ++i) DUET_UNROLL
    for (int e = 0; e < 4; ++e) {
      const int d = 4 * cg + 32 * i + e;
      if (d < D) store_f32(p.out, p.out_dtype, ob + d, o[r][4 * i + e] * inv);
    }
  }
}

// ---- decode: G rows (1, 4 or 8) of one (batch, kv head), one split of the keys.
template <int DM, int G>
DUET_KERNEL_BOUNDED_MIN(128, 4)
gen_decode_kernel(const GenAttnParams p) {
  grid_dependency_sync();
  constexpr int DL = DM / 32;                          // O dims per lane: lane * DL + e
  constexpr int GP = G < 4 ? 4 : G;                    // P's row pitch (16-byte stores)
  float* const qs = reinterpret_cast<float*>(smem());  // [G][DM]
  float* const ps = qs + G * DM;                       // [warp][32 keys][GP]
  const int w = warp(), ln = lane();
  const int group = p.Hq / p.Hkv, rows = group * p.Lq;
  const int hkv = bid_y() % p.Hkv, split = bid_y() / p.Hkv, b = bid_z();
  const int r0 = bid_x() * G;
  const int nrows = rows - r0 < G ? rows - r0 : G;
  const int D = p.D;
  const int Lk = simt_valid_keys(p.kv_len, p.Lk, p.error);
  const int off = Lk - p.Lq;

  DUET_NO_UNROLL
  for (int e = tid(); e < G * (DM / 4); e += nthreads()) {
    const int g = e / (DM / 4), d = (e % (DM / 4)) * 4;
    F4 v = {{0.f, 0.f, 0.f, 0.f}};
    if (g < nrows) {
      const PackedRow pr = packed_row(p, hkv, r0 + g);
      v = load4(p.q, b * p.q.stride[0] + pr.head * p.q.stride[1] + pr.pos * p.q.stride[2], d, D);
    }
    st4s(qs + g * DM + d, v);
  }
  // The last key each row sees (-1: a padding row).
  auto last_key = [&](int g) {
    return g < nrows ? (p.causal ? packed_row(p, hkv, r0 + g).pos + off : Lk - 1) : -1;
  };
  int i_max = 0;
  for (int g = 0; g < nrows; ++g) i_max = max_i(i_max, packed_row(p, hkv, r0 + g).pos);
  const int kv_end = p.causal ? min_i(Lk, i_max + off + 1) : Lk;
  const int k_begin = split * p.keys_per_split;
  const int k_end = min_i(kv_end, k_begin + p.keys_per_split);
  sync();

  const float scale = p.scale * kLog2eGen;
  const int64_t kb = b * p.k.stride[0] + hkv * p.k.stride[1];
  const int64_t vb = b * p.v.stride[0] + hkv * p.v.stride[1];
  float o[G][DL], m[G], l[G];
  DUET_UNROLL
  for (int g = 0; g < G; ++g) {
    m[g] = -kSimtInf;
    l[g] = 0.f;
    DUET_UNROLL
    for (int d = 0; d < DL; ++d) o[g][d] = 0.f;
  }
  float* const pw = ps + w * 32 * GP;
  for (int c0 = k_begin + 32 * w; c0 < k_end; c0 += 32 * nwarps()) {
    // S for this lane's key, every row.
    const int j = c0 + ln;
    float s[G];
    DUET_UNROLL
    for (int g = 0; g < G; ++g) s[g] = 0.f;
    if (j < k_end) {
      const int64_t kr = kb + j * p.k.stride[2];
      DUET_NO_UNROLL
      for (int d = 0; d < D; d += 4) {
        const F4 kv = load4(p.k, kr, d, D);
        DUET_UNROLL
        for (int g = 0; g < G; ++g) {
          const F4 q = ld4s(qs + g * DM + d);
          s[g] += q.x[0] * kv.x[0] + q.x[1] * kv.x[1] + q.x[2] * kv.x[2] + q.x[3] * kv.x[3];
        }
      }
    }
    // Scale, mask, online softmax per row over the warp's 32 keys.
    float alpha[G];
    DUET_UNROLL
    for (int g = 0; g < G; ++g) {
      float v = s[g] * scale;
      if (j >= k_end || j > last_key(g)) v = -kSimtInf;
      if (p.mask.data && v != -kSimtInf) {
        const PackedRow pr = packed_row(p, hkv, r0 + g);
        const int64_t mrow =
            b * p.mask.stride[0] + pr.head * p.mask.stride[1] + pr.pos * p.mask.stride[2];
        v += load_f32(p.mask.data, p.mask.dtype, mrow + j * p.mask.stride[3]) * kLog2eGen;
      }
      const float m_new = fmaxf(m[g], warp_max(v));
      const float m_use = m_new == -kSimtInf ? 0.f : m_new;
      alpha[g] = exp2_fast(m[g] - m_use);
      m[g] = m_new;
      s[g] = exp2_fast(v - m_use);
      l[g] = l[g] * alpha[g] + s[g];  // this lane's share; summed at the end
    }
    sync_warp();  // the previous chunk's P has been read
    if constexpr (G == 1) {
      store_u32(pw + ln * GP, fbits(s[0]));
    } else {
      DUET_UNROLL
      for (int g = 0; g < G; g += 4)
        st4s(pw + ln * GP + g, F4{{s[g], s[g + 1], s[g + 2], s[g + 3]}});
    }
    sync_warp();
    // O += P V: every lane over its dims, the chunk's keys in turn.
    DUET_UNROLL
    for (int g = 0; g < G; ++g) DUET_UNROLL
    for (int d = 0; d < DL; ++d) o[g][d] *= alpha[g];
    const int n = k_end - c0 < 32 ? k_end - c0 : 32;
    DUET_NO_UNROLL
    for (int jj = 0; jj < n; ++jj) {
      float v[DL];
      const int64_t vr = vb + (c0 + jj) * p.v.stride[2];
      if constexpr (DL >= 4) {
        DUET_UNROLL
        for (int d = 0; d < DL; d += 4) {
          const F4 f = load4(p.v, vr, ln * DL + d, D);
          DUET_UNROLL
          for (int e = 0; e < 4; ++e) v[d + e] = f.x[e];
        }
      } else {
        DUET_UNROLL
        for (int d = 0; d < DL; ++d)
          v[d] = ln * DL + d < D ? load_f32(p.v.data, p.v.dtype, vr + (ln * DL + d) * p.v.stride[3])
                                 : 0.f;
      }
      if constexpr (G == 1) {
        const float pg = ffrom(load_u32(pw + jj * GP));
        DUET_UNROLL
        for (int d = 0; d < DL; ++d) o[0][d] += pg * v[d];
      } else {
        DUET_UNROLL
        for (int g = 0; g < G; g += 4) {
          const F4 pg = ld4s(pw + jj * GP + g);
          DUET_UNROLL
          for (int e = 0; e < 4; ++e) DUET_UNROLL
          for (int d = 0; d < DL; ++d) o[g + e][d] += pg.x[e] * v[d];
        }
      }
    }
  }

  // Merge the warps: each writes its (m, l, O) per row, then the threads combine rows' dims.
  sync();
  float* const mw = reinterpret_cast<float*>(smem());  // [warp][G]: m, then l, then O
  float* const lw = mw + 4 * G;
  float* const ow = lw + 4 * G;  // [warp][G][DM]
  DUET_UNROLL
  for (int g = 0; g < G; ++g) {
    const float lt = warp_sum(l[g]);
    if (ln == 0) {
      store_u32(mw + w * G + g, fbits(m[g]));
      store_u32(lw + w * G + g, fbits(lt));
    }
    DUET_UNROLL
    for (int d = 0; d < DL; ++d) store_u32(ow + (w * G + g) * DM + ln * DL + d, fbits(o[g][d]));
  }
  sync();
  const int64_t out_rows = int64_t(p.B) * p.Hq * p.Lq;
  DUET_NO_UNROLL
  for (int e = tid(); e < nrows * D; e += nthreads()) {
    const int g = e / D, d = e % D;
    float mx = -kSimtInf;
    for (int k = 0; k < nwarps(); ++k) mx = fmaxf(mx, mw[k * G + g]);
    float acc = 0.f, lsum = 0.f;
    if (mx != -kSimtInf)
      for (int k = 0; k < nwarps(); ++k) {
        const float f = exp2_fast(mw[k * G + g] - mx);
        acc += f * ow[(k * G + g) * DM + d];
        lsum += f * lw[k * G + g];
      }
    const PackedRow pr = packed_row(p, hkv, r0 + g);
    const int64_t orow = (int64_t(b) * p.Hq + pr.head) * p.Lq + pr.pos;
    const float val = lsum > 0.f ? acc / lsum : 0.f;
    if (p.splits == 1) {
      store_f32(p.out, p.out_dtype, orow * D + d, val);
    } else {
      p.part_o[(split * out_rows + orow) * D + d] = val;
      if (d == 0)
        p.part_lse[split * out_rows + orow] = lsum > 0.f ? mx + log2_fast(lsum) : -kSimtInf;
    }
  }
}

DUET_DEV_END
