#include "fold.h"

#include <cstring>

namespace duet::onnx_import {

namespace {
size_t z(int64_t i) {
  return static_cast<size_t>(i);
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;) s[d - 1] = s[d] * dims[d];
  return s;
}

int64_t product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}
}  // namespace

Result<int> normalize_axis(int64_t axis, int rank, std::string_view what) {
  if (axis < -rank || axis >= rank || (rank == 0 && axis != 0))
    return Status(Code::invalid_argument, std::string(what) + " " + std::to_string(axis) +
                                              " is outside rank " + std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

Status check_folded_size(const std::vector<int64_t>& dims) {
  DUET_ASSIGN_OR_RETURN(int64_t n, count(dims));
  if (n > kMaxFoldedElements)
    return Status(Code::invalid_argument, "a value of shape " + dims_str(dims) +
                                              " evaluated at import would have more than 2^28 "
                                              "elements");
  return {};
}

Result<std::vector<int64_t>> broadcast(const std::vector<int64_t>& a,
                                       const std::vector<int64_t>& b) {
  for (const auto* s : {&a, &b})
    for (int64_t d : *s)
      if (d < 0)
        return Status(Code::invalid_argument, "shape " + dims_str(*s) + " has a negative size");
  const size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1)
      return Status(Code::invalid_argument,
                    "shapes " + dims_str(a) + " and " + dims_str(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> broadcast_index(const std::vector<int64_t>& shape,
                                     const std::vector<int64_t>& out) {
  // An empty result reads nothing (and the partial products of its other sizes may overflow).
  for (int64_t d : out)
    if (d == 0) return {};
  const size_t lead = out.size() - shape.size();
  const std::vector<int64_t> src_strides = strides_of(shape);
  const int64_t n = product(out);
  std::vector<int64_t> index(z(n));
  std::vector<int64_t> at(out.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t s = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      if (shape[d] != 1) s += at[lead + d] * src_strides[d];
    index[z(i)] = s;
    for (size_t d = out.size(); d-- > 0;) {
      if (++at[d] < out[d]) break;
      at[d] = 0;
    }
  }
  return index;
}

Array pick(const Array& src, std::vector<int64_t> dims, const std::vector<int64_t>& index) {
  const size_t es = z(elem_size(src.elem()));
  std::string bytes(index.size() * es, '\0');
  for (size_t i = 0; i < index.size(); ++i)
    std::memcpy(bytes.data() + i * es, src.bytes().data() + z(index[i]) * es, es);
  return *Array::from_bytes(src.elem(), std::move(dims), std::move(bytes));
}

Result<Array> fold_binary(const Array& a, const Array& b, int out_elem,
                          const std::function<double(double, double)>& real,
                          const std::function<int64_t(int64_t, int64_t)>& integer) {
  DUET_ASSIGN_OR_RETURN(std::vector<int64_t> out, broadcast(a.dims(), b.dims()));
  DUET_TRY(check_folded_size(out));
  const std::vector<int64_t> ia = broadcast_index(a.dims(), out);
  const std::vector<int64_t> ib = broadcast_index(b.dims(), out);
  if (elem_is_float(a.elem()) || elem_is_float(b.elem())) {
    std::vector<double> v(ia.size());
    for (size_t i = 0; i < v.size(); ++i) v[i] = real(a.real_at(ia[i]), b.real_at(ib[i]));
    return Array::of_reals(out_elem, out, v);
  }
  std::vector<int64_t> v(ia.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = integer(a.int_at(ia[i]), b.int_at(ib[i]));
  return Array::of_ints(out_elem, out, v);
}

Array fold_unary(const Array& a, const std::function<double(double)>& f) {
  std::vector<double> v = a.reals();
  for (double& x : v) x = f(x);
  return Array::of_reals(a.elem(), a.dims(), v);
}

Array transpose(const Array& a, const std::vector<int64_t>& perm) {
  std::vector<int64_t> dims(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) dims[d] = a.dims()[z(perm[d])];
  const std::vector<int64_t> src_strides = strides_of(a.dims());
  std::vector<int64_t> index(z(a.numel()));
  std::vector<int64_t> at(dims.size(), 0);
  for (size_t i = 0; i < index.size(); ++i) {
    int64_t s = 0;
    for (size_t d = 0; d < dims.size(); ++d) s += at[d] * src_strides[z(perm[d])];
    index[i] = s;
    for (size_t d = dims.size(); d-- > 0;) {
      if (++at[d] < dims[d]) break;
      at[d] = 0;
    }
  }
  return pick(a, dims, index);
}

Array slice(const Array& a, int axis, int64_t start, int64_t stop, int64_t step) {
  std::vector<int64_t> dims = a.dims();
  int64_t n = 0;
  if (step > 0 && stop > start) n = (stop - start + step - 1) / step;
  if (step < 0 && start > stop) n = (start - stop - step - 1) / -step;
  dims[z(axis)] = n;
  const int64_t inner = product({dims.begin() + axis + 1, dims.end()});
  const int64_t outer = product({dims.begin(), dims.begin() + axis});
  const int64_t src_dim = a.dims()[z(axis)];
  std::vector<int64_t> index;
  index.reserve(z(outer * n * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = 0; i < inner; ++i)
        index.push_back((o * src_dim + start + k * step) * inner + i);
  return pick(a, dims, index);
}

Array concat(const std::vector<const Array*>& parts, int axis) {
  std::vector<int64_t> dims = parts[0]->dims();
  dims[z(axis)] = 0;
  for (const Array* p : parts) dims[z(axis)] += p->dims()[z(axis)];
  const int64_t outer = product({dims.begin(), dims.begin() + axis});
  const size_t es = z(elem_size(parts[0]->elem()));
  std::string bytes;
  bytes.reserve(z(product(dims)) * es);
  for (int64_t o = 0; o < outer; ++o)
    for (const Array* p : parts) {
      const int64_t chunk = p->numel() / std::max<int64_t>(outer, 1);
      bytes.append(p->bytes().data() + z(o * chunk) * es, z(chunk) * es);
    }
  return *Array::from_bytes(parts[0]->elem(), std::move(dims), std::move(bytes));
}

Array gather(const Array& data, const std::vector<int64_t>& indices,
             const std::vector<int64_t>& index_dims, int axis) {
  const std::vector<int64_t>& d = data.dims();
  std::vector<int64_t> dims(d.begin(), d.begin() + axis);
  dims.insert(dims.end(), index_dims.begin(), index_dims.end());
  dims.insert(dims.end(), d.begin() + axis + 1, d.end());
  const int64_t inner = product({d.begin() + axis + 1, d.end()});
  const int64_t outer = product({d.begin(), d.begin() + axis});
  std::vector<int64_t> index;
  index.reserve(z(outer) * indices.size() * z(inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k : indices)
      for (int64_t i = 0; i < inner; ++i) index.push_back((o * d[z(axis)] + k) * inner + i);
  return pick(data, dims, index);
}

}  // namespace duet::onnx_import
