// A tensor in host memory: a descriptor over shared, owned storage. Used for inputs and outputs
// crossing the API, by the reference, and by tests.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "duet/export.h"
#include "duet/status.h"
#include "duet/tensor.h"

namespace duet {

class DUET_API HostTensor {
 public:
  HostTensor() = default;
  // Dense, uninitialised storage for `shape`.
  static HostTensor empty(DType dtype, std::span<const int64_t> shape);
  static HostTensor empty(const TensorDesc& dense_like) {
    return empty(dense_like.dtype, dense_like.dims());
  }
  // A tensor over memory it does not own (e.g. a device's host-visible buffer); the caller keeps
  // the memory alive. Fails when the descriptor reaches past `storage_bytes`.
  static Result<HostTensor> borrow(const TensorDesc& desc, void* storage, uint64_t storage_bytes);
  // A tensor over memory that `owner` keeps alive (a memory-mapped file): no copy is made, and
  // the memory lives as long as any tensor over it.
  static Result<HostTensor> borrow(const TensorDesc& desc, void* storage, uint64_t storage_bytes,
                                   std::shared_ptr<void> owner);
  // Storage of `storage_bytes` and a descriptor over it (checked to fit).
  static Result<HostTensor> with_storage(const TensorDesc& desc, uint64_t storage_bytes);

  const TensorDesc& desc() const { return desc_; }
  DType dtype() const { return desc_.dtype; }
  int64_t numel() const { return desc_.numel(); }
  bool defined() const { return storage_ != nullptr; }

  // The storage base; element [0,...] lives at desc().offset elements past it.
  std::byte* storage() { return storage_.get(); }
  const std::byte* storage() const { return storage_.get(); }
  uint64_t storage_bytes() const { return bytes_; }
  template <class T>
  T* data() {
    return reinterpret_cast<T*>(storage_.get()) + desc_.offset;
  }
  template <class T>
  const T* data() const {
    return reinterpret_cast<const T*>(storage_.get()) + desc_.offset;
  }

  // Another view of the same storage; fails if it reaches outside it.
  Result<HostTensor> view(const TensorDesc& desc) const;
  // A dense copy (same dtype).
  HostTensor contiguous() const;
  // Every element in row-major order, widened to double (block formats: dequantized exactly).
  std::vector<double> to_doubles() const;
  // Sets every element from row-major doubles (rounded to the dtype; block formats: quantized
  // row by row, non-finite values leaving their blocks unspecified).
  void from_doubles(std::span<const double> values);
  // Fills the whole storage with a byte pattern (poisoning before a run).
  void fill_bytes(uint8_t pattern);

 private:
  TensorDesc desc_;
  std::shared_ptr<std::byte[]> storage_;
  uint64_t bytes_ = 0;
};

}  // namespace duet
