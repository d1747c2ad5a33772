// The product of float activations with a block-quantized weight, C = X W^T, on the backend's
// thread pool. X's rows are quantized to 8 bits per 32 once (the "repack" is the activations');
// W is read in its blocks: for few rows (decode) each weight row is streamed once through the
// ISA's row dot, else tiles of weight rows are unpacked into a per-thread L2 buffer that every
// activation row reuses (kernels/quant.h). No dequantized copy of W is ever made.
#pragma once

#include <cstdint>

#include "duet/dtype.h"
#include "kernels/quant.h"
#include "scratch.h"
#include "thread_pool.h"

namespace duet::cpu::kernels {

struct QuantMatmul {
  DType format = DType::q4_0;
  const uint8_t* w = nullptr;  // N rows of K / block elements blocks, `w_row_bytes` apart
  int64_t w_row_bytes = 0;
  int64_t n = 0, k = 0;
  const float* x = nullptr;  // M rows of K floats, `ldx` apart
  int64_t m = 0, ldx = 0;
  float* y = nullptr;  // M rows of N floats, `ldy` apart
  int64_t ldy = 0;
};

// Which kernels a product of `m` activation rows through `format` runs on an ISA's table: the
// row dots (decode), or tiles whose weights are unpacked by the ISA's decoder or, where the table
// has none, by the portable one (through duet::unpack_block, several times slower).
enum class QuantPath { row_dot, tile, tile_portable_unpack };
QuantPath quant_path(const QuantKernels& qk, DType format, int64_t m);

// Scratch (the quantized activations, weight tiles) comes from `scratch`; when it cannot be had
// the product is abandoned and `scratch` says so (scratch.h).
void quantized_matmul(const QuantKernels& qk, const QuantMatmul& a, ThreadPool& pool,
                      Scratch& scratch);

}  // namespace duet::cpu::kernels
