// .safetensors files: an 8-byte little-endian header length N, N bytes of JSON header
// ({"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
// "__metadata__": {"key": "value"}}), then the raw little-endian data. Every header field is
// checked (known dtype names, non-negative shapes, offsets inside the data, consistent with
// dtype and shape, non-overlapping and covering the data with no gap, sane header length);
// a malformed file is an error naming the file, tensor and field, never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "duet/export.h"
#include "duet/host_tensor.h"
#include "duet/status.h"

namespace duet {

// The largest header duet reads (the format's own limit is 100 MB).
inline constexpr uint64_t kSafetensorsMaxHeader = 100u * 1000u * 1000u;

struct DUET_API SafetensorsEntry {
  std::string name;
  std::string dtype;  // as written in the file: "F32", "F16", "BF16", "I8", "I32", "F64", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets into the data section
};

// A parsed file: its metadata and tensor index, plus the data section. A file read from disk is
// memory-mapped read-only (its pages are read when touched, so a file larger than memory opens);
// `storage` keeps the mapping (or a parsed buffer's copy) alive, also for tensors that borrow it.
struct DUET_API SafetensorsFile {
  std::map<std::string, std::string> metadata;
  std::vector<SafetensorsEntry> tensors;  // in data order
  std::span<const std::byte> data;
  std::shared_ptr<const void> storage;

  const SafetensorsEntry* find(std::string_view name) const;
  // One tensor as a HostTensor of its own (a copy). Fails for dtypes or ranks duet does not have
  // (F64, rank > 4, zero-sized dimensions) with a message naming the tensor, and for a tensor
  // larger than this machine's memory.
  Result<HostTensor> tensor(std::string_view name) const;
  // The same over the file's bytes, not copied: read-only (a write through it faults). Copied only
  // when its first byte is not 4-byte aligned.
  Result<HostTensor> view(std::string_view name) const;
};

// `what` names the source in errors (a path, or "buffer").
DUET_API Result<SafetensorsFile> parse_safetensors(std::span<const std::byte> bytes,
                                                   std::string_view what = "buffer");
DUET_API Result<SafetensorsFile> read_safetensors(const std::string& path);
// Every tensor of a file, by name.
DUET_API Result<std::map<std::string, HostTensor>> load_safetensors(const std::string& path);

// Serialises tensors (written dense, in the order given) with optional metadata.
DUET_API Result<std::vector<std::byte>> encode_safetensors(
    const std::vector<std::pair<std::string, HostTensor>>& tensors,
    const std::map<std::string, std::string>& metadata = {});
DUET_API Status write_safetensors(const std::string& path,
                                  const std::vector<std::pair<std::string, HostTensor>>& tensors,
                                  const std::map<std::string, std::string>& metadata = {});

// "F32" <-> DType for the dtypes duet has.
DUET_API std::string_view safetensors_dtype_name(DType t);

}  // namespace duet
