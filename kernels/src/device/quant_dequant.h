// A block-quantized [V, D] tensor cast to dense f32, f16 or bf16 at the speed of its bytes (the
// generic tier's cast of a block format, and the weight tiles the CUDA backend dequantizes for
// cuBLAS): a thread per group of 32, which it reads straight from global memory as aligned words
// (quant_words.h: 18-byte blocks leave fields on any even address) and writes as 16-byte stores.
// Group t of the whole tensor is row t / (D / 32) and lands at element 32 t of the dense output,
// so a warp writes 32 neighbouring groups: 2 KiB of f16 in one contiguous range.
//
// The first version staged 32 groups of a row into shared memory per warp and walked a row per
// warp in four steps, each waiting on its copies: on an H200 it dequantized a 4096 x 4096 q4_0
// tile in 100 us at 4% of DRAM throughput (Nsight Compute, 2026-11-28). Values are fma(scale, q,
// min) in f32, rounded once to the output's type as the generic tier's decode does.
#pragma once

#include "device/quant_words.h"
#include "device/tc_common.h"

DUET_DEV_BEGIN

template <class Arch>
DUET_KERNEL_BOUNDED(256)
qdequant_kernel(const QRowsParams p) {
  grid_dependency_sync();
  if constexpr (Arch::kAsync) {
    if (device_arch_below(80)) return;
  } else {
    if (device_arch_at_least(80)) return;
  }
  const int groups = static_cast<int>(p.D / 32), qb = q_block_bytes(p.fmt);
  const int gpb = q_block_elems(p.fmt) / 32;
  const int64_t total = p.rows * groups, step = int64_t(nbid_x()) * nthreads();
  // 32-bit division where the groups' count allows it (64-bit division is a long sequence).
  const bool narrow = total <= 0x7fffffff;
  for (int64_t t = int64_t(bid_x()) * nthreads() + tid(); t < total; t += step) {
    const int64_t r = narrow ? int64_t(uint32_t(t) / uint32_t(groups)) : t / groups;
    const int gi = static_cast<int>(t - r * groups);
    uint32_t v[8];
    float sc[2], mn[2];
    q_group_s8(p.fmt, p.table + r * p.row_bytes + int64_t(gi / gpb) * qb, gi % gpb, v, sc, mn);
    float f[32];
    DUET_UNROLL for (int i = 0; i < 8; ++i) DUET_UNROLL for (int j = 0; j < 4; ++j) {
      const int h = i / 4;
      f[4 * i + j] = fmaf(sc[h], static_cast<float>(static_cast<int8_t>(v[i] >> (8 * j))), mn[h]);
    }
    if (p.out_dtype == Elt::f32) {
      auto* o = static_cast<float*>(p.out) + t * 32;
      DUET_UNROLL for (int q = 0; q < 8; ++q) store16(
          o + 4 * q,
          Vec16{{fbits(f[4 * q]), fbits(f[4 * q + 1]), fbits(f[4 * q + 2]), fbits(f[4 * q + 3])}});
    } else {
      auto* o = static_cast<uint16_t*>(p.out) + t * 32;
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

DUET_DEV_END
