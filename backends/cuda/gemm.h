// A matmul op expressed as one column-major strided-batched GEMM, the form cuBLAS(Lt) takes.
// Pure: the rules use it to decide whether cuBLASLt can run an op (and say why not), the device
// to call it, and the tests to check the mapping against the reference without a GPU.
#pragma once

#include <cstdint>

#include "duet/op.h"

namespace duet::cuda {

// Column-major D[m x n] = op(A)[m x k] * op(B)[k x n], `batch` times, with A, B, D advancing by
// their batch strides (0 = the same matrix for every batch). Row-major C = a @ b is computed as
// C^T = b^T a^T, so the GEMM's A is the op's `b` and the GEMM's B is the op's `a`.
struct GemmCall {
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  bool trans_a = false, trans_b = false;  // op(X) = X^T
  int64_t lda = 0, ldb = 0, ldd = 0;      // leading dimensions, in elements
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;
  int a_input = 1, b_input = 0;  // which op input feeds the GEMM's A and B
  DType a_type = DType::f32, b_type = DType::f32, d_type = DType::f32;
  bool accumulate = false;  // D += op(A) op(B) (beta 1), else D = op(A) op(B)
  bool operator==(const GemmCall&) const = default;
};

// The GEMM for `op`, or why its layout cannot be one: a matrix with no unit stride, or batch
// dims that do not collapse into a single stride. Strides and offsets come from op's
// descriptors; the output must be dense.
Result<GemmCall> plan_gemm(const OpDesc& op);

}  // namespace duet::cuda
