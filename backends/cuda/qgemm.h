// A matmul of block-quantized weights through cuBLASLt, without ever holding the dequantized
// weight: K is walked in chunks, each chunk of the weight dequantized to f16 (bf16 for bf16
// activations) into a tile of at most `tile_bytes` of the device's workspace, and multiplied
// into an f32 result by one GEMM (beta 1 after the first chunk). Activations that are not dense
// in the GEMM's type are copied once into the workspace; an f16 or bf16 output is written by a
// last cast of the f32 result. Pure planning: the rules ask whether it applies, the device runs
// it, the tests check it against the reference with the fake driver.
#pragma once

#include <cstdint>

#include "duet/op.h"
#include "gemm.h"

namespace duet::cuda {

// The default bound on the dequantized weight tile (DeviceOptions::dequant_tile_bytes): four
// chunks of a 4096 x 14336 layer; the weight itself stays in its blocks.
inline constexpr uint64_t kDequantTileBytes = 32ull << 20;

struct DequantGemm {
  DType compute = DType::f16;      // the GEMM's operands (f16, or bf16 for bf16 activations)
  int64_t rows = 0, N = 0, K = 0;  // rows of A (batch dims folded), weight rows, K
  int64_t kc = 0, chunks = 0;      // K per chunk (whole blocks), and how many
  bool cast_a = false;             // A copied to a dense `compute` matrix first
  bool f32_result = false;         // the output is not f32: accumulate in the workspace, cast last
  // Workspace layout (bytes from its start; each part 256-byte aligned) and size, the cuBLASLt
  // scratch last.
  uint64_t a_at = 0, tile_at = 0, result_at = 0, gemm_at = 0, gemm_bytes = 0, total = 0;

  // The GEMM of chunk c: result[rows, N] (+)= A[:, kc c ...] x tile^T, column-major as cuBLASLt
  // takes it (A operand the tile, B operand A's rows); `accumulate` for c > 0.
  GemmCall gemm(int64_t c) const;
  uint64_t tile_bytes() const;  // N x kc of `compute`
};

// How `op` (matmul of float activations by a quantized [N, K] weight, transpose_b) runs this
// way, or why it cannot.
Result<DequantGemm> plan_dequant_gemm(const OpDesc& op, uint64_t tile_bytes,
                                      uint64_t gemm_workspace_bytes);

}  // namespace duet::cuda
