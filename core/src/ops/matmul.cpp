// matmul: shape rule (with quantized weights) and flop count.
#include "op_facts.h"

namespace duet::ops {

namespace {

constexpr InputSpec kAB[] = {{"a", false}, {"b", false}};

// A quantized 'b' is a weight as checkpoints store it: [N, K] with rows of K (transpose_b), read
// by the kernel block by block; 'a' is a float activation whose dtype the output takes.
Status check_quantized_b(const Check& c, const OpDesc& op) {
  const TensorDesc& b = op.inputs[1];
  DUET_TRY(c.rank(1, 2, 2));
  if (!op.attrs.transpose_b)
    return c.fail(1)
        .expected("a quantized weight stored [N, K] with transpose_b (rows of K in " +
                  std::string(dtype_name(b.dtype)) + " blocks)")
        .got(b.str() + " without transpose_b");
  return {};
}

Status infer_matmul(const Check& c, OpDesc& op) {
  DUET_TRY(c.rank(0, 2, 4));
  DUET_TRY(c.rank(1, 2, 4));
  if (is_quantized(op.inputs[0].dtype))
    return c.fail(0)
        .expected(
            "a float activation (a quantized weight goes in 'b', stored [N, K] with "
            "transpose_b)")
        .got(op.inputs[0].str());
  DUET_TRY(c.float_dtype(0));
  if (is_quantized(op.inputs[1].dtype))
    DUET_TRY(check_quantized_b(c, op));
  else
    DUET_TRY(c.same_dtype(0, 1));
  const TensorDesc& a = op.inputs[0];
  const TensorDesc& b = op.inputs[1];
  int64_t m = op.attrs.transpose_a ? a.dim(-1) : a.dim(-2);
  int64_t ka = op.attrs.transpose_a ? a.dim(-2) : a.dim(-1);
  int64_t kb = op.attrs.transpose_b ? b.dim(-1) : b.dim(-2);
  int64_t n = op.attrs.transpose_b ? b.dim(-2) : b.dim(-1);
  if (ka != kb)
    return c.fail(1)
        .expected("K = " + std::to_string(ka) + " (the contraction size of 'a')")
        .got(std::to_string(kb) + " in " + b.str() + (op.attrs.transpose_b ? " (transposed)" : ""));
  int brank = 0;
  auto batch =
      broadcast_shapes(a.dims().first(u(a.rank - 2)), b.dims().first(u(b.rank - 2)), &brank);
  if (!batch.ok()) return c.fail(1).expected("batch dims that broadcast with 'a'").got(b.str());
  std::vector<int64_t> out(batch->begin(), batch->begin() + brank);
  out.push_back(m);
  out.push_back(n);
  op.output = TensorDesc::contiguous(a.dtype, out);
  return {};
}

double matmul_flops(const OpDesc& op) {
  const TensorDesc& a = op.inputs[0];
  double k = static_cast<double>(op.attrs.transpose_a ? a.dim(-2) : a.dim(-1));
  return 2.0 * static_cast<double>(op.output.numel()) * k;
}

// What docs/ops.md says of it (duet ops --markdown).
constexpr std::string_view kMatmulInputs[] = {
    "`[..., M, K]` (`[..., K, M]` with `transpose_a`), rank 2 to 4, a float dtype",
    "`[..., K, N]` (`[..., N, K]` with `transpose_b`), rank 2 to 4, `a`'s dtype; or a block "
    "format (a quantized weight) stored `[N, K]`, read with `transpose_b`"};
constexpr OpAttrDoc kMatmulAttrs[] = {
    {"transpose_a", "bool", "false", "true, false", "`a` is stored `[..., K, M]`"},
    {"transpose_b", "bool", "false", "true, false",
     "`b` is stored `[..., N, K]` (as checkpoints store weights; required for a quantized `b`)"}};
constexpr OpDoc kMatmulDoc{
    "Matrix product with batch broadcasting.",
    kMatmulInputs,
    "`a`'s dtype, `[..., M, N]` with the batch dims broadcast (numpy rules)",
    kMatmulAttrs,
    "`y[..., m, n] = sum over k of a[..., m, k] * b[..., k, n]`, with `a` and `b` read transposed "
    "where their attribute says so. Products are accumulated in f32 (the reference: f64) and the "
    "output is rounded once to its dtype. A quantized `b` contributes its exact dequantization; a "
    "kernel may quantize `a`'s rows to 8 bits per 32 (or per 256), as ggml does.",
    R"({"format": "duet-graph", "version": 1, "name": "matmul",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 4]},
            {"name": "w", "dtype": "f32", "shape": [3, 4]}],
 "nodes": [{"name": "y", "op": "matmul", "inputs": ["x", "w"], "attrs": {"transpose_b": true}}],
 "outputs": ["y"]}
)"};

constexpr OpFacts kRows[] = {
    {OpKind::matmul, "matmul", kAB, OpClass::contraction, infer_matmul, matmul_flops, &kMatmulDoc},
};

}  // namespace

std::span<const OpFacts> matmul_facts() {
  return kRows;
}

}  // namespace duet::ops
