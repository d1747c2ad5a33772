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

constexpr OpFacts kRows[] = {
    {OpKind::cast, "cast", kX, OpClass::data_movement, infer_cast, per_element<1>},
    {OpKind::copy, "copy", kX, OpClass::data_movement, infer_copy, per_element<1>},
    {OpKind::concat, "concat", kX, OpClass::data_movement, infer_concat, per_element<1>},
    {OpKind::embedding, "embedding", kEmb, OpClass::data_movement, infer_embedding, per_element<1>},
    {OpKind::write_slice, "write_slice", kWrite, OpClass::data_movement, infer_write_slice,
     write_slice_flops},
};

}  // namespace

std::span<const OpFacts> data_facts() {
  return kRows;
}

}  // namespace duet::ops
