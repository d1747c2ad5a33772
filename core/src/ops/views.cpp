// Views: reshape, transpose, permute, slice. No kernel runs them: the output aliases the input's
// storage under the view's descriptor.
#include "op_facts.h"

namespace duet::ops {

namespace {

constexpr InputSpec kX[] = {{"x", false}};

Status infer_view(const Check& c, OpDesc& op) {
  Result<TensorDesc> r = Status(Code::internal, "unreachable");
  const TensorDesc& x = op.inputs[0];
  switch (op.kind) {
    case OpKind::reshape:
      r = reshape(x, op.attrs.shape);
      break;
    case OpKind::transpose:
      r = transpose(x, op.attrs.dim0, op.attrs.dim1);
      break;
    case OpKind::permute:
      r = permute(x, op.attrs.perm);
      break;
    case OpKind::slice:
      r = slice(x, op.attrs.axis, op.attrs.start, op.attrs.stop, op.attrs.step);
      break;
    default:
      break;
  }
  if (!r.ok()) {
    // The view functions name themselves ("reshape: ..."); restate it with the node and tensor.
    std::string m = r.status().message();
    const std::string self = std::string(op_name(op.kind)) + ": ";
    if (m.rfind(self, 0) == 0) m = m.substr(self.size());
    return Status(r.status().code(), m)
        .with_context(std::string(op_name(op.kind)) +
                      (op.name.empty() ? "" : " '" + op.name + "'") + ": tensor '" +
                      op.input_name(0) + "'");
  }
  if (Status s = validate(*r); !s.ok())  // a view that splits or transposes blocks
    return s.with_context(std::string(op_name(op.kind)) +
                          (op.name.empty() ? "" : " '" + op.name + "'") + ": tensor '" +
                          op.input_name(0) + "'");
  (void)c;
  op.output = *r;
  return {};
}

double no_flops(const OpDesc&) {
  return 0.0;
}

// What docs/ops.md says of them (duet ops --markdown).
constexpr std::string_view kViewInput[] = {"any dtype and shape"};
constexpr std::string_view kViewOut = "`x`'s dtype; a view of its storage (no copy)";
constexpr OpAttrDoc kReshapeAttrs[] = {{"shape", "array of int", "[]",
                                        "1 to 4 sizes, one of them may be -1 (inferred)",
                                        "the new shape, of as many elements as `x`"}};
constexpr OpDoc kReshapeDoc{
    "A new shape over the same elements, without a copy.",
    kViewInput,
    kViewOut,
    kReshapeAttrs,
    "`y` holds `x`'s elements in row-major order under `shape`. A view whose strides cannot "
    "express the new shape (a transposed view) is an error: `copy` it first.",
    R"({"format": "duet-graph", "version": 1, "name": "reshape",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 6]}],
 "nodes": [{"name": "y", "op": "reshape", "inputs": ["x"], "attrs": {"shape": [3, -1]}}],
 "outputs": ["y"]}
)"};
constexpr OpAttrDoc kTransposeAttrs[] = {
    {"dim0", "int", "0", "-rank to rank - 1", "one dim swapped"},
    {"dim1", "int", "1", "-rank to rank - 1", "the other"}};
constexpr OpDoc kTransposeDoc{
    "Swaps two dims, without a copy.",
    kViewInput,
    kViewOut,
    kTransposeAttrs,
    "`y` is `x` with dims `dim0` and `dim1` swapped: `y[..., j, ..., i, ...] = x[..., i, ..., j, "
    "...]`.",
    R"({"format": "duet-graph", "version": 1, "name": "transpose",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "transpose", "inputs": ["x"]}],
 "outputs": ["y"]}
)"};
constexpr OpAttrDoc kPermuteAttrs[] = {{"perm", "array of int", "[]",
                                        "a permutation of 0 .. rank - 1",
                                        "dim `i` of `y` is dim `perm[i]` of `x`"}};
constexpr OpDoc kPermuteDoc{
    "Reorders the dims, without a copy.",
    kViewInput,
    kViewOut,
    kPermuteAttrs,
    "`y.shape[i] = x.shape[perm[i]]`, and `y` at an index reads `x` at that index permuted back.",
    R"({"format": "duet-graph", "version": 1, "name": "permute",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3, 4]}],
 "nodes": [{"name": "y", "op": "permute", "inputs": ["x"], "attrs": {"perm": [2, 0, 1]}}],
 "outputs": ["y"]}
)"};
constexpr OpAttrDoc kSliceAttrs[] = {
    {"axis", "int", "0", "-rank to rank - 1 (negative counts from the end)", "the dim sliced"},
    {"start", "int", "0", "-size to size - 1 (negative counts from the end)", "the first index"},
    {"stop", "int", "0", "past `start`; negative counts from the end, beyond the size is the size",
     "one past the last index (the default 0 gives an empty slice: an error)"},
    {"step", "int", "1", "an integer >= 1", "the stride"}};
constexpr OpDoc kSliceDoc{
    "Every `step`-th index of `[start, stop)` along an axis, without a copy.",
    kViewInput,
    kViewOut,
    kSliceAttrs,
    "`y[..., i, ...] = x[..., start + i * step, ...]` along `axis`, for `i` below `ceil((stop - "
    "start) / step)`.",
    R"({"format": "duet-graph", "version": 1, "name": "slice",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 6]}],
 "nodes": [{"name": "y", "op": "slice", "inputs": ["x"], "attrs": {"axis": 1, "start": 1, "stop": 6, "step": 2}}],
 "outputs": ["y"]}
)"};

constexpr OpFacts kRows[] = {
    {OpKind::reshape, "reshape", kX, OpClass::view, infer_view, no_flops, &kReshapeDoc},
    {OpKind::transpose, "transpose", kX, OpClass::view, infer_view, no_flops, &kTransposeDoc},
    {OpKind::permute, "permute", kX, OpClass::view, infer_view, no_flops, &kPermuteDoc},
    {OpKind::slice, "slice", kX, OpClass::view, infer_view, no_flops, &kSliceDoc},
};

}  // namespace

std::span<const OpFacts> view_facts() {
  return kRows;
}

}  // namespace duet::ops
