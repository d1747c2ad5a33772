#include "duet/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "duet/internal/files.h"
#include "duet/internal/json.h"
#include "readers.h"

namespace duet {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; duet reads it in place");

using nlohmann::json;

namespace {

struct StDType {
  std::string_view name;
  int bytes;
};
// Every element type of the safetensors format with a whole number of bytes.
constexpr StDType kStDTypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
    {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
    {"F32", 4},  {"F64", 8}, {"I64", 8}, {"U64", 8},
};

int st_dtype_bytes(std::string_view name) {
  for (const StDType& d : kStDTypes)
    if (d.name == name) return d.bytes;
  return 0;
}

std::optional<DType> to_dtype(std::string_view name) {
  for (DType t : kElementDTypes)
    if (safetensors_dtype_name(t) == name) return t;
  return std::nullopt;
}

Status bad(std::string_view what, std::string_view tensor, std::string_view expected,
           std::string_view got) {
  Err e(Code::parse_error);
  if (!tensor.empty()) e.tensor(tensor);
  e.expected(expected).got(got);
  return Status(e).with_context("safetensors " + std::string(what));
}

// Parses the JSON header within the nesting and memory limits of JSON from outside, rejecting
// duplicate keys (nlohmann would keep the last silently).
Result<json> parse_header(std::string_view text, std::string_view what) {
  JsonLimits limits;
  limits.unique_keys = true;
  auto j = parse_json(text, limits);
  if (!j.ok()) {
    const std::string& m = j.status().message();
    if (m.starts_with("key '"))
      return bad(what, m.substr(5, m.find("' given twice") - 5), "each key once in the header",
                 "a duplicate key");
    return bad(what, {}, "a JSON header", m);
  }
  return std::move(*j);
}

// The index of a file whose bytes `bytes` stay alive through `owner`.
Result<SafetensorsFile> parse_bytes(std::span<const std::byte> bytes,
                                    std::shared_ptr<const void> owner, std::string_view what) {
  if (bytes.size() < 8)
    return bad(what, {}, "at least 8 bytes (the header length)",
               std::to_string(bytes.size()) + " bytes");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const uint64_t rest = bytes.size() - 8;
  if (n < 2 || n > kSafetensorsMaxHeader)
    return bad(what, {},
               "a header length from 2 to " + std::to_string(kSafetensorsMaxHeader) + " bytes",
               std::to_string(n));
  if (n > rest)
    return bad(what, {}, "a header of " + std::to_string(n) + " bytes inside the file",
               "only " + std::to_string(rest) + " bytes after the length");
  std::string_view text(reinterpret_cast<const char*>(bytes.data()) + 8, static_cast<size_t>(n));
  if (text.front() != '{')
    return bad(what, {}, "a header starting with '{'", "'" + std::string(1, text.front()) + "'");
  DUET_ASSIGN_OR_RETURN(json header, parse_header(text, what));
  if (!header.is_object()) return bad(what, {}, "a JSON object header", header.type_name());

  const uint64_t data_size = rest - n;
  SafetensorsFile f;
  for (const auto& [name, item] : header.items()) {
    if (name == "__metadata__") {
      if (!item.is_object()) return bad(what, name, "an object of string values", item.type_name());
      for (const auto& [k, v] : item.items()) {
        if (!v.is_string()) return bad(what, "__metadata__." + k, "a string value", v.type_name());
        f.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    if (name.empty()) return bad(what, {}, "non-empty tensor names", "\"\"");
    if (!item.is_object())
      return bad(what, name, "an object with dtype, shape, data_offsets", item.type_name());
    for (const auto& [k, v] : item.items()) {
      (void)v;
      if (k != "dtype" && k != "shape" && k != "data_offsets")
        return bad(what, name, "only the fields dtype, shape, data_offsets", "field '" + k + "'");
    }
    SafetensorsEntry e;
    e.name = name;
    if (!item.contains("dtype") || !item["dtype"].is_string())
      return bad(what, name, "a dtype string", item.contains("dtype") ? "a non-string" : "none");
    e.dtype = item["dtype"].get<std::string>();
    const int esize = st_dtype_bytes(e.dtype);
    if (esize == 0)
      return bad(what, name,
                 "a safetensors dtype (F32, F16, BF16, I8, I32, F64, I64, U8, BOOL, ...)",
                 "'" + e.dtype + "'");
    if (!item.contains("shape") || !item["shape"].is_array())
      return bad(what, name, "a shape array", "none");
    uint64_t numel = 1;
    for (const json& d : item["shape"]) {
      if (!d.is_number_unsigned())
        return bad(what, name, "non-negative integer dimensions", json_excerpt(d));
      const uint64_t dim = d.get<uint64_t>();
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return bad(what, name, "dimensions below 2^63", json_excerpt(d));
      if (dim != 0 && numel > data_size / dim + 1)
        return bad(
            what, name,
            "a shape whose data fits in the file's " + std::to_string(data_size) + " data bytes",
            json_excerpt(item["shape"]));
      numel *= dim;
      e.shape.push_back(static_cast<int64_t>(dim));
    }
    const json& off = item.contains("data_offsets") ? item["data_offsets"] : json();
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      return bad(what, name, "data_offsets [begin, end] of non-negative integers",
                 off.is_null() ? "none" : json_excerpt(off));
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    if (e.begin > e.end || e.end > data_size)
      return bad(what, name,
                 "0 <= begin <= end <= " + std::to_string(data_size) + " (the data size)",
                 json_excerpt(off));
    if (numel > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(esize) ||
        e.end - e.begin != numel * static_cast<uint64_t>(esize))
      return bad(
          what, name,
          std::to_string(numel) + " elements of " + e.dtype + " = " +
              std::to_string(numel * static_cast<uint64_t>(esize)) + " bytes",
          "data_offsets " + json_excerpt(off) + " = " + std::to_string(e.end - e.begin) + " bytes");
    f.tensors.push_back(std::move(e));
  }
  std::sort(f.tensors.begin(), f.tensors.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t pos = 0;
  for (const SafetensorsEntry& e : f.tensors) {
    if (e.begin < pos)
      return bad(
          what, e.name,
          "data not overlapping the previous tensor's (ending at " + std::to_string(pos) + ")",
          "begin " + std::to_string(e.begin));
    if (e.begin > pos)
      return bad(what, e.name, "data starting at " + std::to_string(pos) + " (no gaps)",
                 "begin " + std::to_string(e.begin));
    pos = e.end;
  }
  if (pos != data_size)
    return bad(what, {}, "tensors covering all " + std::to_string(data_size) + " data bytes",
               "the last tensor ending at " + std::to_string(pos));
  f.data = bytes.subspan(static_cast<size_t>(8 + n));
  f.storage = std::move(owner);
  return f;
}

}  // namespace

std::string_view safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "F32";
    case DType::f16:
      return "F16";
    case DType::bf16:
      return "BF16";
    case DType::i8:
      return "I8";
    case DType::i32:
      return "I32";
    default:
      break;  // block formats have no safetensors dtype
  }
  return "?";
}

const SafetensorsEntry* SafetensorsFile::find(std::string_view name) const {
  for (const SafetensorsEntry& e : tensors)
    if (e.name == name) return &e;
  return nullptr;
}

namespace {

Result<TensorDesc> entry_desc(const SafetensorsFile& f, std::string_view name,
                              const SafetensorsEntry** entry) {
  const SafetensorsEntry* e = f.find(name);
  if (!e)
    return Err(Code::not_found)
        .tensor(name)
        .expected("a tensor of the safetensors file")
        .got("no such name");
  auto dt = to_dtype(e->dtype);
  if (!dt)
    return Err(Code::unsupported)
        .tensor(name)
        .expected("dtype F32, F16, BF16, I8 or I32")
        .got(e->dtype);
  if (e->shape.size() > static_cast<size_t>(kMaxRank))
    return Err(Code::unsupported)
        .tensor(name)
        .expected("rank <= " + std::to_string(kMaxRank))
        .got("rank " + std::to_string(e->shape.size()));
  const TensorDesc desc = TensorDesc::contiguous(*dt, e->shape);
  if (Status s = validate(desc); !s.ok()) return s.with_context("tensor '" + e->name + "'");
  *entry = e;
  return desc;
}

}  // namespace

Result<HostTensor> SafetensorsFile::tensor(std::string_view name) const {
  const SafetensorsEntry* e = nullptr;
  DUET_ASSIGN_OR_RETURN(TensorDesc desc, entry_desc(*this, name, &e));
  const uint64_t bytes = e->end - e->begin;
  DUET_TRY(check_host_bytes(bytes, "tensor '" + e->name + "'"));
  DUET_ASSIGN_OR_RETURN(HostTensor t, HostTensor::with_storage(desc, bytes));
  std::memcpy(t.storage(), data.data() + e->begin, static_cast<size_t>(bytes));
  return t;
}

Result<HostTensor> SafetensorsFile::view(std::string_view name) const {
  const SafetensorsEntry* e = nullptr;
  DUET_ASSIGN_OR_RETURN(TensorDesc desc, entry_desc(*this, name, &e));
  const std::byte* p = data.data() + e->begin;
  // Elements at an address they cannot be loaded from in place (an f32 at an odd byte) are copied.
  if (!storage || reinterpret_cast<uintptr_t>(p) % 4 != 0) return tensor(name);
  return HostTensor::borrow(desc, const_cast<std::byte*>(p), e->end - e->begin,
                            std::const_pointer_cast<void>(storage));
}

Result<SafetensorsFile> parse_safetensors(std::span<const std::byte> bytes, std::string_view what) {
  // A copy, so the index and its tensors outlive the caller's buffer.
  std::shared_ptr<std::vector<std::byte>> copy;
  try {
    copy = std::make_shared<std::vector<std::byte>>(bytes.begin(), bytes.end());
  } catch (const std::bad_alloc&) {
    return bad(what, {}, "a buffer this machine can copy", std::to_string(bytes.size()) + " bytes");
  }
  return parse_bytes(*copy, copy, what);
}

Result<SafetensorsFile> read_safetensors(const OpenFile& file) {
  // Mapped read-only: the tensors' bytes are the file's pages, read when touched, so a file larger
  // than memory opens.
  DUET_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> map, map_file(file));
  return parse_bytes(map->bytes(), map, "file '" + file.path() + "'");
}

Result<SafetensorsFile> read_safetensors(const std::string& path) {
  FileRules rules;
  rules.kind = "safetensors file";
  DUET_ASSIGN_OR_RETURN(OpenFile f, open_file(path, rules));
  return read_safetensors(f);
}

Result<std::map<std::string, HostTensor>> load_safetensors(const std::string& path) {
  DUET_ASSIGN_OR_RETURN(SafetensorsFile f, read_safetensors(path));
  std::map<std::string, HostTensor> out;
  for (const SafetensorsEntry& e : f.tensors) {
    auto t = f.tensor(e.name);
    if (!t.ok()) return t.status().with_context("safetensors file '" + path + "'");
    out.emplace(e.name, std::move(*t));
  }
  return out;
}

Result<std::vector<std::byte>> encode_safetensors(
    const std::vector<std::pair<std::string, HostTensor>>& tensors,
    const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> seen;
  uint64_t pos = 0;
  std::vector<HostTensor> dense;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == "__metadata__" || !seen.insert(name).second)
      return Err(Code::invalid_argument)
          .tensor(name)
          .expected("unique, non-empty tensor names other than __metadata__")
          .got("'" + name + "'");
    if (!t.defined())
      return Err(Code::invalid_argument).tensor(name).expected("tensor data").got("none");
    dense.push_back(t.desc().is_contiguous() && t.desc().offset == 0 ? t : t.contiguous());
    const uint64_t n = static_cast<uint64_t>(t.desc().nbytes());
    header[name] = {{"dtype", std::string(safetensors_dtype_name(t.dtype()))},
                    {"shape", std::vector<int64_t>(t.desc().dims().begin(), t.desc().dims().end())},
                    {"data_offsets", {pos, pos + n}}};
    pos += n;
  }
  std::string text = header.dump();
  // nlohmann sorts keys; the index order does not matter to readers.
  while (text.size() % 8 != 0) text += ' ';
  std::vector<std::byte> out(8 + text.size() + pos);
  const uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, text.data(), text.size());
  std::byte* p = out.data() + 8 + text.size();
  for (const HostTensor& t : dense) {
    const size_t b = static_cast<size_t>(t.desc().nbytes());
    std::memcpy(p, t.data<std::byte>(), b);
    p += b;
  }
  return out;
}

Status write_safetensors(const std::string& path,
                         const std::vector<std::pair<std::string, HostTensor>>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  DUET_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, encode_safetensors(tensors, metadata));
  return write_file_atomically(
      path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace duet
