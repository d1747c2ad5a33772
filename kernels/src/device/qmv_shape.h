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
// 6 (85 registers) where the decode of four rows of q2_k or q3_k would spill at 64.
DUET_QFMT_HD inline constexpr int qmv_min_blocks(QFmt f, int act_rows) {
  return act_rows == 1 && (f == QFmt::q2_k || f == QFmt::q3_k) ? 6 : 8;
}

}  // namespace duet::kernels::dev
