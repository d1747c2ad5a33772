// A tensor known while importing: initializers, Constant nodes and what shape arithmetic folds
// from them. Unlike HostTensor it has any rank, zero-sized dimensions and every ONNX element
// type the importer reads (int64 and bool included), because shape subgraphs are made of them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "duet/host_tensor.h"
#include "duet/status.h"

namespace duet::onnx_import {

// ONNX TensorProto::DataType values the importer knows.
enum Elem : int {
  kUndefined = 0,
  kFloat = 1,
  kUint8 = 2,
  kInt8 = 3,
  kUint16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUint32 = 12,
  kUint64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBfloat16 = 16,
};

std::string elem_name(int elem);  // "float", "int64", ... ("type 99" when unknown)
int elem_size(int elem);          // bytes per element; 0 for strings, complex and unknown types
bool elem_is_float(int elem);     // float, float16, bfloat16, double
// The duet dtype a tensor of this type is held in at run time, or an error saying why none.
Result<DType> runtime_dtype(int elem);
int elem_of(DType t);

std::string dims_str(const std::vector<int64_t>& dims);  // "[2,3]"
// The number of elements, or an error when it overflows.
Result<int64_t> count(const std::vector<int64_t>& dims);

class Array {
 public:
  Array() = default;
  // Dense little-endian bytes of `dims`; the size is checked.
  static Result<Array> from_bytes(int elem, std::vector<int64_t> dims, std::string bytes);
  static Array of_ints(int elem, std::vector<int64_t> dims, const std::vector<int64_t>& values);
  static Array of_reals(int elem, std::vector<int64_t> dims, const std::vector<double>& values);
  static Array scalar_int(int64_t v) { return of_ints(kInt64, {}, {v}); }

  int elem() const { return elem_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t numel() const { return numel_; }
  const std::string& bytes() const { return bytes_; }

  int64_t int_at(int64_t i) const;  // integers and bool; floats truncated
  double real_at(int64_t i) const;
  std::vector<int64_t> ints() const;
  std::vector<double> reals() const;

  // The same elements under another shape (same count).
  Array reshaped(std::vector<int64_t> dims) const;
  // Converted to another element type (ONNX Cast semantics: float -> int truncates).
  Array cast(int to) const;
  // As a duet host tensor of its runtime dtype (int64 checked to fit i32), or why not.
  Result<HostTensor> to_host(std::string_view name) const;
  // Whether to_host would succeed, and its dtype, without making the copy.
  Result<DType> host_dtype(std::string_view name) const;

 private:
  int elem_ = kUndefined;
  std::vector<int64_t> dims_;
  int64_t numel_ = 0;
  std::string bytes_;
};

}  // namespace duet::onnx_import
