// A block-quantized [V, D] tensor cast to dense f32, f16 or bf16 at the speed of its bytes (the
// generic tier's cast of a block format, and the weight tiles the CUDA backend dequantizes for
// cuBLAS): each warp takes a row at a time, stages 32 groups of its raw blocks into shared
// memory in 16-byte copies (quant_stage.h), and each lane decodes one group (quant_words.h) and
// writes its 32 values as 16-byte stores. Values are fma(scale, q, min) in f32, rounded once to
// the output's type as the generic tier's decode does.
#pragma once

#include "device/quant_stage.h"
#include "device/quant_words.h"

DUET_DEV_BEGIN

template <class Arch>
DUET_KERNEL_BOUNDED(256)
qdequant_kernel(const QRowsParams p) {
  if constexpr (Arch::kAsync) {
    if (device_arch_below(80)) return;
  } else {
    if (device_arch_at_least(80)) return;
  }
  const int ln = lane();
  const int groups = static_cast<int>(p.D / 32), qb = q_block_bytes(p.fmt);
  const int gpb = q_block_elems(p.fmt) / 32;
  uint8_t* buf = smem() + warp() * p.w_pitch;
  const int64_t warps = int64_t(nbid_x()) * nwarps();
  for (int64_t r = int64_t(bid_x()) * nwarps() + warp(); r < p.rows; r += warps) {
    const uint8_t* row = p.table + r * p.row_bytes;
    for (int g0 = 0; g0 < groups; g0 += 32) {
      const int g1 = g0 + 32 < groups ? g0 + 32 : groups;
      const uint8_t* lo = row + int64_t(g0 / gpb) * qb;
      sync_warp();  // every lane is done with the previous step's bytes
      const int off = stage_bytes<Arch>(buf, lo, row + int64_t(g1 / gpb) * qb, ln, kWarp);
      commit<Arch>();
      wait_pending<Arch>(0);
      sync_warp();
      const int gi = g0 + ln;
      if (gi >= g1) continue;
      uint32_t v[8];
      float sc[2], mn[2];
      q_group_s8(p.fmt, buf + off + (ln / gpb) * qb, gi % gpb, v, sc, mn);
      float f[32];
      DUET_UNROLL for (int i = 0; i < 8; ++i) DUET_UNROLL for (int j = 0; j < 4; ++j) {
        const int h = i / 4;
        f[4 * i + j] = fmaf(sc[h], static_cast<float>(static_cast<int8_t>(v[i] >> (8 * j))), mn[h]);
      }
      const int64_t at = r * p.D + int64_t(gi) * 32;
      if (p.out_dtype == Elt::f32) {
        auto* o = static_cast<float*>(p.out) + at;
        DUET_UNROLL for (int q = 0; q < 8; ++q)
            store16(o + 4 * q, Vec16{{fbits(f[4 * q]), fbits(f[4 * q + 1]), fbits(f[4 * q + 2]),
                                      fbits(f[4 * q + 3])}});
      } else {
        auto* o = static_cast<uint16_t*>(p.out) + at;
        const bool bf = p.out_dtype == Elt::bf16;
        DUET_UNROLL for (int q = 0; q < 4; ++q) {
          uint32_t w[4];
          DUET_UNROLL for (int e = 0; e < 4; ++e) {
            const float a = f[8 * q + 2 * e], b = f[8 * q + 2 * e + 1];
            // cvt.rn.{f16,bf16}x2 on sm_80+; the same rounding in integer code before.
            if constexpr (Arch::kAsync)
              w[e] = bf ? pack2(a, b, Bf16{}) : pack2(a, b, F16{});
            else
              w[e] = bf ? uint32_t(f2b(a)) | uint32_t(f2b(b)) << 16
                        : uint32_t(f2h(a)) | uint32_t(f2h(b)) << 16;
          }
          store16(o + 8 * q, Vec16{{w[0], w[1], w[2], w[3]}});
        }
      }
    }
  }
}

DUET_DEV_END
