// Contractions, normalisations and softmax.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "fold.h"
#include "importer.h"

namespace duet::onnx_import {

namespace {

int64_t product(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i) n *= d[i];
  return n;
}

Status float_input(Node& n, size_t i) {
  if (elem_is_float(n.elem(i)) && n.elem(i) != kDouble) return {};
  return n.unsupported(std::string(n.type()) + " of " + elem_name(n.elem(i)));
}

// numpy matmul: 1-D operands are promoted to matrices and the added dim dropped after.
Status map_matmul(Node& n) {
  DUET_TRY(float_input(n, 0));
  DUET_TRY(float_input(n, 1));
  std::vector<int64_t> sa = n.shape(0), sb = n.shape(1);
  DUET_ASSIGN_OR_RETURN(ValueId a, n.runtime(0));
  DUET_ASSIGN_OR_RETURN(ValueId b, n.runtime(1));
  const bool va = sa.size() == 1, vb = sb.size() == 1;
  if (va) a = n.reshape(a, {1, sa[0]}, "a");
  if (vb) b = n.reshape(b, {sb[0], 1}, "b");
  if (!va && !vb) {
    n.set(0, n.op(OpKind::matmul, {a, b}), n.elem(0));
    return {};
  }
  ValueId y = n.op(OpKind::matmul, {a, b}, {}, "matmul");
  if (!y.valid()) return {};  // the builder holds why (shapes that do not meet); map_node says it
  std::vector<int64_t> out(n.desc(y).dims().begin(), n.desc(y).dims().end());
  out.erase(out.end() - (vb ? 1 : 2));  // the promoted dim: N of b, else M of a
  if (va && vb) out.clear();
  n.set(0, n.reshape(y, out), n.elem(0));
  return {};
}

// Y = alpha * A' B' + beta * C. beta folds into a known C; alpha and a run-time beta are scales.
Status map_gemm(Node& n) {
  DUET_TRY(float_input(n, 0));
  DUET_TRY(float_input(n, 1));
  const float alpha = n.attr_float("alpha", 1.0f), beta = n.attr_float("beta", 1.0f);
  if (n.rank(0) != 2 || n.rank(1) != 2) return n.invalid("A and B must be matrices");
  DUET_ASSIGN_OR_RETURN(ValueId a, n.runtime(0));
  DUET_ASSIGN_OR_RETURN(ValueId b, n.runtime(1));
  OpAttrs mm;
  mm.transpose_a = n.attr_int("transA", 0) != 0;
  mm.transpose_b = n.attr_int("transB", 0) != 0;
  const bool bias = n.has(2) && beta != 0.0f;
  const bool scaled = alpha != 1.0f;
  ValueId y = n.op(OpKind::matmul, {a, b}, mm, bias || scaled ? "matmul" : "");
  if (scaled) {
    OpAttrs s;
    s.alpha = alpha;
    y = n.op(OpKind::scale, {y}, s, bias ? "alpha" : "");
  }
  if (bias) {
    ValueId c;
    if (n.known(2) && beta != 1.0f) {
      const Array scaled_c = fold_unary(n.array(2), [beta](double v) { return beta * v; });
      DUET_ASSIGN_OR_RETURN(c, n.constant(scaled_c, "beta_c"));
    } else {
      DUET_ASSIGN_OR_RETURN(c, n.runtime(2));
      if (beta != 1.0f) {
        OpAttrs s;
        s.alpha = beta;
        c = n.op(OpKind::scale, {c}, s, "beta_c");
      }
    }
    y = n.op(OpKind::add, {y, c});
  }
  n.set(0, y, n.elem(0));
  return {};
}

// Softmax over one axis (opset 13) or over the dims from `axis` on, flattened (before 13).
Status map_softmax(Node& n) {
  DUET_TRY(float_input(n, 0));
  const std::vector<int64_t> dims = n.shape(0);
  const int r = static_cast<int>(dims.size());
  DUET_ASSIGN_OR_RETURN(
      int axis, normalize_axis(n.attr_int("axis", n.opset() >= 13 ? -1 : 1), std::max(r, 1)));
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  if (r == 0) return n.invalid("softmax of a scalar");
  if (n.opset() < 13 && axis != r - 1) {
    const int64_t rows = product(dims, 0, static_cast<size_t>(axis));
    ValueId flat =
        n.reshape(x, {rows, product(dims, static_cast<size_t>(axis), dims.size())}, "rows");
    ValueId s = n.op(OpKind::softmax, {flat}, {}, "softmax");
    n.set(0, n.reshape(s, dims), n.elem(0));
    return {};
  }
  if (axis == r - 1) {
    n.set(0, n.op(OpKind::softmax, {x}), n.elem(0));
    return {};
  }
  // Another axis: swap it with the last (a view), softmax, swap back (a view).
  OpAttrs t;
  t.dim0 = axis;
  t.dim1 = r - 1;
  ValueId xt = n.op(OpKind::transpose, {x}, t, "to_last");
  ValueId s = n.op(OpKind::softmax, {xt}, {}, "softmax");
  n.set(0, n.op(OpKind::transpose, {s}, t), n.elem(0));
  return {};
}

// LogSoftmax as its definition in duet's ops, stable as softmax is: d = x - max(x), then
// d - log(sum(exp(d))), over one axis (opset 13) or over the dims from `axis` on, flattened
// (before 13).
Status map_log_softmax(Node& n) {
  DUET_TRY(float_input(n, 0));
  const std::vector<int64_t> dims = n.shape(0);
  const int r = static_cast<int>(dims.size());
  if (r == 0) return n.invalid("LogSoftmax of a scalar");
  DUET_ASSIGN_OR_RETURN(int axis, normalize_axis(n.attr_int("axis", n.opset() >= 13 ? -1 : 1), r));
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  const bool flat = n.opset() < 13 && axis != r - 1;
  if (flat) {
    x = n.reshape(x,
                  {product(dims, 0, static_cast<size_t>(axis)),
                   product(dims, static_cast<size_t>(axis), dims.size())},
                  "rows");
    axis = 1;
  }
  OpAttrs red;
  red.axes = {axis};
  ValueId m = n.op(OpKind::reduce_max, {x}, red, "max");
  ValueId d = n.op(OpKind::sub, {x, m}, {}, "shifted");
  ValueId s = n.op(OpKind::reduce_sum, {n.op(OpKind::exp, {d}, {}, "exp")}, red, "sum");
  ValueId y =
      n.op(OpKind::sub, {d, n.op(OpKind::log, {s}, {}, "log_sum")}, {}, flat ? "log_softmax" : "");
  n.set(0, flat ? n.reshape(y, dims) : y, n.elem(0));
  return {};
}

// Input k of a norm, a Scale or B broadcast to the normalised dims `norm`, as the one vector of
// their size that duet's norms take.
Result<ValueId> norm_vector(Node& n, size_t k, const std::vector<int64_t>& norm,
                            std::string_view purpose) {
  const int64_t width = product(norm, 0, norm.size());
  const std::vector<int64_t> s = n.shape(k);
  if (product(s, 0, s.size()) != width) {
    if (!n.known(k)) return n.unsupported("a broadcast Scale or B computed at run time");
    const Array& a = n.array(k);
    DUET_ASSIGN_OR_RETURN(std::vector<int64_t> full, broadcast(a.dims(), norm));
    DUET_TRY(n.room_for(full, a.elem(), 8));
    if (product(full, 0, full.size()) != width) return n.invalid("Scale/B shape " + dims_str(s));
    return n.constant(pick(a, {width}, broadcast_index(a.dims(), full)), purpose);
  }
  DUET_ASSIGN_OR_RETURN(ValueId w, n.runtime(k));
  return s.size() == 1 ? w : n.reshape(w, {width}, purpose);
}

// LayerNormalization over the dims from `axis` on: duet's layernorm over the last dim, with
// those dims flattened into one (views of dense tensors).
Status map_layer_norm(Node& n) {
  DUET_TRY(float_input(n, 0));
  const bool stats =
      (n.num_outputs() > 1 && n.output_used(1)) || (n.num_outputs() > 2 && n.output_used(2));
  if (stats && n.elem(0) != kFloat)
    return n.unsupported("the Mean and InvStdDev outputs of " + elem_name(n.elem(0)) +
                         " input (duet computes them for float input only)");
  const std::vector<int64_t> dims = n.shape(0);
  const int r = static_cast<int>(dims.size());
  DUET_ASSIGN_OR_RETURN(int axis, normalize_axis(n.attr_int("axis", -1), r));
  const float eps = n.attr_float("epsilon", 1e-5f);
  if (!(eps > 0.0f)) return n.unsupported("epsilon " + std::to_string(eps) + " (duet needs > 0)");
  const int64_t width = product(dims, static_cast<size_t>(axis), dims.size());
  std::vector<int64_t> flat(dims.begin(), dims.begin() + axis);
  flat.push_back(width);
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  const bool reshape = axis != r - 1;
  if (reshape) x = n.reshape(x, flat, "rows");
  std::vector<ValueId> ins = {x};
  for (size_t k = 1; k < 3 && n.has(k); ++k) {
    DUET_ASSIGN_OR_RETURN(
        ValueId w, norm_vector(n, k, {dims.begin() + axis, dims.end()}, k == 1 ? "scale" : "bias"));
    ins.push_back(w);
  }
  OpAttrs at;
  at.eps = eps;
  ValueId y = n.op(OpKind::layernorm, ins, at, reshape ? "layernorm" : "");
  n.set(0, reshape ? n.reshape(y, dims) : y, n.elem(0));
  if (stats) {
    // Mean and InvStdDev (the normalised dims kept as 1): their definitions, mean(x) and
    // (mean((x - mean)^2) + eps)^-1/2, in reduce_mean, sub, pow and add.
    DUET_ASSIGN_OR_RETURN(ValueId xs, n.runtime(0));
    OpAttrs red;
    for (int d = axis; d < r; ++d) red.axes.push_back(d);
    ValueId mean = n.op(OpKind::reduce_mean, {xs}, red, n.output_used(1) ? "" : "mean", 1);
    n.set(1, mean, kFloat);
    if (n.num_outputs() > 2 && n.output_used(2)) {
      OpAttrs sq, rsqrt;
      sq.exponent = 2.0f;
      rsqrt.exponent = -0.5f;
      ValueId d = n.op(OpKind::sub, {xs, mean}, {}, "centred");
      ValueId var = n.op(OpKind::reduce_mean, {n.op(OpKind::pow, {d}, sq, "squared")}, red, "var");
      DUET_ASSIGN_OR_RETURN(ValueId e, n.constant(Array::of_reals(kFloat, {1}, {eps}), "eps"));
      n.set(2, n.op(OpKind::pow, {n.op(OpKind::add, {var, e}, {}, "var_eps")}, rsqrt, "", 2),
            kFloat);
    }
  }
  return {};
}

// InstanceNormalization: each (n, c) of x [N, C, spatial...] normalised over its spatial
// elements (duet's layernorm over x viewed as [N, C, S]), then scaled and shifted per channel
// (scale and B viewed as [C, 1], broadcast).
Status map_instance_norm(Node& n) {
  DUET_TRY(float_input(n, 0));
  const std::vector<int64_t> dims = n.shape(0);
  if (dims.size() < 3)
    return n.invalid("input of shape " + dims_str(dims) +
                     " (expected [N, C, D1, ...], at least one spatial dim)");
  const int64_t c = dims[1];
  for (size_t k : {size_t{1}, size_t{2}}) {
    if (n.elem(k) != n.elem(0))
      return n.invalid(std::string(k == 1 ? "scale" : "B") + " of type " + elem_name(n.elem(k)) +
                       " (expected the input's, " + elem_name(n.elem(0)) + ")");
    if (n.shape(k) != std::vector<int64_t>{c})
      return n.invalid(std::string(k == 1 ? "scale" : "B") + " of shape " + dims_str(n.shape(k)) +
                       " (expected [C] = [" + std::to_string(c) + "])");
  }
  const float eps = n.attr_float("epsilon", 1e-5f);
  if (!(eps > 0.0f)) return n.unsupported("epsilon " + std::to_string(eps) + " (duet needs > 0)");
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  const bool flat = dims.size() == 3;
  if (!flat) x = n.reshape(x, {dims[0], c, product(dims, 2, dims.size())}, "rows");
  OpAttrs at;
  at.eps = eps;
  ValueId y = n.op(OpKind::layernorm, {x}, at, "normalised");
  DUET_ASSIGN_OR_RETURN(ValueId scale, n.runtime(1));
  DUET_ASSIGN_OR_RETURN(ValueId bias, n.runtime(2));
  y = n.op(OpKind::mul, {y, n.reshape(scale, {c, 1}, "scale")}, {}, "scaled");
  y = n.op(OpKind::add, {y, n.reshape(bias, {c, 1}, "bias")}, {}, flat ? "" : "shifted");
  n.set(0, flat ? y : n.reshape(y, dims), n.elem(0));
  return {};
}

// MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9) over `axes` (default 0, 2, 3),
// ONNX's definition with the variance taken as the mean of the centred squares (reduce_mean,
// sub, pow, sqrt, add, div).
Status map_mvn(Node& n) {
  DUET_TRY(float_input(n, 0));
  const int r = n.rank(0);
  std::vector<int64_t> axes = n.attr_ints("axes").value_or(std::vector<int64_t>{0, 2, 3});
  OpAttrs red;
  for (int64_t a : axes) {
    DUET_ASSIGN_OR_RETURN(int axis, normalize_axis(a, r, "axes"));
    if (std::find(red.axes.begin(), red.axes.end(), axis) != red.axes.end())
      return n.invalid("axis " + std::to_string(a) + " listed twice in axes");
    red.axes.push_back(axis);
  }
  std::sort(red.axes.begin(), red.axes.end());
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  OpAttrs sq;
  sq.exponent = 2.0f;
  ValueId d = n.op(OpKind::sub, {x, n.op(OpKind::reduce_mean, {x}, red, "mean")}, {}, "centred");
  ValueId var = n.op(OpKind::reduce_mean, {n.op(OpKind::pow, {d}, sq, "squared")}, red, "var");
  DUET_ASSIGN_OR_RETURN(ValueId e, n.constant(Array::of_reals(n.elem(0), {1}, {1e-9}), "eps"));
  ValueId sd = n.op(OpKind::add, {n.op(OpKind::sqrt, {var}, {}, "std"), e}, {}, "std_eps");
  n.set(0, n.op(OpKind::div, {d, sd}), n.elem(0));
  return {};
}

// RMSNorm over the last axis, found by the fusion pass: duet's rmsnorm.
Status map_rms_norm(Node& n) {
  DUET_TRY(float_input(n, 0));
  const std::vector<int64_t> dims = n.shape(0);
  if (dims.empty()) return n.invalid("RMSNorm of a scalar");
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  std::vector<ValueId> ins = {x};
  if (n.has(1)) {
    DUET_ASSIGN_OR_RETURN(ValueId w, norm_vector(n, 1, {dims.back()}, "weight"));
    ins.push_back(w);
  }
  OpAttrs at;
  at.eps = n.attr_float("epsilon", 1e-6f);
  n.set(0, n.op(OpKind::rmsnorm, ins, at), n.elem(0));
  return {};
}

// The ONNX reductions: duet's reduce_sum, reduce_mean, reduce_max or reduce_min over the axes,
// with the element-wise ops the composite ones are defined by before (x^2, |x|, exp x) and after
// (sqrt, log). Folded when x is known.
enum class Red { sum, mean, max, min, prod, sum_square, l1, l2, log_sum, log_sum_exp };

double red_pre(Red r, double x) {
  switch (r) {
    case Red::sum_square:
    case Red::l2:
      return x * x;
    case Red::l1:
      return std::fabs(x);
    case Red::log_sum_exp:
      return std::exp(x);
    default:
      return x;
  }
}

double red_post(Red r, double x) {
  switch (r) {
    case Red::l2:
      return std::sqrt(x);
    case Red::log_sum:
    case Red::log_sum_exp:
      return std::log(x);
    default:
      return x;
  }
}

Status map_reduce(Node& n, Red r) {
  std::vector<int64_t> axes;
  // Axes as an input from opset 13 for ReduceSum, from 18 for the others.
  const bool axes_input = n.opset() >= (r == Red::sum ? 13 : 18);
  if (axes_input) {
    if (n.has(1)) {
      DUET_ASSIGN_OR_RETURN(axes, n.ints(1, "axes"));
    }
  } else {
    axes = n.attr_ints("axes").value_or(std::vector<int64_t>{});
  }
  const std::vector<int64_t> dims = n.shape(0);
  const int rank = static_cast<int>(dims.size());
  const bool noop = axes.empty() && axes_input && n.attr_int("noop_with_empty_axes", 0) != 0;
  std::vector<bool> reduce(dims.size(), axes.empty() && !noop);
  for (int64_t ax : axes) {
    DUET_ASSIGN_OR_RETURN(int d, normalize_axis(ax, rank));
    reduce[static_cast<size_t>(d)] = true;
  }
  const bool keep = n.attr_int("keepdims", 1) != 0;
  std::vector<int64_t> kept, out;
  std::vector<int> red_axes;
  for (size_t d = 0; d < dims.size(); ++d) {
    kept.push_back(reduce[d] ? 1 : dims[d]);
    if (!reduce[d] || keep) out.push_back(kept.back());
    if (reduce[d]) red_axes.push_back(static_cast<int>(d));
    if (reduce[d] && dims[d] == 0)
      return n.unsupported("a reduction over an empty dim (duet tensors have no zero-sized dims)");
  }
  if (n.known(0)) {
    const Array& a = n.array(0);
    DUET_TRY(n.room_for(out, a.elem(), 8));
    const double init = r == Red::max    ? -INFINITY
                        : r == Red::min  ? INFINITY
                        : r == Red::prod ? 1.0
                                         : 0.0;
    std::vector<double> acc(static_cast<size_t>(product(kept, 0, kept.size())), init);
    std::vector<int64_t> at(dims.size(), 0);
    for (int64_t i = 0; i < a.numel(); ++i) {
      int64_t o = 0;
      for (size_t d = 0; d < dims.size(); ++d) o = o * kept[d] + (reduce[d] ? 0 : at[d]);
      const double v = red_pre(r, a.real_at(i));
      double& s = acc[static_cast<size_t>(o)];
      s = r == Red::max    ? std::max(s, v)
          : r == Red::min  ? std::min(s, v)
          : r == Red::prod ? s * v
                           : s + v;
      for (size_t d = dims.size(); d-- > 0;) {
        if (++at[d] < dims[d]) break;
        at[d] = 0;
      }
    }
    const double per = static_cast<double>(a.numel()) / static_cast<double>(acc.size());
    for (double& s : acc) s = red_post(r, r == Red::mean ? s / per : s);
    n.set_known(0, Array::of_reals(a.elem(), out, acc));
    return {};
  }
  DUET_TRY(float_input(n, 0));
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  auto unary = [&](OpKind k, ValueId v, const char* purpose) {
    OpAttrs at;
    if (k == OpKind::pow) at.exponent = 2.0f;  // the square of ReduceSumSquare
    return n.op(k, {v}, at, purpose);
  };
  if (r == Red::sum_square || r == Red::l2) x = unary(OpKind::pow, x, "square");
  if (r == Red::l1) x = unary(OpKind::abs, x, "abs");
  if (r == Red::log_sum_exp) x = unary(OpKind::exp, x, "exp");
  ValueId y = x;
  if (!red_axes.empty()) {
    OpAttrs at;
    at.axes = red_axes;
    const OpKind k = r == Red::mean   ? OpKind::reduce_mean
                     : r == Red::max  ? OpKind::reduce_max
                     : r == Red::min  ? OpKind::reduce_min
                     : r == Red::prod ? OpKind::reduce_prod
                                      : OpKind::reduce_sum;
    y = n.op(k, {x}, at, "reduce");
  }
  if (r == Red::l2) y = unary(OpKind::sqrt, y, "sqrt");
  if (r == Red::log_sum || r == Red::log_sum_exp) y = unary(OpKind::log, y, "log");
  n.set(0, keep ? y : n.reshape(y, out), n.elem(0));
  return {};
}

Status map_reduce_sum(Node& n) {
  return map_reduce(n, Red::sum);
}
Status map_reduce_mean(Node& n) {
  return map_reduce(n, Red::mean);
}
Status map_reduce_max(Node& n) {
  return map_reduce(n, Red::max);
}
Status map_reduce_min(Node& n) {
  return map_reduce(n, Red::min);
}
Status map_reduce_prod(Node& n) {
  return map_reduce(n, Red::prod);
}
Status map_reduce_sum_square(Node& n) {
  return map_reduce(n, Red::sum_square);
}
Status map_reduce_l1(Node& n) {
  return map_reduce(n, Red::l1);
}
Status map_reduce_l2(Node& n) {
  return map_reduce(n, Red::l2);
}
Status map_reduce_log_sum(Node& n) {
  return map_reduce(n, Red::log_sum);
}
Status map_reduce_log_sum_exp(Node& n) {
  return map_reduce(n, Red::log_sum_exp);
}

// Whether a known additive mask is causal for [Lq, Lk] scores (end-aligned, as duet's causal
// attention): 0 where key j is visible to query i (j <= i + Lk - Lq), at most -1e4 elsewhere
// (exp of it is 0 even in double), in every slice of its leading dims.
bool is_causal_mask(const Array& mask, int64_t lq, int64_t lk) {
  if (lq > lk) return false;  // rows with no visible key: duet gives 0, softmax would give NaN
  const std::vector<int64_t>& d = mask.dims();
  const int r = static_cast<int>(d.size());
  const int64_t mq = r >= 2 ? d[static_cast<size_t>(r - 2)] : 1;
  const int64_t mk = r >= 1 ? d[static_cast<size_t>(r - 1)] : 1;
  if ((mq != lq && mq != 1) || (mk != lk && mk != 1) || (mq == 1 && lq > 1) || mk == 1)
    return false;
  for (int64_t i = 0; i < mask.numel(); ++i) {
    const int64_t q = (i / mk) % mq, k = i % mk;
    const double v = mask.real_at(i);
    if (k <= q + (lk - lq) ? v != 0.0 : !(v <= -1e4)) return false;
  }
  return true;
}

// The additive form of masked_fill(scores, c, fill) (ONNX: Where(c, fill, scores)), with c and
// fill known: fill where c is set, 0 elsewhere, plus the additive mask `add` when there is one.
// Softmax gives the same probabilities either way when the filled values are -inf, or at most
// -1e4 (whose exponential is 0 even in double) in rows that keep at least one key; else none.
std::optional<Array> masked_fill_as_mask(Node& n, const Array* add) {
  const Array& c = n.array(4);
  const Array& fill = n.array(5);
  auto dims = broadcast(c.dims(), fill.dims());
  if (!dims.ok()) return std::nullopt;
  std::vector<int64_t> out = *dims;
  if (add) {
    auto with = broadcast(out, add->dims());
    if (!with.ok()) return std::nullopt;
    out = *with;
  }
  if (out.empty() || !n.room_for(out, kDouble, 40).ok()) return std::nullopt;
  const std::vector<int64_t> ic = broadcast_index(c.dims(), out);
  const std::vector<int64_t> ifl = broadcast_index(fill.dims(), out);
  std::vector<int64_t> ia;
  if (add) ia = broadcast_index(add->dims(), out);
  const int64_t row = out.back();
  std::vector<double> v(ic.size());
  bool kept_in_row = false, finite_fill = false;
  for (size_t i = 0; i < ic.size(); ++i) {
    const bool filled = c.int_at(ic[i]) != 0;
    const double f = fill.real_at(ifl[i]);
    if (filled && !(f <= -1e4)) return std::nullopt;  // not a mask that hides keys
    finite_fill = finite_fill || (filled && !std::isinf(f));
    kept_in_row = kept_in_row || !filled;
    v[i] = (filled ? f : 0.0) + (add ? add->real_at(ia[i]) : 0.0);
    if ((static_cast<int64_t>(i) + 1) % row == 0) {
      if (!kept_in_row && finite_fill) return std::nullopt;  // ONNX gives a uniform row here
      kept_in_row = finite_fill = false;
    }
  }
  return Array::of_reals(add ? add->elem() : n.elem(0), out, v);
}

// softmax(q @ kt * scale + mask) @ v, found by the fusion pass (inputs q, kt, v, the additive
// mask or "", and the condition and fill value of a masked_fill): duet's attention when the
// shapes are attention's (q [B,H,Lq,D], kt [B,H,D,Lk], v [B,H,Lk,D], or [B*H, L, D] each; one kv
// head or as many as q), else the ops it was made of, with a note saying so.
Status map_attention(Node& n) {
  // A plain float and a flag, not an optional (GCC 12 warns of the optional, wrongly).
  const bool has_scale = n.has_attr("scale");
  const float scale = n.attr_float("scale", 1.0f);
  // The mask, known or not: the additive one, or the masked_fill's additive form.
  std::optional<Array> filled;
  if (n.has(4)) {
    if (!n.known(4) || !n.known(5))
      return n.unsupported(
          "masked_fill (Where) of attention scores with a condition computed at run time (a "
          "condition known at import, such as a mask made from a constant buffer, works)");
    if (n.has(3) && !n.known(3))
      return n.unsupported("masked_fill (Where) after an additive mask computed at run time");
    filled = masked_fill_as_mask(n, n.has(3) ? &n.array(3) : nullptr);
    if (!filled)
      return n.unsupported(
          "masked_fill (Where) whose fill value is not -inf or at most -1e4, or that hides every "
          "key of a row");
  }
  const bool has_mask = n.has(3) || filled;
  const Array* known_mask = filled ? &*filled : n.has(3) && n.known(3) ? &n.array(3) : nullptr;
  const std::vector<int64_t> mask_shape = filled     ? filled->dims()
                                          : has_mask ? n.shape(3)
                                                     : std::vector<int64_t>{};
  auto runtime_mask = [&]() -> Result<ValueId> {
    return filled ? n.constant(*filled, "mask") : n.runtime(3);
  };
  std::vector<int64_t> q = n.shape(0), kt = n.shape(1), v = n.shape(2);
  // Heads folded into the batch ([B*H, L, D], as nn.MultiheadAttention exports): one batch of
  // B*H heads, through reshape views.
  const bool folded =
      q.size() == 3 && kt.size() == 3 && v.size() == 3 && (!has_mask || mask_shape.size() <= 3);
  if (folded)
    for (auto* s : {&q, &kt, &v}) s->insert(s->begin(), 1);
  bool fits = q.size() == 4 && kt.size() == 4 && v.size() == 4 && n.elem(0) == n.elem(1) &&
              n.elem(0) == n.elem(2) && elem_is_float(n.elem(0)) && n.elem(0) != kDouble;
  fits = fits && kt[0] == q[0] && v[0] == q[0] && kt[1] == v[1] && (kt[1] == q[1] || kt[1] == 1) &&
         kt[2] == q[3] && v[3] == q[3] && v[2] == kt[3];
  DUET_ASSIGN_OR_RETURN(ValueId qv, n.runtime(0));
  DUET_ASSIGN_OR_RETURN(ValueId ktv, n.runtime(1));
  DUET_ASSIGN_OR_RETURN(ValueId vv, n.runtime(2));
  bool causal = false;
  ValueId mask;
  if (has_mask) {
    if (fits && known_mask) causal = is_causal_mask(*known_mask, q[2], kt[3]);
    if (!causal) {
      DUET_ASSIGN_OR_RETURN(mask, runtime_mask());
      if (fits && folded) {
        std::vector<int64_t> m = mask_shape;
        m.insert(m.begin(), 4 - m.size(), 1);
        mask = n.reshape(mask, m, "mask4");
      }
    }
    if (fits && mask.valid()) {  // the shapes are read only when they have rank 4
      const TensorDesc& m = n.desc(mask);
      const int64_t target[4] = {q[0], q[1], q[2], kt[3]};
      fits = (m.dtype == DType::f32 || m.dtype == n.desc(qv).dtype) && broadcast_to(m, target).ok();
    }
  }
  if (fits) {
    OpAttrs t;
    t.dim0 = 2;
    t.dim1 = 3;
    if (folded) {
      qv = n.reshape(qv, q, "q4");
      ktv = n.reshape(ktv, kt, "kt4");
      vv = n.reshape(vv, v, "v4");
    }
    ValueId k = n.op(OpKind::transpose, {ktv}, t, "k");
    OpAttrs at;
    at.scale = scale;
    at.causal = causal;
    std::vector<ValueId> ins = {qv, k, vv};
    if (mask.valid()) ins.push_back(mask);
    if (folded) {
      ValueId y = n.op(OpKind::attention, ins, at, "attention");
      n.set(0, n.reshape(y, {q[1], q[2], q[3]}), n.elem(0));
    } else {
      n.set(0, n.op(OpKind::attention, ins, at), n.elem(0));
    }
    return {};
  }
  // Not attention's shapes: the ops as the model wrote them, and the note says so.
  n.note("the Attention pattern runs as matmul, softmax and matmul: q " + dims_str(n.shape(0)) +
         ", k^T " + dims_str(n.shape(1)) + ", v " + dims_str(n.shape(2)) +
         (has_mask ? ", mask " + dims_str(mask_shape) : std::string()) +
         " are not attention's shapes and types");
  if (has_mask) {  // as the model gives it (not the rank-4 view made for attention)
    DUET_ASSIGN_OR_RETURN(mask, runtime_mask());
  }
  ValueId s = n.op(OpKind::matmul, {qv, ktv}, {}, "scores");
  if (has_scale) {
    OpAttrs sc;
    sc.alpha = scale;
    s = n.op(OpKind::scale, {s}, sc, "scaled");
  }
  if (mask.valid()) s = n.op(OpKind::add, {s, mask}, {}, "masked");
  ValueId p = n.op(OpKind::softmax, {s}, {}, "probs");
  n.set(0, n.op(OpKind::matmul, {p, vv}), n.elem(0));
  return {};
}

// NegativeLogLikelihoodLoss of log-probabilities `x` [N, C, d...] computed at run time and the
// class ids of input `t_at` (known or at run time), weighted by input `w_at` (known) when
// present. Each element's -w[t] * x[n, t, d...] is x (its class dim moved last, a permute view)
// times a row of a known table picked by the target (duet's embedding): row t holds -w[t] at
// column t and 0 elsewhere, the ignore_index's row only zeros; reduce_sum over the classes sums
// one product and zeros, exact. `mean` divides the sum by the weights of the targets (the same
// lookup in a [V, 1] table of weights). An infinite or NaN x in a class not picked gives NaN.
Result<ValueId> nll(Node& n, ValueId x, int elem, const std::vector<int64_t>& xd, size_t t_at,
                    size_t w_at) {
  const int r = static_cast<int>(xd.size());
  if (r < 2) return n.invalid("input of rank " + std::to_string(r) + " (expected [N, C, ...])");
  const int64_t c = xd[1];
  std::vector<int64_t> td = xd;
  td.erase(td.begin() + 1);
  if (n.shape(t_at) != td)
    return n.invalid("target of shape " + dims_str(n.shape(t_at)) + " for input " + dims_str(xd));
  const std::string reduction = n.attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return n.invalid("reduction '" + reduction + "'");
  std::vector<double> w(static_cast<size_t>(c), 1.0);
  const bool weighted = n.has(w_at);
  const bool run_time_w = weighted && !n.known(w_at);
  if (weighted) {
    if (n.shape(w_at) != std::vector<int64_t>{c})
      return n.invalid("weights of shape " + dims_str(n.shape(w_at)));
    if (n.elem(w_at) != elem) return n.invalid("weights of type " + elem_name(n.elem(w_at)));
    if (!run_time_w) w = n.array(w_at).reals();
  }
  // The ids the targets may hold: [0, C) and the ignore_index, which may lie outside it (rows of
  // zeros appended; a negative one read through negative_ids).
  const bool ignores = n.has_attr("ignore_index");
  const int64_t ii = n.attr_int("ignore_index", 0);
  int64_t rows = c;
  bool negative = false;
  if (ignores && ii >= c) rows = ii + 1;
  if (ignores && ii < 0) {
    rows = c - ii;
    negative = true;
  }
  if (rows - c > 4096)
    return n.unsupported("ignore_index " + std::to_string(ii) + " far outside the " +
                         std::to_string(c) + " classes");
  const int64_t ignored_row = !ignores ? -1 : ii < 0 ? rows + ii : ii;
  std::vector<double> pick(static_cast<size_t>(rows * c), 0.0), weight(static_cast<size_t>(rows));
  for (int64_t k = 0; k < c; ++k) {
    if (k == ignored_row) continue;
    pick[static_cast<size_t>(k * c + k)] = -w[static_cast<size_t>(k)];
    weight[static_cast<size_t>(k)] = w[static_cast<size_t>(k)];
  }
  DUET_TRY(n.room_for({rows, c}, elem, 8));
  // Weights computed at run time: the tables made by the run from the 0/1 pattern of picks
  // (diag(1) with the ignored row zero) times w as a row, exact.
  ValueId w_row, pattern;
  if (run_time_w) {
    for (double& v : pick) v = v != 0.0 ? 1.0 : 0.0;
    DUET_ASSIGN_OR_RETURN(pattern, n.constant(Array::of_reals(elem, {rows, c}, pick), "pattern"));
    DUET_ASSIGN_OR_RETURN(ValueId wv, n.runtime(w_at));
    w_row = n.reshape(wv, {1, c}, "weight_row");
  }
  ValueId table;
  if (run_time_w) {
    OpAttrs neg;
    neg.alpha = -1.0f;
    table = n.op(OpKind::mul, {pattern, n.op(OpKind::scale, {w_row}, neg, "negated_weights")}, {},
                 "picks");
  } else {
    DUET_ASSIGN_OR_RETURN(table, n.constant(Array::of_reals(elem, {rows, c}, pick), "picks"));
  }
  DUET_ASSIGN_OR_RETURN(ValueId ids, n.runtime(t_at));
  OpAttrs lookup;
  lookup.negative_ids = negative;
  ValueId picked = n.op(OpKind::embedding, {table, ids}, lookup, "picked");
  if (r > 2) {
    OpAttrs perm;
    perm.perm.push_back(0);
    for (int d = 2; d < r; ++d) perm.perm.push_back(d);
    perm.perm.push_back(1);
    x = n.op(OpKind::permute, {x}, perm, "classes_last");
  }
  OpAttrs last;
  last.axes = {r - 1};
  ValueId loss =
      n.op(OpKind::reduce_sum, {n.op(OpKind::mul, {x, picked}, {}, "products")}, last, "losses");
  if (reduction == "none") return n.reshape(loss, td);
  OpAttrs all;
  for (int d = 0; d < r; ++d) all.axes.push_back(d);
  ValueId total = n.op(OpKind::reduce_sum, {loss}, all, "total");
  if (reduction == "sum") return n.reshape(total, {});
  if (!weighted && !ignores) {
    int64_t count = 1;
    for (int64_t d : td) count *= d;
    OpAttrs at;
    at.alpha = static_cast<float>(1.0 / static_cast<double>(count));
    return n.reshape(n.op(OpKind::scale, {total}, at, "mean"), {});
  }
  ValueId wt;
  if (run_time_w) {
    OpAttrs row;
    row.axes = {1};
    wt = n.op(OpKind::reduce_sum, {n.op(OpKind::mul, {pattern, w_row}, {}, "weight_diag")}, row,
              "weight_table");
  } else {
    DUET_ASSIGN_OR_RETURN(wt, n.constant(Array::of_reals(elem, {rows, 1}, weight), "weight_table"));
  }
  ValueId wsum = n.op(OpKind::reduce_sum, {n.op(OpKind::embedding, {wt, ids}, lookup, "weights")},
                      all, "weight_sum");
  return n.reshape(n.op(OpKind::div, {total, wsum}, {}, "mean"), {});
}

Status map_nll_loss(Node& n) {
  DUET_TRY(float_input(n, 0));
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  DUET_ASSIGN_OR_RETURN(ValueId y, nll(n, x, n.elem(0), n.shape(0), 1, 2));
  n.set(0, y, n.elem(0));
  return {};
}

// SoftmaxCrossEntropyLoss: LogSoftmax over the classes (dim 1; as map_log_softmax lowers it),
// its optional log_prob output, then the NLL of it.
Status map_softmax_cross_entropy(Node& n) {
  DUET_TRY(float_input(n, 0));
  const std::vector<int64_t> dims = n.shape(0);
  if (dims.size() < 2) return n.invalid("scores of rank " + std::to_string(dims.size()));
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  OpAttrs red;
  red.axes = {1};
  ValueId m = n.op(OpKind::reduce_max, {x}, red, "max");
  ValueId d = n.op(OpKind::sub, {x, m}, {}, "shifted");
  ValueId s = n.op(OpKind::reduce_sum, {n.op(OpKind::exp, {d}, {}, "exp")}, red, "sum");
  const bool lp_out = n.num_outputs() > 1 && n.output_used(1);
  ValueId lp = n.op(OpKind::sub, {d, n.op(OpKind::log, {s}, {}, "log_sum")}, {},
                    lp_out ? "" : "log_prob", lp_out ? 1 : 0);
  if (lp_out) n.set(1, lp, n.elem(0));
  DUET_ASSIGN_OR_RETURN(ValueId y, nll(n, lp, n.elem(0), dims, 1, 2));
  n.set(0, y, n.elem(0));
  return {};
}

// LRN: x / (bias + alpha / size * s)^beta, s the sum of the squares over the channels
// [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)] (those that exist): pow 2, then a matmul
// by a known 0/1 band matrix [C, C] with x viewed as [N, C, pixels] (batch broadcast), scale, add,
// pow -beta, mul.
Status map_lrn(Node& n) {
  DUET_TRY(float_input(n, 0));
  const std::vector<int64_t> dims = n.shape(0);
  if (dims.size() < 3) return n.invalid("an input of rank " + std::to_string(dims.size()));
  const int64_t size = n.attr_int("size", 0);
  if (size < 1) return n.invalid("size " + std::to_string(size));
  const double alpha = n.attr_float("alpha", 1e-4f), beta = n.attr_float("beta", 0.75f);
  const double bias = n.attr_float("bias", 1.0f);
  const int64_t c = dims[1], before = (size - 1) / 2, after = size - 1 - before;
  DUET_TRY(n.room_for({c, c}, n.elem(0), 8));
  std::vector<double> band(static_cast<size_t>(c * c), 0.0);
  for (int64_t i = 0; i < c; ++i)
    for (int64_t j = std::max<int64_t>(0, i - before); j <= std::min(c - 1, i + after); ++j)
      band[static_cast<size_t>(i * c + j)] = 1.0;
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  DUET_ASSIGN_OR_RETURN(ValueId w, n.constant(Array::of_reals(n.elem(0), {c, c}, band), "band"));
  OpAttrs sq, scaled, power;
  sq.exponent = 2.0f;
  scaled.alpha = static_cast<float>(alpha / static_cast<double>(size));
  power.exponent = static_cast<float>(-beta);
  ValueId squares = n.reshape(n.op(OpKind::pow, {x}, sq, "squared"),
                              {dims[0], c, product(dims, 2, dims.size())}, "pixels");
  ValueId sums = n.reshape(n.op(OpKind::matmul, {w, squares}, {}, "window_sums"), dims, "sums");
  DUET_ASSIGN_OR_RETURN(ValueId b, n.constant(Array::of_reals(n.elem(0), {1}, {bias}), "bias"));
  ValueId base = n.op(OpKind::add, {n.op(OpKind::scale, {sums}, scaled, "scaled"), b}, {}, "base");
  n.set(0, n.op(OpKind::mul, {x, n.op(OpKind::pow, {base}, power, "divisor")}), n.elem(0));
  return {};
}

// RNN, GRU and LSTM (forward, reverse or bidirectional), unrolled over the sequence into
// matmuls and element-wise ops as ONNX defines them, with the default activations (sigmoid for
// the gates, tanh for the rest): per direction, X W^T for every step in one matmul (plus the
// biases), then per step H R^T added and the gates taken as slice views; Y stacked by concat
// (bidirectional: the forward pass, then the reverse one with its own W, R, B and initial states,
// the two concatenated along Y's and Y_h's direction axis). GRU's linear_before_reset both ways,
// LSTM's peepholes. sequence_lens must be known and every sequence full length; other
// activations, clip and input_forget are refused.
enum class Cell { rnn, gru, lstm };
Status recurrent(Node& n, Cell cell) {
  const std::string type(n.type());
  const int64_t gates = cell == Cell::rnn ? 1 : cell == Cell::gru ? 3 : 4;
  for (size_t i = 0; i < 3; ++i) DUET_TRY(float_input(n, i));
  const std::string dir = n.attr_string("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    return n.invalid(type + " with direction '" + dir + "' (forward, reverse or bidirectional)");
  const int64_t dirs = dir == "bidirectional" ? 2 : 1;
  if (const auto* a = n.attr("activations")) {
    static const char* const kDefaults[3][3] = {
        {"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
    const int want = cell == Cell::rnn ? 1 : cell == Cell::gru ? 2 : 3;
    bool same = a->strings_size() == want;
    for (int k = 0; same && k < want; ++k)
      same = a->strings(k) == kDefaults[static_cast<int>(cell)][k];
    if (!same) return n.unsupported(type + " with activations other than the defaults");
  }
  if (n.has_attr("clip")) return n.unsupported(type + " with clip");
  if (n.attr_int("input_forget", 0) != 0) return n.unsupported(type + " with input_forget");
  const bool batch_first = n.attr_int("layout", 0) != 0;
  const bool lbr = n.attr_int("linear_before_reset", 0) != 0;
  const std::vector<int64_t> xd = n.shape(0), wd = n.shape(1), rd = n.shape(2);
  if (xd.size() != 3 || wd.size() != 3 || rd.size() != 3 || wd[0] != dirs || rd[0] != dirs)
    return n.invalid("X, W and R of shapes " + dims_str(xd) + ", " + dims_str(wd) + ", " +
                     dims_str(rd) + " (rank 3, " + std::to_string(dirs) + " direction(s))");
  const int64_t steps = xd[batch_first ? 1 : 0], batch = xd[batch_first ? 0 : 1], in = xd[2];
  const int64_t hidden = n.attr_int("hidden_size", rd[2]), gh = gates * hidden;
  if (wd[1] != gh || wd[2] != in || rd[1] != gh || rd[2] != hidden)
    return n.invalid("W " + dims_str(wd) + " and R " + dims_str(rd) + " for hidden_size " +
                     std::to_string(hidden) + " and " + std::to_string(in) + " inputs");
  if (n.has(4)) {
    DUET_ASSIGN_OR_RETURN(std::vector<int64_t> lens, n.ints(4, "sequence_lens"));
    for (int64_t l : lens)
      if (l != steps)
        return n.unsupported(type + " with a sequence length of " + std::to_string(l) +
                             " in a sequence of " + std::to_string(steps) +
                             " (duet runs every sequence to its full length)");
  }
  for (size_t i = 3; i < n.num_inputs(); ++i)
    if (i != 4 && n.has(i)) DUET_TRY(float_input(n, i));
  const int elem = n.elem(0);
  auto cut = [&](ValueId v, int axis, int64_t start, int64_t stop, std::string_view what) {
    OpAttrs at;
    at.axis = axis;
    at.start = start;
    at.stop = stop;
    return n.op(OpKind::slice, {v}, at, what);
  };
  auto apply1 = [&](OpKind k, ValueId v, std::string_view what) { return n.op(k, {v}, {}, what); };
  auto apply2 = [&](OpKind k, ValueId a, ValueId b, std::string_view what) {
    return n.op(k, {a, b}, {}, what);
  };
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  DUET_ASSIGN_OR_RETURN(ValueId wv, n.runtime(1));
  DUET_ASSIGN_OR_RETURN(ValueId rv, n.runtime(2));
  const ValueId rows = n.reshape(x, {xd[0] * xd[1], in}, "rows");
  struct Pass {
    std::vector<ValueId> ys;  // h after each step, by time
    ValueId h;
    std::optional<ValueId> c;
  };
  auto pass = [&](int64_t d, bool reverse) -> Result<Pass> {
    // One direction's slice (along axis 0 of W, R, B and P; the direction axis of the states).
    const std::string tag = dirs == 1 ? "" : reverse ? "back_" : "fwd_";
    auto part = [&](ValueId v, int axis, std::string_view what) {
      return dirs == 1 ? v : cut(v, axis, d, d + 1, tag + std::string(what) + "_dir");
    };
    ValueId w = n.reshape(part(wv, 0, "w"), {gh, in}, tag + "w");
    ValueId r = n.reshape(part(rv, 0, "r"), {gh, hidden}, tag + "r");
    OpAttrs tb;
    tb.transpose_b = true;
    // X W^T for every step: [steps * batch, gh] viewed as X's leading dims.
    ValueId xw = n.op(OpKind::matmul, {rows, w}, tb, tag + "xw");
    xw = n.reshape(xw, {xd[0], xd[1], gh}, tag + "xw_steps");
    std::optional<ValueId> rbh;  // GRU: R's bias of the h gate, added apart
    if (n.has(3)) {
      if (n.shape(3) != std::vector<int64_t>{dirs, 2 * gh})
        return n.invalid("B of shape " + dims_str(n.shape(3)) + " (expected [" +
                         std::to_string(dirs) + ", " + std::to_string(2 * gh) + "])");
      DUET_ASSIGN_OR_RETURN(ValueId bv, n.runtime(3));
      ValueId b = part(bv, 0, "b");
      ValueId wb = cut(b, 1, 0, gh, "wb"), rb = cut(b, 1, gh, 2 * gh, "rb");
      ValueId bias;
      if (cell == Cell::gru) {
        ValueId zr = apply2(OpKind::add, cut(wb, 1, 0, 2 * hidden, "wb_zr"),
                            cut(rb, 1, 0, 2 * hidden, "rb_zr"), "b_zr");
        OpAttrs cat;
        cat.axis = 1;
        bias = n.op(OpKind::concat, {zr, cut(wb, 1, 2 * hidden, gh, "wb_h")}, cat, "bias");
        rbh = cut(rb, 1, 2 * hidden, gh, "rb_h");
      } else {
        bias = apply2(OpKind::add, wb, rb, "bias");
      }
      xw = apply2(OpKind::add, xw, bias, "xw_b");
    }
    auto state = [&](size_t i, std::string_view what) -> Result<std::optional<ValueId>> {
      if (!n.has(i)) return std::optional<ValueId>{};
      const std::vector<int64_t> want = batch_first ? std::vector<int64_t>{batch, dirs, hidden}
                                                    : std::vector<int64_t>{dirs, batch, hidden};
      if (n.shape(i) != want)
        return n.invalid(std::string(what) + " of shape " + dims_str(n.shape(i)) + " (expected " +
                         dims_str(want) + ")");
      DUET_ASSIGN_OR_RETURN(ValueId v, n.runtime(i));
      return std::optional<ValueId>{
          n.reshape(part(v, batch_first ? 1 : 0, what), {batch, hidden}, tag + std::string(what))};
    };
    DUET_ASSIGN_OR_RETURN(std::optional<ValueId> h, state(5, "initial_h"));
    std::optional<ValueId> c, pi, po, pf;
    if (cell == Cell::lstm) {
      DUET_ASSIGN_OR_RETURN(c, state(6, "initial_c"));
      if (n.has(7)) {
        if (n.shape(7) != std::vector<int64_t>{dirs, 3 * hidden})
          return n.invalid("P of shape " + dims_str(n.shape(7)));
        DUET_ASSIGN_OR_RETURN(ValueId pv, n.runtime(7));
        ValueId p = part(pv, 0, "p");
        pi = cut(p, 1, 0, hidden, "p_i");
        po = cut(p, 1, hidden, 2 * hidden, "p_o");
        pf = cut(p, 1, 2 * hidden, 3 * hidden, "p_f");
      }
    }
    ValueId one;
    if (cell == Cell::gru) {
      DUET_ASSIGN_OR_RETURN(one, n.constant(Array::of_reals(elem, {1}, {1.0}), "one"));
    }
    const ValueId r_h = cell == Cell::gru ? cut(r, 0, 2 * hidden, gh, "r_h") : r;
    Pass out;
    std::vector<ValueId>& ys = out.ys;
    ys.resize(static_cast<size_t>(steps));
    for (int64_t k = 0; k < steps; ++k) {
      const int64_t t = reverse ? steps - 1 - k : k;
      const std::string at = tag + "t" + std::to_string(t);
      ValueId g = n.reshape(cut(xw, batch_first ? 1 : 0, t, t + 1, at + "_x"), {batch, gh}, at);
      std::optional<ValueId> hr;
      if (h) hr = n.op(OpKind::matmul, {*h, r}, tb, at + "_hr");
      if (cell == Cell::rnn) {
        h = apply1(OpKind::tanh, hr ? apply2(OpKind::add, g, *hr, at + "_sum") : g, at + "_h");
      } else if (cell == Cell::lstm) {
        if (hr) g = apply2(OpKind::add, g, *hr, at + "_sum");
        ValueId gi = cut(g, 1, 0, hidden, at + "_i"), go = cut(g, 1, hidden, 2 * hidden, at + "_o");
        ValueId gf = cut(g, 1, 2 * hidden, 3 * hidden, at + "_f");
        ValueId gc = cut(g, 1, 3 * hidden, gh, at + "_c");
        if (pi && c) {
          gi = apply2(OpKind::add, gi, apply2(OpKind::mul, *pi, *c, at + "_pic"), at + "_ip");
          gf = apply2(OpKind::add, gf, apply2(OpKind::mul, *pf, *c, at + "_pfc"), at + "_fp");
        }
        ValueId ig = apply2(OpKind::mul, apply1(OpKind::sigmoid, gi, at + "_is"),
                            apply1(OpKind::tanh, gc, at + "_ct"), at + "_in");
        c = c ? apply2(
                    OpKind::add,
                    apply2(OpKind::mul, apply1(OpKind::sigmoid, gf, at + "_fs"), *c, at + "_keep"),
                    ig, at + "_cell")
              : ig;
        if (po) go = apply2(OpKind::add, go, apply2(OpKind::mul, *po, *c, at + "_poc"), at + "_op");
        h = apply2(OpKind::mul, apply1(OpKind::sigmoid, go, at + "_os"),
                   apply1(OpKind::tanh, *c, at + "_cs"), at + "_h");
      } else {
        ValueId zr = cut(g, 1, 0, 2 * hidden, at + "_zr_x");
        if (hr) zr = apply2(OpKind::add, zr, cut(*hr, 1, 0, 2 * hidden, at + "_zr_h"), at + "_zr");
        zr = apply1(OpKind::sigmoid, zr, at + "_zrs");
        ValueId z = cut(zr, 1, 0, hidden, at + "_z"),
                rg = cut(zr, 1, hidden, 2 * hidden, at + "_r");
        ValueId hx = cut(g, 1, 2 * hidden, gh, at + "_hx");
        std::optional<ValueId> hh;  // what R adds to the h gate
        if (lbr) {
          std::optional<ValueId> rh;
          if (hr) rh = cut(*hr, 1, 2 * hidden, gh, at + "_rh");
          if (rh && rbh) rh = apply2(OpKind::add, *rh, *rbh, at + "_rhb");
          if (!rh) rh = rbh;
          if (rh) hh = apply2(OpKind::mul, rg, *rh, at + "_hh");
        } else {
          if (h)
            hh = n.op(OpKind::matmul, {apply2(OpKind::mul, rg, *h, at + "_rh"), r_h}, tb,
                      at + "_hh");
          if (hh && rbh) hh = apply2(OpKind::add, *hh, *rbh, at + "_hhb");
          if (!hh) hh = rbh;
        }
        ValueId cand =
            apply1(OpKind::tanh, hh ? apply2(OpKind::add, hx, *hh, at + "_hs") : hx, at + "_ht");
        ValueId next =
            apply2(OpKind::mul, apply2(OpKind::sub, one, z, at + "_1z"), cand, at + "_new");
        h = h ? apply2(OpKind::add, next, apply2(OpKind::mul, z, *h, at + "_old"), at + "_h")
              : next;
      }
      ys[static_cast<size_t>(t)] = *h;
    }
    out.h = *h;
    out.c = c;
    return out;
  };
  std::vector<Pass> passes;
  for (int64_t d = 0; d < dirs; ++d) {
    DUET_ASSIGN_OR_RETURN(Pass p, pass(d, dir == "reverse" || d == 1));
    passes.push_back(std::move(p));
  }
  // Y: [steps, dirs, batch, hidden] ([batch, steps, dirs, hidden] in layout 1): each direction's
  // steps concatenated, then the directions; Y_h and Y_c: [dirs, batch, hidden] ([batch, dirs,
  // hidden]).
  const std::vector<int64_t> one_step = batch_first ? std::vector<int64_t>{batch, 1, 1, hidden}
                                                    : std::vector<int64_t>{1, 1, batch, hidden};
  const std::vector<int64_t> last =
      batch_first ? std::vector<int64_t>{batch, 1, hidden} : std::vector<int64_t>{1, batch, hidden};
  const bool one_dir = passes.size() == 1;
  if (n.output_used(0)) {
    std::vector<ValueId> per_dir;
    for (size_t d = 0; d < passes.size(); ++d) {
      const std::string tag = one_dir ? "" : "dir" + std::to_string(d) + "_";
      const std::vector<ValueId>& ys = passes[d].ys;
      const bool is_y = one_dir && ys.size() == 1;  // the output itself
      std::vector<ValueId> parts;
      for (size_t t = 0; t < ys.size(); ++t)
        parts.push_back(n.reshape(ys[t], one_step, is_y ? "" : tag + "y" + std::to_string(t)));
      if (parts.size() == 1) {
        per_dir.push_back(parts[0]);
        continue;
      }
      OpAttrs cat;
      cat.axis = batch_first ? 1 : 0;
      per_dir.push_back(n.op(OpKind::concat, parts, cat, one_dir ? "" : tag + "y"));
    }
    if (one_dir) {
      n.set(0, per_dir[0], elem);
    } else {
      OpAttrs cat;
      cat.axis = batch_first ? 2 : 1;
      n.set(0, n.op(OpKind::concat, per_dir, cat), elem);
    }
  }
  auto final_state = [&](size_t out, bool cell_state) {
    std::vector<ValueId> parts;
    for (size_t d = 0; d < passes.size(); ++d) {
      const ValueId v = cell_state ? *passes[d].c : passes[d].h;
      parts.push_back(
          one_dir ? n.reshape(v, last, "", out)
                  : n.reshape(v, last, "state" + std::to_string(out) + "_dir" + std::to_string(d)));
    }
    if (one_dir) {
      n.set(out, parts[0], elem);
      return;
    }
    OpAttrs cat;
    cat.axis = batch_first ? 1 : 0;
    n.set(out, n.op(OpKind::concat, parts, cat, {}, out), elem);
  };
  if (n.output_used(1)) final_state(1, false);
  if (cell == Cell::lstm && n.output_used(2)) final_state(2, true);
  return {};
}
Status map_rnn(Node& n) {
  return recurrent(n, Cell::rnn);
}
Status map_gru(Node& n) {
  return recurrent(n, Cell::gru);
}
Status map_lstm(Node& n) {
  return recurrent(n, Cell::lstm);
}

const Mapping kNn[] = {
    {"Attention", map_attention},
    {"MatMul", map_matmul},
    {"Gemm", map_gemm},
    {"Softmax", map_softmax},
    {"LogSoftmax", map_log_softmax},
    {"LayerNormalization", map_layer_norm},
    {"InstanceNormalization", map_instance_norm},
    {"LRN", map_lrn},
    {"RNN", map_rnn},
    {"GRU", map_gru},
    {"LSTM", map_lstm},
    {"MeanVarianceNormalization", map_mvn},
    {"RmsNormalization", map_rms_norm},
    {"ReduceMean", map_reduce_mean},
    {"ReduceSum", map_reduce_sum},
    {"ReduceMax", map_reduce_max},
    {"ReduceMin", map_reduce_min},
    {"ReduceProd", map_reduce_prod},
    {"ReduceSumSquare", map_reduce_sum_square},
    {"ReduceL1", map_reduce_l1},
    {"ReduceL2", map_reduce_l2},
    {"ReduceLogSum", map_reduce_log_sum},
    {"ReduceLogSumExp", map_reduce_log_sum_exp},
    {"NegativeLogLikelihoodLoss", map_nll_loss},
    {"SoftmaxCrossEntropyLoss", map_softmax_cross_entropy},
};

}  // namespace

std::span<const Mapping> nn_mappings() {
  return kNn;
}

}  // namespace duet::onnx_import
