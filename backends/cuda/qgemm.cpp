#include "qgemm.h"

#include <algorithm>

namespace duet::cuda {

namespace {

uint64_t align256(uint64_t v) {
  return (v + 255) / 256 * 256;
}

}  // namespace

uint64_t DequantGemm::tile_bytes() const {
  return static_cast<uint64_t>(N) * static_cast<uint64_t>(kc) * dtype_size(compute);
}

GemmCall DequantGemm::gemm(int64_t c) const {
  // Column-major: D (N x rows, ld N) = tile (stored kc x N, ld kc: transposed) x A^T (K x rows
  // with ld K, starting at column k0 of A's rows).
  GemmCall g;
  g.m = N;
  g.n = rows;
  g.k = std::min(kc, K - c * kc);
  g.trans_a = true;
  g.lda = g.k;
  g.trans_b = false;
  g.ldb = K;
  g.ldd = N;
  g.a_input = 1;
  g.b_input = 0;
  g.a_type = g.b_type = compute;
  g.d_type = DType::f32;
  g.accumulate = c > 0;
  return g;
}

Result<DequantGemm> plan_dequant_gemm(const OpDesc& op, uint64_t tile_bytes,
                                      uint64_t gemm_workspace_bytes) {
  auto refuse = [&](const std::string& why) -> Status {
    return Err(Code::unsupported).op(op_name(op.kind), op.name).note(why);
  };
  if (op.kind != OpKind::matmul || op.inputs.size() != 2 || !is_quantized(op.inputs[1].dtype))
    return refuse("not a matmul of a block-quantized weight");
  const TensorDesc &a = op.inputs[0], &w = op.inputs[1];
  if (!is_float(a.dtype)) return refuse("'" + op.input_name(0) + "' is not a float tensor");
  if (op.attrs.transpose_a) return refuse("transposed activations (copy them first)");
  if (w.rank != 2 || !op.attrs.transpose_b)
    return refuse("the weight is not a [N, K] matrix read transposed");
  if (!op.output.is_contiguous()) return refuse("output " + op.output.str() + " is not dense");
  DequantGemm d;
  d.compute = a.dtype == DType::bf16 ? DType::bf16 : DType::f16;
  d.N = w.dim(0);
  d.K = w.dim(1);
  d.rows = op.output.numel() / std::max<int64_t>(d.N, 1);
  const int64_t be = dtype_block_elems(w.dtype);
  // Chunks of whole blocks, 8-element aligned (16-byte rows of the tile), within the bound.
  const int64_t unit = std::max<int64_t>(be, 8);
  const int64_t fit = static_cast<int64_t>(tile_bytes / (static_cast<uint64_t>(d.N) * 2));
  d.kc = std::clamp<int64_t>(fit / unit * unit, unit, (d.K + unit - 1) / unit * unit);
  d.kc = std::min(d.kc, d.K);
  d.chunks = (d.K + d.kc - 1) / d.kc;
  d.cast_a = !(a.dtype == d.compute && a.is_contiguous() && a.offset % 8 == 0);
  d.f32_result = op.output.dtype != DType::f32;
  uint64_t at = 0;
  if (d.cast_a) {
    d.a_at = at;
    at = align256(at + static_cast<uint64_t>(d.rows * d.K) * dtype_size(d.compute));
  }
  d.tile_at = at;
  at = align256(at + d.tile_bytes());
  if (d.f32_result) {
    d.result_at = at;
    at = align256(at + static_cast<uint64_t>(d.rows * d.N) * 4);
  }
  d.gemm_at = at;
  d.gemm_bytes = gemm_workspace_bytes;
  d.total = at + gemm_workspace_bytes;
  return d;
}

}  // namespace duet::cuda
