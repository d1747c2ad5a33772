// Data movement: ops that move or convert stored values exactly (cast, copy, concat,
// embedding, write_slice). They have no arithmetic precision of their own.
#include "op_facts.h"

namespace duet::ops {

namespace {

constexpr InputSpec kX[] = {{"x", false}};
constexpr InputSpec kEmb[] = {{"table", false}, {"ids", false}};
constexpr InputSpec kWrite[] = {{"state", false}, {"x", false}, {"pos", true}};

Status infer_cast(const Check& c, OpDesc& op) {
  if (is_quantized(op.attrs.to))
    return c.fail_attr()
        .expected(
            "a float or integer 'to' (quantize weights with duet::quantize, duet/quantize.h, "
            "not in a graph)")
        .got("to " + std::string(dtype_name(op.attrs.to)));
  if (is_quantized(op.inputs[0].dtype) && !is_float(op.attrs.to))
    return c.fail_attr()
        .expected("a float 'to' (f32, f16, bf16) for the quantized '" + op.input_name(0) + "'")
        .got("to " + std::string(dtype_name(op.attrs.to)));
  op.output = TensorDesc::contiguous(op.attrs.to, op.inputs[0].dims());
  return {};
}

Status infer_copy(const Check& c, OpDesc& op) {
  DUET_TRY(c.not_quantized(0));
  op.output = TensorDesc::contiguous(op.inputs[0].dtype, op.inputs[0].dims());
  return {};
}

Status infer_concat(const Check& c, OpDesc& op) {
  const TensorDesc& x0 = op.inputs[0];
  int axis = op.attrs.axis < 0 ? op.attrs.axis + x0.rank : op.attrs.axis;
  if (x0.rank == 0 || axis < 0 || axis >= x0.rank)
    return c.fail_attr()
        .expected("axis within rank " + std::to_string(x0.rank))
        .got("axis " + std::to_string(op.attrs.axis));
  Dims out = x0.shape;
  out[u(axis)] = 0;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const TensorDesc& t = op.inputs[i];
    DUET_TRY(c.not_quantized(i));
    DUET_TRY(c.same_dtype(0, i));
    bool ok = t.rank == x0.rank;
    for (int d = 0; ok && d < t.rank; ++d) ok = d == axis || t.shape[u(d)] == x0.shape[u(d)];
    if (!ok)
      return c.fail(i)
          .expected("the shape of '" + op.input_name(0) + "' " + x0.shape_str() +
                    " except on axis " + std::to_string(axis))
          .got(t.str());
    out[u(axis)] += t.shape[u(axis)];
  }
  op.attrs.axis = axis;
  op.output = TensorDesc::contiguous(x0.dtype, std::span(out.data(), u(x0.rank)));
  return {};
}

Status infer_embedding(const Check& c, OpDesc& op) {
  DUET_TRY(c.rank(0, 2, 2));
  const bool quantized = is_quantized(op.inputs[0].dtype);
  if (!quantized) DUET_TRY(c.float_dtype(0));
  DUET_TRY(c.rank(1, 1, 3));
  if (op.inputs[1].dtype != DType::i32)
    return c.fail(1).expected("i32 ids").got(op.inputs[1].str());
  std::vector<int64_t> out(op.inputs[1].dims().begin(), op.inputs[1].dims().end());
  out.push_back(op.inputs[0].dim(1));
  // Rows of a quantized table come out dequantized, in f32.
  op.output = TensorDesc::contiguous(quantized ? DType::f32 : op.inputs[0].dtype, out);
  return {};
}

// write_slice(state, x[, pos]): x written along an axis at attrs.start + pos; the output is the
// whole state (in place when the first input is a graph state).
Status infer_write_slice(const Check& c, OpDesc& op) {
  const TensorDesc &st = op.inputs[0], &x = op.inputs[1];
  DUET_TRY(c.not_quantized(0));
  DUET_TRY(c.not_quantized(1));
  if (st.rank == 0) return c.fail(0).expected("rank 1 to 4").got(st.str());
  if (x.dtype != st.dtype && !(is_float(x.dtype) && is_float(st.dtype)))
    return c.fail(1)
        .expected(std::string(dtype_name(st.dtype)) + " like '" + op.input_name(0) + "'" +
                  (is_float(st.dtype) ? " (or another float dtype)" : ""))
        .got(x.str());
  const int axis = op.attrs.axis < 0 ? op.attrs.axis + st.rank : op.attrs.axis;
  if (axis < 0 || axis >= st.rank)
    return c.fail_attr()
        .expected("axis within rank " + std::to_string(st.rank))
        .got("axis " + std::to_string(op.attrs.axis));
  bool ok = x.rank == st.rank;
  for (int d = 0; ok && d < st.rank; ++d) ok = d == axis || x.shape[u(d)] == st.shape[u(d)];
  if (!ok || x.shape[u(axis)] > st.shape[u(axis)])
    return c.fail(1)
        .expected("the shape of '" + op.input_name(0) + "' " + st.shape_str() + " except on axis " +
                  std::to_string(axis) + " (at most " + std::to_string(st.shape[u(axis)]) +
                  " there)")
        .got(x.str());
  if (op.attrs.start < 0 ||
      (!op.has_input(2) && op.attrs.start + x.shape[u(axis)] > st.shape[u(axis)]))
    return c.fail_attr()
        .expected("start in [0, " + std::to_string(st.shape[u(axis)] - x.shape[u(axis)]) + "]")
        .got("start " + std::to_string(op.attrs.start));
  if (op.has_input(2)) DUET_TRY(c.scalar(2));
  op.attrs.axis = axis;
  op.output = TensorDesc::contiguous(st.dtype, st.dims());
  return {};
}

// The slice written (the rest of the state is untouched).
double write_slice_flops(const OpDesc& op) {
  return static_cast<double>(op.inputs[1].numel());
}

// What docs/ops.md says of them (duet ops --markdown).
constexpr std::string_view kCastInputs[] = {"any dtype and shape, or a block format"};
constexpr OpAttrDoc kCastAttrs[] = {{"to", "dtype", "\"f32\"",
                                     "\"f32\", \"f16\", \"bf16\", \"i8\", \"i32\"",
                                     "the output dtype (a float one for a block-format `x`)"}};
constexpr OpDoc kCastDoc{
    "Converts to another dtype.",
    kCastInputs,
    "`to`, `x`'s shape",
    kCastAttrs,
    "Each value converted once: to a float dtype rounded to nearest even (exact where it fits); "
    "to an integer dtype rounded toward zero and saturated at its range, NaN giving 0. A "
    "block-format `x` gives its exact dequantization, rounded once to `to`; nothing casts to a "
    "block format (quantize weights with `duet::quantize`).",
    R"({"format": "duet-graph", "version": 1, "name": "cast",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "cast", "inputs": ["x"], "attrs": {"to": "f16"}}],
 "outputs": ["y"]}
)"};

constexpr std::string_view kCopyInputs[] = {
    "any dtype and shape (a view included), not a block format"};
constexpr OpDoc kCopyDoc{"Dense copy (makes a view contiguous).",
                         kCopyInputs,
                         "`x`'s dtype and shape, dense row-major",
                         {},
                         "`y = x`, value for value, written dense in row-major order.",
                         R"({"format": "duet-graph", "version": 1, "name": "copy",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "t", "op": "transpose", "inputs": ["x"]},
           {"name": "y", "op": "copy", "inputs": ["t"]}],
 "outputs": ["y"]}
)"};

constexpr std::string_view kConcatInputs[] = {
    "1 to 64 tensors of one dtype (not a block format), equal in every dim but `axis`"};
constexpr OpAttrDoc kAxisAttrs[] = {{"axis", "int", "0",
                                     "-rank to rank - 1 (negative counts from the end)",
                                     "the dim joined along"}};
constexpr OpDoc kConcatDoc{"Joins tensors along an axis.",
                           kConcatInputs,
                           "the inputs' dtype; their shape with the sizes along `axis` added",
                           kAxisAttrs,
                           "`y` along `axis` is `x0`, then `x1`, ... in input order.",
                           R"({"format": "duet-graph", "version": 1, "name": "concat",
 "inputs": [{"name": "a", "dtype": "f32", "shape": [2, 3]},
            {"name": "b", "dtype": "f32", "shape": [2, 1]}],
 "nodes": [{"name": "y", "op": "concat", "inputs": ["a", "b"], "attrs": {"axis": 1}}],
 "outputs": ["y"]}
)"};

constexpr std::string_view kEmbInputs[] = {"`[V, D]`, a float dtype or a block format",
                                           "i32 of any shape of rank 1 to 3"};
constexpr OpAttrDoc kEmbAttrs[] = {
    {"negative_ids", "bool", "false", "true, false",
     "ids in `[-V, 0)` count from the end (`id + V`), as ONNX's Gather and numpy read them"}};
constexpr OpDoc kEmbeddingDoc{
    "Row lookup: one table row per id.",
    kEmbInputs,
    "`table`'s dtype (f32 for a block-format table), `ids.shape + [D]`",
    kEmbAttrs,
    "`y[..., d] = table[ids[...], d]`. An id outside `[0, V)` (`[-V, V)` with `negative_ids`) is "
    "an error naming the value, reported by the backend. A block-format table gives its rows' "
    "exact dequantization.",
    R"({"format": "duet-graph", "version": 1, "name": "embedding",
 "inputs": [{"name": "table", "dtype": "f32", "shape": [10, 4]}],
 "constants": [{"name": "ids", "dtype": "i32", "shape": [3], "values": [7, 0, 7]}],
 "nodes": [{"name": "y", "op": "embedding", "inputs": ["table", "ids"]}],
 "outputs": ["y"]}
)"};

constexpr std::string_view kWriteInputs[] = {
    "any dtype but a block format, rank 1 to 4: the tensor written into (a graph state to write "
    "in place, e.g. a KV cache)",
    "`state`'s shape except along `axis` (at most its size there); `state`'s dtype, or any float "
    "dtype for a float state",
    "optional run-time scalar (i32, one element) added to `start`"};
constexpr OpAttrDoc kWriteAttrs[] = {
    {"axis", "int", "0", "-rank to rank - 1 (negative counts from the end)",
     "the dim written along"},
    {"start", "int", "0", "0 to the room left along `axis`",
     "where the slice begins (plus `pos`)"}};
constexpr OpDoc kWriteSliceDoc{
    "Writes a slice into a tensor (appends to a KV cache in place).",
    kWriteInputs,
    "`state`'s dtype and shape: the state after the write",
    kWriteAttrs,
    "With `s = start + pos`: `y` is `state` with the slice `[s, s + x.shape[axis])` along `axis` "
    "replaced by `x` (rounded once to `state`'s dtype, as cast does). A slice outside the state is "
    "an error of the backend. When `state` is a graph state the write happens in place and "
    "persists across runs.",
    R"({"format": "duet-graph", "version": 1, "name": "write_slice",
 "inputs": [{"name": "state", "dtype": "f32", "shape": [4, 3]},
            {"name": "x", "dtype": "f32", "shape": [1, 3]}],
 "nodes": [{"name": "y", "op": "write_slice", "inputs": ["state", "x"], "attrs": {"start": 2}}],
 "outputs": ["y"]}
)"};

constexpr OpFacts kRows[] = {
    {OpKind::cast, "cast", kX, OpClass::data_movement, infer_cast, per_element<1>, &kCastDoc},
    {OpKind::copy, "copy", kX, OpClass::data_movement, infer_copy, per_element<1>, &kCopyDoc},
    {OpKind::concat, "concat", kX, OpClass::data_movement, infer_concat, per_element<1>,
     &kConcatDoc},
    {OpKind::embedding, "embedding", kEmb, OpClass::data_movement, infer_embedding, per_element<1>,
     &kEmbeddingDoc},
    {OpKind::write_slice, "write_slice", kWrite, OpClass::data_movement, infer_write_slice,
     write_slice_flops, &kWriteSliceDoc},
};

}  // namespace

std::span<const OpFacts> data_facts() {
  return kRows;
}

}  // namespace duet::ops
