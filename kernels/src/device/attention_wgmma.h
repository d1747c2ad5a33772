// Attention forward for Hopper (the wgmma tier, sm_90a), in the FlashAttention-3 manner:
//   - warp specialisation: warpgroup 0 is the producer (one thread issues the TMA copies of the
//     K and V tiles into a ring of kStages shared-memory stages, each completing on an mbarrier
//     with a transaction count; its registers are given back with setmaxnreg), warpgroups 1..kWG
//     consume, 64 query rows each (the registers they need: setmaxnreg up);
//   - S = Q K^T by wgmma with both operands in shared memory (128-byte swizzled tiles, as the TMA
//     writes them), O += P V by wgmma with P from registers (the S accumulators rounded to the
//     16-bit type are exactly wgmma's A fragment) and V N-major from shared memory;
//   - the online softmax of tile j overlaps the P V product of tile j - 1: S_j is issued, then
//     P_{j-1} V_{j-1}; the softmax waits only for S_j (wgmma.wait_group 1); O is rescaled once the
//     P V product has landed;
//   - a consumer releases a stage (an mbarrier arrive per warp) once its P V product is done; the
//     producer waits for every active consumer warp before refilling it.
// Rows are packed as in attention_tc.h (the query heads of a GQA group times the queries), so a
// decode step fills rows with the group's heads; causal masking is aligned to the end of the
// keys; keys past the end come as zeros from the TMA (its bounds) and are masked; split-KV
// writes normalised partials and their log-sum-exp for attention_combine. Causal blocks run in
// reverse order, the longest first.
#pragma once

#include "device/elem.h"
#include "device/params.h"
#include "device/tc_common.h"
#include "device/wgmma_shape.h"

DUET_DEV_BEGIN

// A K-major or N-major operand tile of 128-byte swizzled rows: the wgmma matrix descriptor.
DUET_DEV uint64_t wg_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return uint64_t((addr >> 4) & 0x3fff) | uint64_t((lbo >> 4) & 0x3fff) << 16 |
         uint64_t((sbo >> 4) & 0x3fff) << 32 | uint64_t(1) << 62;
}

template <class T, int D, WgFault F = WgFault::none>
DUET_KERNEL_ONE_BLOCK(WgShape<D>::kThreads)
attention_wgmma(const DUET_GRID_CONSTANT WgAttnParams wp) {
  grid_dependency_sync();
  using S = WgShape<D>;
  constexpr int kBN = S::kBN, kStages = S::kStages, kCB = S::kCB;
  constexpr int NS = kBN / 2;  // S accumulators per thread
  constexpr int NO = D / 2;    // O accumulators per thread
  constexpr int CH = D / 8;    // 16-byte chunks of a row
  constexpr float kInf = __builtin_huge_valf();
  const AttnParams& p = wp.a;

  // Shared memory: Q tiles, K stages, V stages, then the barriers; 1024-byte aligned, as the
  // 128-byte swizzle of TMA and wgmma requires.
  unsigned char* base = smem();
  base += (1024 - (smem_addr(base) & 1023)) & 1023;
  unsigned char* const qs = base;
  unsigned char* const ks = base + S::kWG * S::kQBytes;
  unsigned char* const vs = ks + kStages * S::kKVBytes;
  uint64_t* const full_k = reinterpret_cast<uint64_t*>(base + S::kBarOffset);
  uint64_t* const full_v = full_k + kStages;
  uint64_t* const empty = full_v + kStages;

  // ---- the block's rows and keys (as attention_tc.h)
  const int rows = p.group * p.Lq;
  const int mblocks = nbid_x();
  const int mb = p.causal ? mblocks - 1 - bid_x() : bid_x();
  const int hkv = bid_y() % p.Hkv, split = bid_y() / p.Hkv, b = bid_z();
  const int r0 = mb * S::kBM;
  int Lk = p.Lk;
  if (p.kv_len) Lk = *p.kv_len < 0 ? 0 : (*p.kv_len < p.Lk ? *p.kv_len : p.Lk);
  if (p.kv_len && tid() == 0 && bid_x() == 0 && bid_y() == 0 && bid_z() == 0 &&
      (*p.kv_len < 0 || *p.kv_len > p.Lk))
    atomic_min_u64(p.error, uint32_t(*p.kv_len));
  const int off = Lk - p.Lq;  // causal: query i sees keys j <= i + off
  auto pos_range = [&](int lo, int hi, int* i_min, int* i_max) {  // rows [lo, hi]
    const bool one_head = lo / p.Lq == hi / p.Lq;
    *i_min = one_head ? lo % p.Lq : 0;
    *i_max = one_head ? hi % p.Lq : p.Lq - 1;
  };
  int i_min, i_max;
  pos_range(r0, (r0 + S::kBM < rows ? r0 + S::kBM : rows) - 1, &i_min, &i_max);
  int kv_end = Lk;
  if (p.causal && i_max + off + 1 < kv_end) kv_end = i_max + off + 1;
  const int n_tiles = kv_end > 0 ? (kv_end + kBN - 1) / kBN : 0;
  const int t_begin = split * p.tiles_per_split;
  const int t_end = t_begin + p.tiles_per_split < n_tiles ? t_begin + p.tiles_per_split : n_tiles;
  // Consumer warpgroups with at least one row; the others leave at once.
  const int rows_here = rows - r0 < S::kBM ? rows - r0 : S::kBM;
  const int active = (rows_here + 63) / 64;

  const int wg = warp() / 4;
  if (tid() == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full_k[s], 1);
      mbar_init(&full_v[s], 1);
      mbar_init(&empty[s], 4 * active);
    }
    mbar_fence_init();
  }
  sync();

  if (wg == 0) {
    // ---- producer
    setmaxnreg_dec<24>();
    if (warp() == 0 && lane() == 0) {
      tma_prefetch_map(wp.k_map);
      tma_prefetch_map(wp.v_map);
      for (int j = t_begin; j < t_end; ++j) {
        const int i = j - t_begin, s = i % kStages, round = i / kStages;
        if constexpr (F != WgFault::skip_empty_wait) mbar_wait(&empty[s], (round & 1) ^ 1);
        mbar_arrive_expect_tx(&full_k[s], S::kKVBytes);
        DUET_UNROLL
        for (int cb = 0; cb < kCB; ++cb)
          tma_load_4d(ks + s * S::kKVBytes + cb * kBN * 128, wp.k_map, cb * 64, j * kBN, hkv, b,
                      &full_k[s]);
        mbar_arrive_expect_tx(&full_v[s], S::kKVBytes);
        DUET_UNROLL
        for (int cb = 0; cb < kCB; ++cb)
          tma_load_4d(vs + s * S::kKVBytes + cb * kBN * 128, wp.v_map, cb * 64, j * kBN, hkv, b,
                      &full_v[s]);
      }
    }
    return;
  }

  // ---- consumers
  setmaxnreg_inc<240>();
  const int c = wg - 1;
  if (c >= active) return;
  const int ct = tid() - 128 * wg;  // thread within the warpgroup
  const int w4 = ct / 32, ln = lane(), g = ln >> 2, t4 = ln & 3;
  unsigned char* const q_sm = qs + c * S::kQBytes;
  const int rw0 = r0 + 64 * c;  // this warpgroup's first row

  // Q: global -> shared in the swizzled layout (ordinary stores, then the async-proxy fence).
  const auto* qg = static_cast<const uint16_t*>(p.q);
  DUET_NO_UNROLL
  for (int k = ct; k < 64 * CH; k += 128) {
    const int row = k / CH, ch = k % CH, r = rw0 + row;
    Vec16 v = {};
    if (r < rows) {
      const int h = hkv * p.group + r / p.Lq, i = r % p.Lq;
      v = load16(qg + b * p.qs[0] + h * p.qs[1] + i * p.qs[2] + ch * 8);
    }
    const int sw = F == WgFault::wrong_swizzle ? 0 : row & 7;
    store16(q_sm + (ch / 8) * 64 * 128 + row * 128 + (((ch % 8) ^ sw) * 16), v);
  }
  if constexpr (F != WgFault::no_proxy_fence) fence_proxy_async();
  named_sync(1 + c, 128);

  int wi_min, wi_max;
  pos_range(rw0, (rw0 + 64 < rows ? rw0 + 64 : rows) - 1, &wi_min, &wi_max);
  const int lane_r = rw0 + 16 * w4 + g;  // this lane's rows: lane_r and lane_r + 8
  auto row_pos = [&](int hi) {
    const int r = lane_r + hi * 8;
    return r < rows ? r % p.Lq : 0;
  };
  auto row_head = [&](int hi) {
    const int r = lane_r + hi * 8;
    return hkv * p.group + (r < rows ? r / p.Lq : 0);
  };
  const uint32_t q_addr = smem_addr(q_sm), k_addr = smem_addr(ks), v_addr = smem_addr(vs);

  float sacc[NS], oacc[NO];
  uint32_t pa[kBN / 16][4];
  DUET_UNROLL
  for (int e = 0; e < NO; ++e) oacc[e] = 0.f;
  float m[2] = {-kInf, -kInf}, l[2] = {0.f, 0.f};

  // S = Q K^T of the tile in stage s (issued, not waited for).
  auto issue_s = [&](int s) {
    DUET_UNROLL
    for (int kd = 0; kd < D / 16; ++kd) {
      const uint32_t col = (kd % 4) * 32;  // 16 columns of the 64 in a swizzled row
      wgmma_ss(sacc, wg_desc(q_addr + (kd / 4) * 64 * 128 + col, 16, 1024),
               wg_desc(k_addr + s * S::kKVBytes + (kd / 4) * kBN * 128 + col, 16, 1024),
               kd > 0 ? 1 : 0, T{});
    }
  };
  // O += P V of the tile in stage s.
  auto issue_pv = [&](int s) {
    DUET_UNROLL
    for (int kk = 0; kk < kBN / 16; ++kk)
      wgmma_rs(oacc, pa[kk], wg_desc(v_addr + s * S::kKVBytes + kk * 16 * 128, kBN * 128, 1024), 1,
               T{});
  };
  // Mask and online softmax of tile j, in place in sacc (P in fp32); alpha: the factor O must be
  // scaled by before P V is added.
  auto softmax = [&](int j, float(&alpha)[2]) {
    const int kv0 = j * kBN;
    DUET_UNROLL
    for (int e = 0; e < NS; ++e) sacc[e] *= p.scale_log2;
    if (kv0 + kBN > Lk || (p.causal && kv0 + kBN - 1 > wi_min + off)) {
      DUET_UNROLL
      for (int hi = 0; hi < 2; ++hi) {
        const int last = p.causal ? row_pos(hi) + off : Lk - 1;  // last key this row sees
        DUET_UNROLL
        for (int n = 0; n < NS / 4; ++n) DUET_UNROLL
        for (int e = 2 * hi; e < 2 * hi + 2; ++e) {
          const int key = kv0 + n * 8 + 2 * t4 + (e & 1);
          if (key >= Lk || key > last) sacc[4 * n + e] = -kInf;
        }
      }
    }
    if (p.mask) {
      DUET_UNROLL
      for (int hi = 0; hi < 2; ++hi) {
        const int64_t mrow = b * p.ms[0] + row_head(hi) * p.ms[1] + row_pos(hi) * p.ms[2];
        DUET_UNROLL
        for (int n = 0; n < NS / 4; ++n) DUET_UNROLL
        for (int e = 2 * hi; e < 2 * hi + 2; ++e) {
          const int key = kv0 + n * 8 + 2 * t4 + (e & 1);
          if (key < Lk && sacc[4 * n + e] != -kInf)
            sacc[4 * n + e] += load_f32(p.mask, p.mask_dtype, mrow + key * p.ms[3]) * kLog2e;
        }
      }
    }
    DUET_UNROLL
    for (int hi = 0; hi < 2; ++hi) {
      float mx = -kInf;
      DUET_UNROLL
      for (int n = 0; n < NS / 4; ++n)
        mx = fmaxf(mx, fmaxf(sacc[4 * n + 2 * hi], sacc[4 * n + 2 * hi + 1]));
      mx = warp_max4(mx);
      const float m_new = fmaxf(m[hi], mx);
      const float m_use = m_new == -kInf ? 0.f : m_new;  // a row with no key yet stays at 0
      alpha[hi] = exp2_fast(m[hi] - m_use);
      m[hi] = m_new;
      float sum = 0.f;
      DUET_UNROLL
      for (int n = 0; n < NS / 4; ++n) DUET_UNROLL
      for (int e = 2 * hi; e < 2 * hi + 2; ++e) {
        const float pe = exp2_fast(sacc[4 * n + e] - m_use);
        sacc[4 * n + e] = pe;
        sum += pe;
      }
      l[hi] = l[hi] * alpha[hi] + sum;
    }
  };
  // P rounded to the 16-bit type: the A fragments of the P V product (sacc's layout is theirs).
  auto to_p = [&] {
    DUET_UNROLL
    for (int kk = 0; kk < kBN / 16; ++kk) {
      pa[kk][0] = pack2(sacc[8 * kk + 0], sacc[8 * kk + 1], T{});
      pa[kk][1] = pack2(sacc[8 * kk + 2], sacc[8 * kk + 3], T{});
      pa[kk][2] = pack2(sacc[8 * kk + 4], sacc[8 * kk + 5], T{});
      pa[kk][3] = pack2(sacc[8 * kk + 6], sacc[8 * kk + 7], T{});
    }
  };
  auto rescale = [&](const float(&alpha)[2]) {
    DUET_UNROLL
    for (int n = 0; n < NO / 4; ++n) {
      oacc[4 * n + 0] *= alpha[0];
      oacc[4 * n + 1] *= alpha[0];
      oacc[4 * n + 2] *= alpha[1];
      oacc[4 * n + 3] *= alpha[1];
    }
  };
  auto release = [&](int s) {
    if (ln == 0) mbar_arrive(&empty[s]);
  };

  if (t_begin < t_end) {
    float alpha[2];
    mbar_wait(&full_k[0], 0);
    wgmma_pin(sacc);
    wgmma_fence();
    issue_s(0);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_pin(sacc);
    softmax(t_begin, alpha);
    to_p();
    for (int j = t_begin + 1; j < t_end; ++j) {
      const int i = j - t_begin, s = i % kStages, sp = (i - 1) % kStages;
      // Both waits first: the fence then covers both products with no branch in between (else
      // ptxas adds a warpgroup.arrive of its own). V_{j-1} was issued before K_j.
      mbar_wait(&full_k[s], (i / kStages) & 1);
      if constexpr (F != WgFault::skip_full_wait) mbar_wait(&full_v[sp], ((i - 1) / kStages) & 1);
      wgmma_pin(sacc);
      wgmma_pin(oacc);
      wgmma_pin(pa);
      wgmma_fence();
      issue_s(s);
      wgmma_commit();
      issue_pv(sp);
      wgmma_commit();
      wgmma_wait<1>();  // S_j has landed; P_{j-1} V_{j-1} may still run
      wgmma_pin(sacc);
      softmax(j, alpha);
      if constexpr (F == WgFault::early_release) release(sp);
      if constexpr (F == WgFault::early_rescale) rescale(alpha);
      wgmma_wait<0>();  // P_{j-1} V_{j-1} has landed: O and pa are free
      wgmma_pin(oacc);
      if constexpr (F != WgFault::early_release) release(sp);
      if constexpr (F != WgFault::early_rescale) rescale(alpha);
      to_p();
    }
    const int last = t_end - 1 - t_begin, sl = last % kStages;
    if constexpr (F != WgFault::skip_full_wait) mbar_wait(&full_v[sl], (last / kStages) & 1);
    // A run-time key count below the capacity: the TMA read keys past it (the map has the
    // capacity), which may hold anything, NaN included; P is 0 there, but 0 * NaN is not, so
    // their V rows become zeros before any warpgroup multiplies by them (only the last tile).
    if (p.kv_len && t_end * kBN > Lk) {
      const int first = Lk - (t_end - 1) * kBN > 0 ? Lk - (t_end - 1) * kBN : 0;
      unsigned char* vt = vs + sl * S::kKVBytes;
      DUET_NO_UNROLL
      for (int k = first * 8 + ct + 128 * c; k < kBN * 8; k += 128 * active) DUET_UNROLL
      for (int cb = 0; cb < kCB; ++cb) store16(vt + cb * kBN * 128 + k * 16, Vec16{});
      fence_proxy_async();
      named_sync(3, 128 * active);
    }
    wgmma_pin(oacc);
    wgmma_pin(pa);
    wgmma_fence();
    issue_pv(sl);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_pin(oacc);
    release(sl);
  }

  // ---- epilogue
  DUET_UNROLL
  for (int hi = 0; hi < 2; ++hi) l[hi] = warp_sum4(l[hi]);
  const int64_t out_rows = int64_t(p.B) * p.Hq * p.Lq;
  if (p.splits == 1) {
    // Normalise, round, stage the warpgroup's 64 rows in its Q tile (swizzled as Q was: no bank
    // conflicts), then write whole rows.
    DUET_UNROLL
    for (int hi = 0; hi < 2; ++hi) {
      const float inv = l[hi] > 0.f ? 1.f / l[hi] : 0.f;  // no visible key: output 0
      const int row = 16 * w4 + g + 8 * hi;
      DUET_UNROLL
      for (int n = 0; n < NO / 4; ++n)
        store_u32(q_sm + (n / 8) * 64 * 128 + row * 128 + (((n % 8) ^ (row & 7)) * 16) + 4 * t4,
                  pack2(oacc[4 * n + 2 * hi] * inv, oacc[4 * n + 2 * hi + 1] * inv, T{}));
    }
    named_sync(1 + c, 128);
    auto* out = static_cast<uint16_t*>(p.out);
    DUET_NO_UNROLL
    for (int k = ct; k < 64 * CH; k += 128) {
      const int row = k / CH, ch = k % CH, r = rw0 + row;
      if (r >= rows) continue;
      const int h = hkv * p.group + r / p.Lq, i = r % p.Lq;
      store16(out + ((int64_t(b) * p.Hq + h) * p.Lq + i) * D + ch * 8,
              load16(q_sm + (ch / 8) * 64 * 128 + row * 128 + (((ch % 8) ^ (row & 7)) * 16)));
    }
  } else {
    DUET_UNROLL
    for (int hi = 0; hi < 2; ++hi) {
      if (lane_r + hi * 8 >= rows) continue;
      const int64_t orow = (int64_t(b) * p.Hq + row_head(hi)) * p.Lq + row_pos(hi);
      const float inv = l[hi] > 0.f ? 1.f / l[hi] : 0.f;
      float* po = p.part_o + (split * out_rows + orow) * D;
      DUET_UNROLL
      for (int n = 0; n < NO / 4; ++n) {
        po[n * 8 + 2 * t4] = oacc[4 * n + 2 * hi] * inv;
        po[n * 8 + 2 * t4 + 1] = oacc[4 * n + 2 * hi + 1] * inv;
      }
      if (t4 == 0)
        p.part_lse[split * out_rows + orow] = l[hi] > 0.f ? m[hi] + log2_fast(l[hi]) : -kInf;
    }
  }
}

DUET_DEV_END
