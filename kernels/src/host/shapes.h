// Tile geometry of the kernels, shared by the selection (which sizes launches from the device's
// limits) and the launch planning (which checks and uses them). Must agree with
// kernels/src/device/*.h.
#pragma once

#include <cstdint>
#include <string>

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

// ---- int8 tensor-core quantized matmul (quant_mma.h): per buffer, the 64 rows of A and the 64
// weight rows of a chunk of kc groups of 32 as int8 (rows padded by 16 bytes against bank
// conflicts), A's scale and offset sums (3 floats a group and row), the weights' scales and
// offsets (4 floats a group and row).
inline uint64_t qmma_pitch(int kc) {
  return static_cast<uint64_t>(kc) * 32 + 16;
}
inline uint64_t qmma_stage_bytes(int kc) {
  const uint64_t k = static_cast<uint64_t>(kc);
  return 128 * qmma_pitch(kc) + 64 * k * 3 * 4 + 64 * k * 4 * 4;
}
inline uint64_t qmma_smem_bytes(int kc, int stages) {
  return static_cast<uint64_t>(stages) * qmma_stage_bytes(kc);
}

// ---- generic kernels
inline constexpr int kGenMatmulThreads = 256;
inline constexpr uint64_t kGenMatmulSmem = 2 * 16 * 64 * 4;
inline constexpr int kGenAttnThreads = 128;
inline uint64_t gen_attn_smem_bytes(int head_dim) {
  return (2 * static_cast<uint64_t>(head_dim) + kGenAttnThreads + kGenAttnThreads / 32) * 4;
}
inline int rows_threads(int64_t n) {
  return n >= 256 ? 256 : n > 64 ? 128 : 64;
}

}  // namespace duet::kernels::shapes
