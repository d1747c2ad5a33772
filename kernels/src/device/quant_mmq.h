// The int8_mma tier: block-quantized weights times activations quantized to int8 per 32
// (q8_act_kernel), on the integer tensor cores, for prefill shapes (more than kQIntRows rows).
//
// A block computes a BM x BN tile of C (warps_m x warps_n warps of 32 x 64) and walks K in steps
// of kQMmqKc groups of 32:
//   - the activations' Q8Blocks of the step ([kc][BM], 48 bytes: 32 int8 and the scales) and the
//     raw bytes of the weight rows' blocks covering the step are copied into shared memory in
//     16-byte chunks (cp.async, the next step in flight while this one computes, on sm_80+);
//   - the weight blocks are decoded once per step and block into int8 words beside their scales
//     ([kc][BN], 48 bytes: 32 int8, sc0, sc1, mn0, mn1; q_group_s8), zero points folded in;
//   - fragments come from shared memory by ldmatrix.x4 (an int8 row of 16 bytes is a b16 row
//     of 8), each group of 32 is one mma.sync.m16n8k32.s8 per 16 x 8 tile (sm_80+; two
//     m16n8k16, one per half, for formats with a scale per 16; four m8n8k16 on sm_75), and its
//     int32 sums are scaled into fp32 accumulators:
//       acc += d_a * (sc0 * I[0,16) + sc1 * I[16,32)) + mn0 * ds_a0 + mn1 * ds_a1
//     (one product when sc0 == sc1; the minimum terms only for formats that have one).
// Integer products are exact, so the result is the dequantized weights times the quantized
// activations up to the f32 roundings of the scaling.
#pragma once

#include "device/quant_stage.h"
#include "device/quant_words.h"

DUET_DEV_BEGIN

// One warp's 32 x 64 tile: a group's mma products scaled into acc. PER16: the halves of a group
// have their own weight scale; MIN: the format has a minimum (offset terms).
template <class Arch, bool PER16, bool MIN>
DUET_DEV void mmq_group(float (&acc)[2][8][4], const uint8_t* as, const uint8_t* ws, int wr,
                        int wc) {
  const int ln = lane(), g = ln >> 2, t4 = ln & 3;
  uint32_t a[2][4];
  float ad[2][2], ads0[2][2], ads1[2][2];
  DUET_UNROLL for (int i = 0; i < 2; ++i) {
    const int r0 = wr * 32 + i * 16;
    ldmatrix_x4(a[i], as + (r0 + (ln & 15)) * 48 + (ln >> 4) * 16);
    DUET_UNROLL for (int h = 0; h < 2; ++h) {
      const uint8_t* f = as + (r0 + g + 8 * h) * 48 + 32;  // d, ds0, ds1
      ad[i][h] = ffrom(load_u32(f));
      ads0[i][h] = MIN ? ffrom(load_u32(f + 4)) : 0.f;
      ads1[i][h] = MIN ? ffrom(load_u32(f + 8)) : 0.f;
    }
  }
  DUET_UNROLL for (int jj = 0; jj < 4; ++jj) {
    const int c0 = wc * 64 + jj * 16;
    uint32_t b[4];
    ldmatrix_x4(b, ws + (c0 + (ln >> 4) * 8 + (ln & 7)) * 48 + ((ln >> 3) & 1) * 16);
    DUET_UNROLL for (int h = 0; h < 2; ++h) {
      const int j = 2 * jj + h;
      // This lane's columns 2 t4 and 2 t4 + 1 of tile j: sc0, sc1, mn0, mn1 each, as far as the
      // format has them.
      float wsc[2][4];
      DUET_UNROLL for (int c = 0; c < 2; ++c) {
        const uint8_t* f = ws + (c0 + h * 8 + 2 * t4 + c) * 48 + 32;
        wsc[c][0] = ffrom(load_u32(f));
        wsc[c][1] = PER16 ? ffrom(load_u32(f + 4)) : 0.f;
        wsc[c][2] = MIN ? ffrom(load_u32(f + 8)) : 0.f;
        wsc[c][3] = MIN ? ffrom(load_u32(f + 12)) : 0.f;
      }
      DUET_UNROLL for (int i = 0; i < 2; ++i) {
        int lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, 0, 0};
        if constexpr (Arch::kAsync) {
          if constexpr (PER16) {
            mma_s8_16816(lo, a[i][0], a[i][1], b[2 * h]);
            mma_s8_16816(hi, a[i][2], a[i][3], b[2 * h + 1]);
          } else {
            mma_s8_16832(lo, a[i], b[2 * h], b[2 * h + 1]);
          }
        } else {
          int top[2] = {0, 0}, bot[2] = {0, 0};
          mma_s8_8816(top, a[i][0], b[2 * h]);
          mma_s8_8816(bot, a[i][1], b[2 * h]);
          if constexpr (!PER16) {
            mma_s8_8816(top, a[i][2], b[2 * h + 1]);
            mma_s8_8816(bot, a[i][3], b[2 * h + 1]);
          }
          lo[0] = top[0], lo[1] = top[1], lo[2] = bot[0], lo[3] = bot[1];
          if constexpr (PER16) {
            top[0] = top[1] = bot[0] = bot[1] = 0;
            mma_s8_8816(top, a[i][2], b[2 * h + 1]);
            mma_s8_8816(bot, a[i][3], b[2 * h + 1]);
            hi[0] = top[0], hi[1] = top[1], hi[2] = bot[0], hi[3] = bot[1];
          }
        }
        // Element e: row g + 8 (e / 2), column 2 t4 + e % 2 of the 16 x 8 tile.
        DUET_UNROLL for (int e = 0; e < 4; ++e) {
          const float* wv = wsc[e & 1];
          const float da = ad[i][e >> 1];
          float v;
          if constexpr (PER16)
            v = wv[0] * small_i2f(lo[e]) + wv[1] * small_i2f(hi[e]);
          else
            v = wv[0] * small_i2f(lo[e]);
          acc[i][j][e] += da * v;
          if constexpr (MIN) acc[i][j][e] += wv[2] * ads0[i][e >> 1] + wv[3] * ads1[i][e >> 1];
        }
      }
    }
  }
}

// One block an SM may use every register it needs (the tile's shared memory allows one or two
// blocks an SM anyway): ptxas' default of 128 spills the per-16 instances.
template <class Arch, bool PER16, bool MIN>
DUET_KERNEL_BOUNDED_MIN(256, 1)
mmq_kernel(const QMatmulParams p) {
  grid_dependency_sync();
  // The m16n8k32 instances run on sm_80+, the m8n8k16 ones on sm_75 only (host/launch_plan.cpp).
  if constexpr (Arch::kAsync) {
    if (device_arch_below(80)) return;
  } else {
    if (device_arch_at_least(80)) return;
  }
  constexpr int KC = kQMmqKc;
  const int t0 = tid(), nt = nthreads(), w = warp();
  const int warps_n = nwarps() / p.warps_m;
  const int BM = p.warps_m * 32, BN = warps_n * 64;
  const int wr = w / warps_n, wc = w % warps_n;
  const int m0 = bid_y() * BM, n0 = bid_x() * BN;
  const int groups = p.K / 32, steps = (groups + KC - 1) / KC;
  const int qb = q_block_bytes(p.fmt), gpb = q_block_elems(p.fmt) / 32;
  const Q8Block* qa = p.qa + int64_t(bid_z()) * p.M * groups;
  const int S = Arch::kAsync ? p.stages : 1;

  // Shared memory: S x (A [KC][BM] Q8Blocks, the weights' raw rows [BN][w_pitch]), then the
  // decoded weights [KC][BN] x 48 bytes.
  const int a_bytes = KC * BM * 48, raw_bytes = BN * p.w_pitch;
  auto a_buf = [&](int s) { return smem() + s * (a_bytes + raw_bytes); };
  auto raw_buf = [&](int s) { return a_buf(s) + a_bytes; };
  uint8_t* wdec = smem() + S * (a_bytes + raw_bytes);

  auto load = [&](int step, int s) {
    const int g0 = step * KC, g1 = g0 + KC < groups ? g0 + KC : groups;
    uint8_t* as = a_buf(s);
    DUET_NO_UNROLL
    for (int i = t0; i < KC * BM * 3; i += nt) {
      const int k = i / (BM * 3), r = i / 3 % BM, part = i % 3;
      const bool ok = m0 + r < p.M && g0 + k < g1;
      const uint8_t* src =
          ok ? reinterpret_cast<const uint8_t*>(qa + int64_t(m0 + r) * groups + g0 + k) + 16 * part
             : reinterpret_cast<const uint8_t*>(qa);
      copy16<Arch>(as + (k * BM + r) * 48 + 16 * part, src, ok ? 16 : 0);
    }
    // The raw rows: blocks [g0 / gpb, ceil(g1 / gpb)), spread over the block's threads.
    uint8_t* raw = raw_buf(s);
    const int rows = p.N - n0 < BN ? p.N - n0 : BN;
    const int per_row = p.w_pitch / 16;
    DUET_NO_UNROLL
    for (int i = t0; i < rows * per_row; i += nt) {
      const int r = i / per_row, c = i % per_row;
      const uint8_t* row = p.w + int64_t(n0 + r) * p.w_row_bytes;
      const uint8_t* lo = row + int64_t(g0 / gpb) * qb;
      const uint8_t* end = row + int64_t((g1 + gpb - 1) / gpb) * qb;
      const uint8_t* base = floor16(lo);
      const int64_t left = end - base - int64_t(c) * 16;
      if (left > 0)
        copy16<Arch>(raw + r * p.w_pitch + 16 * c, base + 16 * c, left >= 16 ? 16 : int(left));
    }
    commit<Arch>();
  };

  // The step's weight groups, decoded once: thread t takes (row, group) pairs.
  auto decode = [&](int step, int s) {
    const int g0 = step * KC;
    const uint8_t* raw = raw_buf(s);
    DUET_NO_UNROLL
    for (int i = t0; i < KC * BN; i += nt) {
      const int k = i / BN, r = i % BN, gi = g0 + k;
      uint32_t v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      float sc[2] = {0.f, 0.f}, mn[2] = {0.f, 0.f};
      if (n0 + r < p.N && gi < groups) {
        const uint8_t* lo = p.w + int64_t(n0 + r) * p.w_row_bytes + int64_t(g0 / gpb) * qb;
        const uint8_t* blk = raw + r * p.w_pitch + offset16(lo) + (gi / gpb - g0 / gpb) * qb;
        q_group_s8(p.fmt, blk, gi % gpb, v, sc, mn);
      }
      uint8_t* d = wdec + (k * BN + r) * 48;
      store16(d, Vec16{{v[0], v[1], v[2], v[3]}});
      store16(d + 16, Vec16{{v[4], v[5], v[6], v[7]}});
      store16(d + 32, Vec16{{fbits(sc[0]), fbits(sc[1]), fbits(mn[0]), fbits(mn[1])}});
    }
  };

  float acc[2][8][4];
  DUET_UNROLL for (int i = 0; i < 2; ++i) DUET_UNROLL for (int j = 0; j < 8; ++j)
      DUET_UNROLL for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  load(0, 0);
  for (int step = 0; step < steps; ++step) {
    const int s = step % S;
    wait_pending<Arch>(0);
    sync();  // the step's copies landed for every thread; compute(step - 1) is done everywhere
    decode(step, s);
    sync();
    // The next step into the other buffers: its raw rows were decoded and its activations read
    // in step - 1, before the barriers above.
    if (S > 1 && step + 1 < steps) load(step + 1, (step + 1) % S);
    DUET_NO_UNROLL
    for (int k = 0; k < KC; ++k)
      mmq_group<Arch, PER16, MIN>(acc, a_buf(s) + k * BM * 48, wdec + k * BN * 48, wr, wc);
    if (S == 1 && step + 1 < steps) {
      sync();  // every warp is done with the only buffers
      load(step + 1, 0);
    }
  }

  const int ln = lane(), g = ln >> 2, t4 = ln & 3;
  const int64_t cb = int64_t(bid_z()) * p.M * p.N;
  DUET_UNROLL for (int i = 0; i < 2; ++i) DUET_UNROLL for (int j = 0; j < 8; ++j)
      DUET_UNROLL for (int e = 0; e < 4; ++e) {
    const int m = m0 + wr * 32 + i * 16 + g + 8 * (e / 2);
    const int n = n0 + wc * 64 + j * 8 + 2 * t4 + (e & 1);
    if (m < p.M && n < p.N) store_f32(p.c, p.c_dtype, cb + int64_t(m) * p.N + n, acc[i][j][e]);
  }
}

DUET_DEV_END
