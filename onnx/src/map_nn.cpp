// Contractions, normalisations and softmax.
#include <algorithm>
#include <cmath>

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
  for (size_t k = 1; k < n.num_outputs(); ++k)
    if (n.output_used(k))
      return n.unsupported("the Mean and InvStdDev outputs (duet's layernorm returns Y only)");
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
enum class Red { sum, mean, max, min, sum_square, l1, l2, log_sum, log_sum_exp };

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
    const double init = r == Red::max ? -INFINITY : r == Red::min ? INFINITY : 0.0;
    std::vector<double> acc(static_cast<size_t>(product(kept, 0, kept.size())), init);
    std::vector<int64_t> at(dims.size(), 0);
    for (int64_t i = 0; i < a.numel(); ++i) {
      int64_t o = 0;
      for (size_t d = 0; d < dims.size(); ++d) o = o * kept[d] + (reduce[d] ? 0 : at[d]);
      const double v = red_pre(r, a.real_at(i));
      double& s = acc[static_cast<size_t>(o)];
      s = r == Red::max ? std::max(s, v) : r == Red::min ? std::min(s, v) : s + v;
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
    const OpKind k = r == Red::mean  ? OpKind::reduce_mean
                     : r == Red::max ? OpKind::reduce_max
                     : r == Red::min ? OpKind::reduce_min
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

// softmax(q @ kt * scale + mask) @ v, found by the fusion pass: duet's attention when the
// shapes are attention's (q [B,H,Lq,D], kt [B,H,D,Lk], v [B,H,Lk,D], one kv head or as many as
// q), else the ops it was made of.
Status map_attention(Node& n) {
  const std::optional<float> scale =
      n.has_attr("scale") ? std::optional<float>(n.attr_float("scale", 1.0f)) : std::nullopt;
  const bool has_mask = n.has(3);
  const std::vector<int64_t> q = n.shape(0), kt = n.shape(1), v = n.shape(2);
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
    if (fits && n.known(3)) causal = is_causal_mask(n.array(3), q[2], kt[3]);
    if (!causal) {
      DUET_ASSIGN_OR_RETURN(mask, n.runtime(3));
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
    ValueId k = n.op(OpKind::transpose, {ktv}, t, "k");
    OpAttrs at;
    at.scale = scale.value_or(1.0f);
    at.causal = causal;
    std::vector<ValueId> ins = {qv, k, vv};
    if (mask.valid()) ins.push_back(mask);
    n.set(0, n.op(OpKind::attention, ins, at), n.elem(0));
    return {};
  }
  // Not attention's shapes: the ops as the model wrote them.
  if (has_mask && !mask.valid()) {
    DUET_ASSIGN_OR_RETURN(mask, n.runtime(3));
  }
  ValueId s = n.op(OpKind::matmul, {qv, ktv}, {}, "scores");
  if (scale) {
    OpAttrs sc;
    sc.alpha = *scale;
    s = n.op(OpKind::scale, {s}, sc, "scaled");
  }
  if (mask.valid()) s = n.op(OpKind::add, {s, mask}, {}, "masked");
  ValueId p = n.op(OpKind::softmax, {s}, {}, "probs");
  n.set(0, n.op(OpKind::matmul, {p, vv}), n.elem(0));
  return {};
}

const Mapping kNn[] = {
    {"Attention", map_attention},
    {"MatMul", map_matmul},
    {"Gemm", map_gemm},
    {"Softmax", map_softmax},
    {"LayerNormalization", map_layer_norm},
    {"RmsNormalization", map_rms_norm},
    {"ReduceMean", map_reduce_mean},
    {"ReduceSum", map_reduce_sum},
    {"ReduceMax", map_reduce_max},
    {"ReduceMin", map_reduce_min},
    {"ReduceSumSquare", map_reduce_sum_square},
    {"ReduceL1", map_reduce_l1},
    {"ReduceL2", map_reduce_l2},
    {"ReduceLogSum", map_reduce_log_sum},
    {"ReduceLogSumExp", map_reduce_log_sum_exp},
};

}  // namespace

std::span<const Mapping> nn_mappings() {
  return kNn;
}

}  // namespace duet::onnx_import
