// The public questions of duet/op.h, answered from each kind's row of facts (ops/op_facts.h).
#include "duet/op.h"

#include <array>
#include <cmath>

#include "duet/eltwise.h"
#include "ops/op_facts.h"

namespace duet {

namespace ops {

namespace {

Status no_row(const Check& c, OpDesc&) {
  return c.fail_attr().expected("an op kind of duet/op.h").got("a kind without facts");
}

double no_flops(const OpDesc&) {
  return 0.0;
}

constexpr OpDoc kNoDoc{};
constexpr OpFacts kUnknown{OpKind::copy, "?", {}, OpClass::view, no_row, no_flops, &kNoDoc};

}  // namespace

const OpFacts& facts(OpKind k) {
  static const std::array<const OpFacts*, kNumOpKinds> index = [] {
    std::array<const OpFacts*, kNumOpKinds> a{};
    for (auto family : {eltwise_facts(), matmul_facts(), attention_facts(), row_facts(),
                        data_facts(), view_facts()})
      for (const OpFacts& f : family) a[static_cast<size_t>(f.kind)] = &f;
    return a;
  }();
  const size_t i = static_cast<size_t>(k);
  return i < index.size() && index[i] ? *index[i] : kUnknown;
}

}  // namespace ops

std::string_view op_name(OpKind k) {
  return ops::facts(k).name;
}

std::optional<OpKind> parse_op(std::string_view name) {
  for (int k = 0; k < kNumOpKinds; ++k)
    if (ops::facts(static_cast<OpKind>(k)).name == name) return static_cast<OpKind>(k);
  return std::nullopt;
}

const OpDoc& op_doc(OpKind k) {
  return *ops::facts(k).doc;
}

OpClass op_class(OpKind k) {
  return ops::facts(k).cls;
}

bool is_view(OpKind k) {
  return op_class(k) == OpClass::view;
}
bool is_unary_elementwise(OpKind k) {
  return op_class(k) == OpClass::elementwise && op_inputs(k).size() == 1;
}
bool is_binary_elementwise(OpKind k) {
  return op_class(k) == OpClass::elementwise && op_inputs(k).size() == 2;
}

bool is_reduction(OpKind k) {
  return k == OpKind::reduce_sum || k == OpKind::reduce_mean || k == OpKind::reduce_max ||
         k == OpKind::reduce_min || k == OpKind::reduce_prod;
}

std::optional<uint32_t> reduce_code(const OpDesc& op) {
  switch (op.kind) {
    case OpKind::reduce_sum:
      return DUET_RED_SUM;
    case OpKind::reduce_mean:
      return DUET_RED_MEAN;
    case OpKind::reduce_max:
      return DUET_RED_MAX;
    case OpKind::reduce_min:
      return DUET_RED_MIN;
    case OpKind::reduce_prod:
      return DUET_RED_PROD;
    default:
      return std::nullopt;
  }
}

uint32_t reduce_dims_mask(const OpDesc& op) {
  uint32_t m = 0;
  const int r = op.inputs.empty() ? 0 : op.inputs[0].rank;
  for (int a : op.attrs.axes) {
    const int d = a < 0 ? a + r : a;
    if (d >= 0 && d < r) m |= 1u << d;
  }
  return m;
}

std::string embedding_id_range(const OpDesc& op) {
  const std::string v = std::to_string(op.inputs.empty() ? 0 : op.inputs[0].dim(0));
  return "ids in [" + (op.attrs.negative_ids ? "-" + v : std::string("0")) + ", " + v + ")";
}

std::optional<uint32_t> eltwise_code(const OpDesc& op) {
  const ops::OpFacts& f = ops::facts(op.kind);
  if (!f.code) return std::nullopt;
  return f.code(op.attrs);
}

float eltwise_param(const OpDesc& op) {
  const ops::OpFacts& f = ops::facts(op.kind);
  return f.param ? f.param(op.attrs) : 0.0f;
}

EltwiseReference eltwise_reference(OpKind k) {
  return ops::facts(k).reference;
}

InputRange op_input_range(OpKind k, size_t input) {
  return input < 2 ? ops::facts(k).range[input] : InputRange::any;
}

std::string_view rope_mode_name(RopeMode m) {
  return m == RopeMode::neox ? "neox" : "gptj";
}
std::string_view gelu_approx_name(GeluApprox a) {
  return a == GeluApprox::tanh ? "tanh" : "none";
}

std::span<const InputSpec> op_inputs(OpKind k) {
  return ops::facts(k).inputs;
}
bool op_is_variadic(OpKind k) {
  return k == OpKind::concat;  // its one input spec repeats
}

std::string OpDesc::input_name(size_t i) const {
  if (i < input_names.size() && !input_names[i].empty()) return input_names[i];
  auto specs = op_inputs(kind);
  if (kind == OpKind::attention && static_cast<int>(i) == scalar_input(*this)) return "kv_len";
  if (op_is_variadic(kind)) return std::string(specs[0].name) + std::to_string(i);
  return i < specs.size() ? std::string(specs[i].name) : "input" + std::to_string(i);
}

Result<OpDesc> make_op(OpKind kind, OpAttrs attrs, std::vector<TensorDesc> inputs,
                       std::vector<std::string> input_names, std::string name) {
  OpDesc op;
  op.kind = kind;
  op.attrs = std::move(attrs);
  op.inputs = std::move(inputs);
  op.input_names = std::move(input_names);
  op.name = std::move(name);
  if (static_cast<int>(kind) >= kNumOpKinds)
    return Status(Code::invalid_argument,
                  "unknown op kind " + std::to_string(static_cast<int>(kind)));

  auto specs = op_inputs(kind);
  size_t required = 0;
  for (const auto& s : specs) required += s.optional ? 0 : 1;
  const size_t most = op_is_variadic(kind) ? 64 : specs.size();
  if (op.inputs.size() < required || op.inputs.size() > most) {
    std::string want;
    for (size_t i = 0; i < specs.size(); ++i)
      want += (i ? ", " : "") + std::string(specs[i].name) + (specs[i].optional ? "?" : "");
    if (op_is_variadic(kind)) want = "1 to 64 inputs";
    return Err(Code::invalid_argument)
        .op(op_name(kind), op.name)
        .expected("inputs (" + want + ")")
        .got(std::to_string(op.inputs.size()) + " inputs");
  }
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    Status s = validate(op.inputs[i]);
    if (!s.ok())
      return Status(s.code(), s.message())
          .with_context(std::string(op_name(kind)) + (op.name.empty() ? "" : " '" + op.name + "'") +
                        ": tensor '" + op.input_name(i) + "'");
  }
  DUET_TRY(ops::facts(kind).infer(ops::Check(op), op));
  return op;
}

bool is_runtime_scalar(const TensorDesc& t) {
  return t.dtype == DType::i32 && t.rank <= 1 && t.numel() == 1;
}

int attention_mask_input(const OpDesc& op) {
  if (op.kind != OpKind::attention || op.inputs.size() < 4) return -1;
  return op.inputs[3].dtype == DType::i32 ? -1 : 3;
}

int scalar_input(const OpDesc& op) {
  switch (op.kind) {
    case OpKind::rope:
      return op.inputs.size() > 1 ? 1 : -1;
    case OpKind::write_slice:
      return op.inputs.size() > 2 ? 2 : -1;
    case OpKind::attention:
      if (op.inputs.size() == 5) return 4;
      return op.inputs.size() == 4 && op.inputs[3].dtype == DType::i32 ? 3 : -1;
    default:
      return -1;
  }
}

float attention_scale(const OpDesc& op) {
  if (op.attrs.scale) return *op.attrs.scale;
  return 1.0f / std::sqrt(static_cast<float>(op.inputs[0].dim(-1)));
}

float softmax_scale(const OpDesc& op) {
  return op.attrs.scale.value_or(1.0f);
}

int rope_dims(const OpDesc& op) {
  return op.attrs.rope_dims == 0 ? static_cast<int>(op.inputs[0].dim(-1)) : op.attrs.rope_dims;
}

double op_flops(const OpDesc& op) {
  return ops::facts(op.kind).flops(op);
}

double op_bytes(const OpDesc& op) {
  if (is_view(op.kind)) return 0.0;
  double b = static_cast<double>(op.output.nbytes());
  if (op.kind == OpKind::embedding) return 2.0 * b + static_cast<double>(op.inputs[1].nbytes());
  // In place into a state: the slice is read and written (a copy of the rest when not in place
  // is not counted: the planner makes it in place wherever it matters).
  if (op.kind == OpKind::write_slice) return 2.0 * static_cast<double>(op.inputs[1].nbytes());
  for (const auto& t : op.inputs) b += static_cast<double>(t.nbytes());
  return b;
}

std::string describe(const OpDesc& op) {
  std::string s(op_name(op.kind));
  if (!op.name.empty() && op.name != s) s += " '" + op.name + "'";
  s += " (";
  for (size_t i = 0; i < op.inputs.size(); ++i) s += (i ? ", " : "") + op.inputs[i].str();
  return s + " -> " + op.output.str() + ")";
}

}  // namespace duet
