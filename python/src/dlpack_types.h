// What the host and the device halves of the DLPack exchange share (dlpack.cpp,
// device_memory.cpp): DLPack's device types and dtypes in duet's words.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <dlpack/dlpack.h>

#include "common.h"
#include "dlpack_versioned.h"

namespace duetpy {

// "CUDA", "CUDA pinned host", ... for messages.
const char* device_type_name(int type);
// Host memory a CPU can read in place: plain and pinned host memory.
bool host_readable(int type);
// duet's dtype of a DLPack dtype (int64 has none: the caller narrows it).
std::optional<duet::DType> dtype_of(const DLDataType& t);
DLDataType dl_dtype(duet::DType t);
std::string dl_type_text(const DLDataType& t);
// What a consumer asked __dlpack__ for (the array API's keywords, checked): a versioned capsule
// (max_version >= (1, 0)), the device (None: the tensor's own), and whether to copy (None: only
// where needed). `who` names the method in errors.
struct Ask {
  bool versioned = false;
  std::optional<std::pair<int, int>> device;
  std::optional<bool> copy;
};
Ask parse_ask(const std::string& who, const py::object& max_version, const py::object& dl_device,
              const py::object& copy);
// What __dlpack__ cannot give as asked (another device, a copy duet does not make, a copy that
// copy=False forbids): duet.DLPackError, an UnsupportedError and the BufferError the array API
// standard names.
[[noreturn]] void refuse_export(const std::string& message);

// What duet exports through DLPack: the DLTensor, its shape and strides, the managed tensor of
// the capsule's kind, and (in a subclass) what keeps the memory alive; freed by the deleter.
struct Export {
  Export();
  virtual ~Export();
  Export(const Export&) = delete;
  Export& operator=(const Export&) = delete;
  std::vector<int64_t> shape, strides;
  DLTensor tensor{};
  DLManagedTensor legacy{};
  DLManagedTensorVersioned versioned{};
};
// Exports alive (made and not yet deleted): what the tests count deleters by.
long exports_alive();
// Fills e's shape, strides, byte offset and dtype from `d`; with `block_bytes`, the bytes of a
// block-quantized tensor (no DLPack dtype) as a flat uint8 array of that length.
void describe(Export& e, const duet::TensorDesc& d, std::optional<uint64_t> block_bytes = {});
// `e` (taken) with `data` on `device` in a capsule: "dltensor_versioned" (DLPack 1.0, with
// `flags`) when `versioned`, else "dltensor". The capsule frees it unless a consumer took it
// (renamed it "used_...").
py::capsule export_capsule(Export* e, void* data, DLDevice device, bool versioned,
                           uint64_t flags = 0);

// A producer's tensor, taken out of its capsule: the DLTensor, the owner that calls the
// producer's deleter once (with the GIL), and whether the producer marked it read-only.
struct Taken {
  const DLTensor* tensor = nullptr;
  std::shared_ptr<void> owner;
  bool read_only = false;
};
// Asks `obj` for its capsule as a DLPack 1.0 consumer: __dlpack__(stream=..., max_version=(1, 0))
// first, and the older signature (no max_version; no stream for host memory, stream None) where
// the producer answers TypeError.
py::object ask_capsule(py::handle obj, const py::object& stream);
// Takes the tensor out of an unused "dltensor_versioned" or "dltensor" capsule (renamed
// "used_...", so that its destructor no longer frees it). `what` names the input in errors.
Taken take_capsule(const py::object& cap, const std::string& what);

}  // namespace duetpy
