// Tensor-core matmul for the pipelined (sm_80+: cp.async multi-stage pipeline, f16/bf16 m16n8k16)
// and tiled (sm_75: register-staged loads, f16 m16n8k8) tiers.
//
// Block tile BM x BN x 32 with a runtime warp grid (warps_m x warps_n warps of 32 x 64 each);
// A is kept in shared memory m-major ([BM][BK]); B either n-major ([BN][BK], when B's k stride is
// 1: plain ldmatrix) or k-major ([BK][BN]: ldmatrix.trans) - the template parameter BKMAJOR says
// which. Rows load as aligned 16-byte chunks when the layout allows (a_vec / b_vec), element by
// element otherwise (any strides, transposed views, odd sizes); ragged edges are zero-filled.
#pragma once

#include "device/elem.h"
#include "device/params.h"
#include "device/tc_common.h"

DUET_DEV_BEGIN

template <class T, bool BNMAJOR, class Arch>
DUET_KERNEL_BOUNDED(256)
matmul_tc(const MatmulParams p) {
  grid_dependency_sync();
  constexpr int BK = 32, WM = 32, WN = 64;
  constexpr int MT = WM / 16, NT = WN / 8;
  constexpr int LDA = BK + 8;
  const int t0 = tid(), nt = nthreads(), w = warp(), ln = lane();
  const int g = ln >> 2, t4 = ln & 3;
  const int warps_n = nwarps() / p.warps_m;
  const int BM = p.warps_m * WM, BN = warps_n * WN;
  const int LDB = BNMAJOR ? BK + 8 : BN + 8;
  const int a_elems = BM * LDA, b_elems = BNMAJOR ? BN * LDB : BK * LDB;
  const int wr = w / warps_n, wc = w % warps_n;
  const int m0 = bid_y() * BM, n0 = bid_x() * BN;
  const int bz = bid_z(), bo = bz / p.batch_inner, bi = bz % p.batch_inner;
  const auto* a = static_cast<const uint16_t*>(p.a) + bo * p.a_batch[0] + bi * p.a_batch[1];
  const auto* bm = static_cast<const uint16_t*>(p.b) + bo * p.b_batch[0] + bi * p.b_batch[1];
  auto* c = static_cast<uint16_t*>(p.c) + int64_t(bz) * p.M * p.N;
  uint16_t* sm = reinterpret_cast<uint16_t*>(smem());
  const int nk = (p.K + BK - 1) / BK;

  auto clamp8 = [](int v) { return v < 0 ? 0 : v > 8 ? 8 : v; };
  auto load = [&](int kt, int stage) {
    uint16_t* as = sm + stage * (a_elems + b_elems);
    uint16_t* bs = as + a_elems;
    const int k0 = kt * BK;
    if (p.a_vec) {
      DUET_NO_UNROLL
      for (int i = t0; i < BM * (BK / 8); i += nt) {
        const int row = i / (BK / 8), ch = i % (BK / 8), gm = m0 + row, gk = k0 + ch * 8;
        const int n = gm < p.M ? clamp8(p.K - gk) : 0;
        copy_chunk<Arch>(as + row * LDA + ch * 8, n ? a + gm * p.a_m + gk : a, n);
      }
    } else {
      DUET_NO_UNROLL
      for (int i = t0; i < BM * BK; i += nt) {
        const int row = i / BK, col = i % BK, gm = m0 + row, gk = k0 + col;
        as[row * LDA + col] = gm < p.M && gk < p.K ? a[gm * p.a_m + gk * p.a_k] : uint16_t(0);
      }
    }
    if (BNMAJOR) {  // bs[n][k]
      if (p.b_vec) {
        DUET_NO_UNROLL
        for (int i = t0; i < BN * (BK / 8); i += nt) {
          const int row = i / (BK / 8), ch = i % (BK / 8), gn = n0 + row, gk = k0 + ch * 8;
          const int n = gn < p.N ? clamp8(p.K - gk) : 0;
          copy_chunk<Arch>(bs + row * LDB + ch * 8, n ? bm + gn * p.b_n + gk : bm, n);
        }
      } else {
        DUET_NO_UNROLL
        for (int i = t0; i < BN * BK; i += nt) {
          const int row = i / BK, col = i % BK, gn = n0 + row, gk = k0 + col;
          bs[row * LDB + col] = gn < p.N && gk < p.K ? bm[gk * p.b_k + gn * p.b_n] : uint16_t(0);
        }
      }
    } else {  // bs[k][n]
      const int nch = BN / 8;
      if (p.b_vec) {
        DUET_NO_UNROLL
        for (int i = t0; i < BK * nch; i += nt) {
          const int row = i / nch, ch = i % nch, gk = k0 + row, gn = n0 + ch * 8;
          const int n = gk < p.K ? clamp8(p.N - gn) : 0;
          copy_chunk<Arch>(bs + row * LDB + ch * 8, n ? bm + gk * p.b_k + gn : bm, n);
        }
      } else {
        DUET_NO_UNROLL
        for (int i = t0; i < BK * BN; i += nt) {
          const int row = i / BN, col = i % BN, gk = k0 + row, gn = n0 + col;
          bs[row * LDB + col] = gn < p.N && gk < p.K ? bm[gk * p.b_k + gn * p.b_n] : uint16_t(0);
        }
      }
    }
  };

  float acc[MT][NT][4];
  DUET_UNROLL
  for (int i = 0; i < MT; ++i) DUET_UNROLL
  for (int j = 0; j < NT; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;

  auto compute = [&](int stage) {
    const uint16_t* as = sm + stage * (a_elems + b_elems);
    const uint16_t* bs = as + a_elems;
    DUET_UNROLL
    for (int kk = 0; kk < BK / 16; ++kk) {
      uint32_t af[MT][4];
      DUET_UNROLL
      for (int i = 0; i < MT; ++i)
        ldmatrix_x4(af[i], as + (wr * WM + i * 16 + a_row(ln)) * LDA + kk * 16 + a_col(ln));
      DUET_UNROLL
      for (int np = 0; np < NT / 2; ++np) {
        uint32_t bf[4];
        if (BNMAJOR)
          ldmatrix_x4(bf, bs + (wc * WN + np * 16 + bn_row(ln)) * LDB + kk * 16 + bn_col(ln));
        else
          ldmatrix_x4_trans(bf, bs + (kk * 16 + bk_row(ln)) * LDB + wc * WN + np * 16 + bk_col(ln));
        DUET_UNROLL
        for (int i = 0; i < MT; ++i) {
          mma16<Arch, T>(acc[i][2 * np], af[i], bf[0], bf[1]);
          mma16<Arch, T>(acc[i][2 * np + 1], af[i], bf[2], bf[3]);
        }
      }
    }
  };

  if (p.stages <= 1) {
    for (int kt = 0; kt < nk; ++kt) {
      if (kt) sync();  // everyone is done with the tile before it is overwritten
      load(kt, 0);
      commit<Arch>();
      wait_groups<Arch, 0>();
      sync();
      compute(0);
    }
  } else {
    // Multi-stage pipeline: stages - 1 tiles in flight while one is computed. One group is
    // committed per step (possibly empty) so that "stages - 2 pending" always means "tile kt
    // has landed".
    const int S = p.stages;
    for (int s = 0; s < S - 1; ++s) {
      if (s < nk) load(s, s);
      commit<Arch>();
    }
    for (int kt = 0; kt < nk; ++kt) {
      if (S == 2)
        wait_groups<Arch, 0>();
      else if (S == 3)
        wait_groups<Arch, 1>();
      else
        wait_groups<Arch, 2>();
      sync();
      const int next = kt + S - 1;
      if (next < nk) load(next, next % S);
      commit<Arch>();
      compute(kt % S);
    }
    wait_groups<Arch, 0>();  // only empty groups remain; leave none behind
  }

  // Epilogue: round and store, pairs of columns per lane.
  DUET_UNROLL
  for (int i = 0; i < MT; ++i) DUET_UNROLL
  for (int j = 0; j < NT; ++j) DUET_UNROLL
  for (int hi = 0; hi < 2; ++hi) {
    const int gm = m0 + wr * WM + i * 16 + g + hi * 8;
    const int gn = n0 + wc * WN + j * 8 + 2 * t4;
    if (gm >= p.M) continue;
    uint16_t* dst = c + int64_t(gm) * p.N + gn;
    if (gn < p.N) dst[0] = round16(acc[i][j][2 * hi], T{});
    if (gn + 1 < p.N) dst[1] = round16(acc[i][j][2 * hi + 1], T{});
  }
}

DUET_DEV_END
