// The row ops, computed over the last dim row by row: softmax, rmsnorm, layernorm, rope; and the
// reductions over any dims.
#include <cmath>

#include "op_facts.h"

namespace duet::ops {

namespace {

constexpr InputSpec kX[] = {{"x", false}};
constexpr InputSpec kSoftmax[] = {{"x", false}, {"mask", true}};
constexpr InputSpec kRms[] = {{"x", false}, {"weight", true}};
constexpr InputSpec kLayer[] = {{"x", false}, {"weight", true}, {"bias", true}};
constexpr InputSpec kRope[] = {{"x", false}, {"pos", true}};

Status infer_softmax(const Check& c, OpDesc& op) {
  DUET_TRY(c.rank(0, 1, 4));
  DUET_TRY(c.float_dtype(0));
  if (op.has_input(1)) DUET_TRY(c.mask(1, 0, op.inputs[0].dims()));
  op.output = TensorDesc::contiguous(op.inputs[0].dtype, op.inputs[0].dims());
  return {};
}

Status infer_norm(const Check& c, OpDesc& op) {
  DUET_TRY(c.rank(0, 1, 4));
  DUET_TRY(c.float_dtype(0));
  if (!(op.attrs.eps > 0.0f) || !std::isfinite(op.attrs.eps))
    return c.fail_attr().expected("eps > 0").got("eps " + std::to_string(op.attrs.eps));
  for (size_t i = 1; i < op.inputs.size(); ++i)
    DUET_TRY(c.channel_vector(i, op.inputs[0].dim(-1), 0));
  op.output = TensorDesc::contiguous(op.inputs[0].dtype, op.inputs[0].dims());
  return {};
}

Status infer_rope(const Check& c, OpDesc& op) {
  DUET_TRY(c.rank(0, 4, 4));
  DUET_TRY(c.float_dtype(0));
  const int64_t d = op.inputs[0].dim(-1);
  const int64_t rd = op.attrs.rope_dims == 0 ? d : op.attrs.rope_dims;
  if (rd <= 0 || rd > d || rd % 2 != 0)
    return c.fail(0)
        .expected("an even number of rotated dims <= D = " + std::to_string(d))
        .got("rope_dims " + std::to_string(op.attrs.rope_dims));
  if (op.attrs.rope_offset < 0)
    return c.fail_attr().expected("rope_offset >= 0").got(std::to_string(op.attrs.rope_offset));
  if (!(op.attrs.rope_theta > 0.0f))
    return c.fail_attr().expected("rope_theta > 0").got(std::to_string(op.attrs.rope_theta));
  if (op.has_input(1)) DUET_TRY(c.scalar(1));
  op.output = TensorDesc::contiguous(op.inputs[0].dtype, op.inputs[0].dims());
  return {};
}

// The reductions: x of any float dtype and rank, each axis in [-rank, rank) at most once; the
// output keeps the rank with the reduced dims of size 1.
Status infer_reduce(const Check& c, OpDesc& op) {
  DUET_TRY(c.rank(0, 1, 4));
  DUET_TRY(c.float_dtype(0));
  const TensorDesc& x = op.inputs[0];
  if (op.attrs.axes.empty())
    return c.fail_attr().expected("at least one reduced dim in axes").got("none");
  std::vector<int64_t> shape(x.dims().begin(), x.dims().end());
  uint32_t seen = 0;
  for (int a : op.attrs.axes) {
    const int d = a < 0 ? a + x.rank : a;
    if (d < 0 || d >= x.rank || (seen >> d & 1u))
      return c.fail_attr()
          .expected("axes in [-" + std::to_string(x.rank) + ", " + std::to_string(x.rank) +
                    "), each once, for " + x.str())
          .got("axis " + std::to_string(a));
    seen |= 1u << d;
    shape[u(d)] = 1;
  }
  op.output = TensorDesc::contiguous(x.dtype, shape);
  return {};
}

double reduce_flops(const OpDesc& op) {
  return static_cast<double>(op.inputs[0].numel());
}

// What docs/ops.md says of them (duet ops --markdown).
constexpr std::string_view kSoftmaxInputs[] = {
    "rank 1 to 4, a float dtype; rows are along the last dim",
    "optional additive mask, f32 or `x`'s dtype, broadcasting to `x` (-inf hides an entry)"};
constexpr OpAttrDoc kSoftmaxAttrs[] = {
    {"scale", "float", "1", "any number", "the factor on `x` before the mask is added"}};
constexpr OpDoc kSoftmaxDoc{
    "Softmax over the last dim, with an optional scale and additive mask.",
    kSoftmaxInputs,
    "`x`'s dtype and shape",
    kSoftmaxAttrs,
    "Per row: `s_i = scale * x_i + mask_i`, `y_i = exp(s_i - max s) / sum over j of exp(s_j - max "
    "s)`. A row with no finite entry (all masked) gives zeros.",
    R"({"format": "duet-graph", "version": 1, "name": "softmax",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 5]}],
 "nodes": [{"name": "y", "op": "softmax", "inputs": ["x"]}],
 "outputs": ["y"]}
)"};

constexpr std::string_view kRmsInputs[] = {
    "rank 1 to 4, a float dtype; rows are along the last dim",
    "optional `[D]` (the last dim), `x`'s dtype"};
constexpr OpAttrDoc kEpsAttrs[] = {
    {"eps", "float", "1e-05", "a finite number > 0", "added to the mean square (variance)"}};
constexpr OpDoc kRmsnormDoc{
    "RMS normalisation over the last dim.",
    kRmsInputs,
    "`x`'s dtype and shape",
    kEpsAttrs,
    "Per row of `D` values: `y_i = x_i / sqrt(mean over j of x_j^2 + eps) * weight_i` (`weight` "
    "1 when absent).",
    R"({"format": "duet-graph", "version": 1, "name": "rmsnorm",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 8]},
            {"name": "w", "dtype": "f32", "shape": [8]}],
 "nodes": [{"name": "y", "op": "rmsnorm", "inputs": ["x", "w"], "attrs": {"eps": 1e-06}}],
 "outputs": ["y"]}
)"};

constexpr std::string_view kLayerInputs[] = {
    "rank 1 to 4, a float dtype; rows are along the last dim",
    "optional `[D]` (the last dim), `x`'s dtype", "optional `[D]`, `x`'s dtype (needs `weight`)"};
constexpr OpDoc kLayernormDoc{
    "Layer normalisation over the last dim.",
    kLayerInputs,
    "`x`'s dtype and shape",
    kEpsAttrs,
    "Per row of `D` values: `mean = sum of x_j / D`, `var = sum of (x_j - mean)^2 / D`, `y_i = "
    "(x_i - mean) / sqrt(var + eps) * weight_i + bias_i` (`weight` 1 and `bias` 0 when absent).",
    R"({"format": "duet-graph", "version": 1, "name": "layernorm",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 8]},
            {"name": "w", "dtype": "f32", "shape": [8]},
            {"name": "b", "dtype": "f32", "shape": [8]}],
 "nodes": [{"name": "y", "op": "layernorm", "inputs": ["x", "w", "b"]}],
 "outputs": ["y"]}
)"};

constexpr std::string_view kRopeInputs[] = {
    "`[B, H, L, D]`, a float dtype",
    "optional run-time scalar (i32, one element) added to every position; 0 when absent"};
constexpr OpAttrDoc kRopeAttrs[] = {
    {"rope_mode", "string", "\"neox\"", "\"neox\", \"gptj\"",
     "which dims pair up: `neox` pairs `(i, i + R/2)`, `gptj` pairs `(2i, 2i + 1)`"},
    {"rope_offset", "int", "0", "an integer >= 0", "the position of the first row"},
    {"rope_theta", "float", "10000", "a number > 0", "the frequency base"},
    {"rope_dims", "int", "0", "0 (all of D), or an even number <= D",
     "`R`, the dims rotated; the dims past them pass through"}};
constexpr OpDoc kRopeDoc{
    "Rotary position embedding.",
    kRopeInputs,
    "`x`'s dtype and shape",
    kRopeAttrs,
    "Row `l` has position `p = rope_offset + pos + l`. For each pair `i < R/2` of dims `(u, w)` "
    "(by `rope_mode`), with angle `a = p * rope_theta^(-2i / R)`: `y_u = x_u cos a - x_w sin a`, "
    "`y_w = x_u sin a + x_w cos a`. Dims past `R` are copied. A negative position is an error of "
    "the backend.",
    R"({"format": "duet-graph", "version": 1, "name": "rope",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 2, 3, 8]}],
 "constants": [{"name": "pos", "dtype": "i32", "shape": [1], "values": [4]}],
 "nodes": [{"name": "y", "op": "rope", "inputs": ["x", "pos"], "attrs": {"rope_mode": "gptj"}}],
 "outputs": ["y"]}
)"};

constexpr std::string_view kReduceInputs[] = {"rank 1 to 4, a float dtype"};
constexpr OpAttrDoc kReduceAttrs[] = {
    {"axes", "array of int", "[]", "at least one of x's dims, each once (negative: from the end)",
     "the reduced dims"}};
constexpr std::string_view kReduceOut =
    "`x`'s dtype, `x`'s shape with the reduced dims of size 1 (a reshape view drops them)";
constexpr OpDoc kReduceSumDoc{"Sum over the given dims.",
                              kReduceInputs,
                              kReduceOut,
                              kReduceAttrs,
                              "`y = sum of x` over `axes`. Each output element combines the "
                              "elements of `x` that share its coordinates outside `axes`; kernels "
                              "accumulate in f32 at least and round once to the output dtype.",
                              R"({"format": "duet-graph", "version": 1, "name": "reduce_sum",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3, 4]}],
 "nodes": [{"name": "y", "op": "reduce_sum", "inputs": ["x"], "attrs": {"axes": [0, -1]}}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kReduceMeanDoc{"Mean over the given dims.",
                               kReduceInputs,
                               kReduceOut,
                               kReduceAttrs,
                               "`y = (sum of x) / n` over `axes`, `n` the number of elements "
                               "reduced into each output. Each output element combines the "
                               "elements of `x` that share its coordinates outside `axes`; kernels "
                               "accumulate in f32 at least and round once to the output dtype.",
                               R"({"format": "duet-graph", "version": 1, "name": "reduce_mean",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3, 4]}],
 "nodes": [{"name": "y", "op": "reduce_mean", "inputs": ["x"], "attrs": {"axes": [0, -1]}}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kReduceMaxDoc{"Largest value over the given dims.",
                              kReduceInputs,
                              kReduceOut,
                              kReduceAttrs,
                              "`y = max of x` over `axes` (a NaN among them gives NaN). Each "
                              "output element combines the elements of `x` that share its "
                              "coordinates outside `axes`.",
                              R"({"format": "duet-graph", "version": 1, "name": "reduce_max",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3, 4]}],
 "nodes": [{"name": "y", "op": "reduce_max", "inputs": ["x"], "attrs": {"axes": [0, -1]}}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kReduceMinDoc{"Smallest value over the given dims.",
                              kReduceInputs,
                              kReduceOut,
                              kReduceAttrs,
                              "`y = min of x` over `axes` (a NaN among them gives NaN). Each "
                              "output element combines the elements of `x` that share its "
                              "coordinates outside `axes`.",
                              R"({"format": "duet-graph", "version": 1, "name": "reduce_min",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3, 4]}],
 "nodes": [{"name": "y", "op": "reduce_min", "inputs": ["x"], "attrs": {"axes": [0, -1]}}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kReduceProdDoc{"Product over the given dims.",
                               kReduceInputs,
                               kReduceOut,
                               kReduceAttrs,
                               "`y = product of x` over `axes`. Each output element combines the "
                               "elements of `x` that share its coordinates outside `axes`; kernels "
                               "multiply in f32 at least and round once to the output dtype.",
                               R"({"format": "duet-graph", "version": 1, "name": "reduce_prod",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3, 4]}],
 "nodes": [{"name": "y", "op": "reduce_prod", "inputs": ["x"], "attrs": {"axes": [0, -1]}}],
 "outputs": ["y"]}
)"};

constexpr OpFacts kRows[] = {
    {OpKind::softmax, "softmax", kSoftmax, OpClass::rows, infer_softmax, per_element<5>,
     &kSoftmaxDoc},
    {OpKind::rmsnorm, "rmsnorm", kRms, OpClass::rows, infer_norm, per_element<4>, &kRmsnormDoc},
    {OpKind::layernorm, "layernorm", kLayer, OpClass::rows, infer_norm, per_element<7>,
     &kLayernormDoc},
    {OpKind::rope, "rope", kRope, OpClass::rows, infer_rope, per_element<6>, &kRopeDoc},
    {OpKind::reduce_sum, "reduce_sum", kX, OpClass::rows, infer_reduce, reduce_flops,
     &kReduceSumDoc},
    {OpKind::reduce_mean, "reduce_mean", kX, OpClass::rows, infer_reduce, reduce_flops,
     &kReduceMeanDoc},
    {OpKind::reduce_max, "reduce_max", kX, OpClass::rows, infer_reduce, reduce_flops,
     &kReduceMaxDoc},
    {OpKind::reduce_min, "reduce_min", kX, OpClass::rows, infer_reduce, reduce_flops,
     &kReduceMinDoc},
    {OpKind::reduce_prod, "reduce_prod", kX, OpClass::rows, infer_reduce, reduce_flops,
     &kReduceProdDoc},
};

}  // namespace

std::span<const OpFacts> row_facts() {
  return kRows;
}

}  // namespace duet::ops
