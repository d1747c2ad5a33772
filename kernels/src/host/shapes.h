// Tile geometry of the kernels, shared by the selection (which sizes launches from the device's
// limits) and the launch planning (which checks and uses them). Must agree with
// kernels/src/device/*.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "device/qmv_shape.h"
#include "device/wgmma_shape.h"
#include "duet/dtype.h"
#include "duet/op.h"

namespace duet::kernels::shapes {

// ---- tensor-core attention (attention_tc.h). `flash` says the tier: the tiled tier keeps Q in
// shared memory at head dim 256 (registers run out with m16n8k8) and uses 16-key tiles there.
inline int attn_key_tile(int head_dim, bool flash) {  // BC: keys per tile
  return head_dim <= 128 ? 64 : flash ? 32 : 16;
}
inline bool attn_q_in_smem(int head_dim, bool flash) {
  return !flash && head_dim > 128;
}
inline int attn_pitch(int head_dim) {  // shared row pitch in elements
  return head_dim + 8;
}
// The Q tile, then stages x (K tile + V tile), 16-bit elements; Q's space is reused by the K/V
// tiles once Q is in registers.
inline uint64_t attn_smem_bytes(int head_dim, int warps, int stages, bool flash) {
  const uint64_t pitch = static_cast<uint64_t>(attn_pitch(head_dim));
  const uint64_t q = static_cast<uint64_t>(warps) * 16 * pitch;
  const uint64_t kv = static_cast<uint64_t>(stages) * 2 * attn_key_tile(head_dim, flash) * pitch;
  if (attn_q_in_smem(head_dim, flash)) return 2 * (q + kv);
  return 2 * (q > kv ? q : kv);
}
inline int attn_max_warps(int head_dim) {
  return head_dim > 128 ? 4 : 8;
}

// ---- Hopper attention (attention_wgmma.h, geometry in device/wgmma_shape.h)
inline bool wgmma_head_dim(int head_dim) {
  return head_dim == 64 || head_dim == 128;
}
inline int wgmma_key_tile(int head_dim) {
  return head_dim == 64 ? dev::WgShape<64>::kBN : dev::WgShape<128>::kBN;
}
inline int wgmma_rows(int head_dim) {  // query rows per block
  return head_dim == 64 ? dev::WgShape<64>::kBM : dev::WgShape<128>::kBM;
}
inline int wgmma_threads(int head_dim) {
  return head_dim == 64 ? dev::WgShape<64>::kThreads : dev::WgShape<128>::kThreads;
}
inline int wgmma_stages(int head_dim) {
  return head_dim == 64 ? dev::WgShape<64>::kStages : dev::WgShape<128>::kStages;
}
inline uint64_t wgmma_smem_bytes(int head_dim) {
  return head_dim == 64 ? dev::WgShape<64>::kSmem : dev::WgShape<128>::kSmem;
}

// ---- tensor-core matmul (matmul_tc.h): warp tile 32x64, k tile 32
inline constexpr int kMmBK = 32, kMmWM = 32, kMmWN = 64;
inline uint64_t matmul_tc_stage_bytes(int warps_m, int warps_n, bool b_nmajor) {
  const uint64_t bm = static_cast<uint64_t>(warps_m) * kMmWM;
  const uint64_t bn = static_cast<uint64_t>(warps_n) * kMmWN;
  const uint64_t a = bm * (kMmBK + 8);
  const uint64_t b = b_nmajor ? bn * (kMmBK + 8) : kMmBK * (bn + 8);
  return 2 * (a + b);
}
// B goes n-major into shared memory when its k stride is 1 (a [N, K] weight, transpose_b).
inline bool matmul_b_nmajor(const OpDesc& op) {
  const TensorDesc& b = op.inputs[1];
  const int64_t k_stride = op.attrs.transpose_b ? b.stride(-1) : b.stride(-2);
  return k_stride == 1 && b.dim(op.attrs.transpose_b ? -1 : -2) > 1;
}

// ---- block-quantized weights staged raw (quant_stage.h): a row's bytes from an even address,
// copied from 16 bytes below, plus the 4 bytes the word loader reads past the last word.
inline uint64_t q_stage_pitch(uint64_t span_bytes) {
  return (span_bytes + 14 + 4 + 15) / 16 * 16;
}
// The bytes of `groups` consecutive groups of 32 of a row (whole blocks).
inline uint64_t q_span_bytes(DType f, int groups) {
  const int gpb = static_cast<int>(dtype_block_elems(f) / 32);
  return static_cast<uint64_t>((groups + gpb - 1) / gpb) *
         static_cast<uint64_t>(dtype_block_bytes(f));
}

// ---- int_dot mat-vec (quant_mv.h): its warps' sums, [warps][rows][act_rows] floats.
inline uint64_t qmv_smem_bytes(int act_rows) {
  return static_cast<uint64_t>(dev::kQMvThreads / 32 * dev::qmv_rows(act_rows) * act_rows) * 4;
}

// ---- int8 tensor-core quantized matmul (quant_mmq.h): per stage the activations [4][BM] and
// the raw weight rows [BN][pitch]; once, the decoded weights [4][BN], 48 bytes a group and row.
inline uint64_t mmq_pitch(DType f) {
  return q_stage_pitch(q_span_bytes(f, 4));
}
inline uint64_t mmq_smem_bytes(DType f, int bm, int bn, int stages) {
  const uint64_t a = 4ull * static_cast<uint64_t>(bm) * 48;
  const uint64_t raw = static_cast<uint64_t>(bn) * mmq_pitch(f);
  return static_cast<uint64_t>(stages) * (a + raw) + 4ull * static_cast<uint64_t>(bn) * 48;
}

// ---- generic mat-vec (matvec.h): decode shapes (at most 8 rows of A) with B's k stride 1; the
// rows of A as f32 [min(M, 8)][kc] in shared memory.
inline bool matvec_applies(const OpDesc& op) {
  const DType t = op.inputs[0].dtype;
  return op.output.dim(-2) <= 8 && matmul_b_nmajor(op) && op.inputs[1].dtype == t &&
         (t == DType::f32 || t == DType::f16 || t == DType::bf16);
}
inline uint64_t matvec_smem_bytes(int act_rows, int kc) {
  return static_cast<uint64_t>(act_rows) * static_cast<uint64_t>(kc) * 4;
}

// ---- the generic tier's attention (attention_simt.h): the SIMT flash kernel for prefill (head
// dims up to 128, in tiles of 64 or 128 dims), the split-KV decode kernel for up to 16 rows per
// kv head (head dims up to 256), and the row-per-block kernel (generic.h) for everything else.
enum class GenAttn : uint8_t { rowwise, flash, decode };
inline constexpr int kGenDecChunk = 128;  // keys per split at least: a chunk per warp
inline int gen_flash_dm(int head_dim) {
  return head_dim <= 64 ? 64 : 128;
}
inline int gen_flash_bm(int dm) {  // rows per block
  return dm == 64 ? 64 : 32;
}
inline constexpr int kGenFlashBN = 32;  // keys per tile
inline uint64_t gen_flash_smem(int dm) {
  return (static_cast<uint64_t>(gen_flash_bm(dm)) * dm + 2ull * kGenFlashBN * (dm + 4)) * 4;
}
inline int gen_decode_dm(int head_dim) {
  return head_dim <= 64 ? 64 : head_dim <= 128 ? 128 : 256;
}
// Rows per decode block: 1, 4 or 8 (4 at most at head dim 256, for registers).
inline int gen_decode_rows(int64_t rows, int dm) {
  return rows <= 1 ? 1 : rows <= 4 || dm > 128 ? 4 : 8;
}
inline uint64_t gen_decode_smem(int dm, int g) {
  const uint64_t gp = g < 4 ? 4 : static_cast<uint64_t>(g);
  const uint64_t loop = static_cast<uint64_t>(g) * dm + 4 * 32 * gp;
  const uint64_t merge = 4ull * g * 2 + 4ull * g * dm;
  return (loop > merge ? loop : merge) * 4;
}
inline GenAttn gen_attn_kind(int head_dim, int64_t rows, uint64_t smem_limit) {
  const int dm = gen_decode_dm(head_dim);
  if (head_dim <= 256 && rows <= 16 && gen_decode_smem(dm, gen_decode_rows(rows, dm)) <= smem_limit)
    return GenAttn::decode;
  if (head_dim <= 128 && gen_flash_smem(gen_flash_dm(head_dim)) <= smem_limit)
    return GenAttn::flash;
  return GenAttn::rowwise;
}

// ---- generic kernels
// The split-KV merge (attention_combine): a block per output row, the splits' weights and the
// reductions' partials in shared memory.
inline constexpr int kCombineThreads = 128;
inline uint64_t combine_smem(int splits) {
  return (static_cast<uint64_t>(splits) + kCombineThreads / 32) * 4;
}
inline constexpr int kGenMatmulThreads = 256;
inline constexpr uint64_t kGenMatmulSmem = 2 * 16 * 64 * 4;
inline constexpr int kGenAttnThreads = 128;
inline uint64_t gen_attn_smem_bytes(int head_dim) {
  return (2 * static_cast<uint64_t>(head_dim) + kGenAttnThreads + kGenAttnThreads / 32) * 4;
}
// A thread per 4 elements of a row, 64 to 1024 threads: rows of up to 8192 elements fit the
// registers of rows_kernel's fast path (kRowRegs a thread), and a single decode row of 4096 is
// spread over 32 warps rather than walked by 8.
inline int rows_threads(int64_t n) {
  const int64_t warps = (n + 4 * 32 - 1) / (4 * 32);
  return static_cast<int>(32 * std::clamp<int64_t>(warps, 2, 32));
}

}  // namespace duet::kernels::shapes
