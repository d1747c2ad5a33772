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

constexpr OpFacts kRows[] = {
    {OpKind::reshape, "reshape", kX, OpClass::view, infer_view, no_flops},
    {OpKind::transpose, "transpose", kX, OpClass::view, infer_view, no_flops},
    {OpKind::permute, "permute", kX, OpClass::view, infer_view, no_flops},
    {OpKind::slice, "slice", kX, OpClass::view, infer_view, no_flops},
};

}  // namespace

std::span<const OpFacts> view_facts() {
  return kRows;
}

}  // namespace duet::ops
