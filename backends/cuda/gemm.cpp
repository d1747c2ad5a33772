#include "gemm.h"

#include <algorithm>
#include <climits>
#include <vector>

namespace duet::cuda {

namespace {

// A logical rows x cols matrix whose element (r, c) sits at r*sr + c*sc, as a column-major
// operand: stored as is (rows x cols, ld = sc) or transposed (cols x rows, ld = sr).
bool as_column_major(int64_t rows, int64_t cols, int64_t sr, int64_t sc, bool* trans, int64_t* ld) {
  if (rows == 1 || sr == 1) {
    const int64_t l = cols == 1 ? rows : sc;
    if (l >= std::max<int64_t>(rows, 1)) {
      *trans = false;
      *ld = l;
      return true;
    }
  }
  if (cols == 1 || sc == 1) {
    const int64_t l = rows == 1 ? cols : sr;
    if (l >= std::max<int64_t>(cols, 1)) {
      *trans = true;
      *ld = l;
      return true;
    }
  }
  return false;
}

// The stride of output batch dim j in input `x` (0 where x broadcasts along it).
int64_t batch_stride(const TensorDesc& x, int out_batch_rank, int j) {
  const int xj = j - (out_batch_rank - (x.rank - 2));
  if (xj < 0 || x.shape[static_cast<size_t>(xj)] == 1) return 0;
  return x.strides[static_cast<size_t>(xj)];
}

}  // namespace

Result<GemmCall> plan_gemm(const OpDesc& op) {
  auto refuse = [&](const std::string& why) -> Status {
    return Err(Code::unsupported).op(op_name(op.kind), op.name).note(why);
  };
  if (op.kind != OpKind::matmul || op.inputs.size() != 2) return refuse("not a matmul");
  if (is_quantized(op.inputs[1].dtype) || is_quantized(op.inputs[0].dtype))
    return refuse("cuBLAS reads no block-quantized weight");
  const TensorDesc& a = op.inputs[0];
  const TensorDesc& b = op.inputs[1];
  const TensorDesc& out = op.output;
  const bool ta = op.attrs.transpose_a, tb = op.attrs.transpose_b;
  const int64_t M = out.dim(-2), N = out.dim(-1);
  const int64_t K = ta ? a.dim(-2) : a.dim(-1);
  const int64_t sa_m = ta ? a.stride(-1) : a.stride(-2), sa_k = ta ? a.stride(-2) : a.stride(-1);
  const int64_t sb_k = tb ? b.stride(-1) : b.stride(-2), sb_n = tb ? b.stride(-2) : b.stride(-1);

  GemmCall g;
  g.m = N;
  g.n = M;
  g.k = K;
  g.a_type = b.dtype;
  g.b_type = a.dtype;
  g.d_type = out.dtype;
  // GEMM A = b^T (N x K): element (n, k) at n*sb_n + k*sb_k. GEMM B = a^T (K x M).
  if (!as_column_major(N, K, sb_n, sb_k, &g.trans_a, &g.lda))
    return refuse("'" + op.input_name(1) + "' " + b.str() + " has no unit stride in its matrix");
  if (!as_column_major(K, M, sa_k, sa_m, &g.trans_b, &g.ldb))
    return refuse("'" + op.input_name(0) + "' " + a.str() + " has no unit stride in its matrix");
  if (!out.is_contiguous()) return refuse("output " + out.str() + " is not dense");
  g.ldd = N;

  // Batch dims (0..2 of them) must collapse into one stride per operand.
  const int nb = out.rank - 2;
  std::vector<int> kept;
  for (int j = 0; j < nb; ++j)
    if (out.shape[static_cast<size_t>(j)] > 1) kept.push_back(j);
  int64_t batch = 1;
  for (int j : kept) batch *= out.shape[static_cast<size_t>(j)];
  if (batch > INT_MAX) return refuse("batch of " + std::to_string(batch) + " exceeds int32");
  g.batch = batch;
  auto collapse = [&](const TensorDesc& x, int64_t* stride) {
    *stride = 0;
    for (size_t i = 0; i < kept.size(); ++i) {
      const int64_t s = batch_stride(x, nb, kept[i]);
      if (i + 1 < kept.size()) {
        const int next = kept[i + 1];
        if (s != batch_stride(x, nb, next) * out.shape[static_cast<size_t>(next)]) return false;
      } else {
        *stride = s;
      }
    }
    return true;
  };
  if (!collapse(b, &g.stride_a))
    return refuse("the batch dims of '" + op.input_name(1) + "' " + b.str() +
                  " do not collapse into one stride");
  if (!collapse(a, &g.stride_b))
    return refuse("the batch dims of '" + op.input_name(0) + "' " + a.str() +
                  " do not collapse into one stride");
  g.stride_d = M * N;
  if (g.batch == 1) g.stride_a = g.stride_b = g.stride_d = 0;
  return g;
}

}  // namespace duet::cuda
