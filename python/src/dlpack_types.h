// What the host and the device halves of the DLPack exchange share (dlpack.cpp,
// device_memory.cpp): DLPack's device types and dtypes in duet's words.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>

#include "common.h"

namespace duetpy {

// "CUDA", "CUDA pinned host", ... for messages.
const char* device_type_name(int type);
// Host memory a CPU can read in place: plain and pinned host memory.
bool host_readable(int type);
// duet's dtype of a DLPack dtype (int64 has none: the caller narrows it).
std::optional<duet::DType> dtype_of(const DLDataType& t);
DLDataType dl_dtype(duet::DType t);
std::string dl_type_text(const DLDataType& t);
// What duet exports through DLPack: the DLManagedTensor, its shape and strides, and (in a
// subclass) what keeps the memory alive; freed by the tensor's deleter.
struct Export {
  std::vector<int64_t> shape, strides;
  DLManagedTensor m{};
  virtual ~Export() = default;
};
// Fills e's shape, strides, byte offset and dtype from `d`; with `block_bytes`, the bytes of a
// block-quantized tensor (no DLPack dtype) as a flat uint8 array of that length.
void describe(Export& e, const duet::TensorDesc& d, std::optional<uint64_t> block_bytes = {});
// `e` (taken) with `data` on `device` in a "dltensor" capsule, freed by the capsule unless a
// consumer took it.
py::capsule export_capsule(Export* e, void* data, DLDevice device);

// Takes the DLManagedTensor out of a producer's "dltensor" capsule (renamed "used_dltensor", so
// that its destructor no longer frees it); the returned owner calls its deleter once. `what`
// names the input in the error when the capsule is not an unused "dltensor".
std::shared_ptr<void> take_capsule(const py::object& cap, const std::string& what,
                                   DLManagedTensor*& m);

// Calls the producer's deleter once, with the GIL (a NumPy producer's deleter releases a Python
// reference).
void release(DLManagedTensor* m);

}  // namespace duetpy
