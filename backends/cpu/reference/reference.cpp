#include "reference/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "duet/half.h"
#include "duet/internal/index.h"

namespace duet::reference {

namespace {

// An input widened to doubles (row-major over its own shape) and read through any broadcast.
struct Values {
  TensorDesc desc;  // dense over `v`
  std::vector<double> v;

  explicit Values(const HostTensor& t)
      : desc(TensorDesc::contiguous(DType::f32, t.desc().dims())), v(t.to_doubles()) {}

  // Where the element at a multi-index of a rank-`rank` shape is in `v` (right-aligned numpy
  // broadcasting).
  int64_t offset(const Dims& idx, int rank) const {
    int64_t off = 0;
    const int lead = rank - desc.rank;
    for (int d = 0; d < desc.rank; ++d) {
      int64_t i = desc.shape[u(d)] == 1 ? 0 : idx[u(d + lead)];
      off += i * desc.strides[u(d)];
    }
    return off;
  }
  double at(const Dims& idx, int rank) const { return v[u(offset(idx, rank))]; }
  // How far offset() moves when coordinate `dim` of a rank-`rank` index grows by one (0 where
  // that coordinate is broadcast).
  int64_t step(int dim, int rank) const {
    const int d = dim - (rank - desc.rank);
    return d < 0 || desc.shape[u(d)] == 1 ? 0 : desc.strides[u(d)];
  }
};

// Calls f(index) for every multi-index of `shape` in row-major order.
template <class F>
void for_each(const TensorDesc& shape, F&& f) {
  Dims idx{};
  const int64_t n = shape.numel();
  for (int64_t k = 0; k < n; ++k) {
    f(idx);
    for (int d = shape.rank - 1; d >= 0; --d) {
      if (++idx[u(d)] < shape.shape[u(d)]) break;
      idx[u(d)] = 0;
    }
  }
}

// Element-wise ops by their float64 definition (duet/op.h: eltwise_reference), inputs
// broadcast to the output's shape.
Result<std::vector<double>> elementwise(const OpDesc& op, std::span<const HostTensor> in) {
  const EltwiseReference f = eltwise_reference(op.kind);
  if (!f)
    return Err(Code::internal)
        .op(op_name(op.kind), op.name)
        .device("reference")
        .note("no float64 definition for this element-wise op");
  std::vector<double> y(u(op.output.numel()));
  if (in.size() == 1) {
    Values a(in[0]);
    for (size_t i = 0; i < y.size(); ++i) y[i] = f(a.v[i], 0.0, op.attrs);
    return y;
  }
  Values a(in[0]), b(in[1]);
  int64_t o = 0;
  for_each(op.output, [&](const Dims& idx) {
    y[u(o++)] = f(a.at(idx, op.output.rank), b.at(idx, op.output.rank), op.attrs);
  });
  return y;
}

std::vector<double> matmul(const OpDesc& op, std::span<const HostTensor> in) {
  Values a(in[0]), b(in[1]);
  const TensorDesc& out = op.output;
  const int r = out.rank;
  const int64_t M = out.dim(-2), N = out.dim(-1);
  const int64_t K = op.attrs.transpose_a ? in[0].desc().dim(-2) : in[0].desc().dim(-1);
  std::vector<double> y(u(out.numel()));
  int64_t o = 0;
  // The coordinates k runs along, and how far each operand's offset moves a step of k.
  const int ka = op.attrs.transpose_a ? r - 2 : r - 1;
  const int kb = op.attrs.transpose_b ? r - 1 : r - 2;
  const int64_t sa = a.step(ka, r), sb = b.step(kb, r);
  for_each(out, [&](const Dims& idx) {
    Dims ia = idx, ib = idx;
    ia[u(r - 2)] = op.attrs.transpose_a ? 0 : idx[u(r - 2)];
    ia[u(r - 1)] = op.attrs.transpose_a ? idx[u(r - 2)] : 0;
    ib[u(r - 2)] = op.attrs.transpose_b ? idx[u(r - 1)] : 0;
    ib[u(r - 1)] = op.attrs.transpose_b ? 0 : idx[u(r - 1)];
    // offset() right-aligns, so the operands' own batch ranks are handled there.
    const int64_t a0 = a.offset(ia, r), b0 = b.offset(ib, r);
    double acc = 0;
    for (int64_t k = 0; k < K; ++k) acc += a.v[u(a0 + k * sa)] * b.v[u(b0 + k * sb)];
    (void)M, (void)N;
    y[u(o++)] = acc;
  });
  return y;
}

// Softmax of one row in place; a row with no finite entry (all masked) becomes all zeros.
void softmax_row(std::span<double> row) {
  double mx = -std::numeric_limits<double>::infinity();
  for (double x : row) mx = std::max(mx, x);
  if (mx == -std::numeric_limits<double>::infinity()) {
    std::fill(row.begin(), row.end(), 0.0);
    return;
  }
  double sum = 0;
  for (double& x : row) sum += (x = std::exp(x - mx));
  for (double& x : row) x /= sum;
}

// Each element of x into the output element whose coordinates it has outside the reduced dims.
std::vector<double> reduce(const OpDesc& op, std::span<const HostTensor> in) {
  Values x(in[0]);
  const TensorDesc& out = op.output;
  const OpKind k = op.kind;
  const double init = k == OpKind::reduce_max    ? -std::numeric_limits<double>::infinity()
                      : k == OpKind::reduce_min  ? std::numeric_limits<double>::infinity()
                      : k == OpKind::reduce_prod ? 1.0
                                                 : 0.0;
  std::vector<double> y(u(out.numel()), init);
  int64_t i = 0;
  for_each(x.desc, [&](const Dims& idx) {
    int64_t o = 0;
    for (int d = 0; d < out.rank; ++d)
      o += (out.shape[u(d)] == 1 ? 0 : idx[u(d)]) * out.strides[u(d)];
    const double v = x.v[u(i++)];
    double& acc = y[u(o)];
    if (k == OpKind::reduce_max)
      acc = v > acc || std::isnan(v) ? v : acc;
    else if (k == OpKind::reduce_min)
      acc = v < acc || std::isnan(v) ? v : acc;
    else if (k == OpKind::reduce_prod)
      acc *= v;
    else
      acc += v;
  });
  if (k == OpKind::reduce_mean) {
    const double count = static_cast<double>(x.desc.numel() / std::max<int64_t>(out.numel(), 1));
    for (double& v : y) v /= count;
  }
  return y;
}

std::vector<double> softmax(const OpDesc& op, std::span<const HostTensor> in) {
  Values x(in[0]);
  const TensorDesc& out = op.output;
  const double s = softmax_scale(op);
  std::vector<double> y(u(out.numel()));
  int64_t o = 0;
  if (op.has_input(1)) {
    Values m(in[1]);
    for_each(out, [&](const Dims& idx) {
      y[u(o)] = x.v[u(o)] * s + m.at(idx, out.rank);
      ++o;
    });
  } else {
    for (size_t i = 0; i < y.size(); ++i) y[i] = x.v[i] * s;
  }
  const int64_t n = out.dim(-1);
  for (int64_t r = 0; r < out.numel() / n; ++r) softmax_row(std::span(y).subspan(u(r * n), u(n)));
  return y;
}

std::vector<double> norm(const OpDesc& op, std::span<const HostTensor> in) {
  Values x(in[0]);
  std::vector<double> w, b;
  if (op.has_input(1)) w = in[1].to_doubles();
  if (op.has_input(2)) b = in[2].to_doubles();
  const int64_t n = op.output.dim(-1), rows = op.output.numel() / n;
  const double eps = op.attrs.eps;
  std::vector<double> y(x.v.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.v.data() + r * n;
    double* yr = y.data() + r * n;
    double mean = 0, var = 0;
    if (op.kind == OpKind::layernorm) {
      for (int64_t i = 0; i < n; ++i) mean += xr[i];
      mean /= static_cast<double>(n);
    }
    for (int64_t i = 0; i < n; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    const double inv = 1.0 / std::sqrt(var / static_cast<double>(n) + eps);
    for (int64_t i = 0; i < n; ++i) {
      double v = (xr[i] - mean) * inv;
      if (!w.empty()) v *= w[u(i)];
      if (!b.empty()) v += b[u(i)];
      yr[i] = v;
    }
  }
  return y;
}

// The value of a run-time scalar input.
int64_t scalar(const OpDesc& op, std::span<const HostTensor> in) {
  const int si = scalar_input(op);
  return si < 0 ? 0 : static_cast<int64_t>(in[u(si)].to_doubles()[0]);
}

std::vector<double> rope(const OpDesc& op, std::span<const HostTensor> in) {
  Values x(in[0]);
  const int64_t first = op.attrs.rope_offset + scalar(op, in);
  std::vector<double> y = x.v;
  const int64_t L = op.output.dim(2), D = op.output.dim(3);
  const int64_t rd = rope_dims(op), half = rd / 2;
  const int64_t rows = op.output.numel() / D;
  for (int64_t r = 0; r < rows; ++r) {
    const double pos = static_cast<double>(first + r % L);
    double* row = y.data() + r * D;
    const double* src = x.v.data() + r * D;
    for (int64_t i = 0; i < half; ++i) {
      const double freq = std::pow(static_cast<double>(op.attrs.rope_theta),
                                   -2.0 * static_cast<double>(i) / static_cast<double>(rd));
      const double c = std::cos(pos * freq), s = std::sin(pos * freq);
      const int64_t i0 = op.attrs.rope_mode == RopeMode::neox ? i : 2 * i;
      const int64_t i1 = op.attrs.rope_mode == RopeMode::neox ? i + half : 2 * i + 1;
      row[i0] = src[i0] * c - src[i1] * s;
      row[i1] = src[i0] * s + src[i1] * c;
    }
  }
  return y;
}

std::vector<double> attention(const OpDesc& op, std::span<const HostTensor> in) {
  Values q(in[0]), k(in[1]), v(in[2]);
  std::vector<double> mask;
  TensorDesc mdesc;
  const TensorDesc& qd = in[0].desc();
  const int64_t B = qd.dim(0), Hq = qd.dim(1), Lq = qd.dim(2), D = qd.dim(3);
  const int64_t Hkv = in[1].desc().dim(1), cap = in[1].desc().dim(2);
  const int64_t Lk = scalar_input(op) >= 0 ? scalar(op, in) : cap;  // the valid keys
  const int64_t group = Hq / Hkv;
  const double scale = attention_scale(op);
  const Dims full{B, Hq, Lq, cap};
  if (const int mi = attention_mask_input(op); mi >= 0) {
    auto bm = broadcast_to(TensorDesc::contiguous(DType::f32, in[u(mi)].desc().dims()), full);
    mdesc = *bm;
    mask = in[u(mi)].to_doubles();
  }
  std::vector<double> y(u(B * Hq * Lq * D));
  std::vector<double> p(u(Lk));
  const double ninf = -std::numeric_limits<double>::infinity();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / group;
      for (int64_t i = 0; i < Lq; ++i) {
        const double* qi = q.v.data() + ((b * Hq + h) * Lq + i) * D;
        for (int64_t j = 0; j < Lk; ++j) {
          if (op.attrs.causal && j > i + (Lk - Lq)) {
            p[u(j)] = ninf;
            continue;
          }
          const double* kj = k.v.data() + ((b * Hkv + hk) * cap + j) * D;
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += qi[d] * kj[d];
          s *= scale;
          if (!mask.empty())
            s += mask[u(b * mdesc.strides[0] + h * mdesc.strides[1] + i * mdesc.strides[2] +
                        j * mdesc.strides[3])];
          p[u(j)] = s;
        }
        softmax_row(p);
        double* yi = y.data() + ((b * Hq + h) * Lq + i) * D;
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < Lk; ++j)
            acc += p[u(j)] * v.v[u(((b * Hkv + hk) * cap + j) * D + d)];
          yi[d] = acc;
        }
      }
    }
  return y;
}

// The state's values with the slice replaced by x, each rounded to the state's dtype.
std::vector<double> write_slice(const OpDesc& op, std::span<const HostTensor> in) {
  std::vector<double> y = in[0].to_doubles();
  const std::vector<double> x = in[1].to_doubles();
  const TensorDesc& out = op.output;
  const int axis = op.attrs.axis;
  const int64_t len = in[1].desc().dim(axis), cap = out.dim(axis);
  const int64_t s = op.attrs.start + scalar(op, in);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= out.shape[u(d)];
  for (int d = axis + 1; d < out.rank; ++d) inner *= out.shape[u(d)];
  HostTensor one = HostTensor::empty(out.dtype, std::span<const int64_t>{});
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < len * inner; ++i) {
      store_from_double(one.storage(), out.dtype, 0, x[u(o * len * inner + i)]);
      y[u((o * cap + s) * inner + i)] = load_as_double(one.storage(), out.dtype, 0);
    }
  return y;
}

std::vector<double> concat(const OpDesc& op, std::span<const HostTensor> in) {
  const TensorDesc& out = op.output;
  const int axis = op.attrs.axis;
  std::vector<Values> parts;
  for (const HostTensor& t : in) parts.emplace_back(t);
  std::vector<double> y(u(out.numel()));
  int64_t o = 0;
  for_each(out, [&](const Dims& idx) {
    Dims local = idx;
    size_t p = 0;
    while (local[u(axis)] >= parts[p].desc.shape[u(axis)])
      local[u(axis)] -= parts[p++].desc.shape[u(axis)];
    y[u(o++)] = parts[p].at(local, out.rank);
  });
  return y;
}

}  // namespace

Result<std::vector<double>> evaluate(const OpDesc& op, std::span<const HostTensor> inputs) {
  if (inputs.size() != op.inputs.size())
    return Err(Code::invalid_argument)
        .op(op_name(op.kind), op.name)
        .device("reference")
        .expected(std::to_string(op.inputs.size()) + " inputs")
        .got(std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].desc().same_shape(op.inputs[i]) || inputs[i].dtype() != op.inputs[i].dtype)
      return Err(Code::invalid_argument)
          .op(op_name(op.kind), op.name)
          .tensor(op.input_name(i))
          .device("reference")
          .expected(op.inputs[i].str())
          .got(inputs[i].desc().str());

  if (const int si = scalar_input(op); si >= 0) {
    // Run-time values out of range: an error, as every backend reports it.
    const int64_t v = scalar(op, inputs);
    int64_t lo = 0, hi = std::numeric_limits<int64_t>::max();
    std::string what = "a position >= 0";
    if (op.kind == OpKind::attention) {
      hi = op.inputs[1].dim(2);
      what = "a key count in [0, " + std::to_string(hi) + "]";
    } else if (op.kind == OpKind::write_slice) {
      const int64_t cap = op.output.dim(op.attrs.axis), len = op.inputs[1].dim(op.attrs.axis);
      lo = -op.attrs.start;
      hi = cap - len - op.attrs.start;
      what = "an offset in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    } else {
      lo = -op.attrs.rope_offset;
    }
    if (v < lo || v > hi)
      return Err(Code::invalid_argument)
          .op(op_name(op.kind), op.name)
          .tensor(op.input_name(u(si)))
          .device("reference")
          .expected(what)
          .got(std::to_string(v));
  }
  if (op_class(op.kind) == OpClass::elementwise) return elementwise(op, inputs);
  switch (op.kind) {
    case OpKind::matmul:
      return matmul(op, inputs);
    case OpKind::softmax:
      return softmax(op, inputs);
    case OpKind::rmsnorm:
    case OpKind::layernorm:
      return norm(op, inputs);
    case OpKind::rope:
      return rope(op, inputs);
    case OpKind::reduce_sum:
    case OpKind::reduce_mean:
    case OpKind::reduce_max:
    case OpKind::reduce_min:
    case OpKind::reduce_prod:
      return reduce(op, inputs);
    case OpKind::attention:
      return attention(op, inputs);
    case OpKind::cast: {
      // The value after conversion to the target type, so integer targets compare exactly.
      std::vector<double> y = inputs[0].to_doubles();
      HostTensor one = HostTensor::empty(op.attrs.to, std::span<const int64_t>{});
      for (double& x : y) {
        store_from_double(one.storage(), op.attrs.to, 0, x);
        x = load_as_double(one.storage(), op.attrs.to, 0);
      }
      return y;
    }
    case OpKind::copy:
    case OpKind::reshape:
    case OpKind::transpose:
    case OpKind::permute:
    case OpKind::slice: {
      auto view = inputs[0].view(op.output);
      if (!view.ok()) return view.status();
      return op.kind == OpKind::copy ? inputs[0].to_doubles() : view->to_doubles();
    }
    case OpKind::concat:
      return concat(op, inputs);
    case OpKind::write_slice:
      return write_slice(op, inputs);
    case OpKind::embedding: {
      std::vector<double> table = inputs[0].to_doubles();
      std::vector<double> ids = inputs[1].to_doubles();
      const int64_t V = op.inputs[0].dim(0), D = op.inputs[0].dim(1);
      std::vector<double> y(u(op.output.numel()));
      for (size_t r = 0; r < ids.size(); ++r) {
        int64_t id = static_cast<int64_t>(ids[r]);
        if (op.attrs.negative_ids && id < 0 && id >= -V) id += V;
        if (id < 0 || id >= V)
          return Err(Code::invalid_argument)
              .op("embedding", op.name)
              .tensor(op.input_name(1))
              .device("reference")
              .expected(embedding_id_range(op))
              .got("id " + std::to_string(ids[r]) + " at position " + std::to_string(r));
        std::copy_n(table.begin() + id * D, D, y.begin() + static_cast<int64_t>(r) * D);
      }
      return y;
    }
    default:
      break;
  }
  return Err(Code::internal).op(op_name(op.kind), op.name).device("reference").note("unknown op");
}

}  // namespace duet::reference
