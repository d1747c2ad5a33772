// Shape and data-movement ops: on known values they fold at import; at run time they become
// duet views (reshape, permute, slice) where a view can express them, else copies or gathers.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "fold.h"
#include "importer.h"

namespace duet::onnx_import {

namespace {

int64_t product(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i) n *= d[i];
  return n;
}

// Output 0 is input 0 under another shape.
Status reshaped(Node& n, std::vector<int64_t> shape) {
  if (n.known(0)) {
    DUET_TRY(n.room_for(shape, n.elem(0), 0));
    n.set_known(0, n.array(0).reshaped(std::move(shape)));
    return {};
  }
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  n.set(0, n.reshape(x, std::move(shape)), n.elem(0));
  return {};
}

Status alias(Node& n) {
  n.forward(0, 0);
  return {};
}

Status map_identity(Node& n) {
  return alias(n);
}

Status map_constant(Node& n) {
  if (n.proto().attribute_size() != 1) return n.invalid("expected exactly one value attribute");
  const onnx::AttributeProto& a = n.proto().attribute(0);
  if (a.name() == "value") {
    DUET_ASSIGN_OR_RETURN(Array v, n.tensor_attr(a));
    n.set_constant(0, std::move(v));
  } else if (a.name() == "value_float") {
    n.set_known(0, Array::of_reals(kFloat, {}, {a.f()}));
  } else if (a.name() == "value_floats") {
    std::vector<double> v(a.floats().begin(), a.floats().end());
    n.set_known(0, Array::of_reals(kFloat, {static_cast<int64_t>(v.size())}, v));
  } else if (a.name() == "value_int") {
    n.set_known(0, Array::of_ints(kInt64, {}, {a.i()}));
  } else if (a.name() == "value_ints") {
    std::vector<int64_t> v(a.ints().begin(), a.ints().end());
    n.set_known(0, Array::of_ints(kInt64, {static_cast<int64_t>(v.size())}, v));
  } else {
    return n.unsupported("Constant with attribute '" + a.name() + "'");
  }
  return {};
}

Status map_constant_of_shape(Node& n) {
  DUET_ASSIGN_OR_RETURN(std::vector<int64_t> shape, n.ints(0, "shape"));
  Array value = Array::of_reals(kFloat, {1}, {0.0});
  if (const auto* a = n.attr("value")) {
    DUET_ASSIGN_OR_RETURN(value, n.tensor_attr(*a));
    if (value.numel() != 1) return n.invalid("value must hold one element");
  }
  DUET_TRY(n.room_for(shape, value.elem(), 0));
  const auto count_ = static_cast<size_t>(*count(shape));
  const std::string& one = value.bytes();
  std::string bytes;
  bytes.reserve(count_ * one.size());
  for (size_t i = 0; i < count_; ++i) bytes += one;
  DUET_ASSIGN_OR_RETURN(Array filled, Array::from_bytes(value.elem(), shape, std::move(bytes)));
  n.set_known(0, std::move(filled));
  return {};
}

Status map_shape(Node& n) {
  std::vector<int64_t> dims = n.shape(0);
  const auto r = static_cast<int64_t>(dims.size());
  auto clamp = [&](int64_t v) { return std::clamp(v < 0 ? v + r : v, int64_t{0}, r); };
  const int64_t start = clamp(n.attr_int("start", 0));
  const int64_t end = clamp(n.attr_int("end", r));
  std::vector<int64_t> v;
  for (int64_t i = start; i < end; ++i) v.push_back(dims[static_cast<size_t>(i)]);
  n.set_known(0, Array::of_ints(kInt64, {static_cast<int64_t>(v.size())}, v));
  return {};
}

Status map_size(Node& n) {
  const std::vector<int64_t> dims = n.shape(0);
  n.set_known(0, Array::scalar_int(product(dims, 0, dims.size())));
  return {};
}

Status map_cast(Node& n) {
  const int to = n.type() == "CastLike" ? n.elem(1) : static_cast<int>(n.attr_int("to", 0));
  if (n.known(0)) {
    if (elem_size(to) == 0) return n.unsupported("Cast to " + elem_name(to));
    DUET_TRY(n.room_for(n.shape(0), to, 16));
    n.set_known(0, n.array(0).cast(to));
    return {};
  }
  auto dtype = runtime_dtype(to);
  if (!dtype.ok()) return n.unsupported("Cast to " + dtype.status().message());
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  if (to == kBool && n.elem(0) != kBool) {
    // x != 0 (NaN is true), as 1 - [x == 0] by two equal ops on x in a float dtype (an integer
    // x as f32: a nonzero integer stays nonzero), then the 0/1 values as i8.
    const DType f = is_float(n.desc(x).dtype) ? n.desc(x).dtype : DType::f32;
    OpAttrs at;
    at.to = f;
    if (n.desc(x).dtype != f) x = n.op(OpKind::cast, {x}, at, "as_float");
    DUET_ASSIGN_OR_RETURN(ValueId zero,
                          n.constant(Array::of_reals(elem_of(f), {1}, {0.0}), "zero"));
    ValueId is_zero = n.op(OpKind::equal, {x, zero}, {}, "is_zero");
    ValueId nonzero = n.op(OpKind::equal, {is_zero, zero}, {}, "nonzero");
    at.to = DType::i8;
    n.set(0, n.op(OpKind::cast, {nonzero}, at), to);
    return {};
  }
  if (n.desc(x).dtype == *dtype) {  // int64 <-> int32: one duet dtype
    n.set(0, x, to);
    return {};
  }
  OpAttrs at;
  at.to = *dtype;
  n.set(0, n.op(OpKind::cast, {x}, at), to);
  return {};
}

Status map_reshape(Node& n) {
  std::vector<int64_t> shape;
  if (n.opset() < 5) {
    shape = n.attr_ints("shape").value_or(std::vector<int64_t>{});
  } else {
    DUET_ASSIGN_OR_RETURN(shape, n.ints(1, "shape"));
  }
  const std::vector<int64_t> in = n.shape(0);
  const bool allowzero = n.attr_int("allowzero", 0) != 0;
  int infer = -1;
  int64_t known_count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowzero) {
      if (i >= in.size())
        return n.invalid("shape " + dims_str(shape) + ": 0 past the input's rank");
      shape[i] = in[i];
    }
    if (shape[i] == -1) {
      if (infer >= 0) return n.invalid("shape " + dims_str(shape) + " has two -1");
      infer = static_cast<int>(i);
      continue;
    }
    if (shape[i] < 0) return n.invalid("shape " + dims_str(shape) + " has a negative size");
    if (__builtin_mul_overflow(known_count, shape[i], &known_count))
      return n.invalid("shape " + dims_str(shape) + " has more elements than 64 bits count");
  }
  const int64_t total = product(in, 0, in.size());
  if (infer >= 0) {
    if (known_count == 0 || total % known_count != 0)
      return n.invalid("cannot infer -1 in " + dims_str(shape) + " for " + dims_str(in));
    shape[static_cast<size_t>(infer)] = total / known_count;
  } else if (known_count != total) {
    return n.invalid("shape " + dims_str(shape) + " does not hold the " + std::to_string(total) +
                     " elements of " + dims_str(in));
  }
  return reshaped(n, shape);
}

Status map_flatten(Node& n) {
  const std::vector<int64_t> in = n.shape(0);
  const int r = static_cast<int>(in.size());
  int64_t axis = n.attr_int("axis", 1);
  if (axis < -r || axis > r)
    return n.invalid("axis " + std::to_string(axis) + " outside [-" + std::to_string(r) + ", " +
                     std::to_string(r) + "]");
  const auto a = static_cast<size_t>(axis < 0 ? axis + r : axis);
  return reshaped(n, {product(in, 0, a), product(in, a, in.size())});
}

Result<std::vector<int64_t>> axes_of(Node& n) {
  if (n.opset() >= 13) {
    if (!n.has(1)) return std::vector<int64_t>{};
    return n.ints(1, "axes");
  }
  return n.attr_ints("axes").value_or(std::vector<int64_t>{});
}

Status map_squeeze(Node& n) {
  DUET_ASSIGN_OR_RETURN(std::vector<int64_t> axes, axes_of(n));
  const std::vector<int64_t> in = n.shape(0);
  std::vector<bool> drop(in.size(), axes.empty());
  if (axes.empty())
    for (size_t d = 0; d < in.size(); ++d) drop[d] = in[d] == 1;
  for (int64_t a : axes) {
    DUET_ASSIGN_OR_RETURN(int d, normalize_axis(a, static_cast<int>(in.size())));
    if (in[static_cast<size_t>(d)] != 1)
      return n.invalid("axis " + std::to_string(a) + " of " + dims_str(in) + " is not 1");
    drop[static_cast<size_t>(d)] = true;
  }
  std::vector<int64_t> out;
  for (size_t d = 0; d < in.size(); ++d)
    if (!drop[d]) out.push_back(in[d]);
  return reshaped(n, out);
}

Status map_unsqueeze(Node& n) {
  DUET_ASSIGN_OR_RETURN(std::vector<int64_t> axes, axes_of(n));
  const std::vector<int64_t> in = n.shape(0);
  const int r = static_cast<int>(in.size() + axes.size());
  std::vector<bool> added(static_cast<size_t>(r), false);
  for (int64_t a : axes) {
    DUET_ASSIGN_OR_RETURN(int d, normalize_axis(a, r));
    if (added[static_cast<size_t>(d)]) return n.invalid("axis " + std::to_string(a) + " repeated");
    added[static_cast<size_t>(d)] = true;
  }
  std::vector<int64_t> out;
  size_t k = 0;
  for (int d = 0; d < r; ++d) out.push_back(added[static_cast<size_t>(d)] ? 1 : in[k++]);
  return reshaped(n, out);
}

Status map_transpose(Node& n) {
  const int r = n.rank(0);
  std::vector<int64_t> perm = n.attr_ints("perm").value_or(std::vector<int64_t>{});
  if (perm.empty())
    for (int d = r - 1; d >= 0; --d) perm.push_back(d);
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (int d = 0; d < r; ++d)
    if (sorted.size() != static_cast<size_t>(r) || sorted[static_cast<size_t>(d)] != d)
      return n.invalid("perm " + dims_str(perm) + " is not a permutation of rank " +
                       std::to_string(r));
  if (n.known(0)) {
    DUET_TRY(n.room_for(n.shape(0), n.elem(0), 8));
    n.set_known(0, transpose(n.array(0), perm));
    return {};
  }
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  OpAttrs at;
  at.perm.assign(perm.begin(), perm.end());
  n.set(0, n.op(OpKind::permute, {x}, at), n.elem(0));
  return {};
}

// One axis of a Slice, with start and stop clamped as ONNX does.
struct Cut {
  int axis;
  int64_t start, stop, step;
};

Result<Cut> clamp_cut(Node& n, int64_t axis, int64_t start, int64_t stop, int64_t step,
                      const std::vector<int64_t>& dims) {
  DUET_ASSIGN_OR_RETURN(int a, normalize_axis(axis, static_cast<int>(dims.size())));
  const int64_t d = dims[static_cast<size_t>(a)];
  if (step == 0) return n.invalid("a step of 0");
  auto fix = [&](int64_t v, int64_t lo, int64_t hi) {
    if (v < 0) v += d;  // counts from the end; still negative clamps to the low end
    return std::clamp(v, lo, hi);
  };
  if (step > 0) return Cut{a, fix(start, 0, d), fix(stop, 0, d), step};
  return Cut{a, fix(start, 0, d - 1), fix(stop, -1, d - 1), step};
}

Status map_slice(Node& n) {
  std::vector<int64_t> starts, ends, axes, steps;
  if (n.opset() < 10) {
    starts = n.attr_ints("starts").value_or(std::vector<int64_t>{});
    ends = n.attr_ints("ends").value_or(std::vector<int64_t>{});
    axes = n.attr_ints("axes").value_or(std::vector<int64_t>{});
  } else {
    DUET_ASSIGN_OR_RETURN(starts, n.ints(1, "starts"));
    DUET_ASSIGN_OR_RETURN(ends, n.ints(2, "ends"));
    if (n.has(3)) {
      DUET_ASSIGN_OR_RETURN(axes, n.ints(3, "axes"));
    }
    if (n.has(4)) {
      DUET_ASSIGN_OR_RETURN(steps, n.ints(4, "steps"));
    }
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return n.invalid("starts, ends, axes and steps of different lengths");
  const std::vector<int64_t> dims = n.shape(0);
  std::vector<Cut> cuts;
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    DUET_ASSIGN_OR_RETURN(Cut c, clamp_cut(n, axes[i], starts[i], ends[i], steps[i], dims));
    if (seen[static_cast<size_t>(c.axis)]) return n.invalid("an axis sliced twice");
    seen[static_cast<size_t>(c.axis)] = true;
    cuts.push_back(c);
  }
  if (n.known(0)) {
    DUET_TRY(n.room_for(dims, n.elem(0), 16));
    Array a = n.array(0);
    for (const Cut& c : cuts) a = slice(a, c.axis, c.start, c.stop, c.step);
    n.set_known(0, std::move(a));
    return {};
  }
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  for (size_t i = 0; i < cuts.size(); ++i) {
    const Cut& c = cuts[i];
    if (c.step < 0) return n.unsupported("negative steps at run time (duet views do not reverse)");
    if (c.start == 0 && c.stop == dims[static_cast<size_t>(c.axis)] && c.step == 1) continue;
    if (c.stop <= c.start) return n.unsupported("an empty slice (duet tensors are never empty)");
    OpAttrs at;
    at.axis = c.axis;
    at.start = c.start;
    at.stop = c.stop;
    at.step = c.step;
    x = n.op(OpKind::slice, {x}, at, i + 1 == cuts.size() ? "" : "axis" + std::to_string(c.axis));
  }
  n.set(0, x, n.elem(0));
  return {};
}

Status map_split(Node& n) {
  const std::vector<int64_t> dims = n.shape(0);
  DUET_ASSIGN_OR_RETURN(int axis,
                        normalize_axis(n.attr_int("axis", 0), static_cast<int>(dims.size())));
  const int64_t d = dims[static_cast<size_t>(axis)];
  std::vector<int64_t> sizes;
  if (n.opset() >= 13 && n.has(1)) {
    DUET_ASSIGN_OR_RETURN(sizes, n.ints(1, "split"));
  } else if (n.opset() < 13) {
    sizes = n.attr_ints("split").value_or(std::vector<int64_t>{});
  }
  if (sizes.empty()) {
    const auto parts =
        static_cast<int64_t>(n.attr_int("num_outputs", static_cast<int64_t>(n.num_outputs())));
    if (parts <= 0) return n.invalid("no outputs");
    const int64_t each = (d + parts - 1) / parts;  // the last part may be smaller (opset 18)
    for (int64_t k = 0; k < parts; ++k) sizes.push_back(std::min(each, d - k * each));
  }
  if (sizes.size() != n.num_outputs())
    return n.invalid(std::to_string(sizes.size()) + " split sizes for " +
                     std::to_string(n.num_outputs()) + " outputs");
  if (std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) != d)
    return n.invalid("split sizes " + dims_str(sizes) + " do not add up to " + std::to_string(d));
  int64_t start = 0;
  for (size_t k = 0; k < sizes.size(); start += sizes[k], ++k) {
    if (n.known(0)) {
      std::vector<int64_t> part = dims;
      part[static_cast<size_t>(axis)] = std::max<int64_t>(sizes[k], 0);
      DUET_TRY(n.room_for(part, n.elem(0), 8));
      n.set_known(k, slice(n.array(0), axis, start, start + sizes[k], 1));
      continue;
    }
    if (!n.output_used(k)) continue;
    if (sizes[k] <= 0) return n.unsupported("an empty split (duet tensors are never empty)");
    DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
    OpAttrs at;
    at.axis = axis;
    at.start = start;
    at.stop = start + sizes[k];
    n.set(k, n.op(OpKind::slice, {x}, at, {}, k), n.elem(0));
  }
  return {};
}

// Gather's row ids: known indices as a constant (negatives made positive), else the run-time
// tensor, which the embedding then reads with negative ids counting from the end.
Result<ValueId> gather_ids(Node& n, int64_t d, const std::vector<int64_t>& index_dims,
                           OpAttrs& at) {
  if (!n.known(1)) {
    at.negative_ids = true;
    return n.runtime(1);
  }
  std::vector<int64_t> idx = n.array(1).ints();
  for (int64_t& i : idx) i = i < 0 ? i + d : i;
  return n.constant(Array::of_ints(kInt32, index_dims, idx), "ids");
}

Status map_concat(Node& n) {
  std::vector<size_t> parts;
  for (size_t i = 0; i < n.num_inputs(); ++i)
    if (n.has(i)) parts.push_back(i);
  if (parts.empty()) return n.invalid("no inputs");
  const int r = n.rank(parts[0]);
  DUET_ASSIGN_OR_RETURN(int axis, normalize_axis(n.attr_int("axis", 0), r));
  for (size_t i : parts)
    if (n.rank(i) != r || n.elem(i) != n.elem(parts[0]))
      return n.invalid("inputs of different ranks or types");
  if (n.all_known()) {
    std::vector<const Array*> arrays;
    std::vector<int64_t> out = n.shape(parts[0]);
    out[static_cast<size_t>(axis)] = 0;
    for (size_t i : parts) {
      arrays.push_back(&n.array(i));
      out[static_cast<size_t>(axis)] += n.shape(i)[static_cast<size_t>(axis)];
    }
    DUET_TRY(n.room_for(out, n.elem(parts[0]), 0));
    n.set_known(0, concat(arrays, axis));
    return {};
  }
  std::vector<ValueId> xs;
  for (size_t i : parts) {
    if (n.shape(i)[static_cast<size_t>(axis)] == 0) continue;  // an empty part adds nothing
    DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(i));
    xs.push_back(x);
  }
  OpAttrs at;
  at.axis = axis;
  n.set(0, xs.size() == 1 ? xs[0] : n.op(OpKind::concat, xs, at), n.elem(parts[0]));
  return {};
}

Status map_gather(Node& n) {
  const std::vector<int64_t> dims = n.shape(0);
  DUET_ASSIGN_OR_RETURN(int axis,
                        normalize_axis(n.attr_int("axis", 0), static_cast<int>(dims.size())));
  const int64_t d = dims[static_cast<size_t>(axis)];
  const std::vector<int64_t> index_dims = n.shape(1);
  if (n.known(1)) {
    DUET_ASSIGN_OR_RETURN(std::vector<int64_t> idx, n.ints(1, "indices"));
    for (int64_t& i : idx) {
      if (i < -d || i >= d)
        return n.invalid("index " + std::to_string(i) + " outside [-" + std::to_string(d) + ", " +
                         std::to_string(d) + ")");
      if (i < 0) i += d;
    }
    if (n.known(0)) {
      std::vector<int64_t> out(dims.begin(), dims.begin() + axis);
      out.insert(out.end(), index_dims.begin(), index_dims.end());
      out.insert(out.end(), dims.begin() + axis + 1, dims.end());
      DUET_TRY(n.room_for(out, n.elem(0), 8));
      n.set_known(0, gather(n.array(0), idx, index_dims, axis));
      return {};
    }
    // A run of consecutive indices is a slice view (a scalar index also drops the axis).
    bool run = !idx.empty();
    for (size_t k = 1; k < idx.size(); ++k) run = run && idx[k] == idx[k - 1] + 1;
    if (run && index_dims.size() <= 1) {
      DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
      OpAttrs at;
      at.axis = axis;
      at.start = idx.front();
      at.stop = idx.back() + 1;
      if (!index_dims.empty()) {
        n.set(0, n.op(OpKind::slice, {x}, at), n.elem(0));
        return {};
      }
      std::vector<int64_t> out = dims;
      out.erase(out.begin() + axis);
      ValueId s = n.op(OpKind::slice, {x}, at, "slice");
      n.set(0, n.reshape(s, out), n.elem(0));
      return {};
    }
  }
  // Rows of a matrix: duet's embedding. Run-time indices in [-d, 0) count from the end (the
  // embedding's negative_ids); one outside [-d, d) is an error of the backend.
  if (axis == 0 && dims.size() <= 2 && elem_is_float(n.elem(0)) && !index_dims.empty() &&
      index_dims.size() <= 3) {
    DUET_ASSIGN_OR_RETURN(ValueId table, n.runtime(0));
    if (dims.size() == 1) table = n.reshape(table, {d, 1}, "table");
    OpAttrs at;
    DUET_ASSIGN_OR_RETURN(ValueId ids, gather_ids(n, d, index_dims, at));
    if (dims.size() == 1) {
      ValueId rows = n.op(OpKind::embedding, {table, ids}, at, "rows");
      n.set(0, n.reshape(rows, index_dims), n.elem(0));
    } else {
      n.set(0, n.op(OpKind::embedding, {table, ids}, at), n.elem(0));
    }
    return {};
  }
  // Any other axis or rank: that axis moved first and the rest flattened, [d, rest] (a permute
  // view, a copy), the rows gathered, then viewed as [indices..., other dims] and permuted into
  // ONNX's order [dims before axis, indices..., dims after].
  const size_t ri = index_dims.size();
  if (elem_is_float(n.elem(0)) && n.elem(0) != kDouble && ri >= 1 && ri <= 3 &&
      dims.size() - 1 + ri <= 4) {
    DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
    std::vector<int64_t> rest;  // the other dims, in order
    for (size_t k = 0; k < dims.size(); ++k)
      if (static_cast<int>(k) != axis) rest.push_back(dims[k]);
    if (axis != 0) {
      OpAttrs p;
      p.perm.push_back(axis);
      for (int k = 0; k < static_cast<int>(dims.size()); ++k)
        if (k != axis) p.perm.push_back(k);
      x = n.op(OpKind::permute, {x}, p, "axis_first");
    }
    ValueId table = n.reshape(x, {d, product(rest, 0, rest.size())}, "table");
    OpAttrs at;
    DUET_ASSIGN_OR_RETURN(ValueId ids, gather_ids(n, d, index_dims, at));
    ValueId rows = n.op(OpKind::embedding, {table, ids}, at, "rows");
    std::vector<int64_t> pre = index_dims;
    pre.insert(pre.end(), rest.begin(), rest.end());
    if (axis == 0) {
      n.set(0, n.reshape(rows, pre), n.elem(0));
      return {};
    }
    ValueId v = n.reshape(rows, pre, "gathered");
    OpAttrs p;
    const int ir = static_cast<int>(ri);
    for (int k = 0; k < axis; ++k) p.perm.push_back(ir + k);
    for (int k = 0; k < ir; ++k) p.perm.push_back(k);
    for (int k = ir + axis; k < static_cast<int>(pre.size()); ++k) p.perm.push_back(k);
    n.set(0, n.op(OpKind::permute, {v}, p), n.elem(0));
    return {};
  }
  return n.unsupported("Gather on axis " + std::to_string(axis) + " of " + dims_str(dims) +
                       " with indices " + dims_str(index_dims) +
                       " at run time (duet gathers with indices of rank 1 to 3 into a result of "
                       "rank <= 4, float data)");
}

// Output 0 as the elements of input `i` at the known flat positions `index`, laid out as `out`:
// folded when the input is known; at run time the input viewed as a one-column table [numel, 1]
// and its rows picked by duet's embedding with the positions as constant ids (a copy, exact).
Status take_elements(Node& n, size_t i, const std::vector<int64_t>& out,
                     const std::vector<int64_t>& index) {
  if (n.known(i)) {
    DUET_TRY(n.room_for(out, n.elem(i), 16));
    n.set_known(0, pick(n.array(i), out, index));
    return {};
  }
  if (!elem_is_float(n.elem(i)) || n.elem(i) == kDouble)
    return n.unsupported(std::string(n.type()) + " of " + elem_name(n.elem(i)) + " at run time");
  DUET_TRY(n.room_for(out, kInt32, 8));
  const std::vector<int64_t> dims = n.shape(i);
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(i));
  ValueId table = n.reshape(x, {product(dims, 0, dims.size()), 1}, "table");
  DUET_ASSIGN_OR_RETURN(
      ValueId ids,
      n.constant(Array::of_ints(kInt32, {static_cast<int64_t>(index.size())}, index), "ids"));
  ValueId rows = n.op(OpKind::embedding, {table, ids}, {}, "elements");
  n.set(0, n.reshape(rows, out), n.elem(i));
  return {};
}

// Output 0 as input `a` with elements replaced by input `b`'s: element i of the result is element
// ids[i] of both inputs' elements in a row (a's, then b's). Folded when both are known; at run time
// both viewed as one-column tables [numel, 1], concatenated and their rows picked by duet's
// embedding with the ids as constants: a copy, exact.
Status select_elements(Node& n, size_t a, size_t b, const std::vector<int64_t>& ids) {
  const std::vector<int64_t> dims = n.shape(a), bd = n.shape(b);
  const int64_t na = product(dims, 0, dims.size()), nb = product(bd, 0, bd.size());
  if (n.elem(a) != n.elem(b))
    return n.invalid("data and updates of types " + elem_name(n.elem(a)) + " and " +
                     elem_name(n.elem(b)));
  if (n.known(a) && n.known(b)) {
    DUET_TRY(n.room_for({na + nb}, n.elem(a), 16));
    const Array fa = n.array(a).reshaped({na}), fb = n.array(b).reshaped({nb});
    n.set_known(0, pick(concat({&fa, &fb}, 0), dims, ids));
    return {};
  }
  if (!elem_is_float(n.elem(a)) || n.elem(a) == kDouble)
    return n.unsupported(std::string(n.type()) + " of " + elem_name(n.elem(a)) + " at run time");
  DUET_TRY(n.room_for(dims, kInt32, 8));
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(a));
  DUET_ASSIGN_OR_RETURN(ValueId u, n.runtime(b));
  OpAttrs cat;
  cat.axis = 0;
  ValueId table =
      n.op(OpKind::concat,
           {n.reshape(x, {na, 1}, "data_column"), n.reshape(u, {nb, 1}, "updates_column")}, cat,
           "table");
  DUET_ASSIGN_OR_RETURN(ValueId idv, n.constant(Array::of_ints(kInt32, {na}, ids), "ids"));
  n.set(0, n.reshape(n.op(OpKind::embedding, {table, idv}, {}, "elements"), dims), n.elem(a));
  return {};
}

// Where each element of an indices tensor of ScatterElements or GatherElements points in the
// data: the row-major offset of the data element at the index element's coordinates, with its
// value (negative ones counting from the end) in place of the coordinate along `axis`.
Result<std::vector<int64_t>> element_offsets(Node& n, const std::vector<int64_t>& dims,
                                             const std::vector<int64_t>& idims, int axis,
                                             const std::vector<int64_t>& idx) {
  const int r = static_cast<int>(dims.size());
  const int64_t d = dims[static_cast<size_t>(axis)];
  std::vector<int64_t> flat(idx.size()), at(idims.size(), 0);
  for (size_t e = 0; e < idx.size(); ++e) {
    int64_t v = idx[e];
    if (v < -d || v >= d)
      return n.invalid("index " + std::to_string(v) + " outside [-" + std::to_string(d) + ", " +
                       std::to_string(d) + ")");
    if (v < 0) v += d;
    int64_t f = 0;
    for (int k = 0; k < r; ++k) {
      const int64_t c = k == axis ? v : at[static_cast<size_t>(k)];
      if (c >= dims[static_cast<size_t>(k)])
        return n.invalid("indices " + dims_str(idims) + " larger than data " + dims_str(dims));
      f = f * dims[static_cast<size_t>(k)] + c;
    }
    flat[e] = f;
    for (int k = r - 1; k >= 0; --k) {
      if (++at[static_cast<size_t>(k)] < idims[static_cast<size_t>(k)]) break;
      at[static_cast<size_t>(k)] = 0;
    }
  }
  return flat;
}

// Run-time indices `i` (f32) checked against the sizes `d` (a known f32 tensor that broadcasts
// with `i`, `minus_d` its negation): `positive` counts negative ones from the end (`i + d * [i <
// 0]`), `outside` is 1 where an index lies outside [-d, d), else 0.
struct Wrapped {
  ValueId positive, outside;
};
Wrapped wrap_indices(Node& n, ValueId i, ValueId d, ValueId minus_d, ValueId zero) {
  Wrapped w;
  w.positive =
      n.op(OpKind::add,
           {i, n.op(OpKind::mul, {n.op(OpKind::less, {i, zero}, {}, "negative"), d}, {}, "wrap")},
           {}, "positive");
  w.outside = n.op(OpKind::add,
                   {n.op(OpKind::less, {i, minus_d}, {}, "below"),
                    n.op(OpKind::less_equal, {d, i}, {}, "above")},
                   {}, "outside");
  return w;
}

ValueId reduce(Node& n, OpKind kind, ValueId x, std::vector<int> axes, std::string_view what) {
  OpAttrs at;
  at.axes = std::move(axes);
  return n.op(kind, {x}, at, what);
}

// Run-time indices as f32 (exact: they are checked to lie within sizes below 2^23).
Result<ValueId> float_indices(Node& n, size_t i) {
  if (n.elem(i) != kInt32 && n.elem(i) != kInt64)
    return n.invalid("indices of type " + elem_name(n.elem(i)));
  DUET_ASSIGN_OR_RETURN(ValueId idx, n.runtime(i));
  OpAttrs f32;
  f32.to = DType::f32;
  return n.op(OpKind::cast, {idx}, f32, "index");
}

Result<ValueId> f32_constant(Node& n, std::vector<int64_t> dims, std::vector<double> v,
                             std::string_view what) {
  return n.constant(Array::of_reals(kFloat, std::move(dims), std::move(v)), what);
}

// Output 0 as input 0 (the data, `na` elements) with the elements of input 2 (the updates, `nb`)
// written at their flat positions `pos` in the data (f32, `nb` of them, computed at run time);
// `bad` ([1]) is 1 when an index was outside its range. Each data element takes the last update
// aimed at it: E = [pos == p] as [na, nb], last = max over j of E * (j + 1), and the element is
// picked (embedding) from the data's and the updates' elements in a row: id p where last is 0,
// na + last - 1 where not. A bad index moves every id past that table, which the embedding
// reports as an error of the run. Exact (every number an integer below 2^24); na * nb
// comparisons, so for small tensors (a scatter kernel would be the way for large ones).
Status scatter_runtime(Node& n, ValueId pos, ValueId bad, int64_t na, int64_t nb) {
  const std::vector<int64_t> dims = n.shape(0);
  if (n.elem(0) != n.elem(2))
    return n.invalid("data and updates of types " + elem_name(n.elem(0)) + " and " +
                     elem_name(n.elem(2)));
  if (!elem_is_float(n.elem(0)) || n.elem(0) == kDouble)
    return n.unsupported(std::string(n.type()) + " of " + elem_name(n.elem(0)) +
                         " with indices computed at run time");
  if (na + nb >= (int64_t{1} << 23) || na * nb > (int64_t{1} << 22))
    return n.unsupported(std::string(n.type()) + " with indices computed at run time of " +
                         std::to_string(nb) + " updates into " + std::to_string(na) +
                         " elements (duet compares every position with every element: at most "
                         "2^22 pairs)");
  DUET_TRY(n.room_for({na, nb}, kFloat, 8));
  std::vector<double> p(static_cast<size_t>(na)), j(static_cast<size_t>(nb));
  std::iota(p.begin(), p.end(), 0.0);
  std::iota(j.begin(), j.end(), 1.0);
  DUET_ASSIGN_OR_RETURN(ValueId pcol, f32_constant(n, {na, 1}, p, "element_column"));
  DUET_ASSIGN_OR_RETURN(ValueId prow, f32_constant(n, {na}, p, "elements"));
  DUET_ASSIGN_OR_RETURN(ValueId number, f32_constant(n, {nb}, j, "update_numbers"));
  DUET_ASSIGN_OR_RETURN(ValueId zero, f32_constant(n, {1}, {0.0}, "zero"));
  DUET_ASSIGN_OR_RETURN(ValueId before,
                        f32_constant(n, {1}, {static_cast<double>(na - 1)}, "na_minus_1"));
  ValueId aimed = n.op(OpKind::equal, {n.reshape(pos, {1, nb}, "position_row"), pcol}, {}, "aimed");
  ValueId last = n.reshape(reduce(n, OpKind::reduce_max,
                                  n.op(OpKind::mul, {aimed, number}, {}, "numbered"), {1}, "last"),
                           {na}, "last_update");
  ValueId hit = n.op(OpKind::less, {zero, last}, {}, "hit");
  ValueId moved = n.op(
      OpKind::mul,
      {hit,
       n.op(OpKind::sub, {n.op(OpKind::add, {last, before}, {}, "update_id"), prow}, {}, "offset")},
      {}, "moved");
  OpAttrs past;
  past.alpha = static_cast<float>(na + nb);
  ValueId id = n.op(OpKind::add,
                    {n.op(OpKind::add, {prow, moved}, {}, "picked"),
                     n.op(OpKind::scale, {bad}, past, "past_the_table")},
                    {}, "checked");
  OpAttrs i32;
  i32.to = DType::i32;
  ValueId ids = n.op(OpKind::cast, {id}, i32, "ids");
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  DUET_ASSIGN_OR_RETURN(ValueId u, n.runtime(2));
  OpAttrs cat;
  cat.axis = 0;
  ValueId table =
      n.op(OpKind::concat,
           {n.reshape(x, {na, 1}, "data_column"), n.reshape(u, {nb, 1}, "updates_column")}, cat,
           "table");
  n.set(0, n.reshape(n.op(OpKind::embedding, {table, ids}, {}, "elements"), dims), n.elem(0));
  return {};
}

// Whether any of the 0/1 values of `outside` (of rank r) is 1, as [1].
ValueId any_outside(Node& n, ValueId outside, int r) {
  std::vector<int> all(static_cast<size_t>(r));
  std::iota(all.begin(), all.end(), 0);
  return n.reshape(reduce(n, OpKind::reduce_max, outside, all, "any_outside"), {1}, "bad");
}

// ScatterElements with indices computed at run time: each update's flat position in the data,
// `index * stride + base` (base the known position of its other coordinates), then
// scatter_runtime.
Status scatter_elements_runtime(Node& n, const std::vector<int64_t>& dims,
                                const std::vector<int64_t>& idims, int axis) {
  const int64_t na = product(dims, 0, dims.size()), nb = product(idims, 0, idims.size());
  if (na >= (int64_t{1} << 23))
    return n.unsupported(std::string(n.type()) +
                         " with indices computed at run time into 2^23 elements or more");
  DUET_TRY(n.room_for(idims, kInt64, 16));
  DUET_ASSIGN_OR_RETURN(
      const std::vector<int64_t> base_pos,
      element_offsets(n, dims, idims, axis, std::vector<int64_t>(static_cast<size_t>(nb), 0)));
  const auto a = static_cast<size_t>(axis);
  const double d = static_cast<double>(dims[a]);
  DUET_ASSIGN_OR_RETURN(ValueId i, float_indices(n, 1));
  DUET_ASSIGN_OR_RETURN(ValueId zero, f32_constant(n, {1}, {0.0}, "zero"));
  DUET_ASSIGN_OR_RETURN(ValueId dv, f32_constant(n, {1}, {d}, "d"));
  DUET_ASSIGN_OR_RETURN(ValueId minus_d, f32_constant(n, {1}, {-d}, "minus_d"));
  DUET_ASSIGN_OR_RETURN(
      ValueId base,
      f32_constant(n, idims, std::vector<double>(base_pos.begin(), base_pos.end()), "base"));
  const Wrapped w = wrap_indices(n, i, dv, minus_d, zero);
  OpAttrs stride;
  stride.alpha = static_cast<float>(product(dims, a + 1, dims.size()));
  ValueId pos = n.op(OpKind::add, {n.op(OpKind::scale, {w.positive}, stride, "along_axis"), base},
                     {}, "position");
  return scatter_runtime(n, pos, any_outside(n, w.outside, static_cast<int>(idims.size())), na, nb);
}

// The row of each index tuple (the last dim of `i`, f32 [tuples, m], coordinates of dims[b, b +
// m)) in the data viewed as [batches * those dims' product, the rest], with `outside` per tuple
// ([tuples, 1]): sum over k of coordinate k (made positive) times the product of the indexed dims
// after k, plus the tuple's batch times the indexed dims' product.
struct Rows {
  ValueId row, outside;
};
Result<Rows> tuple_rows(Node& n, ValueId i, const std::vector<int64_t>& dims, int64_t b, int64_t m,
                        int64_t tuples) {
  const auto sb = static_cast<size_t>(b), sm = static_cast<size_t>(m);
  std::vector<double> d(sm), minus(sm), stride(sm), base(static_cast<size_t>(tuples));
  for (size_t k = 0; k < sm; ++k) {
    d[k] = static_cast<double>(dims[sb + k]);
    minus[k] = -d[k];
    stride[k] = static_cast<double>(product(dims, sb + k + 1, sb + sm));
  }
  const int64_t per_batch = product(dims, sb, sb + sm), batches = product(dims, 0, sb);
  const int64_t per = tuples / batches;  // tuples of each batch
  for (int64_t t = 0; t < tuples; ++t)
    base[static_cast<size_t>(t)] = static_cast<double>((t / per) * per_batch);
  DUET_ASSIGN_OR_RETURN(ValueId zero, f32_constant(n, {1}, {0.0}, "zero"));
  DUET_ASSIGN_OR_RETURN(ValueId dv, f32_constant(n, {m}, d, "d"));
  DUET_ASSIGN_OR_RETURN(ValueId minus_d, f32_constant(n, {m}, minus, "minus_d"));
  DUET_ASSIGN_OR_RETURN(ValueId strides, f32_constant(n, {m}, stride, "strides"));
  DUET_ASSIGN_OR_RETURN(ValueId bases, f32_constant(n, {tuples}, base, "batch_rows"));
  const Wrapped w = wrap_indices(n, i, dv, minus_d, zero);
  ValueId within =
      n.reshape(reduce(n, OpKind::reduce_sum,
                       n.op(OpKind::mul, {w.positive, strides}, {}, "scaled"), {1}, "within"),
                {tuples}, "within_batch");
  return Rows{n.op(OpKind::add, {within, bases}, {}, "row"),
              reduce(n, OpKind::reduce_max, w.outside, {1}, "tuple_outside")};
}

// ScatterND with indices computed at run time: each tuple's row of slices, its slice's elements'
// flat positions, then scatter_runtime.
Status scatter_nd_runtime(Node& n, const std::vector<int64_t>& dims,
                          const std::vector<int64_t>& idims) {
  const int64_t q = idims.back(), tuples = product(idims, 0, idims.size() - 1);
  const int64_t slice = product(dims, static_cast<size_t>(q), dims.size());
  const int64_t na = product(dims, 0, dims.size()), nb = tuples * slice;
  if (na >= (int64_t{1} << 23))
    return n.unsupported("ScatterND with indices computed at run time into 2^23 elements or more");
  DUET_ASSIGN_OR_RETURN(ValueId i, float_indices(n, 1));
  i = n.reshape(i, {tuples, q}, "tuples");
  DUET_ASSIGN_OR_RETURN(Rows r, tuple_rows(n, i, dims, 0, q, tuples));
  std::vector<double> j(static_cast<size_t>(slice));
  std::iota(j.begin(), j.end(), 0.0);
  DUET_ASSIGN_OR_RETURN(ValueId within, f32_constant(n, {slice}, j, "within_slice"));
  OpAttrs by;
  by.alpha = static_cast<float>(slice);
  ValueId first =
      n.op(OpKind::scale, {n.reshape(r.row, {tuples, 1}, "row_column")}, by, "slice_start");
  ValueId pos = n.op(OpKind::add, {first, within}, {}, "position");
  return scatter_runtime(n, pos, any_outside(n, r.outside, 2), na, nb);
}

// GatherND with indices computed at run time: each tuple's row (tuple_rows) picks a row of the
// data viewed as [rows, slice] (embedding); a tuple with a coordinate outside its range becomes
// the id `rows`, which the embedding reports as an error of the run. Exact: every row number is
// an integer below 2^23.
Status gather_nd_runtime(Node& n, const std::vector<int64_t>& dims,
                         const std::vector<int64_t>& idims, int64_t b, int64_t m,
                         const std::vector<int64_t>& out) {
  if (!elem_is_float(n.elem(0)) || n.elem(0) == kDouble)
    return n.unsupported("GatherND of " + elem_name(n.elem(0)) +
                         " with indices computed at run time");
  const auto sb = static_cast<size_t>(b), sm = static_cast<size_t>(m);
  const int64_t rows = product(dims, 0, sb + sm), slice = product(dims, sb + sm, dims.size());
  const int64_t tuples = product(idims, 0, idims.size() - 1);
  if (rows >= (int64_t{1} << 23))
    return n.unsupported(
        "GatherND with indices computed at run time into 2^23 rows or more (duet computes the rows "
        "in f32)");
  if (out.size() > 4)
    return n.unsupported("GatherND with indices computed at run time into a result of rank " +
                         std::to_string(out.size()) + " (duet tensors have rank <= 4)");
  DUET_ASSIGN_OR_RETURN(ValueId i, float_indices(n, 1));
  i = n.reshape(i, {tuples, m}, "tuples");
  DUET_ASSIGN_OR_RETURN(Rows r, tuple_rows(n, i, dims, b, m, tuples));
  DUET_ASSIGN_OR_RETURN(ValueId zero, f32_constant(n, {1}, {0.0}, "zero"));
  DUET_ASSIGN_OR_RETURN(ValueId past,
                        f32_constant(n, {1}, {static_cast<double>(rows)}, "past_the_table"));
  ValueId bad = n.reshape(r.outside, {tuples}, "bad");
  ValueId good = n.op(OpKind::equal, {bad, zero}, {}, "inside");
  ValueId pos = n.op(
      OpKind::add,
      {n.op(OpKind::mul, {r.row, good}, {}, "kept"), n.op(OpKind::mul, {bad, past}, {}, "sent")},
      {}, "checked");
  OpAttrs i32;
  i32.to = DType::i32;
  ValueId ids = n.op(OpKind::cast, {pos}, i32, "ids");
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  ValueId table = n.reshape(x, {rows, slice}, "table");
  n.set(0, n.reshape(n.op(OpKind::embedding, {table, ids}, {}, "rows"), out), n.elem(0));
  return {};
}

// ScatterElements (and Scatter before opset 11) with known indices and no reduction.
Status map_scatter_elements(Node& n) {
  const std::string red = n.attr_string("reduction", "none");
  if (red != "none") return n.unsupported(std::string(n.type()) + " with reduction '" + red + "'");
  const std::vector<int64_t> dims = n.shape(0), idims = n.shape(1);
  const int r = static_cast<int>(dims.size());
  DUET_ASSIGN_OR_RETURN(int axis, normalize_axis(n.attr_int("axis", 0), r));
  if (static_cast<int>(idims.size()) != r || n.shape(2) != idims)
    return n.invalid("indices " + dims_str(idims) + " and updates " + dims_str(n.shape(2)) +
                     " for data " + dims_str(dims));
  if (!n.known(1)) return scatter_elements_runtime(n, dims, idims, axis);
  const int64_t na = product(dims, 0, dims.size());
  DUET_TRY(n.room_for({na}, kInt64, 16));
  std::vector<int64_t> ids(static_cast<size_t>(na));
  std::iota(ids.begin(), ids.end(), int64_t{0});
  DUET_ASSIGN_OR_RETURN(const std::vector<int64_t> flat,
                        element_offsets(n, dims, idims, axis, n.array(1).ints()));
  for (size_t e = 0; e < flat.size(); ++e)
    ids[static_cast<size_t>(flat[e])] = na + static_cast<int64_t>(e);
  return select_elements(n, 0, 2, ids);
}

// ScatterND with known indices and no reduction: each index tuple names a slice of the data that
// the matching slice of the updates replaces.
Status map_scatter_nd(Node& n) {
  const std::string red = n.attr_string("reduction", "none");
  if (red != "none") return n.unsupported("ScatterND with reduction '" + red + "'");
  const std::vector<int64_t> dims = n.shape(0), idims = n.shape(1);
  if (idims.empty()) return n.invalid("indices of rank 0");
  const auto q = static_cast<size_t>(idims.back());
  if (q < 1 || q > dims.size()) return n.invalid("index tuples of " + std::to_string(q));
  const int64_t na = product(dims, 0, dims.size());
  const int64_t slice_size = product(dims, q, dims.size());
  const int64_t tuples = product(idims, 0, idims.size() - 1);
  if (product(n.shape(2), 0, n.shape(2).size()) != tuples * slice_size)
    return n.invalid("updates " + dims_str(n.shape(2)) + " for indices " + dims_str(idims) +
                     " and data " + dims_str(dims));
  if (!n.known(1)) return scatter_nd_runtime(n, dims, idims);
  DUET_TRY(n.room_for({na}, kInt64, 16));
  std::vector<int64_t> ids(static_cast<size_t>(na));
  std::iota(ids.begin(), ids.end(), int64_t{0});
  const std::vector<int64_t> idx = n.array(1).ints();
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t base = 0;
    for (size_t k = 0; k < q; ++k) {
      int64_t v = idx[static_cast<size_t>(t) * q + k];
      const int64_t d = dims[k];
      if (v < -d || v >= d)
        return n.invalid("index " + std::to_string(v) + " outside [-" + std::to_string(d) + ", " +
                         std::to_string(d) + ")");
      if (v < 0) v += d;
      base = base * d + v;
    }
    for (int64_t j = 0; j < slice_size; ++j)
      ids[static_cast<size_t>(base * slice_size + j)] = na + t * slice_size + j;
  }
  return select_elements(n, 0, 2, ids);
}

// GatherElements with indices computed at run time: each element's flat position in the data,
// `index * stride + base` in f32 (the index made positive by `+ d * [index < 0]`, base the known
// flat position of its other coordinates), cast to i32 ids that pick from the data viewed as a
// one-column table [numel, 1] (embedding). An index outside [-d, d) becomes the id numel, which
// the embedding reports as an error of the run. Exact: every position is an integer below 2^23.
Status gather_elements_runtime(Node& n, const std::vector<int64_t>& dims,
                               const std::vector<int64_t>& idims, int axis) {
  if (!elem_is_float(n.elem(0)) || n.elem(0) == kDouble)
    return n.unsupported("GatherElements of " + elem_name(n.elem(0)) +
                         " with indices computed at run time");
  if (n.elem(1) != kInt32 && n.elem(1) != kInt64)
    return n.invalid("indices of type " + elem_name(n.elem(1)));
  const int64_t numel = product(dims, 0, dims.size()), count = product(idims, 0, idims.size());
  if (numel >= (int64_t{1} << 23))
    return n.unsupported(
        "GatherElements with indices computed at run time into 2^23 elements or more (duet "
        "computes the positions in f32)");
  DUET_TRY(n.room_for(idims, kInt64, 16));
  DUET_ASSIGN_OR_RETURN(
      const std::vector<int64_t> base_pos,
      element_offsets(n, dims, idims, axis, std::vector<int64_t>(static_cast<size_t>(count), 0)));
  const auto a = static_cast<size_t>(axis);
  const double d = static_cast<double>(dims[a]);
  const double stride = static_cast<double>(product(dims, a + 1, dims.size()));
  std::vector<double> base(base_pos.begin(), base_pos.end());
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  DUET_ASSIGN_OR_RETURN(ValueId idx, n.runtime(1));
  ValueId table = n.reshape(x, {numel, 1}, "table");
  OpAttrs f32;
  f32.to = DType::f32;
  ValueId i = n.op(OpKind::cast, {idx}, f32, "index");
  auto scalar = [&](double v, std::string_view what) {
    return n.constant(Array::of_reals(kFloat, {1}, {v}), what);
  };
  DUET_ASSIGN_OR_RETURN(ValueId zero, scalar(0.0, "zero"));
  DUET_ASSIGN_OR_RETURN(ValueId lo, scalar(-d, "minus_d"));
  DUET_ASSIGN_OR_RETURN(ValueId hi, scalar(d, "d"));
  DUET_ASSIGN_OR_RETURN(ValueId past, scalar(static_cast<double>(numel), "past_the_table"));
  DUET_ASSIGN_OR_RETURN(ValueId offsets, n.constant(Array::of_reals(kFloat, idims, base), "base"));
  auto scaled = [&](ValueId v, double by, std::string_view what) {
    OpAttrs at;
    at.alpha = static_cast<float>(by);
    return n.op(OpKind::scale, {v}, at, what);
  };
  ValueId positive =
      n.op(OpKind::add, {i, scaled(n.op(OpKind::less, {i, zero}, {}, "negative"), d, "wrap")}, {},
           "positive");
  ValueId pos =
      n.op(OpKind::add, {scaled(positive, stride, "along_axis"), offsets}, {}, "position");
  ValueId bad = n.op(
      OpKind::add,
      {n.op(OpKind::less, {i, lo}, {}, "below"), n.op(OpKind::less_equal, {hi, i}, {}, "above")},
      {}, "outside");
  ValueId good = n.op(OpKind::equal, {bad, zero}, {}, "inside");
  pos =
      n.op(OpKind::add,
           {n.op(OpKind::mul, {pos, good}, {}, "kept"), n.op(OpKind::mul, {bad, past}, {}, "sent")},
           {}, "checked");
  OpAttrs i32;
  i32.to = DType::i32;
  ValueId ids = n.op(OpKind::cast, {pos}, i32, "ids");
  if (idims.size() > 3) ids = n.reshape(ids, {count}, "flat_ids");
  ValueId rows = n.op(OpKind::embedding, {table, ids}, {}, "elements");
  n.set(0, n.reshape(rows, idims), n.elem(0));
  return {};
}

// GatherElements with known indices (any axis, negative ones counting from the end).
Status map_gather_elements(Node& n) {
  const std::vector<int64_t> dims = n.shape(0), idims = n.shape(1);
  const int r = static_cast<int>(dims.size());
  DUET_ASSIGN_OR_RETURN(int axis, normalize_axis(n.attr_int("axis", 0), r));
  if (static_cast<int>(idims.size()) != r)
    return n.invalid("indices of rank " + std::to_string(idims.size()) + " for data of rank " +
                     std::to_string(r));
  if (!n.known(1)) return gather_elements_runtime(n, dims, idims, axis);
  DUET_TRY(n.room_for(idims, kInt64, 16));
  DUET_ASSIGN_OR_RETURN(const std::vector<int64_t> flat,
                        element_offsets(n, dims, idims, axis, n.array(1).ints()));
  return take_elements(n, 0, idims, flat);
}

// GatherND with known indices (batch_dims, negative indices counting from the end): each
// output element's flat position in the data, taken by take_elements.
Status map_gather_nd(Node& n) {
  const std::vector<int64_t> dims = n.shape(0), idims = n.shape(1);
  const int64_t b = n.attr_int("batch_dims", 0);
  const auto r = static_cast<int64_t>(dims.size()), q = static_cast<int64_t>(idims.size());
  if (q < 1) return n.invalid("indices of rank 0 (expected >= 1)");
  const int64_t m = idims.back();
  if (b < 0 || b >= std::min(r, q))
    return n.invalid("batch_dims " + std::to_string(b) + " (expected 0 to " +
                     std::to_string(std::min(r, q) - 1) + ")");
  if (m < 1 || b + m > r)
    return n.invalid("index tuples of " + std::to_string(m) + " for data " + dims_str(dims) +
                     " and batch_dims " + std::to_string(b));
  for (int64_t k = 0; k < b; ++k)
    if (idims[static_cast<size_t>(k)] != dims[static_cast<size_t>(k)])
      return n.invalid("indices " + dims_str(idims) + " and data " + dims_str(dims) +
                       " differ in the batch dims");
  std::vector<int64_t> out(idims.begin(), idims.end() - 1);
  out.insert(out.end(), dims.begin() + b + m, dims.end());
  if (!n.known(1)) return gather_nd_runtime(n, dims, idims, b, m, out);
  DUET_TRY(n.room_for(out, kInt64, 16));
  const auto sb = static_cast<size_t>(b), sm = static_cast<size_t>(m);
  const int64_t slice = product(dims, sb + sm, dims.size()), batches = product(dims, 0, sb),
                per_batch = product(dims, sb, dims.size()),
                tuples = product(idims, sb, idims.size() - 1);
  const std::vector<int64_t> idx = n.array(1).ints();
  std::vector<int64_t> flat;
  flat.reserve(static_cast<size_t>(batches * tuples * slice));
  for (int64_t bi = 0; bi < batches; ++bi)
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t base = 0;
      for (size_t k = 0; k < sm; ++k) {
        int64_t v = idx[static_cast<size_t>((bi * tuples + t) * m) + k];
        const int64_t d = dims[sb + k];
        if (v < -d || v >= d)
          return n.invalid("index " + std::to_string(v) + " outside [-" + std::to_string(d) + ", " +
                           std::to_string(d) + ")");
        if (v < 0) v += d;
        base = base * d + v;
      }
      for (int64_t j = 0; j < slice; ++j) flat.push_back(bi * per_batch + base * slice + j);
    }
  return take_elements(n, 0, out, flat);
}

// DepthToSpace (DCR or CRD) and SpaceToDepth: a fixed permutation of a [N, C, H, W] tensor's
// elements (its definition's rank-6 reshape and transpose, which duet's rank-4 tensors cannot
// hold), taken by take_elements.
Status depth_space(Node& n, bool to_space) {
  const std::vector<int64_t> dims = n.shape(0);
  const int64_t b = n.attr_int("blocksize", 0);
  if (dims.size() != 4) return n.invalid("input of rank " + std::to_string(dims.size()) + " (4)");
  if (b < 1) return n.invalid("blocksize " + std::to_string(b));
  const int64_t N = dims[0], C = dims[1], H = dims[2], W = dims[3];
  const bool crd = n.attr_string("mode", "DCR") == "CRD";
  std::vector<int64_t> out;
  if (to_space) {
    if (C % (b * b) != 0) return n.invalid("channels not a multiple of blocksize^2");
    out = {N, C / (b * b), H * b, W * b};
  } else {
    if (H % b != 0 || W % b != 0) return n.invalid("height or width not a multiple of blocksize");
    out = {N, C * b * b, H / b, W / b};
  }
  DUET_TRY(n.room_for(out, kInt64, 16));
  std::vector<int64_t> flat;
  flat.reserve(static_cast<size_t>(N * C * H * W));
  for (int64_t i = 0; i < out[0]; ++i)
    for (int64_t c = 0; c < out[1]; ++c)
      for (int64_t h = 0; h < out[2]; ++h)
        for (int64_t w = 0; w < out[3]; ++w) {
          int64_t ic, ih, iw;
          if (to_space) {
            const int64_t bh = h % b, bw = w % b;
            ic = crd ? c * b * b + bh * b + bw : (bh * b + bw) * out[1] + c;
            ih = h / b;
            iw = w / b;
          } else {
            const int64_t blk = c / C, ch = c % C;
            ic = ch;
            ih = h * b + blk / b;
            iw = w * b + blk % b;
          }
          flat.push_back(((i * C + ic) * H + ih) * W + iw);
        }
  return take_elements(n, 0, out, flat);
}

Status map_depth_to_space(Node& n) {
  return depth_space(n, true);
}
Status map_space_to_depth(Node& n) {
  return depth_space(n, false);
}

// EyeLike: depends on the input's shape only, known at import: ones on diagonal k.
Status map_eye_like(Node& n) {
  const std::vector<int64_t> dims = n.shape(0);
  if (dims.size() != 2) return n.invalid("input of rank " + std::to_string(dims.size()) + " (2)");
  const int elem = static_cast<int>(n.attr_int("dtype", n.elem(0)));
  const int64_t k = n.attr_int("k", 0);
  DUET_TRY(n.room_for(dims, elem, 8));
  std::vector<double> v(static_cast<size_t>(dims[0] * dims[1]), 0.0);
  for (int64_t i = 0; i < dims[0]; ++i)
    if (i + k >= 0 && i + k < dims[1]) v[static_cast<size_t>(i * dims[1] + i + k)] = 1.0;
  n.set_known(0, Array::of_reals(elem, dims, v));
  return {};
}

// Tile: `repeats[k]` copies of x along each axis k, concatenated (folded when x is known).
Status map_tile(Node& n) {
  DUET_ASSIGN_OR_RETURN(std::vector<int64_t> reps, n.ints(1, "repeats"));
  const std::vector<int64_t> dims = n.shape(0);
  if (reps.size() != dims.size())
    return n.invalid(std::to_string(reps.size()) + " repeats for rank " +
                     std::to_string(dims.size()));
  std::vector<int64_t> out = dims;
  for (size_t k = 0; k < dims.size(); ++k) {
    if (reps[k] < 1)
      return reps[k] < 0 ? n.invalid("repeats " + dims_str(reps))
                         : n.unsupported("repeats of 0 (duet tensors are never empty)");
    out[k] *= reps[k];
  }
  if (n.known(0)) {
    DUET_TRY(n.room_for(out, n.elem(0), 8));
    Array a = n.array(0);
    for (size_t k = 0; k < dims.size(); ++k) {
      if (reps[k] == 1) continue;
      std::vector<const Array*> parts(static_cast<size_t>(reps[k]), &a);
      a = concat(parts, static_cast<int>(k));
    }
    n.set_known(0, std::move(a));
    return {};
  }
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  size_t last = dims.size();
  for (size_t k = 0; k < dims.size(); ++k)
    if (reps[k] > 1) last = k;
  if (last == dims.size()) {
    n.forward(0, 0);
    return {};
  }
  for (size_t k = 0; k <= last; ++k) {
    if (reps[k] == 1) continue;
    OpAttrs at;
    at.axis = static_cast<int>(k);
    x = n.op(OpKind::concat, std::vector<ValueId>(static_cast<size_t>(reps[k]), x), at,
             k == last ? "" : "tiled" + std::to_string(k));
  }
  n.set(0, x, n.elem(0));
  return {};
}

Status map_expand(Node& n) {
  DUET_ASSIGN_OR_RETURN(std::vector<int64_t> shape, n.ints(1, "shape"));
  DUET_ASSIGN_OR_RETURN(std::vector<int64_t> out, broadcast(n.shape(0), shape));
  if (n.known(0)) {
    DUET_TRY(n.room_for(out, n.elem(0), 8));
    n.set_known(0, pick(n.array(0), out, broadcast_index(n.array(0).dims(), out)));
    return {};
  }
  if (out == n.shape(0)) return alias(n);
  // A broadcast at run time: x + 0 with a known zero tensor of the output's shape (exact, but
  // for -0 becoming +0).
  if (!elem_is_float(n.elem(0)) || n.elem(0) == kDouble)
    return n.unsupported("Expand of a run-time " + elem_name(n.elem(0)) + " value to " +
                         dims_str(out) + " (duet's element-wise ops are float)");
  DUET_TRY(n.room_for(out, n.elem(0), 8));
  DUET_ASSIGN_OR_RETURN(ValueId x, n.runtime(0));
  DUET_ASSIGN_OR_RETURN(
      ValueId zeros,
      n.constant(Array::of_reals(
                     n.elem(0), out,
                     std::vector<double>(static_cast<size_t>(product(out, 0, out.size())), 0.0)),
                 "zeros"));
  n.set(0, n.op(OpKind::add, {x, zeros}), n.elem(0));
  return {};
}

Status map_range(Node& n) {
  if (!n.all_known()) return n.unsupported("Range with run-time bounds");
  const Array& s = n.array(0);
  const double start = s.real_at(0), limit = n.array(1).real_at(0), delta = n.array(2).real_at(0);
  if (delta == 0) return n.invalid("delta 0");
  const double steps = std::ceil((limit - start) / delta);
  if (!(steps <= static_cast<double>(kMaxFoldedElements)))  // NaN too
    return n.invalid("more than 2^28 elements");
  const auto count_ = static_cast<int64_t>(std::max(0.0, steps));
  DUET_TRY(n.room_for({count_}, s.elem(), 8));
  std::vector<double> v(static_cast<size_t>(count_));
  for (int64_t i = 0; i < count_; ++i)
    v[static_cast<size_t>(i)] = start + static_cast<double>(i) * delta;
  n.set_known(0, Array::of_reals(s.elem(), std::vector<int64_t>{count_}, v));
  return {};
}

// Compress with a known condition: the slices along `axis` (or the elements of the flattened
// input, without an axis) whose condition is true, taken by take_elements (a condition shorter
// than the axis leaves the rest out). A condition computed at run time is refused: the result's
// shape depends on it.
Status map_compress(Node& n) {
  if (!n.known(1))
    return n.unsupported(
        "Compress with a condition computed at run time (the result's shape depends on it)");
  if (n.rank(1) != 1) return n.invalid("a condition of rank " + std::to_string(n.rank(1)));
  std::vector<int64_t> dims = n.shape(0);
  int axis = 0;
  if (n.has_attr("axis")) {
    DUET_ASSIGN_OR_RETURN(axis,
                          normalize_axis(n.attr_int("axis", 0), static_cast<int>(dims.size())));
  } else {
    dims = {product(dims, 0, dims.size())};
  }
  const size_t a = static_cast<size_t>(axis);
  const std::vector<int64_t> cond = n.array(1).ints();
  if (static_cast<int64_t>(cond.size()) > dims[a])
    return n.invalid("a condition of " + std::to_string(cond.size()) + " values for an axis of " +
                     std::to_string(dims[a]));
  std::vector<int64_t> picked;
  for (size_t k = 0; k < cond.size(); ++k)
    if (cond[k] != 0) picked.push_back(static_cast<int64_t>(k));
  if (picked.empty())
    return n.unsupported("Compress that selects nothing (duet has no empty tensors)");
  std::vector<int64_t> out = dims;
  out[a] = static_cast<int64_t>(picked.size());
  DUET_TRY(n.room_for(out, kInt64, 16));
  const int64_t outer = product(dims, 0, a), inner = product(dims, a + 1, dims.size());
  std::vector<int64_t> flat;
  flat.reserve(static_cast<size_t>(product(out, 0, out.size())));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t p : picked)
      for (int64_t i = 0; i < inner; ++i) flat.push_back((o * dims[a] + p) * inner + i);
  return take_elements(n, 0, out, flat);
}

// ReverseSequence with known sequence_lens: element (b, t) of the result is the input's
// (b, len[b] - 1 - t) for t < len[b], else (b, t) (time_axis and batch_axis 0 and 1, either
// way), taken by take_elements: a copy, exact.
Status map_reverse_sequence(Node& n) {
  const std::vector<int64_t> dims = n.shape(0);
  if (dims.size() < 2) return n.invalid("an input of rank " + std::to_string(dims.size()));
  const int64_t ta = n.attr_int("time_axis", 0), ba = n.attr_int("batch_axis", 1);
  if (!((ta == 0 && ba == 1) || (ta == 1 && ba == 0)))
    return n.invalid("time_axis " + std::to_string(ta) + " and batch_axis " + std::to_string(ba) +
                     " (0 and 1, either way)");
  DUET_ASSIGN_OR_RETURN(std::vector<int64_t> lens, n.ints(1, "sequence_lens"));
  const int64_t steps = dims[static_cast<size_t>(ta)];
  if (static_cast<int64_t>(lens.size()) != dims[static_cast<size_t>(ba)])
    return n.invalid(std::to_string(lens.size()) + " sequence lengths for a batch of " +
                     std::to_string(dims[static_cast<size_t>(ba)]));
  for (int64_t l : lens)
    if (l < 0 || l > steps)
      return n.invalid("a sequence length of " + std::to_string(l) + " outside [0, " +
                       std::to_string(steps) + "]");
  DUET_TRY(n.room_for(dims, kInt64, 16));
  const int64_t inner = product(dims, 2, dims.size());
  std::vector<int64_t> flat(static_cast<size_t>(product(dims, 0, dims.size())));
  for (int64_t i = 0; i < dims[0]; ++i)
    for (int64_t j = 0; j < dims[1]; ++j) {
      const int64_t b = ta == 0 ? j : i, t = ta == 0 ? i : j;
      const int64_t len = lens[static_cast<size_t>(b)];
      const int64_t from = t < len ? len - 1 - t : t;
      const int64_t i2 = ta == 0 ? from : i, j2 = ta == 0 ? j : from;
      for (int64_t k = 0; k < inner; ++k)
        flat[static_cast<size_t>((i * dims[1] + j) * inner + k)] = (i2 * dims[1] + j2) * inner + k;
    }
  return take_elements(n, 0, dims, flat);
}

// NonZero of a known input, folded: the coordinates of its nonzero elements (NaN counts), one
// column each. At run time it is refused: the result's shape depends on the values.
Status map_non_zero(Node& n) {
  if (!n.known(0))
    return n.unsupported(
        "op type 'NonZero' is mapped only for a known input (its result's shape depends on the "
        "values)");
  const Array& x = n.array(0);
  const std::vector<int64_t> dims = x.dims();
  std::vector<int64_t> hits;
  for (int64_t e = 0; e < x.numel(); ++e)
    if (x.real_at(e) != 0) hits.push_back(e);
  const auto r = static_cast<int64_t>(dims.size()), k = static_cast<int64_t>(hits.size());
  if (r == 0 || k == 0)
    return n.unsupported("NonZero with an empty result (duet has no empty tensors)");
  DUET_TRY(n.room_for({r, k}, kInt64, 8));
  std::vector<int64_t> v(static_cast<size_t>(r * k));
  for (int64_t j = 0; j < k; ++j) {
    int64_t rem = hits[static_cast<size_t>(j)];
    for (int64_t d = r - 1; d >= 0; --d) {
      v[static_cast<size_t>(d * k + j)] = rem % dims[static_cast<size_t>(d)];
      rem /= dims[static_cast<size_t>(d)];
    }
  }
  n.set_known(0, Array::of_ints(kInt64, {r, k}, v));
  return {};
}

// HannWindow, HammingWindow, BlackmanWindow: folded at import (the size must be known), as ONNX
// defines them: a0 - a1 cos(2 pi k / N) + a2 cos(4 pi k / N) for k in [0, size), N the size
// (periodic) or the size - 1 (symmetric).
Status window(Node& n, double a0, double a1, double a2) {
  DUET_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, n.ints(0, "size"));
  if (sizes.size() != 1)
    return n.invalid("a size of " + std::to_string(sizes.size()) + " values (a scalar)");
  const int64_t size = sizes[0];
  if (size < 0 || size > kMaxFoldedElements)
    return n.invalid("size " + std::to_string(size) + " outside [0, 2^28]");
  const int elem = static_cast<int>(n.attr_int("output_datatype", kFloat));
  if (!elem_is_float(elem) && elem != kInt64 && elem != kInt32)
    return n.unsupported(std::string(n.type()) + " of " + elem_name(elem));
  DUET_TRY(n.room_for({size}, elem, 8));
  const double period = static_cast<double>(n.attr_int("periodic", 1) != 0 ? size : size - 1);
  const double pi = 3.14159265358979323846;
  std::vector<double> v(static_cast<size_t>(size));
  for (int64_t k = 0; k < size; ++k) {
    const double t = 2 * pi * static_cast<double>(k) / period;
    v[static_cast<size_t>(k)] = a0 - a1 * std::cos(t) + a2 * std::cos(2 * t);
  }
  n.set_known(0, Array::of_reals(elem, std::vector<int64_t>{size}, v));
  return {};
}
Status map_hann_window(Node& n) {
  return window(n, 0.5, 0.5, 0.0);
}
Status map_hamming_window(Node& n) {
  return window(n, 25.0 / 46.0, 21.0 / 46.0, 0.0);
}
Status map_blackman_window(Node& n) {
  return window(n, 0.42, 0.5, 0.08);
}

const Mapping kShape[] = {
    {"Identity", map_identity},
    {"Constant", map_constant},
    {"ConstantOfShape", map_constant_of_shape},
    {"HannWindow", map_hann_window},
    {"Compress", map_compress},
    {"ReverseSequence", map_reverse_sequence},
    {"NonZero", map_non_zero},
    {"HammingWindow", map_hamming_window},
    {"BlackmanWindow", map_blackman_window},
    {"Shape", map_shape},
    {"Size", map_size},
    {"Cast", map_cast},
    {"CastLike", map_cast},
    {"Reshape", map_reshape},
    {"Flatten", map_flatten},
    {"Squeeze", map_squeeze},
    {"Unsqueeze", map_unsqueeze},
    {"Transpose", map_transpose},
    {"Slice", map_slice},
    {"Split", map_split},
    {"Concat", map_concat},
    {"Gather", map_gather},
    {"Tile", map_tile},
    {"GatherElements", map_gather_elements},
    {"GatherND", map_gather_nd},
    {"DepthToSpace", map_depth_to_space},
    {"SpaceToDepth", map_space_to_depth},
    {"EyeLike", map_eye_like},
    {"ScatterElements", map_scatter_elements},
    {"Scatter", map_scatter_elements},
    {"ScatterND", map_scatter_nd},
    {"Expand", map_expand},
    {"Range", map_range},
};

}  // namespace

std::span<const Mapping> shape_mappings() {
  return kShape;
}

}  // namespace duet::onnx_import
