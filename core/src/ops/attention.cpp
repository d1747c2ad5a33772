// attention: shape rule (GQA/MQA, masks) and flop count.
#include <algorithm>
#include <cmath>

#include "op_facts.h"

namespace duet::ops {

namespace {

constexpr InputSpec kAttn[] = {
    {"q", false}, {"k", false}, {"v", false}, {"mask", true}, {"kv_len", true}};

Status infer_attention(const Check& c, OpDesc& op) {
  for (size_t i = 0; i < 3; ++i) {
    DUET_TRY(c.rank(i, 4, 4));
    DUET_TRY(c.float_dtype(i));
    if (i) DUET_TRY(c.same_dtype(0, i));
  }
  const TensorDesc &q = op.inputs[0], &k = op.inputs[1], &v = op.inputs[2];
  const int64_t B = q.dim(0), Hq = q.dim(1), Lq = q.dim(2), D = q.dim(3);
  const int64_t Hkv = k.dim(1), Lk = k.dim(2);
  if (k.dim(0) != B || k.dim(3) != D)
    return c.fail(1)
        .expected("[" + std::to_string(B) + ", Hkv, Lk, " + std::to_string(D) +
                  "] (batch and head dim of q)")
        .got(k.str());
  if (!v.same_shape(k)) return c.fail(2).expected("the shape of k " + k.shape_str()).got(v.str());
  if (Hq % Hkv != 0)
    return c.fail(1)
        .expected("Hkv dividing Hq = " + std::to_string(Hq) + " (GQA/MQA)")
        .got("Hkv = " + std::to_string(Hkv));
  // The 4th input is the mask (a float tensor) or kv_len (i32); a 5th is kv_len.
  const int mi = attention_mask_input(op), si = scalar_input(op);
  if (mi >= 0) {
    const int64_t target[4] = {B, Hq, Lq, Lk};
    DUET_TRY(c.mask(u(mi), 0, target));
  }
  if (op.inputs.size() == 5 && mi != 3)
    return c.fail(3).expected("a float mask before kv_len").got(op.inputs[3].str());
  if (si >= 0) DUET_TRY(c.scalar(u(si)));
  if (op.attrs.scale && !std::isfinite(*op.attrs.scale))
    return c.fail_attr().expected("a finite scale").got(std::to_string(*op.attrs.scale));
  op.output = TensorDesc::contiguous(q.dtype, {B, Hq, Lq, D});
  return {};
}

// QK^T and PV over the visible (query, key) pairs: all of them unless causal.
double attention_flops(const OpDesc& op) {
  const TensorDesc& q = op.inputs[0];
  double lq = static_cast<double>(q.dim(2)), lk = static_cast<double>(op.inputs[1].dim(2));
  double pairs = lq * lk;
  if (op.attrs.causal) {
    // Visible (query, key) pairs under end-aligned causal masking.
    double shift = lk - lq, vis = 0;
    for (int64_t i = 0; i < q.dim(2); ++i)
      vis += std::clamp(static_cast<double>(i) + shift + 1.0, 0.0, lk);
    pairs = vis;
  }
  return 4.0 * static_cast<double>(q.dim(0) * q.dim(1)) * pairs * static_cast<double>(q.dim(3));
}

constexpr OpFacts kRows[] = {
    {OpKind::attention, "attention", kAttn, OpClass::contraction, infer_attention, attention_flops},
};

}  // namespace

std::span<const OpFacts> attention_facts() {
  return kRows;
}

}  // namespace duet::ops
