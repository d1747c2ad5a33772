// GGUF files (llama.cpp's model container, versions 2 and 3): a header of typed metadata
// key/values and tensor infos, then the tensor data, each tensor at an offset aligned to
// `general.alignment` (default 32). The reader memory-maps the file and checks every field:
// magic, version, counts against the bytes left, string and array lengths, value types, unique
// keys and names, dimensions, types, sizes and offsets (aligned, inside the file, not
// overlapping). A malformed file is an error naming the file, the tensor or key, and the field;
// never a crash. Tensors of types duet cannot compute with (the iq and tq formats, f64, ...)
// are listed with their type name and refused when read.
//
// Dimension order: GGUF lists the innermost dimension first (ne[0]); duet's shape is the
// reverse, so a [K, N] GGUF weight (ne = {K, N}) is duet's [N, K] with rows of K.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "duet/export.h"
#include "duet/host_tensor.h"
#include "duet/status.h"

namespace duet {

enum class GgufType : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};
DUET_API std::string_view gguf_type_name(GgufType t);

// A metadata value: a scalar or an array of one element type (GGUF has no nested arrays).
// Integers and bools are kept in `ints` (signed types sign-extended), floats in `floats`,
// strings in `strings`; a scalar holds one entry.
struct DUET_API GgufValue {
  GgufType type = GgufType::u8;  // array: elements are of `elem`
  GgufType elem = GgufType::u8;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;

  bool is_array() const { return type == GgufType::array; }
  GgufType value_type() const { return is_array() ? elem : type; }
  size_t size() const;  // elements (1 for a scalar)
  // The scalar as an integer / a string, when it is one.
  std::optional<int64_t> as_int() const;
  std::optional<std::string> as_string() const;
  // "4096", "\"llama\"", "[32000 strings: \"<unk>\", \"<s>\", ...]"
  std::string str(size_t max_items = 6) const;

  static GgufValue of_int(GgufType t, int64_t v);
  static GgufValue of_float(GgufType t, double v);
  static GgufValue of_string(std::string v);
};

// The name of a ggml type id ("q4_K", "iq2_xxs"), or "type <id>" for an unknown one.
DUET_API std::string ggml_type_name(int ggml_type);

struct DUET_API GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // GGUF order: innermost first
  int ggml_type = 0;
  uint64_t offset = 0;  // bytes from the start of the data section
  uint64_t bytes = 0;
  std::optional<DType> dtype;          // when duet has the type
  std::vector<int64_t> shape() const;  // duet order (ne reversed)
};

struct DUET_API GgufFile {
  std::string what;  // the path, or "buffer"
  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;  // where the data section starts in the file
  std::vector<std::pair<std::string, GgufValue>> metadata;  // in file order
  std::vector<GgufTensorInfo> tensors;                      // in file order

  const GgufValue* find_metadata(std::string_view key) const;
  const GgufTensorInfo* find(std::string_view name) const;
  // A tensor over the file's bytes (no copy; it keeps the mapping alive; read-only for a file read
  // from disk). Fails for types duet does not have, zero-sized or rank > 4 tensors, with a
  // message naming the tensor.
  Result<HostTensor> tensor(std::string_view name) const;
  // The raw bytes of a tensor.
  std::span<const std::byte> tensor_bytes(const GgufTensorInfo& t) const;

  std::shared_ptr<void> storage;  // the mapping (or a copy of a parsed buffer)
  const std::byte* base = nullptr;
  uint64_t size = 0;
};

inline constexpr uint32_t kGgufDefaultAlignment = 32;

// A file, memory-mapped read-only and shared: its pages are read when touched, so a file larger
// than memory opens; tensors over it are read-only (a write through one faults).
DUET_API Result<GgufFile> read_gguf(const std::string& path);
// A file's bytes (copied); `what` names the source in errors.
DUET_API Result<GgufFile> parse_gguf(std::span<const std::byte> bytes,
                                     std::string_view what = "buffer");

// Serialises metadata and tensors (GGUF v3; each tensor dense, in the order given, its shape
// written innermost first). `general.alignment`, when among the metadata, must be a u32 power of
// two; else `alignment` is used and not written.
DUET_API Result<std::vector<std::byte>> encode_gguf(
    const std::vector<std::pair<std::string, GgufValue>>& metadata,
    const std::vector<std::pair<std::string, HostTensor>>& tensors,
    uint32_t alignment = kGgufDefaultAlignment);
DUET_API Status write_gguf(const std::string& path,
                           const std::vector<std::pair<std::string, GgufValue>>& metadata,
                           const std::vector<std::pair<std::string, HostTensor>>& tensors,
                           uint32_t alignment = kGgufDefaultAlignment);

// Whether a file starts with the GGUF magic (read from disk; false when unreadable).
DUET_API bool is_gguf_file(const std::string& path);

}  // namespace duet
