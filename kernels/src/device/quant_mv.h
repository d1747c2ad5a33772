// The int_dot tier's mat-vec (decode and small batches: up to kQIntRows activation rows per
// block), for every block format, at the speed of the weight's bytes:
//   - each warp owns `rpw` weight rows and streams their raw blocks through its own
//     shared-memory ring of `stages` buffers in 16-byte chunks (cp.async on sm_80+: several
//     kilobytes in flight per warp, whatever the alignment of the blocks), 32 groups of 32
//     weights a row and a step, one group a lane;
//   - the block's activation rows, quantized to int8 per 32, sit in shared memory and each is
//     read once per group for all of the warp's weight rows. Where they are few and all of K is
//     one chunk (p.act_fused: decode), the block quantizes them itself from A (q8_group, a
//     thread a block of 32) and the matmul is one launch; else q8_act_kernel quantized them into
//     the workspace before, and the block copies its rows;
//   - a lane decodes its group of each row once (q_group_s8) and takes dp4a with every
//     activation row; warp sums at the end.
// The activations go through shared memory in chunks of `kc` groups when all of K does not fit
// (a block barrier per chunk).
#pragma once

#include "device/quant_act.h"
#include "device/quant_stage.h"
#include "device/quant_words.h"

DUET_DEV_BEGIN

// A group's products with one activation block: sc * dot per half, plus the minimum times the
// activations' sums.
DUET_DEV float q_group_dot(const uint32_t (&v)[8], const float (&sc)[2], const float (&mn)[2],
                           const uint32_t (&q)[8], float d, float ds0, float ds1) {
  int s0 = 0, s1 = 0;
  DUET_UNROLL for (int i = 0; i < 4; ++i) {
    s0 = dp4a(v[i], q[i], s0);
    s1 = dp4a(v[i + 4], q[i + 4], s1);
  }
  return d * (sc[0] * small_i2f(s0) + sc[1] * small_i2f(s1)) + mn[0] * ds0 + mn[1] * ds1;
}

// Two blocks of 8 warps an SM at least (128 registers a thread): enough copies in flight. The
// synchronous instance (sm_75) needs more than 128 registers to keep its accumulators and a
// group's words without spilling, and asks for one block.
template <class Arch>
DUET_KERNEL_BOUNDED_MIN(256, Arch::kAsync ? 2 : 1)
qmv_kernel(const QMatmulParams p) {
  // cp.async instances run on sm_80+, the synchronous ones before (host/launch_plan.cpp).
  if constexpr (Arch::kAsync) {
    if (device_arch_below(80)) return;
  } else {
    if (device_arch_at_least(80)) return;
  }
  constexpr int MR = kQMvMaxRows, MA = kQIntRows;
  const int R = p.rpw, S = Arch::kAsync ? p.stages : 1;
  const int t0 = tid(), w = warp(), ln = lane();
  const int n0 = (bid_x() * nwarps() + w) * R;
  const int rows = p.N - n0 < R ? (p.N - n0 > 0 ? p.N - n0 : 0) : R;  // this warp's rows
  const int m0 = bid_y() * MA, ma = p.M - m0 < MA ? p.M - m0 : MA;
  const int groups = p.K / 32, qb = q_block_bytes(p.fmt), gpb = q_block_elems(p.fmt) / 32;
  const bool has_min = q_has_min(p.fmt);
  const Q8Block* qa = p.act_fused ? nullptr : p.qa + (int64_t(bid_z()) * p.M + m0) * groups;

  // Shared memory: the activation chunk [act_rows][kc] Q8Blocks, then each warp's ring of
  // `stages` x `rpw` rows of w_pitch bytes.
  auto* act = reinterpret_cast<Q8Block*>(smem());
  uint8_t* ring =
      smem() + int64_t(p.act_rows) * p.kc * sizeof(Q8Block) + int64_t(w) * p.stages * R * p.w_pitch;

  // Decode (p.act_fused, all of K in one chunk): the block quantizes its activation rows itself,
  // before its accumulators hold anything; the barrier of the first step publishes them.
  if (p.act_fused) {
    const int64_t a0 = int64_t(bid_z()) / p.batch_inner * p.a_batch[0] +
                       int64_t(bid_z()) % p.batch_inner * p.a_batch[1] + int64_t(m0) * p.a_m;
    DUET_NO_UNROLL
    for (int m = 0; m < ma; ++m) {
      DUET_NO_UNROLL
      for (int k = t0; k < groups; k += nthreads())
        q8_group(p.a, p.a_dtype, a0 + int64_t(m) * p.a_m + int64_t(k) * 32 * p.a_k, p.a_k,
                 act + m * p.kc + k);
    }
  }

  float acc[MR][MA];
  DUET_UNROLL for (int r = 0; r < MR; ++r) DUET_UNROLL for (int m = 0; m < MA; ++m) acc[r][m] = 0.f;

  const int nchunks = (groups + p.kc - 1) / p.kc;
  for (int c = 0; c < nchunks; ++c) {
    const int c0 = c * p.kc, c1 = c0 + p.kc < groups ? c0 + p.kc : groups;
    const int steps = (c1 - c0 + 31) / 32;
    sync();  // every warp is done with the previous chunk's activations
    const int n = c1 - c0;
    if (!p.act_fused) {
      DUET_NO_UNROLL
      for (int i = t0; i < ma * n * 3; i += nthreads()) {
        const int m = i / (3 * n), k = i / 3 % n, part = i % 3;
        copy16<Arch>(
            reinterpret_cast<uint8_t*>(act + m * p.kc + k) + 16 * part,
            reinterpret_cast<const uint8_t*>(qa + int64_t(m) * groups + c0 + k) + 16 * part, 16);
      }
      commit<Arch>();
    }
    // Stage s of the ring holds step s's bytes of this warp's rows; returns their offsets.
    auto stage = [&](int step) {
      const int g0 = c0 + 32 * step, g1 = g0 + 32 < c1 ? g0 + 32 : c1;
      uint8_t* dst = ring + (step % S) * R * p.w_pitch;
      DUET_UNROLL for (int r = 0; r < MR; ++r) {
        if (r >= rows) break;
        const uint8_t* row = p.w + int64_t(n0 + r) * p.w_row_bytes;
        stage_bytes<Arch>(dst + r * p.w_pitch, row + int64_t(g0 / gpb) * qb,
                          row + int64_t(g1 / gpb) * qb, ln, kWarp);
      }
      commit<Arch>();
    };
    for (int s = 0; s + 1 < S && s < steps; ++s) stage(s);
    for (int step = 0; step < steps; ++step) {
      if (step + S - 1 < steps) {
        // The buffer it overwrites was read in step - 1: every lane is past it.
        sync_warp();
        stage(step + S - 1);
        wait_pending<Arch>(S - 1);
      } else {
        wait_groups<Arch, 0>();
      }
      if (step == 0)
        sync();  // the activation chunk, copied by the whole block
      else
        sync_warp();
      const int g0 = c0 + 32 * step, gl = ln;
      if (g0 + gl >= c1 || rows == 0) continue;
      const uint8_t* buf = ring + (step % S) * R * p.w_pitch;
      uint32_t v[MR][8];
      float sc[MR][2], mn[MR][2];
      DUET_UNROLL for (int r = 0; r < MR; ++r) {
        if (r >= rows) break;
        const uint8_t* row0 = p.w + int64_t(n0 + r) * p.w_row_bytes + int64_t(g0 / gpb) * qb;
        const uint8_t* blk = buf + r * p.w_pitch + offset16(row0) + (gl / gpb) * qb;
        q_group_s8(p.fmt, blk, gl % gpb, v[r], sc[r], mn[r]);
      }
      const int k = g0 - c0 + gl;
      DUET_UNROLL for (int m = 0; m < MA; ++m) {
        if (m >= ma) break;
        const Q8Block& a = act[m * p.kc + k];
        uint32_t q[8];
        q8_words(a, q);
        const Vec16 f = load16(&a.d);
        const float d = ffrom(f.w[0]), ds0 = has_min ? ffrom(f.w[1]) : 0.f,
                    ds1 = has_min ? ffrom(f.w[2]) : 0.f;
        DUET_UNROLL for (int r = 0; r < MR; ++r) {
          if (r >= rows) break;
          acc[r][m] += q_group_dot(v[r], sc[r], mn[r], q, d, ds0, ds1);
        }
      }
    }
  }

  const int64_t cb = int64_t(bid_z()) * p.M * p.N;
  DUET_UNROLL for (int r = 0; r < MR; ++r) {
    if (r >= rows) break;
    DUET_UNROLL for (int m = 0; m < MA; ++m) {
      if (m >= ma) break;
      const float s = warp_sum(acc[r][m]);
      if (ln == 0) store_f32(p.c, p.c_dtype, cb + int64_t(m0 + m) * p.N + n0 + r, s);
    }
  }
}

DUET_DEV_END
