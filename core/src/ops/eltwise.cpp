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

// What docs/ops.md says of each op (duet ops --markdown): the float64 definition above, in words.
constexpr std::string_view kXDoc[] = {"any shape (rank 1 to 4)"};
constexpr std::string_view kABDoc[] = {
    "any shape (rank 1 to 4)",
    "a shape that broadcasts with `a` (numpy rules: dims aligned from the right, a dim of 1 "
    "stretches), `a`'s dtype"};
constexpr std::string_view kSameOut = "`x`'s dtype and shape";
constexpr std::string_view kBroadcastOut = "`a`'s dtype, the broadcast shape of `a` and `b`";

constexpr OpAttrDoc kScaleAttrs[] = {{"alpha", "float", "1", "any finite number", "the factor"}};
constexpr OpAttrDoc kGeluAttrs[] = {{"gelu_approx", "string", "\"none\"", "\"none\", \"tanh\"",
                                     "`none`: the exact erf form; `tanh`: the tanh approximation"}};
constexpr OpAttrDoc kPowAttrs[] = {{"exponent", "float", "1", "any finite number", "the exponent"}};

constexpr OpDoc kAddDoc{"Element-wise sum with broadcasting.",
                        kABDoc,
                        kBroadcastOut,
                        {},
                        "`y = a + b`, element by element after broadcasting.",
                        R"({"format": "duet-graph", "version": 1, "name": "add",
 "inputs": [{"name": "a", "dtype": "f32", "shape": [2, 3]},
            {"name": "b", "dtype": "f32", "shape": [3]}],
 "nodes": [{"name": "y", "op": "add", "inputs": ["a", "b"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kSubDoc{"Element-wise difference with broadcasting.",
                        kABDoc,
                        kBroadcastOut,
                        {},
                        "`y = a - b`, element by element after broadcasting.",
                        R"({"format": "duet-graph", "version": 1, "name": "sub",
 "inputs": [{"name": "a", "dtype": "f32", "shape": [2, 3]},
            {"name": "b", "dtype": "f32", "shape": [3]}],
 "nodes": [{"name": "y", "op": "sub", "inputs": ["a", "b"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kMulDoc{"Element-wise product with broadcasting.",
                        kABDoc,
                        kBroadcastOut,
                        {},
                        "`y = a * b`, element by element after broadcasting.",
                        R"({"format": "duet-graph", "version": 1, "name": "mul",
 "inputs": [{"name": "a", "dtype": "f32", "shape": [2, 3]},
            {"name": "b", "dtype": "f32", "shape": [3]}],
 "nodes": [{"name": "y", "op": "mul", "inputs": ["a", "b"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kDivDoc{"Element-wise quotient with broadcasting.",
                        kABDoc,
                        kBroadcastOut,
                        {},
                        "`y = a / b`, element by element after broadcasting (IEEE division: a zero "
                        "divisor gives an infinity or NaN; checks draw positive divisors).",
                        R"({"format": "duet-graph", "version": 1, "name": "div",
 "inputs": [{"name": "a", "dtype": "f32", "shape": [2, 3]},
            {"name": "b", "dtype": "f32", "shape": [3]}],
 "nodes": [{"name": "y", "op": "div", "inputs": ["a", "b"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kSiluMulDoc{
    "SiLU of a times b, with broadcasting (the SwiGLU gate in one kernel).",
    kABDoc,
    kBroadcastOut,
    {},
    "`y = a / (1 + exp(-a)) * b`, element by element after broadcasting: `mul(silu(a), b)` "
    "without the intermediate tensor.",
    R"({"format": "duet-graph", "version": 1, "name": "silu_mul",
 "inputs": [{"name": "a", "dtype": "f32", "shape": [2, 3]},
            {"name": "b", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "silu_mul", "inputs": ["a", "b"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kScaleDoc{"Multiplies by a constant.",
                          kXDoc,
                          kSameOut,
                          kScaleAttrs,
                          "`y = alpha * x`.",
                          R"({"format": "duet-graph", "version": 1, "name": "scale",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "scale", "inputs": ["x"], "attrs": {"alpha": 0.5}}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kSiluDoc{"SiLU (swish) activation.",
                         kXDoc,
                         kSameOut,
                         {},
                         "`y = x / (1 + exp(-x))`.",
                         R"({"format": "duet-graph", "version": 1, "name": "silu",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "silu", "inputs": ["x"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kGeluDoc{"GELU activation, exact or in its tanh form.",
                         kXDoc,
                         kSameOut,
                         kGeluAttrs,
                         "`gelu_approx = none`: `y = x/2 * (1 + erf(x / sqrt(2)))`. `gelu_approx = "
                         "tanh`: `y = x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`. The "
                         "reference evaluates both in forms that do not cancel for negative x.",
                         R"({"format": "duet-graph", "version": 1, "name": "gelu",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "gelu", "inputs": ["x"], "attrs": {"gelu_approx": "tanh"}}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kReluDoc{"ReLU activation.",
                         kXDoc,
                         kSameOut,
                         {},
                         "`y = max(x, 0)`.",
                         R"({"format": "duet-graph", "version": 1, "name": "relu",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "relu", "inputs": ["x"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kExpDoc{"Natural exponential.",
                        kXDoc,
                        kSameOut,
                        {},
                        "`y = exp(x)` (overflows to +inf).",
                        R"({"format": "duet-graph", "version": 1, "name": "exp",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "exp", "inputs": ["x"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kSigmoidDoc{"Logistic sigmoid.",
                            kXDoc,
                            kSameOut,
                            {},
                            "`y = 1 / (1 + exp(-x))`.",
                            R"({"format": "duet-graph", "version": 1, "name": "sigmoid",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "sigmoid", "inputs": ["x"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kTanhDoc{"Hyperbolic tangent.",
                         kXDoc,
                         kSameOut,
                         {},
                         "`y = tanh(x)`.",
                         R"({"format": "duet-graph", "version": 1, "name": "tanh",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "tanh", "inputs": ["x"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kErfDoc{"Gauss error function.",
                        kXDoc,
                        kSameOut,
                        {},
                        "`y = erf(x) = 2/sqrt(pi) * integral from 0 to x of exp(-t^2) dt`.",
                        R"({"format": "duet-graph", "version": 1, "name": "erf",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "erf", "inputs": ["x"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kSqrtDoc{"Square root.",
                         kXDoc,
                         kSameOut,
                         {},
                         "`y = sqrt(x)`; NaN below 0 (checks draw positive inputs).",
                         R"({"format": "duet-graph", "version": 1, "name": "sqrt",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "sqrt", "inputs": ["x"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kAbsDoc{"Absolute value.",
                        kXDoc,
                        kSameOut,
                        {},
                        "`y = |x|`.",
                        R"({"format": "duet-graph", "version": 1, "name": "abs",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "abs", "inputs": ["x"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kLogDoc{"Natural logarithm.",
                        kXDoc,
                        kSameOut,
                        {},
                        "`y = ln(x)`; NaN below 0 and -inf at 0 (checks draw positive inputs).",
                        R"({"format": "duet-graph", "version": 1, "name": "log",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "log", "inputs": ["x"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kPowDoc{
    "Power with a constant exponent.",
    kXDoc,
    kSameOut,
    kPowAttrs,
    "`y = x ^ exponent`, C's `pow`: a negative base needs an integral exponent, else NaN (checks "
    "draw positive inputs, and integral exponents on signed ones).",
    R"({"format": "duet-graph", "version": 1, "name": "pow",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "pow", "inputs": ["x"], "attrs": {"exponent": 2}}],
 "outputs": ["y"]}
)"};

constexpr std::string_view kCompareOut = "`a`'s dtype, the broadcast shape of `a` and `b`: 1 or 0";
constexpr OpDoc kLessDoc{
    "Element-wise a < b with broadcasting, as 1 or 0.",
    kABDoc,
    kCompareOut,
    {},
    "`y = a < b ? 1 : 0`, element by element after broadcasting; a NaN compares false. The "
    "booleans of a graph at run time (masks, conditions) are these values; checks draw inputs from "
    "a few values so that ties occur.",
    R"({"format": "duet-graph", "version": 1, "name": "less",
 "inputs": [{"name": "a", "dtype": "f32", "shape": [2, 3]},
            {"name": "b", "dtype": "f32", "shape": [3]}],
 "nodes": [{"name": "y", "op": "less", "inputs": ["a", "b"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kLessEqualDoc{
    "Element-wise a <= b with broadcasting, as 1 or 0.",
    kABDoc,
    kCompareOut,
    {},
    "`y = a <= b ? 1 : 0`, element by element after broadcasting; a NaN compares false. The "
    "booleans of a graph at run time (masks, conditions) are these values; checks draw inputs from "
    "a few values so that ties occur.",
    R"({"format": "duet-graph", "version": 1, "name": "less_equal",
 "inputs": [{"name": "a", "dtype": "f32", "shape": [2, 3]},
            {"name": "b", "dtype": "f32", "shape": [3]}],
 "nodes": [{"name": "y", "op": "less_equal", "inputs": ["a", "b"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kEqualDoc{
    "Element-wise a == b with broadcasting, as 1 or 0.",
    kABDoc,
    kCompareOut,
    {},
    "`y = a == b ? 1 : 0`, element by element after broadcasting; a NaN compares false. The "
    "booleans of a graph at run time (masks, conditions) are these values; checks draw inputs from "
    "a few values so that ties occur.",
    R"({"format": "duet-graph", "version": 1, "name": "equal",
 "inputs": [{"name": "a", "dtype": "f32", "shape": [2, 3]},
            {"name": "b", "dtype": "f32", "shape": [3]}],
 "nodes": [{"name": "y", "op": "equal", "inputs": ["a", "b"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kFmodDoc{
    "Element-wise remainder of a / b with a's sign (C's fmod), with broadcasting.",
    kABDoc,
    kBroadcastOut,
    {},
    "`y = a - b * trunc(a / b)`, computed exactly (every such remainder is representable), element "
    "by element after broadcasting: the result has `a`'s sign and is smaller than `b` in "
    "magnitude; NaN where `b` is 0 or `a` is infinite, `a` where `b` is infinite. ONNX's Mod with "
    "fmod=1.",
    R"({"format": "duet-graph", "version": 1, "name": "fmod",
 "inputs": [{"name": "a", "dtype": "f32", "shape": [2, 3]},
            {"name": "b", "dtype": "f32", "shape": [3]}],
 "nodes": [{"name": "y", "op": "fmod", "inputs": ["a", "b"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kSinDoc{"Sine (radians).",
                        kXDoc,
                        kSameOut,
                        {},
                        "`y = sin(x)`.",
                        R"({"format": "duet-graph", "version": 1, "name": "sin",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "sin", "inputs": ["x"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kCosDoc{"Cosine (radians).",
                        kXDoc,
                        kSameOut,
                        {},
                        "`y = cos(x)`.",
                        R"({"format": "duet-graph", "version": 1, "name": "cos",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "cos", "inputs": ["x"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kTanDoc{"Tangent (radians).",
                        kXDoc,
                        kSameOut,
                        {},
                        "`y = tan(x)`.",
                        R"({"format": "duet-graph", "version": 1, "name": "tan",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "tan", "inputs": ["x"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kAsinDoc{"Arcsine.",
                         kXDoc,
                         kSameOut,
                         {},
                         "`y = asin(x)`, in [-pi/2, pi/2]; NaN outside [-1, 1].",
                         R"({"format": "duet-graph", "version": 1, "name": "asin",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "asin", "inputs": ["x"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kAcosDoc{"Arccosine.",
                         kXDoc,
                         kSameOut,
                         {},
                         "`y = acos(x)`, in [0, pi]; NaN outside [-1, 1].",
                         R"({"format": "duet-graph", "version": 1, "name": "acos",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "acos", "inputs": ["x"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kAtanDoc{"Arctangent.",
                         kXDoc,
                         kSameOut,
                         {},
                         "`y = atan(x)`, in (-pi/2, pi/2).",
                         R"({"format": "duet-graph", "version": 1, "name": "atan",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "atan", "inputs": ["x"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kSinhDoc{"Hyperbolic sine.",
                         kXDoc,
                         kSameOut,
                         {},
                         "`y = sinh(x) = (e^x - e^-x) / 2`.",
                         R"({"format": "duet-graph", "version": 1, "name": "sinh",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "sinh", "inputs": ["x"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kCoshDoc{"Hyperbolic cosine.",
                         kXDoc,
                         kSameOut,
                         {},
                         "`y = cosh(x) = (e^x + e^-x) / 2`.",
                         R"({"format": "duet-graph", "version": 1, "name": "cosh",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "cosh", "inputs": ["x"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kAsinhDoc{"Inverse hyperbolic sine.",
                          kXDoc,
                          kSameOut,
                          {},
                          "`y = asinh(x) = ln(x + sqrt(x^2 + 1))`.",
                          R"({"format": "duet-graph", "version": 1, "name": "asinh",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "asinh", "inputs": ["x"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kAcoshDoc{
    "Inverse hyperbolic cosine.",
    kXDoc,
    kSameOut,
    {},
    "`y = acosh(x) = ln(x + sqrt(x^2 - 1))`; NaN below 1 (checks draw inputs from [1, 3]).",
    R"({"format": "duet-graph", "version": 1, "name": "acosh",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "acosh", "inputs": ["x"]}],
 "outputs": ["y"]}
)"};
constexpr OpDoc kAtanhDoc{"Inverse hyperbolic tangent.",
                          kXDoc,
                          kSameOut,
                          {},
                          "`y = atanh(x) = ln((1 + x) / (1 - x)) / 2`; infinite at -1 and 1, NaN "
                          "beyond (checks draw inputs inside (-1, 1)).",
                          R"({"format": "duet-graph", "version": 1, "name": "atanh",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
 "nodes": [{"name": "y", "op": "atanh", "inputs": ["x"]}],
 "outputs": ["y"]}
)"};

constexpr OpFacts kRows[] = {
    {OpKind::add, "add", kAB, OpClass::elementwise, infer_binary, per_element<1>, &kAddDoc,
     code_of<DUET_EW_ADD>, [](double x, double z, const OpAttrs&) { return x + z; }},
    {OpKind::sub, "sub", kAB, OpClass::elementwise, infer_binary, per_element<1>, &kSubDoc,
     code_of<DUET_EW_SUB>, [](double x, double z, const OpAttrs&) { return x - z; }},
    {OpKind::mul, "mul", kAB, OpClass::elementwise, infer_binary, per_element<1>, &kMulDoc,
     code_of<DUET_EW_MUL>, [](double x, double z, const OpAttrs&) { return x * z; }},
    {OpKind::div,
     "div",
     kAB,
     OpClass::elementwise,
     infer_binary,
     per_element<1>,
     &kDivDoc,
     code_of<DUET_EW_DIV>,
     [](double x, double z, const OpAttrs&) { return x / z; },
     nullptr,
     {InputRange::any, InputRange::positive}},
    {OpKind::silu_mul, "silu_mul", kAB, OpClass::elementwise, infer_binary, per_element<7>,
     &kSiluMulDoc, code_of<DUET_EW_SILU_MUL>,
     [](double x, double z, const OpAttrs&) { return x / (1.0 + std::exp(-x)) * z; }},
    {OpKind::scale, "scale", kX, OpClass::elementwise, infer_scale, per_element<1>, &kScaleDoc,
     code_of<DUET_EW_SCALE>,
     [](double x, double, const OpAttrs& a) { return x * static_cast<double>(a.alpha); }, alpha},
    {OpKind::silu, "silu", kX, OpClass::elementwise, infer_unary, per_element<6>, &kSiluDoc,
     code_of<DUET_EW_SILU>,
     [](double x, double, const OpAttrs&) { return x / (1.0 + std::exp(-x)); }},
    {OpKind::gelu, "gelu", kX, OpClass::elementwise, infer_unary, per_element<12>, &kGeluDoc,
     gelu_code, gelu},
    {OpKind::relu, "relu", kX, OpClass::elementwise, infer_unary, per_element<1>, &kReluDoc,
     code_of<DUET_EW_RELU>, [](double x, double, const OpAttrs&) { return x > 0 ? x : 0.0; }},
    {OpKind::exp, "exp", kX, OpClass::elementwise, infer_unary, per_element<4>, &kExpDoc,
     code_of<DUET_EW_EXP>, [](double x, double, const OpAttrs&) { return std::exp(x); }},
    {OpKind::sigmoid, "sigmoid", kX, OpClass::elementwise, infer_unary, per_element<6>,
     &kSigmoidDoc, code_of<DUET_EW_SIGMOID>,
     [](double x, double, const OpAttrs&) { return 1.0 / (1.0 + std::exp(-x)); }},
    {OpKind::tanh, "tanh", kX, OpClass::elementwise, infer_unary, per_element<6>, &kTanhDoc,
     code_of<DUET_EW_TANH>, [](double x, double, const OpAttrs&) { return std::tanh(x); }},
    {OpKind::erf, "erf", kX, OpClass::elementwise, infer_unary, per_element<12>, &kErfDoc,
     code_of<DUET_EW_ERF>, [](double x, double, const OpAttrs&) { return std::erf(x); }},
    // NaN below 0: checks draw positive inputs.
    {OpKind::sqrt,
     "sqrt",
     kX,
     OpClass::elementwise,
     infer_unary,
     per_element<4>,
     &kSqrtDoc,
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
     &kPowDoc,
     code_of<DUET_EW_POW>,
     [](double x, double, const OpAttrs& a) {
       return std::pow(x, static_cast<double>(a.exponent));
     },
     exponent,
     {InputRange::positive}},
    {OpKind::abs, "abs", kX, OpClass::elementwise, infer_unary, per_element<1>, &kAbsDoc,
     code_of<DUET_EW_ABS>, [](double x, double, const OpAttrs&) { return std::fabs(x); }},
    // NaN below 0, -inf at 0: checks draw positive inputs.
    {OpKind::log,
     "log",
     kX,
     OpClass::elementwise,
     infer_unary,
     per_element<4>,
     &kLogDoc,
     code_of<DUET_EW_LOG>,
     [](double x, double, const OpAttrs&) { return std::log(x); },
     nullptr,
     {InputRange::positive}},
    {OpKind::less,
     "less",
     kAB,
     OpClass::elementwise,
     infer_binary,
     per_element<1>,
     &kLessDoc,
     code_of<DUET_EW_LESS>,
     [](double x, double z, const OpAttrs&) { return x < z ? 1.0 : 0.0; },
     nullptr,
     {InputRange::steps, InputRange::steps}},
    {OpKind::less_equal,
     "less_equal",
     kAB,
     OpClass::elementwise,
     infer_binary,
     per_element<1>,
     &kLessEqualDoc,
     code_of<DUET_EW_LESS_EQUAL>,
     [](double x, double z, const OpAttrs&) { return x <= z ? 1.0 : 0.0; },
     nullptr,
     {InputRange::steps, InputRange::steps}},
    {OpKind::equal,
     "equal",
     kAB,
     OpClass::elementwise,
     infer_binary,
     per_element<1>,
     &kEqualDoc,
     code_of<DUET_EW_EQUAL>,
     [](double x, double z, const OpAttrs&) { return x == z ? 1.0 : 0.0; },
     nullptr,
     {InputRange::steps, InputRange::steps}},
    {OpKind::fmod, "fmod", kAB, OpClass::elementwise, infer_binary, per_element<8>, &kFmodDoc,
     code_of<DUET_EW_FMOD>, [](double x, double z, const OpAttrs&) { return std::fmod(x, z); }},
    {OpKind::sin, "sin", kX, OpClass::elementwise, infer_unary, per_element<8>, &kSinDoc,
     code_of<DUET_EW_SIN>, [](double x, double, const OpAttrs&) { return std::sin(x); }},
    {OpKind::cos, "cos", kX, OpClass::elementwise, infer_unary, per_element<8>, &kCosDoc,
     code_of<DUET_EW_COS>, [](double x, double, const OpAttrs&) { return std::cos(x); }},
    {OpKind::tan, "tan", kX, OpClass::elementwise, infer_unary, per_element<8>, &kTanDoc,
     code_of<DUET_EW_TAN>, [](double x, double, const OpAttrs&) { return std::tan(x); }},
    {OpKind::asin, "asin", kX, OpClass::elementwise, infer_unary, per_element<8>, &kAsinDoc,
     code_of<DUET_EW_ASIN>, [](double x, double, const OpAttrs&) { return std::asin(x); }},
    {OpKind::acos, "acos", kX, OpClass::elementwise, infer_unary, per_element<8>, &kAcosDoc,
     code_of<DUET_EW_ACOS>, [](double x, double, const OpAttrs&) { return std::acos(x); }},
    {OpKind::atan, "atan", kX, OpClass::elementwise, infer_unary, per_element<8>, &kAtanDoc,
     code_of<DUET_EW_ATAN>, [](double x, double, const OpAttrs&) { return std::atan(x); }},
    {OpKind::sinh, "sinh", kX, OpClass::elementwise, infer_unary, per_element<8>, &kSinhDoc,
     code_of<DUET_EW_SINH>, [](double x, double, const OpAttrs&) { return std::sinh(x); }},
    {OpKind::cosh, "cosh", kX, OpClass::elementwise, infer_unary, per_element<8>, &kCoshDoc,
     code_of<DUET_EW_COSH>, [](double x, double, const OpAttrs&) { return std::cosh(x); }},
    {OpKind::asinh, "asinh", kX, OpClass::elementwise, infer_unary, per_element<8>, &kAsinhDoc,
     code_of<DUET_EW_ASINH>, [](double x, double, const OpAttrs&) { return std::asinh(x); }},
    {OpKind::acosh,
     "acosh",
     kX,
     OpClass::elementwise,
     infer_unary,
     per_element<8>,
     &kAcoshDoc,
     code_of<DUET_EW_ACOSH>,
     [](double x, double, const OpAttrs&) { return std::acosh(x); },
     nullptr,
     {InputRange::above_one}},
    {OpKind::atanh,
     "atanh",
     kX,
     OpClass::elementwise,
     infer_unary,
     per_element<8>,
     &kAtanhDoc,
     code_of<DUET_EW_ATANH>,
     [](double x, double, const OpAttrs&) { return std::atanh(x); },
     nullptr,
     {InputRange::open_unit}},
};

}  // namespace

std::span<const OpFacts> eltwise_facts() {
  return kRows;
}

}  // namespace duet::ops
