// Element-wise ops: duet's element-wise kernels at run time; folded at import when every input
// is known.
#include <cmath>
#include <limits>
#include <numeric>

#include "fold.h"
#include "importer.h"

namespace duet::onnx_import {

namespace {

// Both operands at run time, of one float type (ONNX gives both the same type).
Result<std::pair<ValueId, ValueId>> float_operands(Node& n) {
  if (n.elem(0) != n.elem(1))
    return n.invalid("operands of types " + elem_name(n.elem(0)) + " and " + elem_name(n.elem(1)));
  if (!elem_is_float(n.elem(0)))
    return n.unsupported(elem_name(n.elem(0)) +
                         " arithmetic at run time (duet's element-wise ops are float)");
  DUET_ASSIGN_OR_RETURN(ValueId a, n.runtime(0));
  DUET_ASSIGN_OR_RETURN(ValueId b, n.runtime(1));
  return std::make_pair(a, b);
}

int64_t int_div(int64_t a, int64_t b) {
  return b == 0 ? 0 : a / b;  // ONNX leaves integer division by zero undefined
}

// Whether a fold of inputs 0 and 1 broadcast together fits the import's memory budget (two
// index vectors and the values in double, beside the result).
Status room_for_broadcast(Node& n, int out_elem) {
  auto out = broadcast(n.shape(0), n.shape(1));
  if (!out.ok()) return n.invalid(out.status().message());
  return n.room_for(*out, out_elem, 24);
}

Status binary(Node& n, OpKind kind) {
  if (n.all_known()) {
    std::function<double(double, double)> real;
    std::function<int64_t(int64_t, int64_t)> integer;
    switch (kind) {
      case OpKind::add:
        real = [](double a, double b) { return a + b; };
        integer = [](int64_t a, int64_t b) { return a + b; };
        break;
      case OpKind::sub:
        real = [](double a, double b) { return a - b; };
        integer = [](int64_t a, int64_t b) { return a - b; };
        break;
      case OpKind::mul:
        real = [](double a, double b) { return a * b; };
        integer = [](int64_t a, int64_t b) { return a * b; };
        break;
      default:
        real = [](double a, double b) { return a / b; };
        integer = int_div;
        break;
    }
    DUET_TRY(room_for_broadcast(n, n.elem(0)));
    auto r = fold_binary(n.array(0), n.array(1), n.elem(0), real, integer);
    if (!r.ok()) return n.invalid(r.status().message());
    n.set_known(0, std::move(*r));
    return {};
  }
  // x * c with c a known scalar: duet's scale, which reads no second tensor.
  if (kind == OpKind::mul && elem_is_float(n.elem(0)) && n.elem(0) == n.elem(1)) {
    for (size_t k = 0; k < 2; ++k) {
      const size_t other = 1 - k;
      if (!n.known(k) || n.array(k).numel() != 1 || n.rank(k) > n.rank(other)) continue;
      const double c = n.array(k).real_at(0);
      if (!std::isfinite(c)) break;
      DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(other));
      OpAttrs at;
      at.alpha = static_cast<float>(c);
      n.set(0, n.op(OpKind::scale, {x}, at), n.elem(0));
      return {};
    }
  }
  DUET_ASSIGN_OR_RETURN(auto ab, float_operands(n));
  n.set(0, n.op(kind, {ab.first, ab.second}), n.elem(0));
  return {};
}

Status map_add(Node& n) {
  return binary(n, OpKind::add);
}
Status map_sub(Node& n) {
  return binary(n, OpKind::sub);
}
Status map_mul(Node& n) {
  return binary(n, OpKind::mul);
}
Status map_div(Node& n) {
  return binary(n, OpKind::div);
}

// A unary op: folded when known (`f`), else duet's `kind` (or unsupported when duet has none).
Status unary(Node& n, std::optional<OpKind> kind, double (*f)(double), OpAttrs attrs = {}) {
  if (n.known(0)) {
    if (!f) return n.unsupported("folding " + std::string(n.type()));
    DUET_TRY(n.room_for(n.shape(0), n.elem(0), 16));
    n.set_known(0, fold_unary(n.array(0), f));
    return {};
  }
  if (!kind) return n.unsupported("duet has no " + std::string(n.type()) + " op yet");
  if (!elem_is_float(n.elem(0)))
    return n.unsupported(std::string(n.type()) + " of " + elem_name(n.elem(0)) + " at run time");
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  n.set(0, n.op(*kind, {x}, attrs), n.elem(0));
  return {};
}

double relu(double x) {
  return x > 0 ? x : (x == 0 || x < 0 ? 0.0 : x);  // NaN stays NaN
}
double neg(double x) {
  return -x;
}
double exp_(double x) {
  return std::exp(x);
}
double sqrt_(double x) {
  return std::sqrt(x);
}
double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
double tanh_(double x) {
  return std::tanh(x);
}
double erf_(double x) {
  return std::erf(x);
}
double abs_(double x) {
  return std::fabs(x);
}
double reciprocal(double x) {
  return 1.0 / x;
}
double log_(double x) {
  return std::log(x);
}

Status map_relu(Node& n) {
  return unary(n, OpKind::relu, relu);
}
Status map_exp(Node& n) {
  return unary(n, OpKind::exp, exp_);
}
Status map_neg(Node& n) {
  if (!n.known(0) && !elem_is_float(n.elem(0)))
    return n.unsupported("Neg of " + elem_name(n.elem(0)) + " at run time");
  OpAttrs at;
  at.alpha = -1.0f;
  return unary(n, OpKind::scale, neg, at);
}
Status map_sqrt(Node& n) {
  return unary(n, OpKind::sqrt, sqrt_);
}
Status map_sigmoid(Node& n) {
  return unary(n, OpKind::sigmoid, sigmoid);
}
Status map_tanh(Node& n) {
  return unary(n, OpKind::tanh, tanh_);
}
Status map_erf(Node& n) {
  return unary(n, OpKind::erf, erf_);
}
Status map_abs(Node& n) {
  return unary(n, OpKind::abs, abs_);
}
Status map_reciprocal(Node& n) {
  OpAttrs at;
  at.exponent = -1.0f;
  return unary(n, OpKind::pow, reciprocal, at);
}
Status map_log(Node& n) {
  return unary(n, OpKind::log, log_);
}

Status map_pow(Node& n) {
  if (n.all_known()) {
    DUET_TRY(room_for_broadcast(n, n.elem(0)));
    auto r = fold_binary(
        n.array(0), n.array(1), n.elem(0), [](double a, double b) { return std::pow(a, b); },
        [](int64_t a, int64_t b) {
          return static_cast<int64_t>(std::pow(static_cast<double>(a), static_cast<double>(b)));
        });
    if (!r.ok()) return n.invalid(r.status().message());
    n.set_known(0, std::move(*r));
    return {};
  }
  if (!n.known(1) || n.array(1).numel() != 1)
    return n.unsupported("Pow with an exponent computed at run time or not a scalar");
  if (!elem_is_float(n.elem(0)))
    return n.unsupported("Pow of " + elem_name(n.elem(0)) + " at run time");
  const double e = n.array(1).real_at(0);
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  OpAttrs at;
  at.exponent = static_cast<float>(e);
  if (static_cast<double>(at.exponent) != e || !std::isfinite(e))
    return n.unsupported("Pow with exponent " + std::to_string(e) +
                         " (duet's pow takes a finite f32 exponent)");
  n.set(0, at.exponent == 1.0f ? x : n.op(OpKind::pow, {x}, at), n.elem(0));
  return {};
}

Status map_dropout(Node& n) {
  // Inference: the identity. Training mode asks for randomness duet does not provide.
  if (n.opset() >= 12 && n.has(2)) {
    if (!n.known(2)) return n.unsupported("training_mode computed at run time");
    if (n.array(2).int_at(0) != 0) return n.unsupported("Dropout in training mode");
  }
  if (n.opset() < 7 && n.attr_int("is_test", 0) == 0)
    return n.unsupported("Dropout in training mode (is_test = 0)");
  n.forward(0, 0);
  if (n.num_outputs() > 1 && n.output_used(1)) {
    const std::vector<int64_t> dims = n.shape(0);
    DUET_TRY(n.room_for(dims, kBool, 8));
    DUET_ASSIGN_OR_RETURN(int64_t count_, count(dims));
    n.set_known(1,
                Array::of_ints(kBool, dims, std::vector<int64_t>(static_cast<size_t>(count_), 1)));
  }
  return {};
}

Status map_gelu(Node& n) {
  const std::string approx = n.attr_string("approximate", "none");
  OpAttrs at;
  if (approx == "tanh")
    at.gelu_approx = GeluApprox::tanh;
  else if (approx != "none")
    return n.invalid("approximate '" + approx + "'");
  return unary(n, OpKind::gelu, nullptr, at);
}

Status map_silu(Node& n) {
  return unary(n, OpKind::silu, nullptr);
}

// Comparisons and logic give bool tensors, which duet does not have at run time: they fold at
// import (shape arithmetic, masks made from constant buffers), nothing more.
Status compare(Node& n, bool (*f)(double, double)) {
  if (!n.all_known())
    return n.unsupported(std::string(n.type()) +
                         " at run time (duet has no boolean tensors; it folds when its inputs are "
                         "known)");
  DUET_TRY(room_for_broadcast(n, kBool));
  auto r = fold_binary(
      n.array(0), n.array(1), kBool, [f](double a, double b) { return f(a, b) ? 1.0 : 0.0; },
      [f](int64_t a, int64_t b) -> int64_t {
        return f(static_cast<double>(a), static_cast<double>(b)) ? 1 : 0;
      });
  if (!r.ok()) return n.invalid(r.status().message());
  n.set_known(0, std::move(*r));
  return {};
}

Status map_equal(Node& n) {
  if (n.all_known() && !elem_is_float(n.elem(0))) {
    // Exact for int64 values beyond 2^53 too.
    DUET_TRY(room_for_broadcast(n, kBool));
    auto r = fold_binary(
        n.array(0), n.array(1), kBool, [](double a, double b) { return a == b ? 1.0 : 0.0; },
        [](int64_t a, int64_t b) -> int64_t { return a == b; });
    if (!r.ok()) return n.invalid(r.status().message());
    n.set_known(0, std::move(*r));
    return {};
  }
  return compare(n, [](double a, double b) { return a == b; });
}
Status map_less(Node& n) {
  return compare(n, [](double a, double b) { return a < b; });
}
Status map_less_equal(Node& n) {
  return compare(n, [](double a, double b) { return a <= b; });
}
Status map_greater(Node& n) {
  return compare(n, [](double a, double b) { return a > b; });
}
Status map_greater_equal(Node& n) {
  return compare(n, [](double a, double b) { return a >= b; });
}
Status map_and(Node& n) {
  return compare(n, [](double a, double b) { return a != 0 && b != 0; });
}
Status map_or(Node& n) {
  return compare(n, [](double a, double b) { return a != 0 || b != 0; });
}
Status map_xor(Node& n) {
  return compare(n, [](double a, double b) { return (a != 0) != (b != 0); });
}
Status map_not(Node& n) {
  if (!n.known(0))
    return n.unsupported("Not at run time (duet has no boolean tensors; it folds when known)");
  DUET_TRY(n.room_for(n.shape(0), kBool, 16));
  n.set_known(0, fold_unary(n.array(0), [](double v) { return v == 0 ? 1.0 : 0.0; }).cast(kBool));
  return {};
}

// Where(c, x, y) with c known and x or y (or both) computed at run time: a select by arithmetic,
// y * keep + fill with keep = !c and fill = c ? x : 0 when x is known (symmetrically when y is),
// x * c + y * !c when neither is. When every x that c picks is infinite (masked_fill with -inf),
// y + fill alone. Exact for finite values; a non-finite value in the branch not taken gives NaN
// (inf * 0) where ONNX gives the other branch.
Status where_runtime(Node& n) {
  for (size_t k : {size_t{1}, size_t{2}})
    if (!n.known(k) && (!elem_is_float(n.elem(k)) || n.elem(k) == kDouble))
      return n.unsupported("Where of " + elem_name(n.elem(k)) +
                           " at run time (duet's element-wise ops are float)");
  const int elem = n.elem(1);
  const Array& c = n.array(0);
  auto mask = [&](bool want, std::string_view purpose) -> Result<ValueId> {
    std::vector<double> v(static_cast<size_t>(c.numel()));
    for (int64_t i = 0; i < c.numel(); ++i)
      v[static_cast<size_t>(i)] = (c.int_at(i) != 0) == want ? 1.0 : 0.0;
    return n.constant(Array::of_reals(elem, c.dims(), v), purpose);
  };
  if (n.known(1) != n.known(2)) {
    const size_t fixed = n.known(1) ? 1 : 2, other = 3 - fixed;
    const bool pick_fixed = fixed == 1;  // c picks input 1
    // fill: the known branch where it is picked, 0 elsewhere, at the broadcast of c and it.
    DUET_ASSIGN_OR_RETURN(std::vector<int64_t> fd, broadcast(c.dims(), n.shape(fixed)));
    DUET_TRY(n.room_for(fd, elem, 40));
    const std::vector<int64_t> ic = broadcast_index(c.dims(), fd);
    const std::vector<int64_t> iv = broadcast_index(n.shape(fixed), fd);
    std::vector<double> fill(ic.size());
    bool all_inf = true;
    for (size_t i = 0; i < ic.size(); ++i) {
      const bool picked = (c.int_at(ic[i]) != 0) == pick_fixed;
      const double v = picked ? n.array(fixed).real_at(iv[i]) : 0.0;
      fill[i] = v;
      if (picked && !std::isinf(v)) all_inf = false;
    }
    DUET_ASSIGN_OR_RETURN(ValueId f, n.constant(Array::of_reals(elem, fd, fill), "fill"));
    DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(other));
    if (!all_inf) {
      DUET_ASSIGN_OR_RETURN(ValueId keep, mask(!pick_fixed, "keep"));
      x = n.op(OpKind::mul, {x, keep}, {}, "kept");
    }
    n.set(0, n.op(OpKind::add, {x, f}), elem);  // of shape `out`: other, c and fixed broadcast
    return {};
  }
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(1));
  DUET_ASSIGN_OR_RETURN(ValueId y, n.runtime(2));
  DUET_ASSIGN_OR_RETURN(ValueId on, mask(true, "picks_x"));
  DUET_ASSIGN_OR_RETURN(ValueId off, mask(false, "picks_y"));
  ValueId a = n.op(OpKind::mul, {x, on}, {}, "x_part");
  ValueId b = n.op(OpKind::mul, {y, off}, {}, "y_part");
  n.set(0, n.op(OpKind::add, {a, b}), elem);
  return {};
}

Status map_where(Node& n) {
  DUET_ASSIGN_OR_RETURN(std::vector<int64_t> xy, broadcast(n.shape(1), n.shape(2)));
  DUET_ASSIGN_OR_RETURN(std::vector<int64_t> out, broadcast(n.shape(0), xy));
  if (!n.all_known()) {
    if (!n.known(0))
      return n.unsupported(
          "Where with a condition computed at run time (duet has no boolean tensors; a condition "
          "known at import, such as a mask made from a constant buffer, works)");
    if (n.elem(1) != n.elem(2)) return n.invalid("X and Y of different types");
    return where_runtime(n);
  }
  DUET_TRY(n.room_for(out, n.elem(1), 48));
  const std::vector<int64_t> ic = broadcast_index(n.shape(0), out);
  const Array x = pick(n.array(1), out, broadcast_index(n.shape(1), out));
  const Array y = pick(n.array(2), out, broadcast_index(n.shape(2), out));
  std::vector<int64_t> index(ic.size());
  std::string bytes;
  const auto es = static_cast<size_t>(elem_size(x.elem()));
  for (size_t i = 0; i < ic.size(); ++i) {
    const Array& from = n.array(0).int_at(ic[i]) ? x : y;
    bytes.append(from.bytes().data() + i * es, es);
  }
  DUET_ASSIGN_OR_RETURN(Array r, Array::from_bytes(x.elem(), out, std::move(bytes)));
  n.set_known(0, std::move(r));
  return {};
}

// Trilu: the upper (j - i >= k) or lower (j - i <= k) triangle of the last two dims, the rest 0.
// Folded when x is known; at run time x times a known 0/1 mask of [rows, cols] (an infinite or
// NaN element outside the triangle gives NaN there, where ONNX gives 0).
Status map_trilu(Node& n) {
  const std::vector<int64_t> dims = n.shape(0);
  if (dims.size() < 2) return n.invalid("Trilu of rank " + std::to_string(dims.size()) + " (>= 2)");
  int64_t k = 0;
  if (n.has(1)) {
    DUET_ASSIGN_OR_RETURN(std::vector<int64_t> kv, n.ints(1, "k"));
    if (kv.size() != 1) return n.invalid("k must be a scalar");
    k = kv[0];
  }
  const bool upper = n.attr_int("upper", 1) != 0;
  const int64_t rows = dims[dims.size() - 2], cols = dims.back();
  auto keep = [&](int64_t i, int64_t j) { return upper ? j - i >= k : j - i <= k; };
  if (n.known(0)) {
    const Array& a = n.array(0);
    DUET_TRY(n.room_for(dims, a.elem(), 16));
    std::vector<int64_t> index(static_cast<size_t>(a.numel()));
    std::iota(index.begin(), index.end(), int64_t{0});
    // Elements outside the triangle read the zero appended after the data.
    const Array zero = Array::of_reals(a.elem(), {1}, {0.0});
    const Array flat = a.reshaped({a.numel()});
    const Array both = concat({&flat, &zero}, 0);
    for (int64_t e = 0; e < a.numel(); ++e)
      if (!keep((e / cols) % rows, e % cols)) index[static_cast<size_t>(e)] = a.numel();
    n.set_known(0, pick(both, dims, index));
    return {};
  }
  if (!elem_is_float(n.elem(0)) || n.elem(0) == kDouble)
    return n.unsupported("Trilu of " + elem_name(n.elem(0)) + " at run time");
  DUET_TRY(n.room_for({rows, cols}, n.elem(0), 8));
  std::vector<double> m(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m[static_cast<size_t>(i * cols + j)] = keep(i, j) ? 1 : 0;
  DUET_ASSIGN_OR_RETURN(ValueId mask,
                        n.constant(Array::of_reals(n.elem(0), {rows, cols}, m), "mask"));
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  n.set(0, n.op(OpKind::mul, {x, mask}), n.elem(0));
  return {};
}

const Mapping kMath[] = {
    {"Add", map_add},         {"Sub", map_sub},
    {"Mul", map_mul},         {"Div", map_div},
    {"Pow", map_pow},         {"Relu", map_relu},
    {"Exp", map_exp},         {"Neg", map_neg},
    {"Sqrt", map_sqrt},       {"Sigmoid", map_sigmoid},
    {"Tanh", map_tanh},       {"Erf", map_erf},
    {"Abs", map_abs},         {"Reciprocal", map_reciprocal},
    {"Log", map_log},         {"Dropout", map_dropout},
    {"Gelu", map_gelu},       {"Silu", map_silu},
    {"Equal", map_equal},     {"Where", map_where},
    {"Less", map_less},       {"LessOrEqual", map_less_equal},
    {"Greater", map_greater}, {"GreaterOrEqual", map_greater_equal},
    {"And", map_and},         {"Or", map_or},
    {"Xor", map_xor},         {"Not", map_not},
    {"Trilu", map_trilu},
};

}  // namespace

std::span<const Mapping> math_mappings() {
  return kMath;
}

}  // namespace duet::onnx_import
