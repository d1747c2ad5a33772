#include "duet/tensor.h"

#include <algorithm>
#include <string>

#include "duet/internal/index.h"

namespace duet {

namespace {
std::string shape_of(std::span<const int64_t> s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

Status view_error(std::string_view view, const TensorDesc& t, std::string_view expected,
                  std::string got) {
  return Err(Code::invalid_argument)
      .op(view)
      .expected(expected)
      .got(std::move(got) + " for " + t.str());
}
}  // namespace

TensorDesc TensorDesc::contiguous(DType dtype, std::span<const int64_t> shape) {
  TensorDesc t;
  t.dtype = dtype;
  t.rank = static_cast<int>(std::min<size_t>(shape.size(), kMaxRank));
  int64_t s = 1;
  for (int i = t.rank - 1; i >= 0; --i) {
    t.shape[u(i)] = shape[u(i)];
    t.strides[u(i)] = s;
    s *= std::max<int64_t>(shape[u(i)], 1);
  }
  return t;
}

int64_t TensorDesc::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= shape[u(i)];
  return n;
}

bool TensorDesc::is_contiguous() const {
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; --i) {
    if (shape[u(i)] != 1 && strides[u(i)] != s) return false;
    s *= shape[u(i)];
  }
  return true;
}

int64_t TensorDesc::storage_extent() const {
  int64_t last = offset;
  for (int i = 0; i < rank; ++i) last += (shape[u(i)] - 1) * strides[u(i)];
  return numel() == 0 ? offset : last + 1;
}

bool TensorDesc::same_shape(const TensorDesc& o) const {
  if (rank != o.rank) return false;
  for (int i = 0; i < rank; ++i)
    if (shape[u(i)] != o.shape[u(i)]) return false;
  return true;
}

std::string TensorDesc::shape_str() const {
  return shape_of(dims());
}

std::string TensorDesc::str() const {
  std::string s = std::string(dtype_name(dtype)) + shape_str();
  if (!is_contiguous() || offset != 0) {
    s += " strides" + shape_of({strides.data(), u(rank)});
    if (offset != 0) s += " offset " + std::to_string(offset);
  }
  return s;
}

bool operator==(const TensorDesc& a, const TensorDesc& b) {
  if (a.dtype != b.dtype || a.rank != b.rank || a.offset != b.offset) return false;
  for (int i = 0; i < a.rank; ++i)
    if (a.shape[u(i)] != b.shape[u(i)] || a.strides[u(i)] != b.strides[u(i)]) return false;
  return true;
}

Status validate(const TensorDesc& t) {
  if (t.rank < 0 || t.rank > kMaxRank)
    return Err(Code::invalid_argument)
        .expected("rank 0 to 4")
        .got("rank " + std::to_string(t.rank));
  for (int i = 0; i < t.rank; ++i) {
    if (t.shape[u(i)] <= 0)
      return Err(Code::invalid_argument)
          .expected("every dimension >= 1")
          .got("shape " + t.shape_str());
    if (t.strides[u(i)] < 0)
      return Err(Code::invalid_argument).expected("non-negative strides").got(t.str());
  }
  if (t.offset < 0) return Err(Code::invalid_argument).expected("offset >= 0").got(t.str());
  if (is_quantized(t.dtype)) {
    // Rows of whole, dense blocks: the last dim is a multiple of the block and unit-strided, every
    // other stride and the offset land on block starts.
    const int64_t be = dtype_block_elems(t.dtype);
    bool ok = t.rank >= 1 && t.shape[u(t.rank - 1)] % be == 0 && t.strides[u(t.rank - 1)] == 1 &&
              t.offset % be == 0;
    for (int i = 0; ok && i + 1 < t.rank; ++i) ok = t.strides[u(i)] % be == 0;
    if (!ok)
      return Err(Code::invalid_argument)
          .expected("rows of whole " + std::string(dtype_name(t.dtype)) +
                    " blocks (a last dim that is a multiple of " + std::to_string(be) +
                    " with stride 1, other strides and the offset multiples of " +
                    std::to_string(be) + ")")
          .got(t.str());
  }
  // Element counts and the storage a view spans must fit comfortably in 64 bits (as bytes too).
  constexpr int64_t kMaxElems = int64_t{1} << 48;
  int64_t n = 1, extent = t.offset;
  for (int i = 0; i < t.rank; ++i) {
    int64_t span = 0;
    if (__builtin_mul_overflow(n, t.shape[u(i)], &n) || n > kMaxElems ||
        __builtin_mul_overflow(t.shape[u(i)] - 1, t.strides[u(i)], &span) ||
        __builtin_add_overflow(extent, span, &extent) || extent > kMaxElems)
      return Err(Code::invalid_argument)
          .expected("at most 2^48 elements in a tensor and its storage")
          .got(t.str());
  }
  return {};
}

Result<TensorDesc> transpose(const TensorDesc& t, int dim0, int dim1) {
  if (dim0 < 0) dim0 += t.rank;
  if (dim1 < 0) dim1 += t.rank;
  if (dim0 < 0 || dim0 >= t.rank || dim1 < 0 || dim1 >= t.rank)
    return view_error("transpose", t, "dims within rank " + std::to_string(t.rank),
                      "dims (" + std::to_string(dim0) + ", " + std::to_string(dim1) + ")");
  TensorDesc r = t;
  std::swap(r.shape[u(dim0)], r.shape[u(dim1)]);
  std::swap(r.strides[u(dim0)], r.strides[u(dim1)]);
  return r;
}

Result<TensorDesc> permute(const TensorDesc& t, std::span<const int> order) {
  std::string got = "order [";
  for (size_t i = 0; i < order.size(); ++i) got += (i ? "," : "") + std::to_string(order[i]);
  got += "]";
  if (static_cast<int>(order.size()) != t.rank)
    return view_error("permute", t, "a permutation of " + std::to_string(t.rank) + " dims", got);
  std::array<bool, kMaxRank> seen{};
  TensorDesc r = t;
  for (int i = 0; i < t.rank; ++i) {
    int d = order[u(i)];
    if (d < 0) d += t.rank;
    if (d < 0 || d >= t.rank || seen[u(d)])
      return view_error("permute", t, "a permutation of " + std::to_string(t.rank) + " dims", got);
    seen[u(d)] = true;
    r.shape[u(i)] = t.shape[u(d)];
    r.strides[u(i)] = t.strides[u(d)];
  }
  return r;
}

Result<TensorDesc> slice(const TensorDesc& t, int dim, int64_t start, int64_t stop, int64_t step) {
  if (dim < 0) dim += t.rank;
  if (dim < 0 || dim >= t.rank)
    return view_error("slice", t, "dim within rank " + std::to_string(t.rank),
                      "dim " + std::to_string(dim));
  const int64_t n = t.shape[u(dim)];
  if (start < 0) start += n;
  if (stop < 0) stop += n;
  stop = std::min(stop, n);
  if (step <= 0 || start < 0 || start >= stop)
    return view_error("slice", t,
                      "0 <= start < stop <= " + std::to_string(n) + " and step >= 1 on dim " +
                          std::to_string(dim),
                      "start " + std::to_string(start) + ", stop " + std::to_string(stop) +
                          ", step " + std::to_string(step));
  TensorDesc r = t;
  r.offset += start * t.strides[u(dim)];
  r.shape[u(dim)] = (stop - start + step - 1) / step;
  r.strides[u(dim)] *= step;
  return r;
}

Result<TensorDesc> reshape(const TensorDesc& t, std::span<const int64_t> shape) {
  if (shape.size() > kMaxRank)
    return view_error("reshape", t, "at most 4 dims", "shape " + shape_of(shape));
  Dims target{};
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && infer < 0) {
      infer = static_cast<int>(i);
    } else if (shape[i] <= 0) {
      return view_error("reshape", t, "sizes >= 1 (one may be -1)", "shape " + shape_of(shape));
    } else {
      known *= shape[i];
    }
    target[i] = shape[i];
  }
  if (infer >= 0) {
    if (known == 0 || t.numel() % known != 0)
      return view_error("reshape", t, "a shape with " + std::to_string(t.numel()) + " elements",
                        "shape " + shape_of(shape));
    target[u(infer)] = t.numel() / known;
    known *= target[u(infer)];
  }
  if (known != t.numel())
    return view_error("reshape", t, "a shape with " + std::to_string(t.numel()) + " elements",
                      "shape " + shape_of(shape));

  // Match groups of old dims to groups of new dims with equal products; within an old group
  // the dims must be mutually contiguous for the group to be re-split without a copy.
  TensorDesc r;
  r.dtype = t.dtype;
  r.rank = static_cast<int>(shape.size());
  r.offset = t.offset;
  r.shape = target;
  int oi = 0, ni = 0;
  while (ni < r.rank || oi < t.rank) {
    // Size-1 dims carry no layout; give new ones a harmless stride.
    if (ni < r.rank && target[u(ni)] == 1) {
      r.strides[u(ni)] = ni + 1 < r.rank ? 0 : 1;
      ++ni;
      continue;
    }
    if (oi < t.rank && t.shape[u(oi)] == 1) {
      ++oi;
      continue;
    }
    if (ni >= r.rank || oi >= t.rank) break;
    int o_end = oi, n_end = ni;
    int64_t op = t.shape[u(o_end++)], np = target[u(n_end++)];
    while (op != np) {
      if (op < np)
        op *= t.shape[u(o_end++)];
      else
        np *= target[u(n_end++)];
    }
    // Each dim of the group of size > 1 must lie right outside the next one of size > 1: a
    // size-1 dim between them carries no layout, whatever stride it was given.
    for (int k = oi, prev = -1; k < o_end; ++k) {
      if (t.shape[u(k)] == 1) continue;
      if (prev >= 0 && t.strides[u(prev)] != t.strides[u(k)] * t.shape[u(k)])
        return view_error("reshape", t, "a view whose strides allow shape " + shape_of(shape),
                          "a non-contiguous layout (make it contiguous first)");
      prev = k;
    }
    int64_t s = t.strides[u(o_end - 1)];
    for (int k = n_end - 1; k >= ni; --k) {
      r.strides[u(k)] = s;
      s *= target[u(k)];
    }
    oi = o_end;
    ni = n_end;
  }
  // Fix strides of size-1 dims so that a dense result reads as contiguous.
  int64_t s = 1;
  for (int k = r.rank - 1; k >= 0; --k) {
    if (target[u(k)] == 1)
      r.strides[u(k)] = s;
    else
      s = r.strides[u(k)] * target[u(k)];
  }
  return r;
}

Result<Dims> broadcast_shapes(std::span<const int64_t> a, std::span<const int64_t> b,
                              int* out_rank) {
  const size_t rank = std::max(a.size(), b.size());
  Dims r{};
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return Err(Code::invalid_argument)
          .expected("shapes that broadcast (equal sizes or 1, aligned from the right)")
          .got(shape_of(a) + " and " + shape_of(b));
    r[i] = da == 1 ? db : da;
  }
  if (out_rank) *out_rank = static_cast<int>(rank);
  return r;
}

Result<TensorDesc> broadcast_to(const TensorDesc& t, std::span<const int64_t> shape) {
  if (shape.size() > kMaxRank || shape.size() < static_cast<size_t>(t.rank))
    return view_error("broadcast", t, "a target of rank >= " + std::to_string(t.rank),
                      "shape " + shape_of(shape));
  TensorDesc r;
  r.dtype = t.dtype;
  r.rank = static_cast<int>(shape.size());
  r.offset = t.offset;
  const int lead = r.rank - t.rank;
  for (int i = 0; i < r.rank; ++i) {
    r.shape[u(i)] = shape[u(i)];
    if (i < lead) {
      r.strides[u(i)] = 0;
      continue;
    }
    int64_t d = t.shape[u(i - lead)];
    if (d == shape[u(i)]) {
      r.strides[u(i)] = t.strides[u(i - lead)];
    } else if (d == 1) {
      r.strides[u(i)] = 0;
    } else {
      return view_error("broadcast", t, "shape " + shape_of(shape) + " (sizes equal or 1)",
                        "size " + std::to_string(d) + " on dim " + std::to_string(i - lead));
    }
  }
  return r;
}

}  // namespace duet
