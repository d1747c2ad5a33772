// The row ops, computed over the last dim row by row: softmax, rmsnorm, layernorm, rope.
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

constexpr OpFacts kRows[] = {
    {OpKind::softmax, "softmax", kSoftmax, OpClass::rows, infer_softmax, per_element<5>},
    {OpKind::rmsnorm, "rmsnorm", kRms, OpClass::rows, infer_norm, per_element<4>},
    {OpKind::layernorm, "layernorm", kLayer, OpClass::rows, infer_norm, per_element<7>},
    {OpKind::rope, "rope", kRope, OpClass::rows, infer_rope, per_element<6>},
};

}  // namespace

std::span<const OpFacts> row_facts() {
  return kRows;
}

}  // namespace duet::ops
