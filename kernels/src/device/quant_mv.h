// The int_dot tier's mat-vec (decode and small batches: up to kQIntRows activation rows per
// block), for every block format, at the speed of the weight's bytes. Its one cost that matters
// is the number of weight bytes each SM has in flight, and then instructions per byte:
//   - a block of kQMvThreads threads owns R weight rows (qmv_rows: 4 for one row of A, 2
//     above) and all of K: thread t takes groups of 32 weights t, t + 128, ... of every row,
//     reading its blocks' words straight from global memory (aligned 4-byte loads joined by
//     funnel shifts, quant_words.h: no shared-memory staging, no barrier in the loop). Each
//     thread has its R rows' words (R x 18 bytes for q4_0) in flight at once, and the grid is
//     N / R blocks of 4 warps (1024 for N 4096), several blocks an SM;
//   - the format is a template argument: the decode (q_group_s8, shared with the int8 tiles)
//     compiles to that format's instructions alone, and the registers of each instance are its
//     own: at most 64 (8 blocks, 32 warps an SM; qmv_min_blocks);
//   - A arrives quantized to int8 per 32 by q8_act_kernel (one launch before); each thread reads
//     its group's Q8Block of each activation row (48 bytes, three 16-byte loads, the same for
//     every block: L1 and L2 hits) once for its R weight rows, and takes dp4a with each;
//   - the per-thread sums are reduced by the warps' shuffles, then across the 4 warps through
//     shared memory (one barrier at the end);
//   - one launch may hold up to kQMvGroup mat-vecs of one format that read the same activations
//     (QMvParams: q, k and v of a decode step; gate and up): the grid's blocks along x are the
//     members' blocks one after the other, each block reading its member's weight in place and
//     writing its member's output, so small mat-vecs (k and v: 256 blocks at N 1024) fill the
//     GPU together and the activations are quantized once.
#pragma once

#include "device/qmv_shape.h"
#include "device/quant_act.h"
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

// The block's member: the last whose first block is at or before bid_x(). Computed where it is
// needed (before the loop and after it) rather than held through the loop; its fields are read
// from the parameter space by index where they are used (ld.param, no copy to local memory): the
// instances of four rows of the k formats have no register to spare.
DUET_DEV int qmv_member(const QMvParams& p) {
  const int bx = bid_x();
  int mi = 0;
  DUET_UNROLL for (int j = 1; j < kQMvGroup; ++j) if (j < p.count && bx >= p.out[j].first) mi = j;
  return mi;
}

// C[b][m0 + m][n0 + r] for the block's MA (>= its rows of A) activation rows and R weight rows
// of its member of the group (QMvParams: the last member whose first block is at or before
// bid_x()).
template <QFmt F, int MA>
DUET_KERNEL_BOUNDED_MIN(kQMvThreads, qmv_min_blocks(F, MA))
qmv_kernel(const QMvParams p) {
  grid_dependency_sync();
  constexpr int R = qmv_rows(MA), NW = kQMvThreads / 32;
  constexpr bool has_min = q_has_min(F);
  const int gpb = q_block_elems(F) / 32, qb = q_block_bytes(F);
  const int mi = qmv_member(p);
  const int n0 = (bid_x() - p.out[mi].first) * R;
  const int rows = p.out[mi].N - n0 < R ? p.out[mi].N - n0 : R;
  const int m0 = bid_y() * kQIntRows, ma = p.M - m0 < MA ? p.M - m0 : MA;
  const int groups = p.K / 32;
  const Q8Block* qa = p.qa + (int64_t(bid_z()) * p.M + m0) * groups;
  // Rows past N read row n0 again (never stored): no branch in the loop.
  const int64_t wrb = p.out[mi].w_row_bytes;
  const uint8_t* w = p.out[mi].w + int64_t(n0) * wrb;
  // The rows' byte offsets from row n0 fit 32 bits (the launch plan checks (R - 1) rows' bytes).
  int roff[R];
  DUET_UNROLL for (int r = 0; r < R; ++r) roff[r] = r < rows ? int(r * wrb) : 0;

  float acc[R][MA];
  DUET_UNROLL for (int r = 0; r < R; ++r) DUET_UNROLL for (int m = 0; m < MA; ++m) acc[r][m] = 0.f;

  for (int g = tid(); g < groups; g += kQMvThreads) {
    const int64_t bo = int64_t(g / gpb) * qb;
    uint32_t v[R][8];
    float sc[R][2], mn[R][2];
    DUET_UNROLL for (int r = 0; r < R; ++r)
        q_group_s8(F, w + roff[r] + bo, g % gpb, v[r], sc[r], mn[r]);
    DUET_UNROLL for (int m = 0; m < MA; ++m) {
      if (m >= ma) break;
      const Q8Block& a = qa[int64_t(m) * groups + g];
      uint32_t q[8];
      q8_words(a, q);
      const Vec16 f = load16(&a.d);
      const float d = ffrom(f.w[0]), ds0 = has_min ? ffrom(f.w[1]) : 0.f,
                  ds1 = has_min ? ffrom(f.w[2]) : 0.f;
      DUET_UNROLL for (int r = 0; r < R; ++r) acc[r][m] +=
          q_group_dot(v[r], sc[r], mn[r], q, d, ds0, ds1);
    }
  }

  // Each warp's sums, then the block's: red[warp][r][m].
  auto* red = reinterpret_cast<float*>(smem());
  const int wp = warp(), ln = lane(), t = tid();
  DUET_UNROLL for (int r = 0; r < R; ++r) DUET_UNROLL for (int m = 0; m < MA; ++m) {
    const float s = warp_sum(acc[r][m]);
    if (ln == 0) red[(wp * R + r) * MA + m] = s;
  }
  sync();
  if (t < R * MA) {
    const int r = t / MA, m = t % MA;
    if (r < rows && m < ma) {
      float s = 0.f;
      DUET_UNROLL for (int i = 0; i < NW; ++i) s += red[(i * R + r) * MA + m];
      const int me = qmv_member(p);
      const int64_t N = p.out[me].N;
      store_f32(p.out[me].c, p.out[me].c_dtype,
                int64_t(bid_z()) * p.M * N + int64_t(m0 + m) * N + n0 + r, s);
    }
  }
}

// use(&qmv_kernel<F, MA>) for format f and a block's activation rows ma (qmv_act_rows): the
// launchers of the GPU and of the emulator pick their instance through it.
template <QFmt F, class Use>
auto qmv_instance_rows(int ma, Use&& use) {
  switch (ma) {
    case 1:
      return use(&qmv_kernel<F, 1>);
    case 2:
      return use(&qmv_kernel<F, 2>);
    case 4:
      return use(&qmv_kernel<F, 4>);
    default:
      return use(&qmv_kernel<F, kQIntRows>);
  }
}
template <class Use>
auto qmv_instance(QFmt f, int ma, Use&& use) {
  switch (f) {
    case QFmt::q8_0:
      return qmv_instance_rows<QFmt::q8_0>(ma, use);
    case QFmt::q4_0:
      return qmv_instance_rows<QFmt::q4_0>(ma, use);
    case QFmt::q4_1:
      return qmv_instance_rows<QFmt::q4_1>(ma, use);
    case QFmt::q5_0:
      return qmv_instance_rows<QFmt::q5_0>(ma, use);
    case QFmt::q5_1:
      return qmv_instance_rows<QFmt::q5_1>(ma, use);
    case QFmt::q2_k:
      return qmv_instance_rows<QFmt::q2_k>(ma, use);
    case QFmt::q3_k:
      return qmv_instance_rows<QFmt::q3_k>(ma, use);
    case QFmt::q4_k:
      return qmv_instance_rows<QFmt::q4_k>(ma, use);
    case QFmt::q5_k:
      return qmv_instance_rows<QFmt::q5_k>(ma, use);
    case QFmt::q6_k:
      return qmv_instance_rows<QFmt::q6_k>(ma, use);
    case QFmt::q4_z:
      break;
  }
  return qmv_instance_rows<QFmt::q4_z>(ma, use);
}

DUET_DEV_END
