// Tensor-core attention forward, FlashAttention-2 style, for the flash (sm_80+) and tiled (sm_75)
// tiers. One block owns up to 16 * warps query rows of one (batch, kv head): the rows are the
// queries of the group of query heads sharing that kv head (GQA/MQA packing: row r is head
// r / Lq of the group, position r % Lq), which fills the mma rows even when decoding (Lq = 1).
// Each warp owns 16 rows:
//   - the Q tile goes to shared memory once, then to registers (ldmatrix) for the whole run;
//   - K/V tiles of BC keys stream through shared memory (flash: cp.async, double buffered when
//     `stages` is 2; tiled: staged through registers);
//   - S = Q K^T with mma (fp32 accumulation), scaled into the log2 domain, masked (causal,
//     ragged key tile, additive mask with -inf), online softmax in fp32, P (rounded to the
//     16-bit type) times V accumulated into O in fp32;
//   - causal tiles past the block's last visible key are never loaded (skipped), and only
//     tiles crossing the diagonal or the end of the keys pay for masking.
// Split-KV (decode): blockIdx.y = split * Hkv + kv head; each split writes its normalised O and
// its log-sum-exp, and attention_combine (generic.h) merges them.
#pragma once

#include "device/elem.h"
#include "device/params.h"
#include "device/tc_common.h"

DUET_DEV_BEGIN

template <class T, int D, int BC, class Arch>
DUET_KERNEL_BOUNDED(D > 128 ? 128 : 256)
attention_tc(const AttnParams p) {
  grid_dependency_sync();
  static_assert(D % 16 == 0 && BC % 16 == 0, "head dim and key tile are multiples of 16");
  constexpr int KD = D / 16;  // 16-deep steps over the head dim; also pairs of 8-wide O tiles
  constexpr int ND = D / 8;   // 8-wide tiles of O
  constexpr int NC = BC / 8;  // 8-wide key tiles of S
  constexpr int LD = D + 8;   // shared row pitch: +16 bytes puts ldmatrix rows in distinct banks
  constexpr int CH = D / 8;   // 16-byte chunks per row
  constexpr float kInf = __builtin_huge_valf();
  // Q lives in registers for the whole run, except in the tiled tier at head dim 256, where
  // O (128 registers) and Q (64) leave m16n8k8 too few: there Q stays in shared memory, next to
  // the K/V tiles, and is re-read for every 16-deep step (host/shapes.h sizes it).
  constexpr bool kQRegs = Arch::kAsync || D <= 128;

  const int t0 = tid(), nt = nthreads(), w = warp(), ln = lane();
  const int g = ln >> 2, t4 = ln & 3;
  const int br = nt / 2;  // 16 rows per warp
  const int hkv = bid_y() % p.Hkv, split = bid_y() / p.Hkv, b = bid_z();
  const int rows = p.group * p.Lq;
  const int r0 = bid_x() * br;
  const int r_last = (r0 + br < rows ? r0 + br : rows) - 1;
  const bool one_head = r0 / p.Lq == r_last / p.Lq;
  const int i_min = one_head ? r0 % p.Lq : 0;
  const int i_max = one_head ? r_last % p.Lq : p.Lq - 1;
  // The keys that exist (a run-time count; host/launch_plan.cpp reports a bad one).
  int Lk = p.Lk;
  if (p.kv_len) Lk = *p.kv_len < 0 ? 0 : (*p.kv_len < p.Lk ? *p.kv_len : p.Lk);
  if (p.kv_len && t0 == 0 && bid_x() == 0 && bid_y() == 0 && bid_z() == 0 &&
      (*p.kv_len < 0 || *p.kv_len > p.Lk))
    atomic_min_u64(p.error, uint32_t(*p.kv_len));
  const int off = Lk - p.Lq;  // causal: query i sees keys j <= i + off

  int kv_end = Lk;
  if (p.causal && i_max + off + 1 < kv_end) kv_end = i_max + off + 1;
  const int n_tiles = kv_end > 0 ? (kv_end + BC - 1) / BC : 0;
  const int t_begin = split * p.tiles_per_split;
  const int t_end = t_begin + p.tiles_per_split < n_tiles ? t_begin + p.tiles_per_split : n_tiles;

  uint16_t* sm = reinterpret_cast<uint16_t*>(smem());
  const auto* qg = static_cast<const uint16_t*>(p.q);
  const auto* kg = static_cast<const uint16_t*>(p.k);
  const auto* vg = static_cast<const uint16_t*>(p.v);

  // ---- Q: global -> shared -> registers, kept for the whole run
  DUET_NO_UNROLL
  for (int c = t0; c < br * CH; c += nt) {
    const int row = c / CH, ch = c % CH, r = r0 + row;
    const bool ok = r < rows;
    const int h = hkv * p.group + (ok ? r / p.Lq : 0), i = ok ? r % p.Lq : 0;
    const uint16_t* src = qg + b * p.qs[0] + h * p.qs[1] + i * p.qs[2] + ch * 8;
    copy_chunk<Arch>(sm + row * LD + ch * 8, ok ? src : qg, ok ? 8 : 0);
  }
  commit<Arch>();
  wait_groups<Arch, 0>();
  sync();
  uint32_t qf[kQRegs ? KD : 1][4];
  if constexpr (kQRegs) {
    DUET_UNROLL
    for (int ks = 0; ks < KD; ++ks)
      ldmatrix_x4(qf[ks], sm + (w * 16 + a_row(ln)) * LD + ks * 16 + a_col(ln));
    sync();  // the K/V tiles reuse Q's shared memory
  }
  uint16_t* const kv_sm = kQRegs ? sm : sm + br * LD;

  // This lane's two rows are g and g + 8 of the warp's 16; their query positions and heads are
  // recomputed where needed rather than kept live across the key loop (registers are the limit
  // at head dim 256).
  const int lane_r = r0 + w * 16 + g;
  auto row_pos = [&](int hi) {
    const int r = lane_r + hi * 8;
    return r < rows ? r % p.Lq : 0;
  };
  auto row_head = [&](int hi) {
    const int r = lane_r + hi * 8;
    return hkv * p.group + (r < rows ? r / p.Lq : 0);
  };
  const uint16_t* kbase = kg + b * p.ks[0] + hkv * p.ks[1];
  const uint16_t* vbase = vg + b * p.vs[0] + hkv * p.vs[1];

  constexpr int kTile = BC * LD;  // elements of one K (or V) tile in shared memory
  auto load_kv = [&](int tile, int buf) {
    uint16_t* ks = kv_sm + buf * 2 * kTile;
    uint16_t* vs = ks + kTile;
    const int kv0 = tile * BC;
    DUET_NO_UNROLL
    for (int c = t0; c < BC * CH; c += nt) {
      const int row = c / CH, ch = c % CH, key = kv0 + row;
      const bool ok = key < Lk;  // keys past the end are zeros (P is 0 there, V must be finite)
      const int64_t kr = int64_t(ok ? key : 0);
      copy_chunk<Arch>(ks + row * LD + ch * 8, kbase + kr * p.ks[2] + ch * 8, ok ? 8 : 0);
      copy_chunk<Arch>(vs + row * LD + ch * 8, vbase + kr * p.vs[2] + ch * 8, ok ? 8 : 0);
    }
  };

  float o[ND][4];
  DUET_UNROLL
  for (int n = 0; n < ND; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m[2] = {-kInf, -kInf}, l[2] = {0.f, 0.f};

  if (t_begin < t_end) {
    load_kv(t_begin, 0);
    commit<Arch>();
  }
  for (int j = t_begin; j < t_end; ++j) {
    const int buf = p.stages == 2 ? ((j - t_begin) & 1) : 0;
    if (p.stages == 1 && j > t_begin) {
      load_kv(j, 0);
      commit<Arch>();
    }
    if (p.stages == 2 && j + 1 < t_end) {
      load_kv(j + 1, buf ^ 1);  // in flight while this tile is computed
      commit<Arch>();
      wait_groups<Arch, 1>();
    } else {
      wait_groups<Arch, 0>();
    }
    sync();
    const uint16_t* ks = kv_sm + buf * 2 * kTile;
    const uint16_t* vs = ks + kTile;

    // S = Q K^T
    float s[NC][4];
    DUET_UNROLL
    for (int n = 0; n < NC; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
    DUET_UNROLL
    for (int kd = 0; kd < KD; ++kd) {
      uint32_t qs[4];
      if constexpr (!kQRegs) ldmatrix_x4(qs, sm + (w * 16 + a_row(ln)) * LD + kd * 16 + a_col(ln));
      const uint32_t(&qa)[4] = kQRegs ? qf[kQRegs ? kd : 0] : qs;
      DUET_UNROLL
      for (int np = 0; np < NC / 2; ++np) {
        uint32_t kb[4];
        ldmatrix_x4(kb, ks + (np * 16 + bn_row(ln)) * LD + kd * 16 + bn_col(ln));
        mma16<Arch, T>(s[2 * np], qa, kb[0], kb[1]);
        mma16<Arch, T>(s[2 * np + 1], qa, kb[2], kb[3]);
      }
    }

    // Scale into the log2 domain and mask. Only tiles crossing the end of the keys or the
    // causal diagonal need per-element masking.
    const int kv0 = j * BC;
    DUET_UNROLL
    for (int n = 0; n < NC; ++n) DUET_UNROLL
    for (int e = 0; e < 4; ++e) s[n][e] *= p.scale_log2;
    if (kv0 + BC > Lk || (p.causal && kv0 + BC - 1 > i_min + off)) {
      DUET_UNROLL
      for (int hi = 0; hi < 2; ++hi) {
        const int last = p.causal ? row_pos(hi) + off : Lk - 1;  // last key this row sees
        DUET_UNROLL
        for (int n = 0; n < NC; ++n) DUET_UNROLL
        for (int e = 2 * hi; e < 2 * hi + 2; ++e) {
          const int key = kv0 + n * 8 + 2 * t4 + (e & 1);
          if (key >= Lk || key > last) s[n][e] = -kInf;
        }
      }
    }
    if (p.mask) {
      DUET_UNROLL
      for (int hi = 0; hi < 2; ++hi) {
        const int64_t mrow = b * p.ms[0] + row_head(hi) * p.ms[1] + row_pos(hi) * p.ms[2];
        DUET_UNROLL
        for (int n = 0; n < NC; ++n) DUET_UNROLL
        for (int e = 2 * hi; e < 2 * hi + 2; ++e) {
          const int key = kv0 + n * 8 + 2 * t4 + (e & 1);
          if (key < Lk && s[n][e] != -kInf)
            s[n][e] += load_f32(p.mask, p.mask_dtype, mrow + key * p.ms[3]) * kLog2e;
        }
      }
    }

    // Online softmax, per row: running max m, running sum l (this lane's part of the row).
    DUET_UNROLL
    for (int hi = 0; hi < 2; ++hi) {
      float mx = -kInf;
      DUET_UNROLL
      for (int n = 0; n < NC; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * hi], s[n][2 * hi + 1]));
      mx = warp_max4(mx);
      const float m_new = fmaxf(m[hi], mx);
      const float m_use = m_new == -kInf ? 0.f : m_new;  // a row with no key yet stays at 0
      const float alpha = exp2_fast(m[hi] - m_use);
      m[hi] = m_new;
      float sum = 0.f;
      DUET_UNROLL
      for (int n = 0; n < NC; ++n) DUET_UNROLL
      for (int e = 2 * hi; e < 2 * hi + 2; ++e) {
        const float pe = exp2_fast(s[n][e] - m_use);
        s[n][e] = pe;
        sum += pe;
      }
      l[hi] = l[hi] * alpha + sum;
      DUET_UNROLL
      for (int n = 0; n < ND; ++n) {
        o[n][2 * hi] *= alpha;
        o[n][2 * hi + 1] *= alpha;
      }
    }

    // O += P V: the S accumulators of two key tiles are exactly an A fragment.
    DUET_UNROLL
    for (int kk = 0; kk < BC / 16; ++kk) {
      const uint32_t pa[4] = {pack2(s[2 * kk][0], s[2 * kk][1], T{}),
                              pack2(s[2 * kk][2], s[2 * kk][3], T{}),
                              pack2(s[2 * kk + 1][0], s[2 * kk + 1][1], T{}),
                              pack2(s[2 * kk + 1][2], s[2 * kk + 1][3], T{})};
      DUET_UNROLL
      for (int dp = 0; dp < KD; ++dp) {
        uint32_t vb[4];
        ldmatrix_x4_trans(vb, vs + (kk * 16 + bk_row(ln)) * LD + dp * 16 + bk_col(ln));
        mma16<Arch, T>(o[2 * dp], pa, vb[0], vb[1]);
        mma16<Arch, T>(o[2 * dp + 1], pa, vb[2], vb[3]);
      }
    }
    sync();  // every warp is done with this buffer before it is refilled
  }

  // ---- epilogue
  DUET_UNROLL
  for (int hi = 0; hi < 2; ++hi) l[hi] = warp_sum4(l[hi]);
  const int64_t out_rows = int64_t(p.B) * p.Hq * p.Lq;
  if (p.splits == 1) {
    // Normalise, round, stage the warp's 16 rows in shared memory, then write whole rows.
    uint16_t* st = sm + w * 16 * LD;
    DUET_UNROLL
    for (int hi = 0; hi < 2; ++hi) {
      const float inv = l[hi] > 0.f ? 1.f / l[hi] : 0.f;  // no visible key: output 0
      DUET_UNROLL
      for (int n = 0; n < ND; ++n)
        store_u32(st + (g + hi * 8) * LD + n * 8 + 2 * t4,
                  pack2(o[n][2 * hi] * inv, o[n][2 * hi + 1] * inv, T{}));
    }
    sync();
    auto* out = static_cast<uint16_t*>(p.out);
    DUET_NO_UNROLL
    for (int c = t0; c < br * CH; c += nt) {
      const int row = c / CH, ch = c % CH, r = r0 + row;
      if (r >= rows) continue;
      const int h = hkv * p.group + r / p.Lq, i = r % p.Lq;
      store16(out + ((int64_t(b) * p.Hq + h) * p.Lq + i) * D + ch * 8,
              load16(sm + row * LD + ch * 8));
    }
  } else {
    DUET_UNROLL
    for (int hi = 0; hi < 2; ++hi) {
      if (lane_r + hi * 8 >= rows) continue;
      const int64_t orow = (int64_t(b) * p.Hq + row_head(hi)) * p.Lq + row_pos(hi);
      const float inv = l[hi] > 0.f ? 1.f / l[hi] : 0.f;
      float* po = p.part_o + (split * out_rows + orow) * D;
      DUET_UNROLL
      for (int n = 0; n < ND; ++n) {
        po[n * 8 + 2 * t4] = o[n][2 * hi] * inv;
        po[n * 8 + 2 * t4 + 1] = o[n][2 * hi + 1] * inv;
      }
      if (t4 == 0)
        p.part_lse[split * out_rows + orow] = l[hi] > 0.f ? m[hi] + log2_fast(l[hi]) : -kInf;
    }
  }
}

DUET_DEV_END
