// A BLIS-style blocked GEMM for the CPU backend: C = A B over strided operands of any float
// dtype (converted to f32 while packing), batched, on the backend's thread pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/kernels.h"
#include "scratch.h"
#include "thread_pool.h"

namespace duet::cpu::kernels {

// A logical [rows x cols] matrix per batch: element (r, c) of batch i is element
// offsets[i] + r * rs + c * cs of `base` (in elements of `type`). Strides may be anything,
// including 0 (broadcast) and the swapped strides of a transposed view.
struct MatrixOperand {
  const std::byte* base = nullptr;
  Elem type = Elem::f32;
  int64_t rs = 0, cs = 0;
  std::vector<int64_t> offsets;  // one per batch
};

struct GemmArgs {
  int64_t M = 0, N = 0, K = 0, batches = 1;
  MatrixOperand a;     // M x K
  MatrixOperand b;     // K x N
  float* c = nullptr;  // dense f32: batch i, row r at c + i * c_batch_stride + r * ldc
  int64_t ldc = 0, c_batch_stride = 0;
  // Multiply in bf16 (inputs rounded to bf16, f32 accumulation) where the kernels have bf16 dot
  // products; elsewhere, and for products of few rows (bound by memory), in f32.
  bool bf16 = false;
};

// Scratch (packed panels, A slivers) comes from `scratch`; when it cannot be had the product is
// abandoned and `scratch` says so (scratch.h).
void gemm(const Kernels& k, const GemmArgs& g, ThreadPool& pool, Scratch& scratch);

// Element size of a kernel element type.
inline int64_t elem_size(Elem t) {
  return t == Elem::f32 ? 4 : 2;
}

}  // namespace duet::cpu::kernels
