// What the core knows about each op kind, in one row per kind: its name and inputs, its class,
// the rule that validates it and infers its output, its flop count and, for element-wise ops, the
// function code the kernels share (duet/eltwise.h), its float64 definition and where checks draw
// its inputs from. The rows live with their family (eltwise.cpp, matmul.cpp, attention.cpp,
// rows.cpp, data.cpp, views.cpp); op.cpp answers the public questions of duet/op.h from them.
// Internal to the core.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "duet/internal/index.h"
#include "duet/op.h"

namespace duet::ops {

// Collects the context of one make_op call so every check reads as one line.
class Check {
 public:
  explicit Check(const OpDesc& op) : op_(op) {}

  Err fail(size_t input) const;  // an error naming the op and input i
  Err fail_attr() const;         // an error naming the op (an attribute is wrong)

  Status rank(size_t i, int lo, int hi) const;
  Status float_dtype(size_t i) const;
  Status not_quantized(size_t i) const;
  Status same_dtype(size_t i, size_t j) const;
  // A mask must be f32 or the dtype of input `like`, and broadcast to `target`.
  Status mask(size_t i, size_t like, std::span<const int64_t> target) const;
  // A run-time scalar: i32 with one element.
  Status scalar(size_t i) const;
  // A per-channel vector of the last dim's size.
  Status channel_vector(size_t i, int64_t n, size_t like) const;

 private:
  const OpDesc& op_;
};

// The float64 definition of an element-wise function: y = f(x, z), z unused by unary ones.
using EltwiseFn = double (*)(double x, double z, const OpAttrs& a);

struct OpFacts {
  OpKind kind;
  std::string_view name;
  std::span<const InputSpec> inputs;
  OpClass cls;
  // Validates the inputs and attributes (arity and tensor validity already checked) and fills
  // op.output.
  Status (*infer)(const Check& c, OpDesc& op);
  double (*flops)(const OpDesc& op);
  // What docs/ops.md says of it (duet ops --markdown).
  const OpDoc* doc;
  // Element-wise ops only.
  uint32_t (*code)(const OpAttrs& a) = nullptr;  // DUET_EW_* of duet/eltwise.h
  EltwiseFn reference = nullptr;
  float (*param)(const OpAttrs& a) = nullptr;  // the kernels' float argument, if it has one
  InputRange range[2] = {InputRange::any, InputRange::any};
};

// The rows of each family.
std::span<const OpFacts> eltwise_facts();
std::span<const OpFacts> matmul_facts();
std::span<const OpFacts> attention_facts();
std::span<const OpFacts> row_facts();
std::span<const OpFacts> data_facts();
std::span<const OpFacts> view_facts();

// The row of `k` (every kind has exactly one: tests/core/op_test.cpp).
const OpFacts& facts(OpKind k);

// Flops as a count per output element, for the rows that are that simple.
template <int N>
double per_element(const OpDesc& op) {
  return N * static_cast<double>(op.output.numel());
}

// An element-wise function code that does not depend on the attributes.
template <uint32_t C>
uint32_t code_of(const OpAttrs&) {
  return C;
}

}  // namespace duet::ops
