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

// What docs/ops.md says of it (duet ops --markdown).
constexpr std::string_view kAttnInputs[] = {
    "queries `[B, Hq, Lq, D]`, a float dtype",
    "keys `[B, Hkv, Lk, D]`, `q`'s dtype; `Hkv` divides `Hq` (GQA, MQA)",
    "values, `k`'s shape and dtype",
    "optional additive mask, f32 or `q`'s dtype, broadcasting to `[B, Hq, Lq, Lk]` (-inf hides "
    "a key)",
    "optional run-time scalar (i32, one element): the number `n` of valid keys, a KV cache of "
    "capacity `Lk` holding `n`; it may come 4th when there is no mask"};
constexpr OpAttrDoc kAttnAttrs[] = {
    {"scale", "float", "1/sqrt(D)", "any finite number", "the factor on `q k^T`"},
    {"causal", "bool", "false", "true, false",
     "query `i` sees keys `j <= i + (n - Lq)` (aligned to the end of the valid keys)"}};
constexpr OpDoc kAttentionDoc{
    "Scaled dot-product attention with GQA/MQA, masks, causal masking and KV-cache lengths.",
    kAttnInputs,
    "`q`'s dtype, `[B, Hq, Lq, D]`",
    kAttnAttrs,
    "For each batch `b` and query head `h` (reading kv head `h / (Hq / Hkv)`): `s[i, j] = scale * "
    "sum over d of q[i, d] * k[j, d] + mask[i, j]` over the valid keys `j < n` (`n = kv_len`, "
    "else `Lk`; `n > Lk` is an error of the backend), with `s[i, j] = -inf` where causal hides "
    "`j > i + (n - Lq)`; then `p = softmax(s)` over `j` and `y[i, d] = sum over j of p[i, j] * "
    "v[j, d]`. A query that sees no key (`n = 0`, all masked, or `Lq > n` under causal) gives 0.",
    R"({"format": "duet-graph", "version": 1, "name": "attention",
 "inputs": [{"name": "q", "dtype": "f32", "shape": [1, 4, 3, 16]},
            {"name": "k", "dtype": "f32", "shape": [1, 2, 5, 16]},
            {"name": "v", "dtype": "f32", "shape": [1, 2, 5, 16]}],
 "nodes": [{"name": "y", "op": "attention", "inputs": ["q", "k", "v"], "attrs": {"causal": true}}],
 "outputs": ["y"]}
)"};

constexpr OpFacts kRows[] = {
    {OpKind::attention, "attention", kAttn, OpClass::contraction, infer_attention, attention_flops,
     &kAttentionDoc},
};

}  // namespace

std::span<const OpFacts> attention_facts() {
  return kRows;
}

}  // namespace duet::ops
