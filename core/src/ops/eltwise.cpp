// The element-wise ops: one row each. A new element-wise function is a row here, its code in
// duet/eltwise.h, its OpKind in duet/op.h, and its formula in each backend's element-wise kernel
// (shaders/eltwise.comp, kernels/src/device/generic.h, backends/cpu/ops/elementwise.cpp):
// docs/adding-an-op.md walks through one.
#include <cmath>
#include <numbers>

#include "duet/eltwise.h"
#include "op_facts.h"

namespace duet::ops {

namespace {

constexpr InputSpec kX[] = {{"x", false}};
constexpr InputSpec kAB[] = {{"a", false}, {"b", false}};

Status infer_binary(const Check& c, OpDesc& op) {
  DUET_TRY(c.float_dtype(0));
  DUET_TRY(c.same_dtype(0, 1));
  int rank = 0;
  auto shape = broadcast_shapes(op.inputs[0].dims(), op.inputs[1].dims(), &rank);
  if (!shape.ok())
    return c.fail(1)
        .expected("a shape that broadcasts with " + op.inputs[0].shape_str())
        .got(op.inputs[1].str());
  op.output = TensorDesc::contiguous(op.inputs[0].dtype, std::span(shape->data(), u(rank)));
  return {};
}

Status infer_unary(const Check& c, OpDesc& op) {
  DUET_TRY(c.float_dtype(0));
  op.output = TensorDesc::contiguous(op.inputs[0].dtype, op.inputs[0].dims());
  return {};
}

Status infer_scale(const Check& c, OpDesc& op) {
  DUET_TRY(c.float_dtype(0));
  if (!std::isfinite(op.attrs.alpha))
    return c.fail_attr().expected("a finite alpha").got(std::to_string(op.attrs.alpha));
  op.output = TensorDesc::contiguous(op.inputs[0].dtype, op.inputs[0].dims());
  return {};
}

Status infer_pow(const Check& c, OpDesc& op) {
  DUET_TRY(c.float_dtype(0));
  if (!std::isfinite(op.attrs.exponent))
    return c.fail_attr().expected("a finite exponent").got(std::to_string(op.attrs.exponent));
  op.output = TensorDesc::contiguous(op.inputs[0].dtype, op.inputs[0].dims());
  return {};
}

float alpha(const OpAttrs& a) {
  return a.alpha;
}
float exponent(const OpAttrs& a) {
  return a.exponent;
}

uint32_t gelu_code(const OpAttrs& a) {
  return a.gelu_approx == GeluApprox::tanh ? DUET_EW_GELU_TANH : DUET_EW_GELU;
}

// Written so that neither form cancels for negative x: 0.5 x (1 + tanh(u)) is x / (1 + exp(-2u)),
// and 1 + erf(z) is erfc(-z).
double gelu(double x, double, const OpAttrs& a) {
  if (a.gelu_approx == GeluApprox::tanh) {
    const double c = std::sqrt(2.0 / std::numbers::pi);
    return x / (1.0 + std::exp(-2.0 * c * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * std::erfc(-x / std::numbers::sqrt2);
}

constexpr OpFacts kRows[] = {
    {OpKind::add, "add", kAB, OpClass::elementwise, infer_binary, per_element<1>,
     code_of<DUET_EW_ADD>, [](double x, double z, const OpAttrs&) { return x + z; }},
    {OpKind::sub, "sub", kAB, OpClass::elementwise, infer_binary, per_element<1>,
     code_of<DUET_EW_SUB>, [](double x, double z, const OpAttrs&) { return x - z; }},
    {OpKind::mul, "mul", kAB, OpClass::elementwise, infer_binary, per_element<1>,
     code_of<DUET_EW_MUL>, [](double x, double z, const OpAttrs&) { return x * z; }},
    {OpKind::div,
     "div",
     kAB,
     OpClass::elementwise,
     infer_binary,
     per_element<1>,
     code_of<DUET_EW_DIV>,
     [](double x, double z, const OpAttrs&) { return x / z; },
     nullptr,
     {InputRange::any, InputRange::positive}},
    {OpKind::scale, "scale", kX, OpClass::elementwise, infer_scale, per_element<1>,
     code_of<DUET_EW_SCALE>,
     [](double x, double, const OpAttrs& a) { return x * static_cast<double>(a.alpha); }, alpha},
    {OpKind::silu, "silu", kX, OpClass::elementwise, infer_unary, per_element<6>,
     code_of<DUET_EW_SILU>,
     [](double x, double, const OpAttrs&) { return x / (1.0 + std::exp(-x)); }},
    {OpKind::gelu, "gelu", kX, OpClass::elementwise, infer_unary, per_element<12>, gelu_code, gelu},
    {OpKind::relu, "relu", kX, OpClass::elementwise, infer_unary, per_element<1>,
     code_of<DUET_EW_RELU>, [](double x, double, const OpAttrs&) { return x > 0 ? x : 0.0; }},
    {OpKind::exp, "exp", kX, OpClass::elementwise, infer_unary, per_element<4>,
     code_of<DUET_EW_EXP>, [](double x, double, const OpAttrs&) { return std::exp(x); }},
    {OpKind::sigmoid, "sigmoid", kX, OpClass::elementwise, infer_unary, per_element<6>,
     code_of<DUET_EW_SIGMOID>,
     [](double x, double, const OpAttrs&) { return 1.0 / (1.0 + std::exp(-x)); }},
    {OpKind::tanh, "tanh", kX, OpClass::elementwise, infer_unary, per_element<6>,
     code_of<DUET_EW_TANH>, [](double x, double, const OpAttrs&) { return std::tanh(x); }},
    {OpKind::erf, "erf", kX, OpClass::elementwise, infer_unary, per_element<12>,
     code_of<DUET_EW_ERF>, [](double x, double, const OpAttrs&) { return std::erf(x); }},
    // NaN below 0: checks draw positive inputs.
    {OpKind::sqrt,
     "sqrt",
     kX,
     OpClass::elementwise,
     infer_unary,
     per_element<4>,
     code_of<DUET_EW_SQRT>,
     [](double x, double, const OpAttrs&) { return std::sqrt(x); },
     nullptr,
     {InputRange::positive}},
    // C's pow: a negative base needs an integral exponent, so checks draw positive inputs (and
    // cases of their own for integral exponents on signed ones, tools/check/cases.cpp).
    {OpKind::pow,
     "pow",
     kX,
     OpClass::elementwise,
     infer_pow,
     per_element<12>,
     code_of<DUET_EW_POW>,
     [](double x, double, const OpAttrs& a) {
       return std::pow(x, static_cast<double>(a.exponent));
     },
     exponent,
     {InputRange::positive}},
};

}  // namespace

std::span<const OpFacts> eltwise_facts() {
  return kRows;
}

}  // namespace duet::ops
