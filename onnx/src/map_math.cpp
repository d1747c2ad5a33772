// Element-wise ops: duet's element-wise kernels at run time; folded at import when every input
// is known.
#include <cmath>
#include <limits>
#include <numeric>

#include "fold.h"
#include "importer.h"

namespace duet::onnx_import {

namespace {

int64_t dims_product(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= d[i];
  return p;
}

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

constexpr double kExactInF32 = 16777216.0;  // 2^24: every integer of smaller magnitude is an f32

// `x` (f32 holding integers) checked as it runs (overflow_check: a zero of shape [1] to add to
// what must wait for the check): a magnitude of 2^24 or more, where f32 no longer
// holds every integer, makes the run fail (a zero looked up in a one-row table at row 1, an error
// naming the step "<output>/<what>/beyond_2^24/check") rather than go on with rounded values. The
// value comes back with that zero added, so the check runs before anything reads it.
ValueId overflow_check(Node& n, ValueId x, const std::string& what) {
  const std::string step = what + "/beyond_2^24";
  std::vector<int> all(n.desc(x).dims().size());
  std::iota(all.begin(), all.end(), 0);
  OpAttrs everywhere;
  everywhere.axes = all;
  ValueId largest = n.op(OpKind::reduce_max, {n.op(OpKind::abs, {x}, {}, step + "/magnitude")},
                         everywhere, step + "/largest");
  auto limit = n.constant(Array::of_reals(kFloat, {1}, {kExactInF32}), step + "/limit");
  auto table = n.constant(Array::of_reals(kFloat, {1, 1}, {0.0}), step + "/zero_table");
  if (!limit.ok() || !table.ok()) return ValueId{};  // the builder holds the error
  ValueId over = n.op(OpKind::less_equal, {*limit, n.reshape(largest, {1}, step + "/one")}, {},
                      step + "/over");
  OpAttrs i32;
  i32.to = DType::i32;
  ValueId row = n.op(OpKind::cast, {over}, i32, step + "/row");
  return n.reshape(n.op(OpKind::embedding, {*table, row}, {}, step + "/check"), {1},
                   step + "/zero");
}
ValueId checked_exact(Node& n, ValueId x, const std::string& what) {
  return n.op(OpKind::add, {x, overflow_check(n, x, what)}, {}, what + "/checked");
}

// Integer input i (int32 or int64, held as i32) as f32, exactly: a known one must lie below 2^24
// in magnitude; one computed at run time is checked as it runs (checked_exact).
Result<ValueId> exact_integer(Node& n, size_t i, std::string_view purpose) {
  if (n.known(i))
    for (int64_t v : n.array(i).ints())
      if (v <= -static_cast<int64_t>(kExactInF32) || v >= static_cast<int64_t>(kExactInF32))
        return n.unsupported(std::string(n.type()) + " at run time with the integer " +
                             std::to_string(v) +
                             " (duet computes with integers in f32, exact below 2^24 in "
                             "magnitude)");
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(i));
  OpAttrs f32;
  f32.to = DType::f32;
  x = n.op(OpKind::cast, {x}, f32, purpose);
  if (n.known(i)) return x;
  return checked_exact(n, x, std::string(purpose));
}

// Integer arithmetic at run time (add, sub, mul of int32 or int64): in f32 on exact operands,
// the result checked as it runs (a true result below 2^24 in magnitude is exact in f32, and one
// at or above it rounds to at least 2^24), then cast back to i32.
Status integer_binary(Node& n, OpKind kind) {
  DUET_ASSIGN_OR_RETURN(ValueId a, exact_integer(n, 0, "a"));
  DUET_ASSIGN_OR_RETURN(ValueId b, exact_integer(n, 1, "b"));
  ValueId r = checked_exact(n, n.op(kind, {a, b}, {}, "result"), "result");
  OpAttrs i32;
  i32.to = DType::i32;
  n.set(0, n.op(OpKind::cast, {r}, i32), n.elem(0));
  return {};
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
  if (kind != OpKind::div && n.elem(0) == n.elem(1) && (n.elem(0) == kInt32 || n.elem(0) == kInt64))
    return integer_binary(n, kind);
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

Status map_sin(Node& n) {
  return unary(n, OpKind::sin, [](double v) { return std::sin(v); });
}
Status map_cos(Node& n) {
  return unary(n, OpKind::cos, [](double v) { return std::cos(v); });
}
Status map_tan(Node& n) {
  return unary(n, OpKind::tan, [](double v) { return std::tan(v); });
}
Status map_asin(Node& n) {
  return unary(n, OpKind::asin, [](double v) { return std::asin(v); });
}
Status map_acos(Node& n) {
  return unary(n, OpKind::acos, [](double v) { return std::acos(v); });
}
Status map_atan(Node& n) {
  return unary(n, OpKind::atan, [](double v) { return std::atan(v); });
}
Status map_sinh(Node& n) {
  return unary(n, OpKind::sinh, [](double v) { return std::sinh(v); });
}
Status map_cosh(Node& n) {
  return unary(n, OpKind::cosh, [](double v) { return std::cosh(v); });
}
Status map_asinh(Node& n) {
  return unary(n, OpKind::asinh, [](double v) { return std::asinh(v); });
}
Status map_acosh(Node& n) {
  return unary(n, OpKind::acosh, [](double v) { return std::acosh(v); });
}
Status map_atanh(Node& n) {
  return unary(n, OpKind::atanh, [](double v) { return std::atanh(v); });
}

Status map_silu(Node& n) {
  return unary(n, OpKind::silu, nullptr);
}

// Comparisons and logic give bool tensors. Known inputs fold at import (shape arithmetic, masks
// made from constant buffers); at run time a bool tensor is an i8 tensor of 0 and 1 (ONNX's own
// bytes), and comparisons and logic compute on those values in a float dtype (exact for 0 and 1):
// duet's less, less_equal and equal ops, products and sums.

// Input i at run time as the float dtype `to`: a bool (i8) or f16/bf16 input is cast (exactly).
Result<ValueId> as_float(Node& n, size_t i, DType to, std::string_view purpose) {
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(i));
  if (n.desc(x).dtype == to) return x;
  OpAttrs at;
  at.to = to;
  return n.op(OpKind::cast, {x}, at, purpose);
}

// Output 0 as a bool: the 0/1 values of `v` cast to i8.
void set_bool(Node& n, ValueId v) {
  OpAttrs at;
  at.to = DType::i8;
  n.set(0, n.op(OpKind::cast, {v}, at), kBool);
}

// The float dtype a run-time comparison or logic op computes in: the operands' own float type,
// f32 for bools and for int32/int64 (held as i32), whose values are exact in f32 below 2^24 in
// magnitude (exact_integer checks it).
Result<DType> compare_dtype(Node& n) {
  const int e = n.elem(0);
  for (size_t i = 0; i < n.num_inputs(); ++i)
    if (n.elem(i) != e)
      return n.invalid("operands of types " + elem_name(e) + " and " + elem_name(n.elem(i)));
  if (e == kBool || e == kInt32 || e == kInt64) return DType::f32;
  if (!elem_is_float(e) || e == kDouble)
    return n.unsupported(std::string(n.type()) + " of " + elem_name(e) +
                         " at run time (duet compares float, bool, int32 and int64 tensors)");
  return runtime_dtype(e);
}

// Operand i of a comparison at run time, in dtype t.
Result<ValueId> compared_operand(Node& n, size_t i, DType t, std::string_view purpose) {
  if (n.elem(i) == kInt32 || n.elem(i) == kInt64) return exact_integer(n, i, purpose);
  return as_float(n, i, t, purpose);
}

// A comparison at run time: duet's `kind` on (a, b), or on (b, a) when `swap` (a > b is b < a).
Status compare_runtime(Node& n, OpKind kind, bool swap) {
  DUET_ASSIGN_OR_RETURN(DType t, compare_dtype(n));
  DUET_ASSIGN_OR_RETURN(ValueId a, compared_operand(n, 0, t, "a"));
  DUET_ASSIGN_OR_RETURN(ValueId b, compared_operand(n, 1, t, "b"));
  set_bool(n, n.op(kind, swap ? std::vector<ValueId>{b, a} : std::vector<ValueId>{a, b}, {},
                   "compared"));
  return {};
}

Status compare(Node& n, bool (*f)(double, double), OpKind kind, bool swap) {
  if (!n.all_known()) return compare_runtime(n, kind, swap);
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
  return compare(
      n, [](double a, double b) { return a == b; }, OpKind::equal, false);
}
Status map_less(Node& n) {
  return compare(
      n, [](double a, double b) { return a < b; }, OpKind::less, false);
}
Status map_less_equal(Node& n) {
  return compare(
      n, [](double a, double b) { return a <= b; }, OpKind::less_equal, false);
}
Status map_greater(Node& n) {
  return compare(
      n, [](double a, double b) { return a > b; }, OpKind::less, true);
}
Status map_greater_equal(Node& n) {
  return compare(
      n, [](double a, double b) { return a >= b; }, OpKind::less_equal, true);
}

// And, Or and Xor of bools at run time, on their 0/1 values: a * b, 0 < a + b, 0 < |a - b|.
enum class Logic { and_, or_, xor_ };
Status logic(Node& n, bool (*f)(double, double), Logic l) {
  if (n.all_known()) return compare(n, f, OpKind::equal, false);
  if (n.elem(0) != kBool || n.elem(1) != kBool)
    return n.invalid(std::string(n.type()) + " of " + elem_name(n.elem(0)) + " and " +
                     elem_name(n.elem(1)) + " (bool operands)");
  DUET_ASSIGN_OR_RETURN(ValueId a, as_float(n, 0, DType::f32, "a"));
  DUET_ASSIGN_OR_RETURN(ValueId b, as_float(n, 1, DType::f32, "b"));
  if (l == Logic::and_) {
    set_bool(n, n.op(OpKind::mul, {a, b}, {}, "both"));
    return {};
  }
  DUET_ASSIGN_OR_RETURN(ValueId zero, n.constant(Array::of_reals(kFloat, {1}, {0.0}), "zero"));
  ValueId d = l == Logic::or_
                  ? n.op(OpKind::add, {a, b}, {}, "sum")
                  : n.op(OpKind::abs, {n.op(OpKind::sub, {a, b}, {}, "difference")}, {}, "apart");
  set_bool(n, n.op(OpKind::less, {zero, d}, {}, "either"));
  return {};
}
Status map_and(Node& n) {
  return logic(
      n, [](double a, double b) { return a != 0 && b != 0; }, Logic::and_);
}
Status map_or(Node& n) {
  return logic(
      n, [](double a, double b) { return a != 0 || b != 0; }, Logic::or_);
}
Status map_xor(Node& n) {
  return logic(
      n, [](double a, double b) { return (a != 0) != (b != 0); }, Logic::xor_);
}

// Not at run time: [x == 0].
Status map_not(Node& n) {
  if (n.known(0)) {
    DUET_TRY(n.room_for(n.shape(0), kBool, 16));
    n.set_known(0, fold_unary(n.array(0), [](double v) { return v == 0 ? 1.0 : 0.0; }).cast(kBool));
    return {};
  }
  if (n.elem(0) != kBool) return n.invalid("Not of " + elem_name(n.elem(0)) + " (a bool operand)");
  DUET_ASSIGN_OR_RETURN(ValueId a, as_float(n, 0, DType::f32, "a"));
  DUET_ASSIGN_OR_RETURN(ValueId zero, n.constant(Array::of_reals(kFloat, {1}, {0.0}), "zero"));
  set_bool(n, n.op(OpKind::equal, {a, zero}, {}, "negated"));
  return {};
}

// Where(c, x, y) with c computed at run time: a select, exact for every value (an infinite or NaN
// in the branch not taken included, as masked_fill with -inf has): x's and y's elements viewed as
// one-column tables and concatenated, and each element of the result picked (embedding) by the
// id `iy + c * (ix - iy)`, ix and iy the known positions in that table of the x and y elements
// it reads under broadcasting, computed in f32 (exact: fewer than 2^23 elements). Past that
// size, x * c + y * [c == 0] in x's dtype, with a note: exact for finite values only.
Status where_condition_runtime(Node& n) {
  for (size_t k : {size_t{1}, size_t{2}})
    if (!elem_is_float(n.elem(k)) || n.elem(k) == kDouble)
      return n.unsupported("Where of " + elem_name(n.elem(k)) +
                           " at run time (duet's element-wise ops are float)");
  if (n.elem(0) != kBool) return n.invalid("a condition of type " + elem_name(n.elem(0)));
  const int elem = n.elem(1);
  DUET_ASSIGN_OR_RETURN(DType t, runtime_dtype(elem));
  DUET_ASSIGN_OR_RETURN(std::vector<int64_t> xy, broadcast(n.shape(1), n.shape(2)));
  DUET_ASSIGN_OR_RETURN(std::vector<int64_t> out, broadcast(n.shape(0), xy));
  const std::vector<int64_t> xd = n.shape(1), yd = n.shape(2);
  DUET_ASSIGN_OR_RETURN(const int64_t nout, count(out));
  DUET_ASSIGN_OR_RETURN(const int64_t nx, count(xd));
  DUET_ASSIGN_OR_RETURN(const int64_t ny, count(yd));
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(1));
  DUET_ASSIGN_OR_RETURN(ValueId y, n.runtime(2));
  constexpr int64_t kExactIds = int64_t{1} << 23;
  if (nout >= kExactIds || nx + ny >= kExactIds || out.empty()) {
    n.note("Where over " + std::to_string(nout) +
           " elements with a condition computed at run time runs as x * c + y * !c: an infinite "
           "or NaN value in the branch not taken gives NaN");
    DUET_ASSIGN_OR_RETURN(ValueId c, as_float(n, 0, t, "condition"));
    DUET_ASSIGN_OR_RETURN(ValueId zero, n.constant(Array::of_reals(elem, {1}, {0.0}), "zero"));
    ValueId off = n.op(OpKind::equal, {c, zero}, {}, "picks_y");
    ValueId a = n.op(OpKind::mul, {x, c}, {}, "x_part");
    ValueId b = n.op(OpKind::mul, {y, off}, {}, "y_part");
    n.set(0, n.op(OpKind::add, {a, b}), elem);
    return {};
  }
  DUET_TRY(n.room_for(out, kFloat, 24));
  const std::vector<int64_t> ix = broadcast_index(xd, out), iy = broadcast_index(yd, out);
  std::vector<double> from_y(ix.size()), step(ix.size());
  for (size_t i = 0; i < ix.size(); ++i) {
    from_y[i] = static_cast<double>(nx + iy[i]);
    step[i] = static_cast<double>(ix[i]) - from_y[i];
  }
  DUET_ASSIGN_OR_RETURN(ValueId c, as_float(n, 0, DType::f32, "condition"));
  DUET_ASSIGN_OR_RETURN(ValueId base, n.constant(Array::of_reals(kFloat, out, from_y), "y_ids"));
  DUET_ASSIGN_OR_RETURN(ValueId delta, n.constant(Array::of_reals(kFloat, out, step), "x_minus_y"));
  ValueId id = n.op(OpKind::add, {base, n.op(OpKind::mul, {c, delta}, {}, "to_x")}, {}, "picked");
  OpAttrs i32;
  i32.to = DType::i32;
  ValueId ids = n.reshape(n.op(OpKind::cast, {id}, i32, "ids"), {nout}, "flat_ids");
  OpAttrs cat;
  cat.axis = 0;
  ValueId table =
      n.op(OpKind::concat, {n.reshape(x, {nx, 1}, "x_column"), n.reshape(y, {ny, 1}, "y_column")},
           cat, "table");
  n.set(0, n.reshape(n.op(OpKind::embedding, {table, ids}, {}, "elements"), out), elem);
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
    if (n.elem(1) != n.elem(2)) return n.invalid("X and Y of different types");
    if (!n.known(0)) return where_condition_runtime(n);
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

// CumSum along a known axis (`exclusive`, `reverse`): folded when x is known (integers exactly,
// floats in double); at run time by ceil(log2 n) steps of y + (y shifted by 1, 2, 4, ... along
// the axis, zeros shifted in: a slice view and a concat), after a shift by one for `exclusive`,
// shifting the other way for `reverse`. Floats in their dtype (the sums in another order than
// one by one); int32/int64 in f32, exact: the sum of the magnitudes along the axis, which bounds
// every partial sum, is checked below 2^24 as it runs.
Status map_cumsum(Node& n) {
  const std::vector<int64_t> dims = n.shape(0);
  const int r = static_cast<int>(dims.size());
  DUET_ASSIGN_OR_RETURN(std::vector<int64_t> av, n.ints(1, "axis"));
  if (av.size() != 1) return n.invalid("axis must hold one value");
  DUET_ASSIGN_OR_RETURN(int axis, normalize_axis(av[0], r));
  const bool exclusive = n.attr_int("exclusive", 0) != 0, reverse = n.attr_int("reverse", 0) != 0;
  const auto a = static_cast<size_t>(axis);
  const int64_t len = dims[a], inner = dims_product(dims, a + 1, dims.size());
  const int elem = n.elem(0);
  const bool integer = elem == kInt32 || elem == kInt64;
  if (n.known(0)) {
    DUET_TRY(n.room_for(dims, elem, 24));
    const Array& x = n.array(0);
    const int64_t total = x.numel(), outer = total / std::max<int64_t>(len * inner, 1);
    std::vector<int64_t> iv(integer ? static_cast<size_t>(total) : 0);
    std::vector<double> rv(integer ? 0 : static_cast<size_t>(total));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t in = 0; in < inner; ++in) {
        int64_t isum = 0;
        double rsum = 0;
        for (int64_t k = 0; k < len; ++k) {
          const int64_t j = reverse ? len - 1 - k : k;
          const int64_t at = (o * len + j) * inner + in;
          if (integer) {
            if (exclusive) iv[static_cast<size_t>(at)] = isum;
            isum += x.int_at(at);
            if (!exclusive) iv[static_cast<size_t>(at)] = isum;
          } else {
            if (exclusive) rv[static_cast<size_t>(at)] = rsum;
            rsum += x.real_at(at);
            if (!exclusive) rv[static_cast<size_t>(at)] = rsum;
          }
        }
      }
    n.set_known(0, integer ? Array::of_ints(elem, dims, iv) : Array::of_reals(elem, dims, rv));
    return {};
  }
  if (!integer && (!elem_is_float(elem) || elem == kDouble))
    return n.unsupported("CumSum of " + elem_name(elem) + " at run time");
  const int zelem = integer ? kFloat : elem;
  ValueId x;
  if (integer) {
    DUET_ASSIGN_OR_RETURN(x, exact_integer(n, 0, "x"));
    OpAttrs along;
    along.axes = {axis};
    ValueId total =
        n.op(OpKind::reduce_sum, {n.op(OpKind::abs, {x}, {}, "magnitude")}, along, "magnitudes");
    x = n.op(OpKind::add, {x, overflow_check(n, total, "sums")}, {}, "checked");
  } else {
    DUET_ASSIGN_OR_RETURN(x, n.runtime(0));
  }
  // y moved by s along the axis (towards the end, or the start for `reverse`), zeros shifted in.
  auto shifted = [&](ValueId y, int64_t s, const std::string& what) -> Result<ValueId> {
    std::vector<int64_t> zd = dims;
    zd[a] = s;
    DUET_ASSIGN_OR_RETURN(
        ValueId zeros,
        n.constant(Array::of_reals(zelem, zd,
                                   std::vector<double>(
                                       static_cast<size_t>(dims_product(zd, 0, zd.size())), 0.0)),
                   what + "/zeros"));
    OpAttrs sl;
    sl.axis = axis;
    sl.start = reverse ? s : 0;
    sl.stop = reverse ? len : len - s;
    ValueId kept = n.op(OpKind::slice, {y}, sl, what + "/kept");
    OpAttrs cat;
    cat.axis = axis;
    return n.op(OpKind::concat,
                reverse ? std::vector<ValueId>{kept, zeros} : std::vector<ValueId>{zeros, kept},
                cat, what);
  };
  ValueId y = x;
  if (exclusive) {
    if (len == 1) {
      DUET_ASSIGN_OR_RETURN(
          y, n.constant(
                 Array::of_reals(zelem, dims,
                                 std::vector<double>(
                                     static_cast<size_t>(dims_product(dims, 0, dims.size())), 0.0)),
                 "zeros"));
    } else {
      DUET_ASSIGN_OR_RETURN(y, shifted(x, 1, "exclusive"));
    }
  }
  for (int64_t s = 1; s < len; s *= 2) {
    const std::string step = "step" + std::to_string(s);
    DUET_ASSIGN_OR_RETURN(ValueId moved, shifted(y, s, step + "/shifted"));
    y = n.op(OpKind::add, {y, moved}, {}, step);
  }
  if (!integer) {
    n.set(0, y, elem);
    return {};
  }
  OpAttrs i32;
  i32.to = DType::i32;
  n.set(0, n.op(OpKind::cast, {y}, i32), elem);
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

// Values of one float type broadcast to `out` and combined element by element into their max or
// min: each broadcast (x + 0 with a known zero tensor of `out`'s shape, exact), viewed as a row
// [1, N], the rows concatenated into [k, N] and reduced over the first dim, then viewed as `out`.
// No arithmetic touches the values, so the result is exact.
Result<ValueId> extreme(Node& n, std::vector<ValueId> xs, const std::vector<int64_t>& out, int elem,
                        bool max, std::string_view purpose) {
  int64_t width = 1;
  for (int64_t d : out) width *= d;
  ValueId zeros;
  const std::string p(purpose);
  for (size_t k = 0; k < xs.size(); ++k) {
    const auto& d = n.desc(xs[k]).dims();
    if (std::vector<int64_t>(d.begin(), d.end()) != out) {
      if (!zeros.valid()) {
        DUET_TRY(n.room_for(out, elem, 8));
        DUET_ASSIGN_OR_RETURN(
            zeros, n.constant(Array::of_reals(elem, out,
                                              std::vector<double>(static_cast<size_t>(width), 0.0)),
                              p + "zeros"));
      }
      xs[k] = n.op(OpKind::add, {xs[k], zeros}, {}, p + "broadcast" + std::to_string(k));
    }
    xs[k] = n.reshape(xs[k], {1, width}, p + "row" + std::to_string(k));
  }
  OpAttrs cat;
  cat.axis = 0;
  ValueId rows = n.op(OpKind::concat, xs, cat, p + "rows");
  OpAttrs red;
  red.axes = {0};
  ValueId r = n.op(max ? OpKind::reduce_max : OpKind::reduce_min, {rows}, red, p + "reduce");
  return n.reshape(r, out, purpose);
}

// Sum, Mean, Max and Min of any number of inputs (numpy broadcasting): folded when known; at run
// time a chain of adds (Mean then scaled by 1/k), or for Max and Min one reduction over the
// inputs stacked as rows (extreme), exact.
enum class Multi { sum, mean, max, min };

Status multi(Node& n, Multi kind) {
  std::vector<size_t> ins;
  for (size_t i = 0; i < n.num_inputs(); ++i)
    if (n.has(i)) ins.push_back(i);
  if (ins.empty()) return n.invalid("no inputs");
  const int elem = n.elem(ins[0]);
  std::vector<int64_t> out = n.shape(ins[0]);
  for (size_t i : ins) {
    if (n.elem(i) != elem)
      return n.invalid("inputs of types " + elem_name(elem) + " and " + elem_name(n.elem(i)));
    auto b = broadcast(out, n.shape(i));
    if (!b.ok()) return n.invalid(b.status().message());
    out = *b;
  }
  if (n.all_known()) {
    auto real = [kind](double a, double b) {
      return kind == Multi::max ? std::max(a, b) : kind == Multi::min ? std::min(a, b) : a + b;
    };
    auto integer = [kind](int64_t a, int64_t b) {
      return kind == Multi::max ? std::max(a, b) : kind == Multi::min ? std::min(a, b) : a + b;
    };
    DUET_TRY(n.room_for(out, elem, 24));
    Array acc = n.array(ins[0]);
    for (size_t k = 1; k < ins.size(); ++k) {
      auto r = fold_binary(acc, n.array(ins[k]), elem, real, integer);
      if (!r.ok()) return n.invalid(r.status().message());
      acc = std::move(*r);
    }
    if (kind == Multi::mean) {
      const auto k = static_cast<double>(ins.size());
      acc = fold_unary(acc, [k](double v) { return v / k; });
    }
    n.set_known(0, std::move(acc));
    return {};
  }
  if (!elem_is_float(elem) || elem == kDouble)
    return n.unsupported(std::string(n.type()) + " of " + elem_name(elem) +
                         " at run time (duet's element-wise ops are float)");
  if (ins.size() == 1 && n.shape(ins[0]) == out) {
    n.forward(0, ins[0]);
    return {};
  }
  std::vector<ValueId> xs;
  for (size_t i : ins) {
    DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(i));
    xs.push_back(x);
  }
  if (kind == Multi::max || kind == Multi::min) {
    DUET_ASSIGN_OR_RETURN(ValueId y, extreme(n, xs, out, elem, kind == Multi::max, ""));
    n.set(0, y, elem);
    return {};
  }
  const bool scaled = kind == Multi::mean && xs.size() > 1;
  ValueId y = xs[0];
  for (size_t k = 1; k < xs.size(); ++k)
    y = n.op(OpKind::add, {y, xs[k]}, {},
             k + 1 == xs.size() && !scaled ? "" : "sum" + std::to_string(k));
  if (scaled) {
    OpAttrs at;
    at.alpha = static_cast<float>(1.0 / static_cast<double>(xs.size()));
    y = n.op(OpKind::scale, {y}, at);
  }
  n.set(0, y, elem);
  return {};
}

Status map_sum(Node& n) {
  return multi(n, Multi::sum);
}
Status map_mean(Node& n) {
  return multi(n, Multi::mean);
}
Status map_max(Node& n) {
  return multi(n, Multi::max);
}
Status map_min(Node& n) {
  return multi(n, Multi::min);
}

// Clip: max with the lower bound, then min with the upper one (each optional; attributes before
// opset 11, scalar inputs after), as extreme does: exact. Folded when everything is known.
Status map_clip(Node& n) {
  const int elem = n.elem(0);
  struct Bound {
    bool given = false;
    std::optional<double> known;
    size_t input = 0;
  } lo, hi;
  if (n.opset() < 11) {
    if (n.has_attr("min")) lo = {true, n.attr_float("min", 0.0f), 0};
    if (n.has_attr("max")) hi = {true, n.attr_float("max", 0.0f), 0};
  } else {
    for (size_t i : {size_t{1}, size_t{2}}) {
      if (!n.has(i)) continue;
      Bound& b = i == 1 ? lo : hi;
      b.given = true;
      b.input = i;
      int64_t size = 1;
      for (int64_t d : n.shape(i)) size *= d;
      if (size != 1) return n.invalid("a bound that is not a scalar");
      if (n.known(i)) b.known = n.array(i).real_at(0);
    }
  }
  const std::vector<int64_t> dims = n.shape(0);
  if (n.known(0) && (!lo.given || lo.known) && (!hi.given || hi.known)) {
    DUET_TRY(n.room_for(dims, elem, 16));
    const double l = lo.given ? *lo.known : -INFINITY, h = hi.given ? *hi.known : INFINITY;
    n.set_known(0, fold_unary(n.array(0), [l, h](double v) {
                  return std::isnan(v) ? v : std::min(std::max(v, l), h);
                }));
    return {};
  }
  if (!elem_is_float(elem) || elem == kDouble)
    return n.unsupported("Clip of " + elem_name(elem) +
                         " at run time (duet's element-wise ops are float)");
  DUET_ASSIGN_OR_RETURN(ValueId y, n.runtime(0));
  int64_t width = 1;
  for (int64_t d : dims) width *= d;
  for (Bound* b : {&lo, &hi}) {
    if (!b->given) continue;
    ValueId bound;
    if (b->known) {
      DUET_TRY(n.room_for(dims, elem, 8));
      DUET_ASSIGN_OR_RETURN(
          bound,
          n.constant(Array::of_reals(elem, dims,
                                     std::vector<double>(static_cast<size_t>(width), *b->known)),
                     b == &lo ? "min" : "max"));
    } else {
      DUET_ASSIGN_OR_RETURN(bound, n.runtime(b->input));
    }
    const bool last = b == &hi || !hi.given;
    DUET_ASSIGN_OR_RETURN(
        y, extreme(n, {y, bound}, dims, elem, b == &lo, last ? "" : "clipped_below/"));
  }
  n.set(0, y, elem);
  return {};
}

// LeakyRelu and PRelu: relu(x) + (-slope) * relu(-x), exact (one product, as ONNX's slope * x;
// adding a zero changes nothing). A known slope is negated at import.
Status leaky(Node& n, std::optional<double> alpha) {
  const int elem = n.elem(0);
  if (n.all_known()) {
    if (alpha) {
      const double a = *alpha;
      DUET_TRY(n.room_for(n.shape(0), elem, 16));
      n.set_known(0, fold_unary(n.array(0), [a](double v) { return v < 0 ? a * v : v; }));
      return {};
    }
    DUET_TRY(room_for_broadcast(n, elem));
    auto r = fold_binary(
        n.array(0), n.array(1), elem, [](double v, double s) { return v < 0 ? s * v : v; },
        [](int64_t v, int64_t s) { return v < 0 ? s * v : v; });
    if (!r.ok()) return n.invalid(r.status().message());
    n.set_known(0, std::move(*r));
    return {};
  }
  if (!elem_is_float(elem) || elem == kDouble)
    return n.unsupported(std::string(n.type()) + " of " + elem_name(elem) + " at run time");
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  OpAttrs negate;
  negate.alpha = -1.0f;
  ValueId pos = n.op(OpKind::relu, {x}, {}, "positive");
  ValueId neg_part =
      n.op(OpKind::relu, {n.op(OpKind::scale, {x}, negate, "negated")}, {}, "negative");
  ValueId scaled;
  if (alpha) {
    OpAttrs at;
    at.alpha = static_cast<float>(-*alpha);
    scaled = n.op(OpKind::scale, {neg_part}, at, "scaled");
  } else {
    if (n.elem(1) != elem) return n.invalid("slope of type " + elem_name(n.elem(1)));
    ValueId s;
    if (n.known(1)) {
      DUET_ASSIGN_OR_RETURN(s, n.constant(fold_unary(n.array(1), neg), "negated_slope"));
    } else {
      DUET_ASSIGN_OR_RETURN(s, n.runtime(1));
      s = n.op(OpKind::scale, {s}, negate, "negated_slope");
    }
    scaled = n.op(OpKind::mul, {neg_part, s}, {}, "scaled");
  }
  n.set(0, n.op(OpKind::add, {pos, scaled}), elem);
  return {};
}

Status map_leaky_relu(Node& n) {
  return leaky(n, n.attr_float("alpha", 0.01f));
}
Status map_prelu(Node& n) {
  return leaky(n, std::nullopt);
}

// x + c for a known scalar c (a constant of x's type broadcast by add).
Result<ValueId> add_scalar(Node& n, ValueId x, int elem, double c, std::string_view purpose) {
  DUET_ASSIGN_OR_RETURN(
      ValueId k, n.constant(Array::of_reals(elem, {1}, {c}), std::string(purpose) + "_constant"));
  return n.op(OpKind::add, {x, k}, {}, purpose);
}

ValueId scaled(Node& n, ValueId x, double alpha, std::string_view purpose) {
  OpAttrs at;
  at.alpha = static_cast<float>(alpha);
  return n.op(OpKind::scale, {x}, at, purpose);
}

// The activations below fold when x is known (`f`), and need a float x at run time.
Status activation_input(Node& n) {
  if (!elem_is_float(n.elem(0)) || n.elem(0) == kDouble)
    return n.unsupported(std::string(n.type()) + " of " + elem_name(n.elem(0)) + " at run time");
  return {};
}

// Elu, Celu and Selu: gamma * (relu(x) + outer * (exp(inner * relu(-x)) - 1)). For x > 0 the
// exp term is exp(0) - 1 = 0 exactly and for x <= 0 the relu term is 0, so each side is its
// definition; exp(..) - 1 subtracts exactly (Sterbenz) before the one product by `outer`.
Status exp_linear(Node& n, double inner, double outer, double gamma) {
  if (n.known(0)) {
    DUET_TRY(n.room_for(n.shape(0), n.elem(0), 16));
    n.set_known(0, fold_unary(n.array(0), [=](double v) {
                  return gamma * (v > 0 ? v : outer * (std::exp(inner * -v) - 1.0));
                }));
    return {};
  }
  DUET_TRY(activation_input(n));
  const int elem = n.elem(0);
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  ValueId pos = n.op(OpKind::relu, {x}, {}, "positive");
  ValueId neg = n.op(OpKind::relu, {scaled(n, x, -1.0, "negated")}, {}, "negative");
  ValueId e = n.op(OpKind::exp, {scaled(n, neg, inner, "exp_argument")}, {}, "exp");
  DUET_ASSIGN_OR_RETURN(ValueId em1, add_scalar(n, e, elem, -1.0, "exp_minus_1"));
  const bool last = gamma == 1.0;
  ValueId y =
      n.op(OpKind::add, {pos, scaled(n, em1, outer, "negative_part")}, {}, last ? "" : "unscaled");
  n.set(0, last ? y : scaled(n, y, gamma, ""), elem);
  return {};
}

Status map_elu(Node& n) {
  const double alpha = n.attr_float("alpha", 1.0f);
  return exp_linear(n, -1.0, alpha, 1.0);
}
Status map_celu(Node& n) {
  const double alpha = n.attr_float("alpha", 1.0f);
  if (alpha == 0.0) return n.invalid("alpha 0 (Celu divides by it)");
  return exp_linear(n, -1.0 / alpha, alpha, 1.0);
}
Status map_selu(Node& n) {
  const double alpha = n.attr_float("alpha", 1.67326319217681884765625f);
  const double gamma = n.attr_float("gamma", 1.05070102214813232421875f);
  return exp_linear(n, -1.0, alpha, gamma);
}

// max(0, min(1, alpha * x + beta)): a scale, an add and the two bounds as Clip takes them
// (extreme: exact).
Result<ValueId> hard_sigmoid(Node& n, ValueId x, double alpha, double beta, bool last) {
  const std::vector<int64_t> dims = n.shape(0);
  const int elem = n.elem(0);
  DUET_ASSIGN_OR_RETURN(ValueId y,
                        add_scalar(n, scaled(n, x, alpha, "alpha_x"), elem, beta, "alpha_x_beta"));
  DUET_TRY(n.room_for(dims, elem, 16));
  DUET_ASSIGN_OR_RETURN(const int64_t width, count(dims));
  for (double bound : {0.0, 1.0}) {
    DUET_ASSIGN_OR_RETURN(
        ValueId b,
        n.constant(
            Array::of_reals(elem, dims, std::vector<double>(static_cast<size_t>(width), bound)),
            bound == 0.0 ? "zeros" : "ones"));
    DUET_ASSIGN_OR_RETURN(y,
                          extreme(n, {y, b}, dims, elem, bound == 0.0,
                                  bound == 0.0 ? "clipped_below/" : (last ? "" : "hard_sigmoid")));
  }
  return y;
}

double hard_sigmoid_of(double v, double alpha, double beta) {
  return std::isnan(v) ? v : std::min(1.0, std::max(0.0, alpha * v + beta));
}

Status map_hard_sigmoid(Node& n) {
  const double alpha = n.attr_float("alpha", 0.2f), beta = n.attr_float("beta", 0.5f);
  if (n.known(0)) {
    DUET_TRY(n.room_for(n.shape(0), n.elem(0), 16));
    n.set_known(0,
                fold_unary(n.array(0), [=](double v) { return hard_sigmoid_of(v, alpha, beta); }));
    return {};
  }
  DUET_TRY(activation_input(n));
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  DUET_ASSIGN_OR_RETURN(ValueId y, hard_sigmoid(n, x, alpha, beta, true));
  n.set(0, y, n.elem(0));
  return {};
}

// x * HardSigmoid(x) with alpha 1/6 and beta 1/2.
Status map_hard_swish(Node& n) {
  const double alpha = 1.0 / 6.0, beta = 0.5;
  if (n.known(0)) {
    DUET_TRY(n.room_for(n.shape(0), n.elem(0), 16));
    n.set_known(
        0, fold_unary(n.array(0), [=](double v) { return v * hard_sigmoid_of(v, alpha, beta); }));
    return {};
  }
  DUET_TRY(activation_input(n));
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  DUET_ASSIGN_OR_RETURN(ValueId h, hard_sigmoid(n, x, alpha, beta, false));
  n.set(0, n.op(OpKind::mul, {x, h}), n.elem(0));
  return {};
}

// log(exp(x) + 1), as ONNX defines it (it overflows to inf where exp(x) does).
Status map_softplus(Node& n) {
  if (n.known(0)) {
    DUET_TRY(n.room_for(n.shape(0), n.elem(0), 16));
    n.set_known(0, fold_unary(n.array(0), [](double v) { return std::log(std::exp(v) + 1.0); }));
    return {};
  }
  DUET_TRY(activation_input(n));
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  ValueId e = n.op(OpKind::exp, {x}, {}, "exp");
  DUET_ASSIGN_OR_RETURN(ValueId e1, add_scalar(n, e, n.elem(0), 1.0, "exp_plus_1"));
  n.set(0, n.op(OpKind::log, {e1}), n.elem(0));
  return {};
}

// x / (1 + |x|).
Status map_softsign(Node& n) {
  if (n.known(0)) {
    DUET_TRY(n.room_for(n.shape(0), n.elem(0), 16));
    n.set_known(0, fold_unary(n.array(0), [](double v) { return v / (1.0 + std::fabs(v)); }));
    return {};
  }
  DUET_TRY(activation_input(n));
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  DUET_ASSIGN_OR_RETURN(
      ValueId d, add_scalar(n, n.op(OpKind::abs, {x}, {}, "abs"), n.elem(0), 1.0, "abs_plus_1"));
  n.set(0, n.op(OpKind::div, {x, d}), n.elem(0));
  return {};
}

// For each position of `dims` but `axis` (row-major, the axis dropped), the index along `axis`
// of the first (or last) largest (or smallest) value of `a`: ArgMax, ArgMin and Hardmax folded.
std::vector<int64_t> fold_extreme_index(const Array& a, const std::vector<int64_t>& dims, int axis,
                                        bool max, bool last) {
  const auto ax = static_cast<size_t>(axis);
  const int64_t outer = dims_product(dims, 0, ax), len = dims[ax],
                inner = dims_product(dims, ax + 1, dims.size());
  std::vector<int64_t> res(static_cast<size_t>(outer * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      for (int64_t k = 1; k < len; ++k) {
        const double v = a.real_at((o * len + k) * inner + i),
                     b = a.real_at((o * len + best) * inner + i);
        if (max ? v > b : v < b) best = k;
        if (last && v == b) best = k;
      }
      res[static_cast<size_t>(o * inner + i)] = best;
    }
  return res;
}

// A known f32 tensor of `rank` dims, all 1 but `axis` of `len`, holding 0, 1, ..., len - 1.
Result<ValueId> positions(Node& n, int rank, int axis, int64_t len) {
  std::vector<int64_t> shape(static_cast<size_t>(rank), 1);
  shape[static_cast<size_t>(axis)] = len;
  std::vector<double> v(static_cast<size_t>(len));
  std::iota(v.begin(), v.end(), 0.0);
  return n.constant(Array::of_reals(kFloat, shape, v), "positions");
}

// The index (as f32, the axis kept at size 1) of the first or last largest (smallest) value of
// the f32 value x along `axis`, by duet's ops and exact for finite x: m = reduce_max(x)
// (reduce_min), d = m - x (x - m) is >= 0 and 0 exactly at the extremes (two distinct finite
// floats never subtract to 0, but where denormals are flushed); c = min(d, 2^-100) (extreme:
// exact) is 0 there and >= 2^-149 elsewhere, so t = c * 2^100 * 2^73 is 0 at the extremes and
// >= 2^24 elsewhere without overflowing; position + t reduced by min (position - t by max, for
// the last) over the axis is the extreme's position (axes up to 2^24 long: exact in f32).
Result<ValueId> extreme_index(Node& n, ValueId x, const std::vector<int64_t>& dims, int axis,
                              bool max, bool last) {
  OpAttrs red;
  red.axes = {axis};
  ValueId m = n.op(max ? OpKind::reduce_max : OpKind::reduce_min, {x}, red, "extreme");
  ValueId d = n.op(OpKind::sub, max ? std::vector<ValueId>{m, x} : std::vector<ValueId>{x, m}, {},
                   "distance");
  DUET_TRY(n.room_for(dims, kFloat, 8));
  DUET_ASSIGN_OR_RETURN(const int64_t width, count(dims));
  const double cap = std::ldexp(1.0, -100);
  DUET_ASSIGN_OR_RETURN(
      ValueId capv,
      n.constant(
          Array::of_reals(kFloat, dims, std::vector<double>(static_cast<size_t>(width), cap)),
          "cap"));
  DUET_ASSIGN_OR_RETURN(ValueId c, extreme(n, {d, capv}, dims, kFloat, false, "capped/"));
  ValueId t = scaled(n, scaled(n, c, std::ldexp(1.0, 100), "magnified_1"), std::ldexp(1.0, 73),
                     "magnified");
  DUET_ASSIGN_OR_RETURN(ValueId pos, positions(n, static_cast<int>(dims.size()), axis,
                                               dims[static_cast<size_t>(axis)]));
  ValueId cand = n.op(last ? OpKind::sub : OpKind::add, {pos, t}, {}, "candidates");
  return n.op(last ? OpKind::reduce_max : OpKind::reduce_min, {cand}, red, "index");
}

// x at run time as f32 (f16 and bf16 cast: ties stay ties), for the index ops.
Result<ValueId> index_input(Node& n) {
  if (!elem_is_float(n.elem(0)) || n.elem(0) == kDouble)
    return n.unsupported(std::string(n.type()) + " of " + elem_name(n.elem(0)) +
                         " at run time (duet compares float values only)");
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  if (n.elem(0) == kFloat) return x;
  OpAttrs at;
  at.to = DType::f32;
  return n.op(OpKind::cast, {x}, at, "f32");
}

// ArgMax and ArgMin (axis, keepdims, select_last_index): int64 indices, i32 at run time.
Status arg_extreme(Node& n, bool max) {
  const std::vector<int64_t> dims = n.shape(0);
  const int r = static_cast<int>(dims.size());
  if (r == 0) return n.invalid(std::string(n.type()) + " of a scalar (expected rank >= 1)");
  DUET_ASSIGN_OR_RETURN(int axis, normalize_axis(n.attr_int("axis", 0), r));
  const bool keep = n.attr_int("keepdims", 1) != 0;
  const int64_t last_attr = n.attr_int("select_last_index", 0);
  if (last_attr != 0 && last_attr != 1)
    return n.invalid("select_last_index " + std::to_string(last_attr) + " (expected 0 or 1)");
  const bool last = last_attr == 1;
  std::vector<int64_t> kept = dims, out;
  kept[static_cast<size_t>(axis)] = 1;
  for (int d = 0; d < r; ++d)
    if (d != axis || keep) out.push_back(kept[static_cast<size_t>(d)]);
  if (n.known(0)) {
    DUET_TRY(n.room_for(out, kInt64, 16));
    n.set_known(0,
                Array::of_ints(kInt64, out, fold_extreme_index(n.array(0), dims, axis, max, last)));
    return {};
  }
  if (dims[static_cast<size_t>(axis)] > (int64_t{1} << 24))
    return n.unsupported("an axis of " + std::to_string(dims[static_cast<size_t>(axis)]) +
                         " elements (duet finds extremes along at most 2^24)");
  DUET_ASSIGN_OR_RETURN(ValueId x, index_input(n));
  DUET_ASSIGN_OR_RETURN(ValueId idx, extreme_index(n, x, dims, axis, max, last));
  OpAttrs at;
  at.to = DType::i32;
  ValueId y = n.op(OpKind::cast, {idx}, at, keep ? "" : "kept");
  n.set(0, keep ? y : n.reshape(y, out), kInt64);
  return {};
}

Status map_arg_max(Node& n) {
  return arg_extreme(n, true);
}
Status map_arg_min(Node& n) {
  return arg_extreme(n, false);
}

// Hardmax: 1 at the first largest value along the axis, 0 elsewhere (before opset 13 over the
// dims from `axis` flattened into one). At run time relu(1 - |position - index|) of the
// extreme's index (extreme_index): exact, the positions and the index being small integers.
Status map_hardmax(Node& n) {
  const std::vector<int64_t> dims = n.shape(0);
  const int r = static_cast<int>(dims.size());
  if (r == 0) return n.invalid("Hardmax of a scalar (expected rank >= 1)");
  const bool flatten = n.opset() < 13;
  DUET_ASSIGN_OR_RETURN(int axis, normalize_axis(n.attr_int("axis", flatten ? 1 : -1), r));
  std::vector<int64_t> work = dims;
  int wa = axis;
  if (flatten) {
    const auto ax = static_cast<size_t>(axis);
    work = {dims_product(dims, 0, ax), dims_product(dims, ax, dims.size())};
    wa = 1;
  }
  if (n.known(0)) {
    DUET_TRY(n.room_for(dims, n.elem(0), 24));
    const std::vector<int64_t> best = fold_extreme_index(n.array(0), work, wa, true, false);
    const auto ax = static_cast<size_t>(wa);
    const int64_t len = work[ax], inner = dims_product(work, ax + 1, work.size());
    std::vector<double> v(static_cast<size_t>(n.array(0).numel()));
    for (size_t e = 0; e < v.size(); ++e) {
      const auto i = static_cast<int64_t>(e);
      const int64_t o = i / (len * inner), k = i / inner % len;
      v[e] = best[static_cast<size_t>(o * inner + i % inner)] == k ? 1.0 : 0.0;
    }
    n.set_known(0, Array::of_reals(n.elem(0), dims, v));
    return {};
  }
  if (work[static_cast<size_t>(wa)] > (int64_t{1} << 24))
    return n.unsupported("an axis of " + std::to_string(work[static_cast<size_t>(wa)]) +
                         " elements (duet finds extremes along at most 2^24)");
  DUET_ASSIGN_OR_RETURN(ValueId x, index_input(n));
  if (flatten) x = n.reshape(x, work, "rows");
  DUET_ASSIGN_OR_RETURN(ValueId idx, extreme_index(n, x, work, wa, true, false));
  DUET_ASSIGN_OR_RETURN(
      ValueId pos, positions(n, static_cast<int>(work.size()), wa, work[static_cast<size_t>(wa)]));
  ValueId dist = n.op(OpKind::abs, {n.op(OpKind::sub, {pos, idx}, {}, "offset")}, {}, "apart");
  DUET_ASSIGN_OR_RETURN(ValueId one_minus,
                        add_scalar(n, scaled(n, dist, -1.0, "negated"), kFloat, 1.0, "closeness"));
  const bool cast = n.elem(0) != kFloat;
  ValueId y = n.op(OpKind::relu, {one_minus}, {}, cast || flatten ? "onehot" : "");
  if (cast) {
    OpAttrs at;
    DUET_ASSIGN_OR_RETURN(at.to, runtime_dtype(n.elem(0)));
    y = n.op(OpKind::cast, {y}, at, flatten ? "onehot_cast" : "");
  }
  n.set(0, flatten ? n.reshape(y, dims) : y, n.elem(0));
  return {};
}

// The float value x as f32 at run time and back: the exact step and rounding below need f32's
// range (2^-149 to 2^127); f16 and bf16 values convert exactly both ways.
Result<ValueId> as_f32(Node& n, ValueId x, int elem) {
  if (elem == kFloat) return x;
  OpAttrs at;
  at.to = DType::f32;
  return n.op(OpKind::cast, {x}, at, "f32");
}

// A known f32 tensor of `dims` holding v everywhere (a bound for extreme).
Result<ValueId> filled(Node& n, const std::vector<int64_t>& dims, double v,
                       std::string_view purpose) {
  DUET_TRY(n.room_for(dims, kFloat, 8));
  DUET_ASSIGN_OR_RETURN(const int64_t width, count(dims));
  return n.constant(
      Array::of_reals(kFloat, dims, std::vector<double>(static_cast<size_t>(width), v)), purpose);
}

// [d > 0] as 0 or 1 for the f32 value d, exact for every d but NaN: relu(d) capped at 2^-100
// (as Min: exact) is 0 or at least 2^-149 (where denormals are not flushed); times 2^100 and
// 2^49 it is 0 or at least 1, never overflowing, and capped at 1 it is the step.
Result<ValueId> step(Node& n, ValueId d, const std::vector<int64_t>& dims, const std::string& p) {
  DUET_ASSIGN_OR_RETURN(ValueId tiny, filled(n, dims, std::ldexp(1.0, -100), p + "_tiny"));
  DUET_ASSIGN_OR_RETURN(ValueId one, filled(n, dims, 1.0, p + "_one"));
  ValueId r = n.op(OpKind::relu, {d}, {}, p + "_positive");
  DUET_ASSIGN_OR_RETURN(ValueId c, extreme(n, {r, tiny}, dims, kFloat, false, p + "_capped/"));
  ValueId big = scaled(n, scaled(n, c, std::ldexp(1.0, 100), p + "_magnified_1"),
                       std::ldexp(1.0, 49), p + "_magnified");
  return extreme(n, {big, one}, dims, kFloat, false, p + "/");
}

// Round half to even of the f32 value x, exact for every x but NaN: each side s = relu(x) and
// relu(-x) capped at 2^23 (as Min) is rounded by (a + 2^23) - 2^23 (f32's own rounding to
// nearest even, a + 2^23 lying in [2^23, 2^24] where the spacing is 1), and s less its
// fraction a - round(a) is round(s) (s itself from 2^23 on, where every float is an integer,
// and for infinities); the result is the positive side less the negative one. `fraction` is
// x - round(x), finite for infinite x too: the positive side's fraction less the negative's.
struct Rounded {
  ValueId value, fraction[2];
};
Result<Rounded> round_even(Node& n, ValueId x, const std::vector<int64_t>& dims,
                           const std::string& p) {
  Rounded r;
  const double two23 = std::ldexp(1.0, 23);
  DUET_ASSIGN_OR_RETURN(ValueId cap, filled(n, dims, two23, p + "_cap"));
  ValueId side[2];
  for (int k = 0; k < 2; ++k) {
    const std::string q = p + (k == 0 ? "_positive" : "_negative");
    ValueId s = n.op(OpKind::relu, {k == 0 ? x : scaled(n, x, -1.0, q + "_negated")}, {}, q);
    DUET_ASSIGN_OR_RETURN(ValueId a, extreme(n, {s, cap}, dims, kFloat, false, q + "_capped/"));
    DUET_ASSIGN_OR_RETURN(ValueId up, add_scalar(n, a, kFloat, two23, q + "_shifted"));
    DUET_ASSIGN_OR_RETURN(ValueId ra, add_scalar(n, up, kFloat, -two23, q + "_rounded"));
    r.fraction[k] = n.op(OpKind::sub, {a, ra}, {}, q + "_fraction");
    side[k] = n.op(OpKind::sub, {s, r.fraction[k]}, {}, q + "_round");
  }
  r.value = n.op(OpKind::sub, {side[0], side[1]}, {}, p);
  return r;
}

// A unary op folded by `f` when x is known, else built on x as f32 by `build` and cast back.
template <typename Build>
Status exact_unary(Node& n, double (*f)(double), Build build) {
  if (n.known(0) && f) {
    DUET_TRY(n.room_for(n.shape(0), n.elem(0), 16));
    n.set_known(0, fold_unary(n.array(0), f));
    return {};
  }
  DUET_TRY(activation_input(n));
  const int elem = n.elem(0);
  DUET_ASSIGN_OR_RETURN(ValueId x0, n.runtime(0));
  DUET_ASSIGN_OR_RETURN(ValueId x, as_f32(n, x0, elem));
  DUET_ASSIGN_OR_RETURN(ValueId y, build(x, n.shape(0), elem == kFloat ? "" : "result"));
  if (elem != kFloat) {
    OpAttrs at;
    DUET_ASSIGN_OR_RETURN(at.to, runtime_dtype(elem));
    y = n.op(OpKind::cast, {y}, at);
  }
  n.set(0, y, elem);
  return {};
}

Status map_round(Node& n) {
  return exact_unary(
      n, [](double v) { return std::nearbyint(v); },
      [&](ValueId x, const std::vector<int64_t>& dims, std::string p) -> Result<ValueId> {
        DUET_ASSIGN_OR_RETURN(Rounded r, round_even(n, x, dims, p));
        return r.value;
      });
}

// Floor: round(x) less [round(x) > x]; Ceil: round(x) plus [x > round(x)] (exact: the
// difference of x and its rounding, from the two sides' fractions, is exact and finite, and so
// is an integer plus or minus 1 below 2^24).
double floor_(double v) {
  return std::floor(v);
}
double ceil_(double v) {
  return std::ceil(v);
}
Status floor_or_ceil(Node& n, bool floor) {
  return exact_unary(
      n, floor ? floor_ : ceil_,
      [&](ValueId x, const std::vector<int64_t>& dims, std::string p) -> Result<ValueId> {
        DUET_ASSIGN_OR_RETURN(Rounded r, round_even(n, x, dims, "rounded"));
        // x - round(x) = fraction[0] - fraction[1]; Floor steps on its negation.
        ValueId d = n.op(OpKind::sub, {r.fraction[floor ? 1 : 0], r.fraction[floor ? 0 : 1]}, {},
                         "rounding_error");
        DUET_ASSIGN_OR_RETURN(ValueId s, step(n, d, dims, "adjust"));
        return n.op(floor ? OpKind::sub : OpKind::add, {r.value, s}, {}, p);
      });
}
Status map_floor(Node& n) {
  return floor_or_ceil(n, true);
}
Status map_ceil(Node& n) {
  return floor_or_ceil(n, false);
}

// Sign: [x > 0] - [x < 0].
Status map_sign(Node& n) {
  return exact_unary(
      n, [](double v) { return v > 0   ? 1.0
                               : v < 0 ? -1.0
                                       : v; },
      [&](ValueId x, const std::vector<int64_t>& dims, std::string p) -> Result<ValueId> {
        DUET_ASSIGN_OR_RETURN(ValueId pos, step(n, x, dims, "positive"));
        DUET_ASSIGN_OR_RETURN(ValueId neg,
                              step(n, scaled(n, x, -1.0, "negated"), dims, "negative"));
        return n.op(OpKind::sub, {pos, neg}, {}, p);
      });
}

// ThresholdedRelu: x * [x - alpha > 0] (x > alpha exactly: the difference of two floats has
// their order's sign). An x of -inf gives NaN (inf * 0) where ONNX gives 0.
Status map_thresholded_relu(Node& n) {
  const double alpha = n.attr_float("alpha", 1.0f);
  if (n.known(0)) {
    DUET_TRY(n.room_for(n.shape(0), n.elem(0), 16));
    n.set_known(0, fold_unary(n.array(0), [alpha](double v) { return v > alpha ? v : 0.0; }));
    return {};
  }
  return exact_unary(
      n, nullptr,
      [&](ValueId x, const std::vector<int64_t>& dims, std::string p) -> Result<ValueId> {
        DUET_ASSIGN_OR_RETURN(ValueId d, add_scalar(n, x, kFloat, -alpha, "above"));
        DUET_ASSIGN_OR_RETURN(ValueId s, step(n, d, dims, "kept"));
        return n.op(OpKind::mul, {x, s}, {}, p);
      });
}

// IsNaN: [x != x], as [[x == x] == 0]; IsInf: [|x| == inf], or [x == inf] or [x == -inf] when
// only one sign is detected (and all false when neither is). Bools as i8, as comparisons give.
Status map_is_nan(Node& n) {
  if (n.known(0)) {
    DUET_TRY(n.room_for(n.shape(0), kBool, 16));
    n.set_known(
        0, fold_unary(n.array(0), [](double v) { return std::isnan(v) ? 1.0 : 0.0; }).cast(kBool));
    return {};
  }
  DUET_TRY(activation_input(n));
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  DUET_ASSIGN_OR_RETURN(ValueId zero, n.constant(Array::of_reals(n.elem(0), {1}, {0.0}), "zero"));
  ValueId same = n.op(OpKind::equal, {x, x}, {}, "is_number");
  set_bool(n, n.op(OpKind::equal, {same, zero}, {}, "is_nan"));
  return {};
}

Status map_is_inf(Node& n) {
  const bool pos = n.attr_int("detect_positive", 1) != 0;
  const bool neg = n.attr_int("detect_negative", 1) != 0;
  if (n.known(0)) {
    DUET_TRY(n.room_for(n.shape(0), kBool, 16));
    n.set_known(0, fold_unary(n.array(0), [pos, neg](double v) {
                     return std::isinf(v) && (v > 0 ? pos : neg) ? 1.0 : 0.0;
                   }).cast(kBool));
    return {};
  }
  DUET_TRY(activation_input(n));
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  const double inf = std::numeric_limits<double>::infinity();
  // Neither sign: compared with NaN, which nothing equals.
  const double target = pos ? inf : neg ? -inf : std::numeric_limits<double>::quiet_NaN();
  DUET_ASSIGN_OR_RETURN(ValueId t,
                        n.constant(Array::of_reals(n.elem(0), {1}, {target}), "infinity"));
  if (pos && neg) x = n.op(OpKind::abs, {x}, {}, "magnitude");
  set_bool(n, n.op(OpKind::equal, {x, t}, {}, "is_inf"));
  return {};
}

// OneHot with known depth and values: folded when the indices are known; at run time
// `off + (on - off) * ([i == k] + [i == k - depth])` for the classes k in [0, depth): the indices
// in f32 with a trailing dim of 1, compared by duet's equal with known rows of the classes (and of
// the classes less depth, for negative indices), broadcast; a new axis other than the last is a
// permute view. Exact for integral indices (below 2^24 in magnitude); an index outside
// [-depth, depth) gives a row of `off`, and a float index with a fraction matches no class where
// ONNX truncates it first.
Status map_one_hot(Node& n) {
  if (!n.known(1) || !n.known(2))
    return n.unsupported("OneHot with its depth or values computed at run time");
  if (n.array(1).numel() != 1 || n.array(2).numel() != 2)
    return n.invalid("a depth of " + std::to_string(n.array(1).numel()) + " values and " +
                     std::to_string(n.array(2).numel()) + " values (1 and 2)");
  const double depth_value = std::trunc(n.array(1).real_at(0));
  if (!(depth_value >= 1 && depth_value <= 1 << 24))
    return n.invalid("depth " + std::to_string(depth_value) + " outside [1, 2^24]");
  const auto depth = static_cast<int64_t>(depth_value);
  const double off = n.array(2).real_at(0), on = n.array(2).real_at(1);
  const int elem = n.elem(2);
  std::vector<int64_t> out = n.shape(0);
  const int r = static_cast<int>(out.size()) + 1;
  DUET_ASSIGN_OR_RETURN(int axis, normalize_axis(n.attr_int("axis", -1), r));
  out.insert(out.begin() + axis, depth);
  DUET_TRY(n.room_for(out, elem, 16));
  if (n.known(0)) {
    const std::vector<double> idx = n.array(0).reals();
    int64_t inner = 1;
    for (size_t d = static_cast<size_t>(axis) + 1; d < out.size(); ++d) inner *= out[d];
    std::vector<double> v(idx.size() * static_cast<size_t>(depth));
    for (size_t e = 0; e < v.size(); ++e) {
      const auto o = static_cast<int64_t>(e) / (depth * inner),
                 k = static_cast<int64_t>(e) / inner % depth;
      double i = std::trunc(idx[static_cast<size_t>(o * inner + static_cast<int64_t>(e) % inner)]);
      if (i < 0) i += static_cast<double>(depth);
      v[e] = i == static_cast<double>(k) ? on : off;
    }
    n.set_known(0, Array::of_reals(elem, out, v));
    return {};
  }
  if (!elem_is_float(elem) || elem == kDouble)
    return n.unsupported("OneHot of " + elem_name(elem) +
                         " values at run time (duet's element-wise ops are float)");
  if (n.elem(0) == kDouble || n.elem(0) == kBool)
    return n.unsupported("OneHot of " + elem_name(n.elem(0)) + " indices at run time");
  DUET_ASSIGN_OR_RETURN(DType t, runtime_dtype(elem));
  DUET_ASSIGN_OR_RETURN(ValueId i, as_float(n, 0, DType::f32, "indices"));
  std::vector<int64_t> column = n.shape(0);
  column.push_back(1);
  i = n.reshape(i, column, "column");
  std::vector<double> classes(static_cast<size_t>(depth)), below(static_cast<size_t>(depth));
  for (int64_t k = 0; k < depth; ++k) {
    classes[static_cast<size_t>(k)] = static_cast<double>(k);
    below[static_cast<size_t>(k)] = static_cast<double>(k - depth);
  }
  DUET_ASSIGN_OR_RETURN(ValueId c,
                        n.constant(Array::of_reals(kFloat, {depth}, classes), "classes"));
  DUET_ASSIGN_OR_RETURN(ValueId cb,
                        n.constant(Array::of_reals(kFloat, {depth}, below), "from_end"));
  ValueId hot = n.op(OpKind::add,
                     {n.op(OpKind::equal, {i, c}, {}, "is_class"),
                      n.op(OpKind::equal, {i, cb}, {}, "is_class_from_end")},
                     {}, "hot");
  if (on - off != 1) {
    OpAttrs at;
    at.alpha = static_cast<float>(on - off);
    hot = n.op(OpKind::scale, {hot}, at, "on_less_off");
  }
  if (off != 0) {
    DUET_ASSIGN_OR_RETURN(ValueId o, n.constant(Array::of_reals(kFloat, {1}, {off}), "off"));
    hot = n.op(OpKind::add, {hot, o}, {}, "with_off");
  }
  if (t != DType::f32) {
    OpAttrs at;
    at.to = t;
    hot = n.op(OpKind::cast, {hot}, at, "as_values");
  }
  if (axis != r - 1) {
    OpAttrs p;
    for (int d = 0; d < r; ++d) p.perm.push_back(d < axis ? d : d == axis ? r - 1 : d - 1);
    hot = n.op(OpKind::permute, {hot}, p, "axis");
  }
  n.set(0, hot, elem);
  return {};
}

// Mod: with fmod=1 C's fmod, the remainder with the dividend's sign; with fmod=0 (integers only)
// the remainder with the divisor's sign, as Python's %. Folded when both operands are known; at
// run time duet's fmod, for float operands (duet's element-wise ops are float).
int64_t int_mod(int64_t a, int64_t b, bool fmod) {
  if (b == 0 || b == -1) return 0;  // ONNX leaves b = 0 undefined; b = -1 divides every a
  const int64_t r = a % b;
  return !fmod && r != 0 && (r < 0) != (b < 0) ? r + b : r;
}

Status map_mod(Node& n) {
  const bool fmod = n.attr_int("fmod", 0) != 0;
  if (!fmod && elem_is_float(n.elem(0)))
    return n.invalid("Mod of " + elem_name(n.elem(0)) +
                     " with fmod=0 (float operands need fmod=1)");
  if (n.all_known()) {
    DUET_TRY(room_for_broadcast(n, n.elem(0)));
    auto r = fold_binary(
        n.array(0), n.array(1), n.elem(0), [](double a, double b) { return std::fmod(a, b); },
        [fmod](int64_t a, int64_t b) { return int_mod(a, b, fmod); });
    if (!r.ok()) return n.invalid(r.status().message());
    n.set_known(0, std::move(*r));
    return {};
  }
  DUET_ASSIGN_OR_RETURN(auto ab, float_operands(n));
  n.set(0, n.op(OpKind::fmod, {ab.first, ab.second}), n.elem(0));
  return {};
}

// Shrink: (x + bias) * [-lambd - x > 0] + (x - bias) * [x - lambd > 0].
Status map_shrink(Node& n) {
  const double bias = n.attr_float("bias", 0.0f), lambd = n.attr_float("lambd", 0.5f);
  if (n.known(0)) {
    DUET_TRY(n.room_for(n.shape(0), n.elem(0), 16));
    n.set_known(0, fold_unary(n.array(0), [=](double v) {
                  return v < -lambd ? v + bias : v > lambd ? v - bias : 0.0;
                }));
    return {};
  }
  return exact_unary(
      n, nullptr,
      [&](ValueId x, const std::vector<int64_t>& dims, std::string p) -> Result<ValueId> {
        DUET_ASSIGN_OR_RETURN(ValueId below_d, add_scalar(n, scaled(n, x, -1.0, "negated"), kFloat,
                                                          -lambd, "below_distance"));
        DUET_ASSIGN_OR_RETURN(ValueId above_d, add_scalar(n, x, kFloat, -lambd, "above_distance"));
        DUET_ASSIGN_OR_RETURN(ValueId below, step(n, below_d, dims, "below"));
        DUET_ASSIGN_OR_RETURN(ValueId above, step(n, above_d, dims, "above"));
        DUET_ASSIGN_OR_RETURN(ValueId lo, add_scalar(n, x, kFloat, bias, "raised"));
        DUET_ASSIGN_OR_RETURN(ValueId hi, add_scalar(n, x, kFloat, -bias, "lowered"));
        return n.op(OpKind::add,
                    {n.op(OpKind::mul, {lo, below}, {}, "below_part"),
                     n.op(OpKind::mul, {hi, above}, {}, "above_part")},
                    {}, p);
      });
}

const Mapping kMath[] = {
    {"Add", map_add},
    {"Sub", map_sub},
    {"Mul", map_mul},
    {"Div", map_div},
    {"Pow", map_pow},
    {"Relu", map_relu},
    {"Exp", map_exp},
    {"Neg", map_neg},
    {"Sqrt", map_sqrt},
    {"Sigmoid", map_sigmoid},
    {"Tanh", map_tanh},
    {"Erf", map_erf},
    {"Abs", map_abs},
    {"Reciprocal", map_reciprocal},
    {"Log", map_log},
    {"Dropout", map_dropout},
    {"Gelu", map_gelu},
    {"Silu", map_silu},
    {"Sin", map_sin},
    {"Cos", map_cos},
    {"Tan", map_tan},
    {"Asin", map_asin},
    {"Acos", map_acos},
    {"Atan", map_atan},
    {"Sinh", map_sinh},
    {"Cosh", map_cosh},
    {"Asinh", map_asinh},
    {"Acosh", map_acosh},
    {"Atanh", map_atanh},
    {"Equal", map_equal},
    {"Where", map_where},
    {"Less", map_less},
    {"LessOrEqual", map_less_equal},
    {"Greater", map_greater},
    {"GreaterOrEqual", map_greater_equal},
    {"And", map_and},
    {"Or", map_or},
    {"Xor", map_xor},
    {"Not", map_not},
    {"Trilu", map_trilu},
    {"CumSum", map_cumsum},
    {"Sum", map_sum},
    {"Mean", map_mean},
    {"Max", map_max},
    {"Min", map_min},
    {"Clip", map_clip},
    {"LeakyRelu", map_leaky_relu},
    {"PRelu", map_prelu},
    {"Elu", map_elu},
    {"Celu", map_celu},
    {"Selu", map_selu},
    {"HardSigmoid", map_hard_sigmoid},
    {"HardSwish", map_hard_swish},
    {"Softplus", map_softplus},
    {"Softsign", map_softsign},
    {"ArgMax", map_arg_max},
    {"ArgMin", map_arg_min},
    {"Hardmax", map_hardmax},
    {"Round", map_round},
    {"Floor", map_floor},
    {"Ceil", map_ceil},
    {"Sign", map_sign},
    {"ThresholdedRelu", map_thresholded_relu},
    {"Shrink", map_shrink},
    {"IsNaN", map_is_nan},
    {"IsInf", map_is_inf},
    {"Mod", map_mod},
    {"OneHot", map_one_hot},
};

}  // namespace

std::span<const Mapping> math_mappings() {
  return kMath;
}

}  // namespace duet::onnx_import
