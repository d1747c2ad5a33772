// The int_dot mat-vec's shape (quant_mv.h), which the selection (host/shapes.h, select.cpp) and
// the launch plan read too: blocks of kQMvThreads threads sharing K; an instance per block format
// and activation rows a block.
#pragma once

#include "device/params.h"

namespace duet::kernels::dev {

inline constexpr int kQMvThreads = 128;
// A block's activation rows for M rows of A (1, 2, 4 or 8: at least min(M, kQIntRows)), and its
// weight rows: 4 for one activation row, whose sums leave registers to spare, else 2.
DUET_QFMT_HD inline constexpr int qmv_act_rows(int64_t M) {
  return M <= 1 ? 1 : M <= 2 ? 2 : M <= 4 ? 4 : kQIntRows;
}
DUET_QFMT_HD inline constexpr int qmv_rows(int act_rows) {
  return act_rows == 1 ? 4 : 2;
}
// Blocks an SM the instance is compiled for (its registers: at most 64 at 8 blocks of 4 warps),
// 6 (85 registers) where the decode of four rows of q2_k or q3_k would spill at 64, 7 (72) for
// q5_k and q6_k, which spilled at 64 on sm_75 and sm_80 once a block could belong to any member
// of a group (QMvParams).
DUET_QFMT_HD inline constexpr int qmv_min_blocks(QFmt f, int act_rows) {
  if (act_rows != 1) return 8;
  if (f == QFmt::q2_k || f == QFmt::q3_k) return 6;
  return f == QFmt::q5_k || f == QFmt::q6_k ? 7 : 8;
}

}  // namespace duet::kernels::dev
