// Tensor descriptors: dtype, shape (rank 0 to 4), strides and offset, in elements. A descriptor
// says how to read a tensor out of some storage; it owns no memory. Views (transpose, permute,
// slice, reshape, broadcast) are new descriptors over the same storage.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "duet/dtype.h"
#include "duet/export.h"
#include "duet/status.h"

namespace duet {

inline constexpr int kMaxRank = 4;
using Dims = std::array<int64_t, kMaxRank>;

struct DUET_API TensorDesc {
  DType dtype = DType::f32;
  int rank = 0;
  Dims shape{};        // shape[0..rank)
  Dims strides{};      // in elements; 0 marks a broadcast dimension
  int64_t offset = 0;  // elements from the start of the storage to element [0,0,...]

  // A dense row-major tensor.
  static TensorDesc contiguous(DType dtype, std::span<const int64_t> shape);
  static TensorDesc contiguous(DType dtype, std::initializer_list<int64_t> shape) {
    return contiguous(dtype, std::span<const int64_t>(shape.begin(), shape.size()));
  }

  int64_t numel() const;
  // Size of dimension i; negative i counts from the end.
  int64_t dim(int i) const { return shape[static_cast<size_t>(i < 0 ? i + rank : i)]; }
  int64_t stride(int i) const { return strides[static_cast<size_t>(i < 0 ? i + rank : i)]; }
  std::span<const int64_t> dims() const { return {shape.data(), static_cast<size_t>(rank)}; }
  bool is_contiguous() const;  // dense row-major, any offset
  // One past the largest element index this view touches, counted from the storage start.
  int64_t storage_extent() const;
  int64_t nbytes() const { return dtype_bytes(dtype, numel()); }
  bool same_shape(const TensorDesc& o) const;

  std::string shape_str() const;  // "[2,3,4]"
  std::string str() const;        // "f32[2,3,4]", plus strides and offset for non-dense views
};

DUET_API bool operator==(const TensorDesc& a, const TensorDesc& b);

// Checks rank, non-negative sizes and strides. Zero-sized dimensions are rejected: every op in
// the engine works on at least one element, and a zero usually means a bug upstream.
DUET_API Status validate(const TensorDesc& t);

// Views. Each returns an error, never a wrong descriptor, when the view is not expressible.
DUET_API Result<TensorDesc> transpose(const TensorDesc& t, int dim0, int dim1);
DUET_API Result<TensorDesc> permute(const TensorDesc& t, std::span<const int> order);
DUET_API Result<TensorDesc> slice(const TensorDesc& t, int dim, int64_t start, int64_t stop,
                                  int64_t step = 1);
// Reshape without a copy. One size may be -1 (inferred). Fails when the strides cannot express
// the new shape (e.g. reshaping a transposed view): make it contiguous first.
DUET_API Result<TensorDesc> reshape(const TensorDesc& t, std::span<const int64_t> shape);
// Numpy-style broadcast to `shape` (right-aligned), with stride 0 on broadcast dimensions.
DUET_API Result<TensorDesc> broadcast_to(const TensorDesc& t, std::span<const int64_t> shape);
// The numpy broadcast of two shapes, or an error naming both.
DUET_API Result<Dims> broadcast_shapes(std::span<const int64_t> a, std::span<const int64_t> b,
                                       int* out_rank);

// Walks every element of a (broadcast, strided) view in row-major order, calling
// f(linear_index, storage_index). Used by host code paths and the reference; never on hot paths.
template <class F>
void for_each_index(const TensorDesc& t, F&& f) {
  Dims idx{};
  const int64_t n = t.numel();
  int64_t off = t.offset;
  for (int64_t linear = 0; linear < n; ++linear) {
    f(linear, off);
    for (int d = t.rank - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < t.shape[static_cast<size_t>(d)]) {
        off += t.strides[static_cast<size_t>(d)];
        break;
      }
      off -= t.strides[static_cast<size_t>(d)] * (t.shape[static_cast<size_t>(d)] - 1);
      idx[static_cast<size_t>(d)] = 0;
    }
  }
}

}  // namespace duet
