// Convolutions and batch normalisation, lowered onto duet's ops: a convolution is a matrix
// product of its weights with the input's patches (im2col), the patches gathered by strided
// slice views of the padded input and one concat per group, so every backend runs it with the
// kernels it has. A depthwise convolution is a sum of per-channel products of those views instead
// (a matrix product per channel would be thousands of tiny ones). BatchNormalization in inference
// is a per-channel scale and shift, folded into the convolution before it when the fusion pass
// paired them and their parameters are known.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "fold.h"
#include "importer.h"

namespace duet::onnx_import {

namespace {

int64_t product(const std::vector<int64_t>& d, size_t from = 0) {
  int64_t n = 1;
  for (size_t i = from; i < d.size(); ++i) n *= d[i];
  return n;
}

Status float_input(Node& n, size_t i) {
  if (elem_is_float(n.elem(i)) && n.elem(i) != kDouble) return {};
  return n.unsupported(std::string(n.type()) + " of " + elem_name(n.elem(i)));
}

// Where each spatial dim's windows lie: their size, stride, dilation, the padding before and after,
// and the output size.
struct Window {
  int64_t in = 0, k = 1, stride = 1, dil = 1, pad_begin = 0, pad_end = 0, out = 0;
  int64_t pad_end_given = 0;  // pad_end before ceil_mode extends it
};

// An ints attribute of `count` values (strides, dilations, pads), each `dflt` when it is absent.
Result<std::vector<int64_t>> attr_list(Node& n, const char* name, int64_t dflt, size_t count) {
  std::vector<int64_t> v = n.attr_ints(name).value_or(std::vector<int64_t>(count, dflt));
  if (v.size() != count)
    return n.invalid(std::string(name) + " has " + std::to_string(v.size()) + " values, expected " +
                     std::to_string(count));
  return v;
}

Result<std::vector<Window>> windows(Node& n, const std::vector<int64_t>& x,
                                    const std::vector<int64_t>& kernel, bool ceil = false) {
  const size_t sd = kernel.size();
  DUET_ASSIGN_OR_RETURN(std::vector<int64_t> strides, attr_list(n, "strides", 1, sd));
  DUET_ASSIGN_OR_RETURN(std::vector<int64_t> dils, attr_list(n, "dilations", 1, sd));
  DUET_ASSIGN_OR_RETURN(std::vector<int64_t> pads, attr_list(n, "pads", 0, 2 * sd));
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
      auto_pad != "SAME_LOWER")
    return n.invalid("auto_pad '" + auto_pad + "'");
  std::vector<Window> w(sd);
  for (size_t i = 0; i < sd; ++i) {
    Window& d = w[i];
    d.in = x[2 + i];
    d.k = kernel[i];
    d.stride = strides[i];
    d.dil = dils[i];
    if (d.k < 1 || d.stride < 1 || d.dil < 1)
      return n.invalid("kernel " + std::to_string(d.k) + ", stride " + std::to_string(d.stride) +
                       ", dilation " + std::to_string(d.dil) + " (each must be >= 1)");
    const int64_t span = d.dil * (d.k - 1) + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      d.out = (d.in + d.stride - 1) / d.stride;
      const int64_t total = std::max<int64_t>(0, (d.out - 1) * d.stride + span - d.in);
      const int64_t small = total / 2;
      d.pad_begin = auto_pad == "SAME_UPPER" ? small : total - small;
      d.pad_end = total - d.pad_begin;
      d.pad_end_given = d.pad_end;
    } else {
      if (auto_pad == "NOTSET") {
        d.pad_begin = pads[i];
        d.pad_end = pads[sd + i];
      }
      if (d.pad_begin < 0 || d.pad_end < 0) return n.invalid("negative pads");
      const int64_t room = d.in + d.pad_begin + d.pad_end - span;
      d.out = room < 0 ? 0 : (ceil ? (room + d.stride - 1) / d.stride : room / d.stride) + 1;
      // ceil_mode: a last window that would start in the end padding or past it is dropped.
      if (ceil && d.out > 1 && (d.out - 1) * d.stride >= d.in + d.pad_begin) --d.out;
      d.pad_end_given = d.pad_end;
      // The windows past the padded end read padding too (the pool says what it holds).
      d.pad_end = std::max(d.pad_end, (d.out - 1) * d.stride + span - d.in - d.pad_begin);
    }
    if (d.out < 1)
      return n.invalid("a window of " + std::to_string(span) + " does not fit spatial dim " +
                       std::to_string(i) + " of size " + std::to_string(d.in) +
                       " with its padding");
  }
  return w;
}

// x with `before` and `after` elements of `value` added along `axis`: a concat with constants.
Result<ValueId> pad_axis(Node& n, ValueId x, int axis, int64_t before, int64_t after, double value,
                         int elem, std::optional<std::string> purpose = std::nullopt) {
  if (before == 0 && after == 0) return x;
  // A copy of x's dims: adding the constants grows the graph's values, which moves them.
  const auto xd = n.desc(x).dims();
  const std::vector<int64_t> x_dims(xd.begin(), xd.end());
  auto filler = [&](int64_t size, const char* side) -> Result<ValueId> {
    std::vector<int64_t> dims = x_dims;
    dims[static_cast<size_t>(axis)] = size;
    DUET_TRY(n.room_for(dims, elem, 8));
    const std::vector<double> v(static_cast<size_t>(product(dims)), value);
    return n.constant(Array::of_reals(elem, dims, v), "pad" + std::to_string(axis) + side);
  };
  std::vector<ValueId> parts;
  if (before > 0) {
    DUET_ASSIGN_OR_RETURN(ValueId c, filler(before, "_begin"));
    parts.push_back(c);
  }
  parts.push_back(x);
  if (after > 0) {
    DUET_ASSIGN_OR_RETURN(ValueId c, filler(after, "_end"));
    parts.push_back(c);
  }
  OpAttrs at;
  at.axis = axis;
  return n.op(OpKind::concat, parts, at, purpose.value_or("padded" + std::to_string(axis)));
}

// The padded input viewed at kernel tap `tap` (row-major over the kernel's dims): one strided
// slice view per spatial dim.
ValueId tap_view(Node& n, ValueId xp, const std::vector<Window>& w, int64_t tap,
                 const std::string& purpose) {
  std::vector<int64_t> pos(w.size());
  for (size_t i = w.size(); i-- > 0;) {
    pos[i] = tap % w[i].k;
    tap /= w[i].k;
  }
  ValueId v = xp;
  for (size_t i = 0; i < w.size(); ++i) {
    const int64_t full = w[i].in + w[i].pad_begin + w[i].pad_end;
    OpAttrs at;
    at.axis = static_cast<int>(2 + i);
    at.start = pos[i] * w[i].dil;
    at.step = w[i].stride;
    at.stop = at.start + (w[i].out - 1) * w[i].stride + 1;
    if (at.start == 0 && at.step == 1 && at.stop == full) continue;
    v = n.op(OpKind::slice, {v}, at, purpose + "/d" + std::to_string(i));
  }
  return v;
}

// The folded parameters of a convolution: weights and bias known at import (with a batch
// normalisation applied), or null to read them from the node at run time.
struct Folded {
  std::shared_ptr<Array> w, b;
};

// Weights and bias with BatchNormalization folded in: w' = w * s, b' = (b - mean) * s + beta,
// s = gamma / sqrt(var + eps), per output channel. Every input known, else nullopt.
std::optional<Folded> fold_batch_norm(Node& n, size_t w_at, size_t b_at, size_t bn_at, float eps) {
  if (!n.known(w_at) || (n.has(b_at) && !n.known(b_at))) return std::nullopt;
  for (size_t k = 0; k < 4; ++k)
    if (!n.has(bn_at + k) || !n.known(bn_at + k)) return std::nullopt;
  const Array& w = n.array(w_at);
  const int64_t m = w.dims()[0], per = w.numel() / std::max<int64_t>(m, 1);
  for (size_t k = 0; k < 4; ++k)
    if (n.array(bn_at + k).numel() != m) return std::nullopt;
  std::vector<double> wv = w.reals(), bv(static_cast<size_t>(m), 0.0);
  if (n.has(b_at)) bv = n.array(b_at).reals();
  const std::vector<double> gamma = n.array(bn_at).reals(), beta = n.array(bn_at + 1).reals(),
                            mean = n.array(bn_at + 2).reals(), var = n.array(bn_at + 3).reals();
  for (int64_t c = 0; c < m; ++c) {
    const auto u = static_cast<size_t>(c);
    const double s = gamma[u] / std::sqrt(var[u] + static_cast<double>(eps));
    for (int64_t j = 0; j < per; ++j) wv[static_cast<size_t>(c * per + j)] *= s;
    bv[u] = (bv[u] - mean[u]) * s + beta[u];
  }
  Folded f;
  f.w = std::make_shared<Array>(Array::of_reals(w.elem(), w.dims(), wv));
  f.b = std::make_shared<Array>(Array::of_reals(w.elem(), {m}, bv));
  return f;
}

// ConvTranspose's convolution: its input already spread and padded, its weights already
// flipped and regrouped as a Conv's [M, C/group, kernel...], stride 1, no padding.
struct ConvSource {
  ValueId x, w;
  std::vector<int64_t> xd, wd, dilations;
};

// Conv over 1 or 2 spatial dims. `folded` replaces the node's W and B when given, `src` its X and
// W and window. The last op takes the node's output name when `fin` is empty, else the purpose
// `fin`.
Result<ValueId> lower_conv(Node& n, const Folded& folded, std::string_view fin,
                           const ConvSource* src = nullptr) {
  DUET_TRY(float_input(n, 0));
  const std::vector<int64_t> x = src ? src->xd : n.shape(0);
  const std::vector<int64_t> wd = src ? src->wd : folded.w ? folded.w->dims() : n.shape(1);
  if (x.size() < 3 || x.size() > 4 || wd.size() != x.size())
    return x.size() > 4 ? n.unsupported("Conv over " + std::to_string(x.size() - 2) +
                                        " spatial dims (duet tensors have rank <= 4: 1-D and 2-D)")
                        : n.invalid("X " + dims_str(x) + " and W " + dims_str(wd) +
                                    " must be [N, C, spatial...] and [M, C/group, kernel...]");
  if (n.elem(1) != n.elem(0)) return n.invalid("X and W of different types");
  const int64_t batch = x[0], c = x[1], m = wd[0], g = n.attr_int("group", 1);
  if (g < 1 || c % g != 0 || m % g != 0 || wd[1] != c / g)
    return n.invalid("group " + std::to_string(g) + " with X " + dims_str(x) + " and W " +
                     dims_str(wd));
  const std::vector<int64_t> kernel(wd.begin() + 2, wd.end());
  if (auto ks = n.attr_ints("kernel_shape"); ks && *ks != kernel)
    return n.invalid("kernel_shape " + dims_str(*ks) + " differs from W's " + dims_str(kernel));
  std::vector<Window> w;
  if (src) {
    for (size_t i = 0; i < kernel.size(); ++i) {
      Window d;
      d.in = x[2 + i];
      d.k = kernel[i];
      d.dil = src->dilations[i];
      d.out = d.in - d.dil * (d.k - 1);
      if (d.out < 1) return n.invalid("an output of size " + std::to_string(d.out));
      w.push_back(d);
    }
  } else {
    DUET_ASSIGN_OR_RETURN(w, windows(n, x, kernel));
  }
  const int elem = n.elem(0);
  ValueId xp;
  if (src) {
    xp = src->x;
  } else {
    DUET_ASSIGN_OR_RETURN(xp, n.runtime(0));
  }
  for (size_t i = 0; i < w.size(); ++i) {
    DUET_ASSIGN_OR_RETURN(
        xp, pad_axis(n, xp, static_cast<int>(2 + i), w[i].pad_begin, w[i].pad_end, 0.0, elem));
  }
  auto param = [&](const std::shared_ptr<Array>& a, size_t i,
                   const char* purpose) -> Result<ValueId> {
    if (a) return n.constant(*a, purpose);
    return n.runtime(i);
  };
  ValueId wv;
  if (src) {
    wv = src->w;
  } else {
    DUET_ASSIGN_OR_RETURN(wv, param(folded.w, 1, "weight"));
  }
  const int64_t taps = product(kernel), cg = c / g, mg = m / g;
  std::vector<int64_t> out = {batch, m};
  for (const Window& d : w) out.push_back(d.out);
  const int64_t pixels = product(out, 2);
  std::vector<int64_t> chan_shape(x.size() - 1, 1);  // [M, 1(, 1)]: broadcasts over space
  chan_shape[0] = m;

  ValueId y;
  if (cg == 1 && mg == 1 && taps > 1) {
    // Depthwise: y[n, c] = sum over taps of x_tap[n, c] * w[c, tap].
    ValueId wm = n.reshape(wv, {m, taps}, "weight_taps");
    for (int64_t t = 0; t < taps; ++t) {
      OpAttrs at;
      at.axis = 1;
      at.start = t;
      at.stop = t + 1;
      const std::string tag = "tap" + std::to_string(t);
      ValueId wt = n.reshape(n.op(OpKind::slice, {wm}, at, tag + "/w"), chan_shape, tag + "/wc");
      ValueId p = n.op(OpKind::mul, {tap_view(n, xp, w, t, tag), wt}, {}, tag + "/product");
      const bool last = t + 1 == taps && !(folded.b || n.has(2));
      y = y.valid() ? n.op(OpKind::add, {y, p}, {}, last ? fin : tag + "/sum") : p;
    }
  } else {
    // im2col: the patches of group j as rows (tap-major, then channel), times W reordered to
    // [M, taps * C/group] the same way.
    std::vector<int> perm = {0};
    for (size_t i = 0; i < kernel.size(); ++i) perm.push_back(static_cast<int>(2 + i));
    perm.push_back(1);
    ValueId wmat;
    if (!src && (folded.w || n.known(1))) {
      const Array& a = folded.w ? *folded.w : n.array(1);
      DUET_TRY(n.room_for(a.dims(), a.elem(), 16));
      std::vector<int64_t> p64(perm.begin(), perm.end());
      DUET_ASSIGN_OR_RETURN(wmat, n.constant(transpose(a, p64).reshaped({m, taps * cg}), "weight"));
    } else {
      OpAttrs pa;
      pa.perm = perm;
      wmat = n.reshape(n.op(OpKind::permute, {wv}, pa, "weight_tap_major"), {m, taps * cg},
                       "weight_matrix");
    }
    std::vector<ValueId> groups;
    for (int64_t j = 0; j < g; ++j) {
      const std::string tag = g == 1 ? std::string("cols") : "group" + std::to_string(j);
      ValueId xg = xp, wg = wmat;
      if (g > 1) {
        OpAttrs at;
        at.axis = 1;
        at.start = j * cg;
        at.stop = (j + 1) * cg;
        xg = n.op(OpKind::slice, {xp}, at, tag + "/x");
        at.axis = 0;
        at.start = j * mg;
        at.stop = (j + 1) * mg;
        wg = n.op(OpKind::slice, {wmat}, at, tag + "/w");
      }
      std::vector<ValueId> views;
      for (int64_t t = 0; t < taps; ++t)
        views.push_back(tap_view(n, xg, w, t, tag + "/tap" + std::to_string(t)));
      ValueId cols = views[0];
      if (views.size() > 1) {
        OpAttrs at;
        at.axis = 1;
        cols = n.op(OpKind::concat, views, at, tag);
      }
      cols = n.reshape(cols, {batch, taps * cg, pixels}, tag + "/matrix");
      groups.push_back(n.op(OpKind::matmul, {wg, cols}, {}, tag + "/product"));
    }
    y = groups[0];
    if (groups.size() > 1) {
      OpAttrs at;
      at.axis = 1;
      y = n.op(OpKind::concat, groups, at, "groups");
    }
    y = n.reshape(y, out, folded.b || n.has(2) ? std::string_view("spatial") : fin);
  }
  if (folded.b || n.has(2)) {
    DUET_ASSIGN_OR_RETURN(ValueId b, param(folded.b, 2, "bias"));
    y = n.op(OpKind::add, {y, n.reshape(b, chan_shape, "bias_channels")}, {}, fin);
  }
  return y;
}

Status map_conv(Node& n) {
  DUET_ASSIGN_OR_RETURN(ValueId y, lower_conv(n, {}, ""));
  n.set(0, y, n.elem(0));
  return {};
}

// BatchNormalization in inference: y = x * s + t per channel (dim 1), s = scale / sqrt(var +
// eps), t = B - mean * s; folded to two constants when the parameters are known.
Status batch_norm(Node& n, ValueId x, const std::vector<int64_t>& dims, size_t at, float eps,
                  int elem) {
  if (dims.size() < 2) return n.invalid("X must have a channel dim (rank >= 2)");
  std::vector<int64_t> chan(dims.size() - 1, 1);
  chan[0] = dims[1];
  bool known = true;
  for (size_t k = 0; k < 4; ++k) {
    if (n.shape(at + k) != std::vector<int64_t>{dims[1]})
      return n.invalid("scale, B, mean and var must be [C] = [" + std::to_string(dims[1]) + "]");
    known = known && n.known(at + k);
  }
  ValueId s, t;
  if (known) {
    const std::vector<double> gamma = n.array(at).reals(), beta = n.array(at + 1).reals(),
                              mean = n.array(at + 2).reals(), var = n.array(at + 3).reals();
    std::vector<double> sv(gamma.size()), tv(gamma.size());
    for (size_t c = 0; c < sv.size(); ++c) {
      sv[c] = gamma[c] / std::sqrt(var[c] + static_cast<double>(eps));
      tv[c] = beta[c] - mean[c] * sv[c];
    }
    DUET_ASSIGN_OR_RETURN(s, n.constant(Array::of_reals(elem, chan, sv), "scale"));
    DUET_ASSIGN_OR_RETURN(t, n.constant(Array::of_reals(elem, chan, tv), "shift"));
  } else {
    std::vector<ValueId> p;
    for (size_t k = 0; k < 4; ++k) {
      DUET_ASSIGN_OR_RETURN(ValueId v, n.runtime(at + k));
      p.push_back(v);
    }
    DUET_ASSIGN_OR_RETURN(ValueId e, n.constant(Array::of_reals(elem, {}, {eps}), "epsilon"));
    ValueId sd = n.op(OpKind::sqrt, {n.op(OpKind::add, {p[3], e}, {}, "var_eps")}, {}, "std");
    ValueId sc = n.op(OpKind::div, {p[0], sd}, {}, "per_channel_scale");
    ValueId sh = n.op(OpKind::sub, {p[1], n.op(OpKind::mul, {p[2], sc}, {}, "mean_scaled")}, {},
                      "per_channel_shift");
    s = n.reshape(sc, chan, "scale");
    t = n.reshape(sh, chan, "shift");
  }
  n.set(0, n.op(OpKind::add, {n.op(OpKind::mul, {x, s}, {}, "scaled"), t}), elem);
  return {};
}

Status check_inference(Node& n) {
  if (n.attr_int("training_mode", 0) != 0)
    return n.unsupported("BatchNormalization in training mode");
  if (n.opset() < 9 && n.attr_int("spatial", 1) == 0)
    return n.unsupported("BatchNormalization with spatial = 0");
  return {};
}

Status map_batch_norm(Node& n) {
  DUET_TRY(float_input(n, 0));
  DUET_TRY(check_inference(n));
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  return batch_norm(n, x, n.shape(0), 1, n.attr_float("epsilon", 1e-5f), n.elem(0));
}

// A Conv whose output only a BatchNormalization reads, paired by the fusion pass: inputs X, W,
// B (maybe ""), scale, bias, mean, var; the Conv's attributes and the norm's epsilon. Folded into
// the weights when they and the norm's parameters are known; else the two as they were.
Status map_conv_batch_norm(Node& n) {
  DUET_TRY(check_inference(n));
  const float eps = n.attr_float("epsilon", 1e-5f);
  if (n.known(1) && n.shape(1).size() >= 1) DUET_TRY(n.room_for(n.shape(1), n.elem(1), 24));
  if (n.shape(1).size() >= 1)
    if (std::optional<Folded> f = fold_batch_norm(n, 1, 2, 3, eps)) {
      DUET_ASSIGN_OR_RETURN(ValueId y, lower_conv(n, *f, ""));
      n.set(0, y, n.elem(0));
      return {};
    }
  DUET_ASSIGN_OR_RETURN(ValueId conv, lower_conv(n, {}, "conv"));
  if (!conv.valid()) return {};  // the builder holds why; map_node says it
  const TensorDesc& d = n.desc(conv);
  return batch_norm(n, conv, {d.dims().begin(), d.dims().end()}, 3, eps, n.elem(0));
}

// MaxPool and AveragePool over 1 or 2 spatial dims: the windows' taps (strided slice views of
// the input padded with -inf or 0) concatenated along the channels, [N, taps * C, ...], viewed as
// [N, taps, C, pixels] and reduced over the taps: reduce_max, or reduce_mean (reduce_sum divided
// by each window's count of input elements when padding is not counted).
Status pool(Node& n, bool max) {
  DUET_TRY(float_input(n, 0));
  const std::vector<int64_t> x = n.shape(0);
  if (x.size() < 3 || x.size() > 4)
    return x.size() > 4
               ? n.unsupported(std::string(n.type()) + " over " + std::to_string(x.size() - 2) +
                               " spatial dims (duet tensors have rank <= 4: 1-D and 2-D)")
               : n.invalid("X " + dims_str(x) + " must be [N, C, spatial...]");
  if (n.output_used(1)) return n.unsupported("MaxPool's Indices output");
  if (n.attr_int("storage_order", 0) != 0) return n.unsupported("storage_order 1");
  const std::optional<std::vector<int64_t>> kernel = n.attr_ints("kernel_shape");
  if (!kernel || kernel->size() != x.size() - 2)
    return n.invalid("kernel_shape must give one size per spatial dim");
  const bool ceil = n.attr_int("ceil_mode", 0) != 0;
  const bool count_pad = n.attr_int("count_include_pad", 0) != 0;
  DUET_ASSIGN_OR_RETURN(std::vector<Window> w, windows(n, x, *kernel, ceil));
  const int elem = n.elem(0);
  const int64_t batch = x[0], c = x[1], taps = product(*kernel);
  std::vector<int64_t> out = {batch, c};
  for (const Window& d : w) out.push_back(d.out);
  const int64_t pixels = product(out, 2);
  DUET_ASSIGN_OR_RETURN(ValueId xp, n.runtime(0));
  for (size_t i = 0; i < w.size(); ++i) {
    DUET_ASSIGN_OR_RETURN(xp, pad_axis(n, xp, static_cast<int>(2 + i), w[i].pad_begin, w[i].pad_end,
                                       max ? -INFINITY : 0.0, elem));
  }
  std::vector<ValueId> views;
  for (int64_t t = 0; t < taps; ++t)
    views.push_back(tap_view(n, xp, w, t, "tap" + std::to_string(t)));
  ValueId all = views[0];
  if (views.size() > 1) {
    OpAttrs at;
    at.axis = 1;
    all = n.op(OpKind::concat, views, at, "taps");
  }
  all = n.reshape(all, {batch, taps, c, pixels}, "by_tap");
  OpAttrs red;
  red.axes = {1};
  // Each window's count of elements of the input (not padding), when the mean must not count it.
  std::vector<double> counts;
  bool uneven = false;
  if (!max)
    for (int64_t p = 0; p < pixels; ++p) {
      int64_t rest = p, cnt = 1;
      for (size_t i = w.size(); i-- > 0;) {
        const Window& d = w[i];
        const int64_t o = rest % d.out;
        rest /= d.out;
        int64_t inside = 0;
        for (int64_t k = 0; k < d.k; ++k) {
          const int64_t at = o * d.stride + k * d.dil - d.pad_begin;
          const bool real = at >= 0 && at < d.in;
          // count_include_pad counts the explicit pads, never ceil_mode's extension past them.
          inside += real || (count_pad && at >= -d.pad_begin && at < d.in + d.pad_end_given);
        }
        cnt *= inside;
      }
      counts.push_back(static_cast<double>(cnt));
      uneven = uneven || cnt != taps;
    }
  ValueId y;
  if (max || !uneven) {
    y = n.op(max ? OpKind::reduce_max : OpKind::reduce_mean, {all}, red, "reduced");
  } else {
    ValueId sum = n.op(OpKind::reduce_sum, {all}, red, "sum");
    DUET_ASSIGN_OR_RETURN(ValueId cnt,
                          n.constant(Array::of_reals(elem, {pixels}, counts), "counts"));
    y = n.op(OpKind::div, {sum, cnt}, {}, "reduced");
  }
  n.set(0, n.reshape(y, out), elem);
  return {};
}

Status map_max_pool(Node& n) {
  return pool(n, true);
}
Status map_average_pool(Node& n) {
  return pool(n, false);
}

// GlobalAveragePool, GlobalMaxPool: the mean or largest value over every spatial dim, kept as
// dims of size 1 (duet's reductions keep them).
Status global_pool(Node& n, OpKind kind) {
  DUET_TRY(float_input(n, 0));
  const int r = n.rank(0);
  if (r < 3) return n.invalid("X must be [N, C, spatial...]");
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  OpAttrs at;
  for (int d = 2; d < r; ++d) at.axes.push_back(d);
  n.set(0, n.op(kind, {x}, at), n.elem(0));
  return {};
}

Status map_global_average_pool(Node& n) {
  return global_pool(n, OpKind::reduce_mean);
}
Status map_global_max_pool(Node& n) {
  return global_pool(n, OpKind::reduce_max);
}

// ConvTranspose as the Conv it equals: the input spread by the strides (stride - 1 zeros after
// each element: a concat with zeros between reshape views, then a slice), padded by
// dilation * (kernel - 1) less the pads on each side (output_padding added at the end; a negative
// amount crops), then convolved at stride 1 and the same dilation with the weights flipped along
// every spatial dim and regrouped from [C, M/group, kernel...] to [M, C/group, kernel...] (slice
// views and concats, a permute view per group). output_shape and auto_pad set the pads as
// ONNX's definition does.
Status map_conv_transpose(Node& n) {
  DUET_TRY(float_input(n, 0));
  const std::vector<int64_t> xd = n.shape(0), wd0 = n.shape(1);
  if (xd.size() < 3 || xd.size() > 4 || wd0.size() != xd.size())
    return xd.size() > 4 ? n.unsupported("ConvTranspose over " + std::to_string(xd.size() - 2) +
                                         " spatial dims (duet tensors have rank <= 4)")
                         : n.invalid("X " + dims_str(xd) + " and W " + dims_str(wd0) +
                                     " must be [N, C, spatial...] and [C, M/group, kernel...]");
  if (n.elem(1) != n.elem(0)) return n.invalid("X and W of different types");
  const size_t sd = xd.size() - 2;
  const int64_t c = xd[1], g = n.attr_int("group", 1);
  if (g < 1 || c % g != 0 || wd0[0] != c)
    return n.invalid("group " + std::to_string(g) + " with X " + dims_str(xd) + " and W " +
                     dims_str(wd0));
  const int64_t cg = c / g, mg = wd0[1], m = mg * g;
  DUET_ASSIGN_OR_RETURN(std::vector<int64_t> strides, attr_list(n, "strides", 1, sd));
  DUET_ASSIGN_OR_RETURN(std::vector<int64_t> dils, attr_list(n, "dilations", 1, sd));
  DUET_ASSIGN_OR_RETURN(std::vector<int64_t> pads, attr_list(n, "pads", 0, 2 * sd));
  DUET_ASSIGN_OR_RETURN(std::vector<int64_t> opad, attr_list(n, "output_padding", 0, sd));
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  std::vector<int64_t> oshape = n.attr_ints("output_shape").value_or(std::vector<int64_t>{});
  if (!oshape.empty() && oshape.size() != sd) {
    if (oshape.size() != sd + 2) return n.invalid("output_shape " + dims_str(oshape));
    oshape.erase(oshape.begin(), oshape.begin() + 2);
  }
  std::vector<int64_t> pb(sd), pe(sd);
  for (size_t i = 0; i < sd; ++i) {
    const int64_t in = xd[2 + i], k = wd0[2 + i], s = strides[i], d = dils[i];
    if (s < 1 || d < 1 || k < 1 || opad[i] < 0)
      return n.invalid("stride, dilation, kernel and output_padding must be positive");
    const int64_t full = s * (in - 1) + opad[i] + (k - 1) * d + 1;
    if (!oshape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = !oshape.empty() ? oshape[i] : in * s;
      // Negative when the output is larger than the input reaches: padding at the end.
      const int64_t total = full - out;
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor(total / 2)
      pb[i] = auto_pad == "SAME_UPPER" ? half : total - half;
      pe[i] = total - pb[i];
    } else if (auto_pad == "NOTSET" || auto_pad == "VALID") {
      pb[i] = auto_pad == "VALID" ? 0 : pads[i];
      pe[i] = auto_pad == "VALID" ? 0 : pads[sd + i];
    } else {
      return n.invalid("auto_pad '" + auto_pad + "'");
    }
  }
  const int elem = n.elem(0);
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  std::vector<int64_t> cur = xd;
  for (size_t i = 0; i < sd; ++i) {
    const int ax = static_cast<int>(2 + i);
    const std::string tag = "spread" + std::to_string(i);
    const int64_t s = strides[i], len = cur[static_cast<size_t>(ax)];
    if (s > 1) {
      const int64_t pre = product(std::vector<int64_t>(cur.begin(), cur.begin() + ax));
      const int64_t post = product(cur, static_cast<size_t>(ax) + 1);
      const std::vector<int64_t> zd = {pre, len, s - 1, post};
      DUET_TRY(n.room_for(zd, elem, 8));
      DUET_ASSIGN_OR_RETURN(
          ValueId zeros,
          n.constant(
              Array::of_reals(elem, zd, std::vector<double>(static_cast<size_t>(product(zd)))),
              tag + "/zeros"));
      OpAttrs cat;
      cat.axis = 2;
      ValueId v = n.op(OpKind::concat, {n.reshape(x, {pre, len, 1, post}, tag + "/column"), zeros},
                       cat, tag + "/interleaved");
      std::vector<int64_t> wide = cur;
      wide[static_cast<size_t>(ax)] = len * s;
      v = n.reshape(v, wide, tag + "/wide");
      OpAttrs cut;
      cut.axis = ax;
      cut.start = 0;
      cut.stop = (len - 1) * s + 1;
      x = n.op(OpKind::slice, {v}, cut, tag);
      cur[static_cast<size_t>(ax)] = cut.stop;
    }
    const int64_t span = dils[i] * (wd0[2 + i] - 1);
    const int64_t before = span - pb[i], after = span - pe[i] + opad[i];
    DUET_ASSIGN_OR_RETURN(
        x, pad_axis(n, x, ax, std::max<int64_t>(before, 0), std::max<int64_t>(after, 0), 0.0, elem,
                    "padded" + std::to_string(i)));
    cur[static_cast<size_t>(ax)] += std::max<int64_t>(before, 0) + std::max<int64_t>(after, 0);
    if (before < 0 || after < 0) {
      OpAttrs cut;
      cut.axis = ax;
      cut.start = std::max<int64_t>(-before, 0);
      cut.stop = cur[static_cast<size_t>(ax)] - std::max<int64_t>(-after, 0);
      if (cut.stop - cut.start < 1) return n.invalid("pads larger than the output");
      x = n.op(OpKind::slice, {x}, cut, "cropped" + std::to_string(i));
      cur[static_cast<size_t>(ax)] = cut.stop - cut.start;
    }
  }
  // The weights: each spatial dim reversed, then [C, M/g] regrouped to [M, C/g].
  DUET_ASSIGN_OR_RETURN(ValueId w, n.runtime(1));
  for (size_t i = 0; i < sd; ++i) {
    const int64_t k = wd0[2 + i];
    if (k == 1) continue;
    std::vector<ValueId> taps;
    for (int64_t j = k; j-- > 0;) {
      OpAttrs at;
      at.axis = static_cast<int>(2 + i);
      at.start = j;
      at.stop = j + 1;
      taps.push_back(
          n.op(OpKind::slice, {w}, at, "w_flip" + std::to_string(i) + "/tap" + std::to_string(j)));
    }
    OpAttrs cat;
    cat.axis = static_cast<int>(2 + i);
    w = n.op(OpKind::concat, taps, cat, "w_flip" + std::to_string(i));
  }
  OpAttrs swap;
  swap.perm = {1, 0};
  for (size_t i = 0; i < sd; ++i) swap.perm.push_back(static_cast<int>(2 + i));
  std::vector<ValueId> groups;
  for (int64_t j = 0; j < g; ++j) {
    ValueId wg = w;
    if (g > 1) {
      OpAttrs at;
      at.axis = 0;
      at.start = j * cg;
      at.stop = (j + 1) * cg;
      wg = n.op(OpKind::slice, {w}, at, "w_group" + std::to_string(j));
    }
    groups.push_back(n.op(OpKind::permute, {wg}, swap, "w_regrouped" + std::to_string(j)));
  }
  ConvSource src;
  src.x = x;
  src.xd = cur;
  if (groups.size() > 1) {
    OpAttrs cat;
    cat.axis = 0;
    src.w = n.op(OpKind::concat, groups, cat, "w_conv");
  } else {
    src.w = groups[0];
  }
  src.wd = {m, cg};
  for (size_t i = 0; i < sd; ++i) src.wd.push_back(wd0[2 + i]);
  src.dilations = dils;
  DUET_ASSIGN_OR_RETURN(ValueId y, lower_conv(n, {}, "", &src));
  n.set(0, y, elem);
  return {};
}

// Pad: per axis, negative pads crop (a slice view), positive ones add elements by a concat:
// `constant` with known constants of the value, `edge` with copies of the first or last slice,
// `reflect` with the slices mirrored about the edge (each a one-element slice view).
Status map_pad(Node& n) {
  const std::vector<int64_t> dims = n.shape(0);
  const int r = static_cast<int>(dims.size());
  const std::string mode = n.attr_string("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect")
    return n.unsupported("Pad mode '" + mode + "' (duet maps constant, edge and reflect)");
  std::vector<int64_t> pads;
  double value = 0.0;
  std::vector<int64_t> axes;
  if (n.opset() < 11) {
    pads = n.attr_ints("pads").value_or(std::vector<int64_t>{});
    value = n.attr_float("value", 0.0f);
  } else {
    DUET_ASSIGN_OR_RETURN(pads, n.ints(1, "pads"));
    if (n.has(2)) {
      if (!n.known(2)) return n.unsupported("Pad with a constant_value computed at run time");
      if (n.array(2).numel() != 1) return n.invalid("constant_value is not a scalar");
      value = n.array(2).real_at(0);
    }
    if (n.has(3)) {
      DUET_ASSIGN_OR_RETURN(axes, n.ints(3, "axes"));
    }
  }
  if (axes.empty())
    for (int64_t k = 0; k < r; ++k) axes.push_back(k);
  if (pads.size() != 2 * axes.size())
    return n.invalid(std::to_string(pads.size()) + " pads for " + std::to_string(axes.size()) +
                     " axes");
  std::vector<int64_t> before(static_cast<size_t>(r), 0), after(static_cast<size_t>(r), 0);
  for (size_t k = 0; k < axes.size(); ++k) {
    DUET_ASSIGN_OR_RETURN(int a, normalize_axis(axes[k], r, "axes"));
    before[static_cast<size_t>(a)] = pads[k];
    after[static_cast<size_t>(a)] = pads[axes.size() + k];
  }
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  const int elem = n.elem(0);
  // The last axis that changes names the output.
  int last = -1;
  for (int a = 0; a < r; ++a)
    if (before[static_cast<size_t>(a)] != 0 || after[static_cast<size_t>(a)] != 0) last = a;
  if (last < 0) {
    n.forward(0, 0);
    return {};
  }
  for (int a = 0; a <= last; ++a) {
    int64_t b = before[static_cast<size_t>(a)], e = after[static_cast<size_t>(a)];
    if (b == 0 && e == 0) continue;
    const std::string ax = std::to_string(a);
    const bool named = a == last;
    const int64_t d = dims[static_cast<size_t>(a)];
    const int64_t grow_b = std::max<int64_t>(b, 0), grow_e = std::max<int64_t>(e, 0);
    const bool crop = b < 0 || e < 0;  // after the padding, as ONNX's reference does
    if (grow_b > 0 || grow_e > 0) {
      if (mode == "constant") {
        DUET_ASSIGN_OR_RETURN(
            x, pad_axis(n, x, a, grow_b, grow_e, value, elem, named && !crop ? "" : "padded" + ax));
      } else {
        if (mode == "reflect" && (grow_b > d - 1 || grow_e > d - 1))
          return n.unsupported("reflect pads of " + std::to_string(b) + " and " +
                               std::to_string(e) + " on axis " + ax + " of size " +
                               std::to_string(d) + " (at most the size - 1)");
        auto one = [&](int64_t at_index, const std::string& purpose) {
          OpAttrs at;
          at.axis = a;
          at.start = at_index;
          at.stop = at_index + 1;
          return n.op(OpKind::slice, {x}, at, purpose);
        };
        std::vector<ValueId> parts;
        if (grow_b > 0) {
          const ValueId first = mode == "edge" ? one(0, "edge" + ax + "_begin") : ValueId{};
          for (int64_t i = grow_b; i >= 1; --i)
            parts.push_back(mode == "edge" ? first
                                           : one(i, "mirror" + ax + "_" + std::to_string(i)));
        }
        parts.push_back(x);
        if (grow_e > 0) {
          const ValueId lastv = mode == "edge" ? one(d - 1, "edge" + ax + "_end") : ValueId{};
          for (int64_t i = 1; i <= grow_e; ++i)
            parts.push_back(mode == "edge"
                                ? lastv
                                : one(d - 1 - i, "mirror" + ax + "_end" + std::to_string(i)));
        }
        OpAttrs cat;
        cat.axis = a;
        x = n.op(OpKind::concat, parts, cat, named && !crop ? "" : "padded" + ax);
      }
    }
    if (crop) {
      OpAttrs at;
      at.axis = a;
      at.start = b < 0 ? -b : 0;
      at.stop = grow_b + d + grow_e + std::min<int64_t>(e, 0);
      if (at.stop <= at.start)
        return n.unsupported("pads that leave axis " + ax +
                             " empty (duet tensors are never empty)");
      x = n.op(OpKind::slice, {x}, at, named ? "" : "cropped" + ax);
    }
  }
  n.set(0, x, elem);
  return {};
}

// Resize: separable, so along each axis whose size or sampling changes it is a known [out, in]
// matrix of interpolation weights (nearest: one 1 per row; linear: two; cubic: four), stored
// [out, in] and applied by a matmul with x viewed as [before, in] (the last axis) or read
// transposed as [before, after, in] (then permuted back, a view). The weights follow ONNX's
// reference: the coordinate transformation, the nearest rounding, the cubic coefficient `a` and
// exclude_outside, neighbours past the edge reading the edge. Exact for nearest with finite values
// (the other products are x * 0).
Result<std::vector<double>> resize_weights(Node& n, int64_t in, int64_t out, double scale,
                                           const std::string& mode, const std::string& ctm) {
  // Upsample (opset 7 to 9) samples the nearest by flooring: Resize's asymmetric mode and floor.
  const std::string nearest =
      n.attr_string("nearest_mode", n.type() == "Upsample" ? "floor" : "round_prefer_floor");
  const double a = n.attr_float("cubic_coeff_a", -0.75f);
  const bool exclude = n.attr_int("exclude_outside", 0) != 0;
  std::vector<double> m(static_cast<size_t>(out * in), 0.0);
  auto at = [&](int64_t o, int64_t i) -> double& {
    return m[static_cast<size_t>(o * in + std::clamp<int64_t>(i, 0, in - 1))];
  };
  // The resized length as ONNX's reference reads it: in * scale, not rounded (align_corners and
  // pytorch_half_pixel use it).
  const double out_f = static_cast<double>(in) * scale;
  for (int64_t o = 0; o < out; ++o) {
    const double xo = static_cast<double>(o);
    double x;
    if (ctm == "half_pixel")
      x = (xo + 0.5) / scale - 0.5;
    else if (ctm == "pytorch_half_pixel")
      x = out_f > 1 ? (xo + 0.5) / scale - 0.5 : 0.0;
    else if (ctm == "align_corners")
      x = out_f == 1 ? 0.0 : xo * static_cast<double>(in - 1) / (out_f - 1);
    else if (ctm == "asymmetric")
      x = xo / scale;
    else if (ctm == "tf_half_pixel_for_nn")
      x = (xo + 0.5) / scale;
    else
      return n.unsupported("coordinate_transformation_mode '" + ctm + "'");
    const double fl = std::floor(x);
    const auto i0 = static_cast<int64_t>(fl);
    const double f = x - fl;
    if (mode == "nearest") {
      bool up;
      if (f == 0.0)
        up = false;
      else if (nearest == "round_prefer_floor")
        up = f > 0.5;
      else if (nearest == "round_prefer_ceil")
        up = f >= 0.5;
      else if (nearest == "floor")
        up = false;
      else if (nearest == "ceil")
        up = true;
      else
        return n.invalid("nearest_mode '" + nearest + "'");
      at(o, up ? i0 + 1 : i0) = 1.0;
    } else if (mode == "linear") {
      at(o, i0) += 1.0 - f;
      at(o, i0 + 1) += f;
    } else if (mode == "cubic") {
      auto k = [a](double d) {
        d = std::fabs(d);
        if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
        if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
        return 0.0;
      };
      double c[4], sum = 0;
      for (int t = 0; t < 4; ++t) {
        const int64_t idx = i0 - 1 + t;
        c[t] = k(f + 1 - t);
        if (exclude && (idx < 0 || idx >= in)) c[t] = 0;
        sum += c[t];
      }
      for (int t = 0; t < 4; ++t) at(o, i0 - 1 + t) += exclude ? c[t] / sum : c[t];
    } else {
      return n.invalid("mode '" + mode + "'");
    }
  }
  return m;
}

Status map_resize(Node& n) {
  DUET_TRY(float_input(n, 0));
  const std::vector<int64_t> dims = n.shape(0);
  const int r = static_cast<int>(dims.size());
  const std::string mode = n.attr_string("mode", "nearest");
  const std::string ctm =
      n.attr_string("coordinate_transformation_mode", n.opset() < 11 ? "asymmetric" : "half_pixel");
  if (ctm == "tf_crop_and_resize")
    return n.unsupported("Resize with coordinate_transformation_mode 'tf_crop_and_resize'");
  if (n.attr_int("antialias", 0) != 0) return n.unsupported("Resize with antialias");
  const std::string policy = n.attr_string("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch") return n.unsupported("keep_aspect_ratio_policy '" + policy + "'");
  std::vector<int64_t> axes = n.attr_ints("axes").value_or(std::vector<int64_t>{});
  if (axes.empty())
    for (int k = 0; k < r; ++k) axes.push_back(k);
  const size_t scales_at = n.opset() < 11 ? 1 : 2;
  std::vector<double> scale(static_cast<size_t>(r), 1.0);
  std::vector<int64_t> out = dims;
  const bool has_sizes = n.opset() >= 11 && n.has(3) && n.shape(3) != std::vector<int64_t>{0};
  if (has_sizes) {
    DUET_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, n.ints(3, "sizes"));
    if (sizes.size() != axes.size())
      return n.invalid(std::to_string(sizes.size()) + " sizes for rank " + std::to_string(r));
    for (size_t k = 0; k < axes.size(); ++k) {
      DUET_ASSIGN_OR_RETURN(int a, normalize_axis(axes[k], r, "axes"));
      out[static_cast<size_t>(a)] = sizes[k];
      scale[static_cast<size_t>(a)] =
          static_cast<double>(sizes[k]) / static_cast<double>(dims[static_cast<size_t>(a)]);
    }
  } else {
    if (!n.has(scales_at)) return n.invalid("neither scales nor sizes");
    if (!n.known(scales_at)) return n.unsupported("scales computed at run time");
    const std::vector<double> sc = n.array(scales_at).reals();
    if (sc.size() != axes.size())
      return n.invalid(std::to_string(sc.size()) + " scales for rank " + std::to_string(r));
    for (size_t k = 0; k < axes.size(); ++k) {
      DUET_ASSIGN_OR_RETURN(int a, normalize_axis(axes[k], r, "axes"));
      if (!(sc[k] > 0)) return n.invalid("scale " + std::to_string(sc[k]));
      scale[static_cast<size_t>(a)] = sc[k];
      out[static_cast<size_t>(a)] = static_cast<int64_t>(
          std::floor(static_cast<double>(dims[static_cast<size_t>(a)]) * sc[k]));
    }
  }
  for (int a = 0; a < r; ++a)
    if (out[static_cast<size_t>(a)] < 1)
      return n.unsupported("an output dim of " + std::to_string(out[static_cast<size_t>(a)]) +
                           " (duet tensors are never empty)");
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  std::vector<int64_t> cur = dims;
  std::vector<std::pair<int, std::vector<double>>> maps;
  for (int a = 0; a < r; ++a) {
    const int64_t in = dims[static_cast<size_t>(a)], o = out[static_cast<size_t>(a)];
    DUET_TRY(n.room_for({in, o}, kDouble, 8));
    DUET_ASSIGN_OR_RETURN(std::vector<double> m,
                          resize_weights(n, in, o, scale[static_cast<size_t>(a)], mode, ctm));
    bool identity = in == o;
    for (int64_t i = 0; identity && i < o; ++i)
      for (int64_t j = 0; j < in; ++j)
        if (m[static_cast<size_t>(i * in + j)] != (i == j ? 1.0 : 0.0)) identity = false;
    if (!identity) maps.emplace_back(a, std::move(m));
  }
  if (maps.empty()) {
    n.forward(0, 0);
    return {};
  }
  const int elem = n.elem(0);
  for (size_t k = 0; k < maps.size(); ++k) {
    const int a = maps[k].first;
    const std::string ax = std::to_string(a);
    const int64_t in = cur[static_cast<size_t>(a)], o = out[static_cast<size_t>(a)];
    const int64_t pre = product(std::vector<int64_t>(cur.begin(), cur.begin() + a));
    const int64_t post = product(cur, static_cast<size_t>(a) + 1);
    ValueId y;
    if (post == 1) {  // x [pre, in] times the weights' transpose (stored [out, in])
      DUET_ASSIGN_OR_RETURN(
          ValueId w, n.constant(Array::of_reals(elem, {o, in}, maps[k].second), "weights" + ax));
      OpAttrs tb;
      tb.transpose_b = true;
      y = n.op(OpKind::matmul, {n.reshape(x, {pre, in}, "rows" + ax), w}, tb, "resized" + ax);
    } else {  // x [pre, in, post] read transposed times the same: [pre, post, out], permuted
      DUET_ASSIGN_OR_RETURN(
          ValueId w, n.constant(Array::of_reals(elem, {o, in}, maps[k].second), "weights" + ax));
      std::vector<int64_t> v =
          pre == 1 ? std::vector<int64_t>{in, post} : std::vector<int64_t>{pre, in, post};
      OpAttrs tt;
      tt.transpose_a = true;
      tt.transpose_b = true;
      ValueId t = n.op(OpKind::matmul, {n.reshape(x, v, "columns" + ax), w}, tt, "resized_t" + ax);
      OpAttrs back;
      back.perm = pre == 1 ? std::vector<int>{1, 0} : std::vector<int>{0, 2, 1};
      y = n.op(OpKind::permute, {t}, back, "resized" + ax);
    }
    cur[static_cast<size_t>(a)] = o;
    x = n.reshape(y, cur, k + 1 == maps.size() ? "" : "axis" + ax);
  }
  n.set(0, x, elem);
  return {};
}

// Upsample (opset 7 to 9, scales an input from opset 9): Resize of opset 10's meaning with the
// nearest sample floored. Its linear mode is refused.
Status map_upsample(Node& n) {
  if (n.attr_string("mode", "nearest") != "nearest")
    return n.unsupported("Upsample in mode '" + n.attr_string("mode", "nearest") +
                         "' (nearest only)");
  if (n.opset() < 9) return n.unsupported("Upsample below opset 9 (scales as an attribute)");
  return map_resize(n);
}

const Mapping kConv[] = {
    {"MaxPool", map_max_pool},
    {"AveragePool", map_average_pool},
    {"GlobalAveragePool", map_global_average_pool},
    {"GlobalMaxPool", map_global_max_pool},
    {"Conv", map_conv},
    {"ConvBatchNormalization", map_conv_batch_norm},
    {"BatchNormalization", map_batch_norm},
    {"Pad", map_pad},
    {"ConvTranspose", map_conv_transpose},
    {"Resize", map_resize},
    {"Upsample", map_upsample},
};

}  // namespace

std::span<const Mapping> conv_mappings() {
  return kConv;
}

}  // namespace duet::onnx_import
