// Evaluating ops at import on known values (shape arithmetic, constants), in double for floats
// and int64 for integers, then stored in the output's element type.
#pragma once

#include <functional>
#include <vector>

#include "array.h"

namespace duet::onnx_import {

// An axis in [-rank, rank) as [0, rank), or an error naming it.
Result<int> normalize_axis(int64_t axis, int rank, std::string_view what = "axis");

// The most elements a value evaluated at import may have; more is an error, not an allocation.
inline constexpr int64_t kMaxFoldedElements = int64_t{1} << 28;
// `dims` has no negative size and at most kMaxFoldedElements elements (counted without
// overflow), or an error saying which.
Status check_folded_size(const std::vector<int64_t>& dims);

// The numpy broadcast of two shapes of any rank (an error for a negative size).
Result<std::vector<int64_t>> broadcast(const std::vector<int64_t>& a,
                                       const std::vector<int64_t>& b);

// Elements picked from `src` by their linear indices, laid out as `dims`.
Array pick(const Array& src, std::vector<int64_t> dims, const std::vector<int64_t>& index);

// For every element of `out` (row-major), the linear index of the element of `shape` it reads
// under numpy broadcasting. `out` has passed check_folded_size.
std::vector<int64_t> broadcast_index(const std::vector<int64_t>& shape,
                                     const std::vector<int64_t>& out);

Result<Array> fold_binary(const Array& a, const Array& b, int out_elem,
                          const std::function<double(double, double)>& real,
                          const std::function<int64_t(int64_t, int64_t)>& integer);
Array fold_unary(const Array& a, const std::function<double(double)>& f);

Array transpose(const Array& a, const std::vector<int64_t>& perm);
// Elements start, start+step, ... before stop along `axis` (start and stop already clamped).
Array slice(const Array& a, int axis, int64_t start, int64_t stop, int64_t step);
Array concat(const std::vector<const Array*>& parts, int axis);
// data.take(indices, axis), indices already normalized to [0, dim).
Array gather(const Array& data, const std::vector<int64_t>& indices,
             const std::vector<int64_t>& index_dims, int axis);

}  // namespace duet::onnx_import
