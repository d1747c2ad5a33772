#include "proto.h"

#include <google/protobuf/io/coded_stream.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>

namespace duet::onnx_import {

namespace fs = std::filesystem;

namespace {

// Nested messages deeper than this are refused (protobuf's default is 100; ONNX graphs nest only
// through control-flow subgraphs, which duet does not import).
constexpr int kMaxDepth = 64;

Status too_large(std::string_view what, uint64_t bytes) {
  return Status(Code::invalid_argument,
                std::string(what) + ": " + std::to_string(bytes) +
                    " bytes, more than protobuf reads (2 GiB); keep weights in external data");
}

template <class M>
Result<M> parse(google::protobuf::io::CodedInputStream& in, std::string_view what,
                const char* kind) {
  in.SetRecursionLimit(kMaxDepth);
  in.SetTotalBytesLimit(static_cast<int>(kOnnxMaxModelBytes));
  M m;
  if (!m.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
    return Status(Code::parse_error, std::string(what) + ": not a valid ONNX " + kind +
                                         " (the protobuf does not parse)");
  return m;
}

template <class M>
Result<M> parse(std::span<const std::byte> bytes, std::string_view what, const char* kind) {
  if (bytes.size() > kOnnxMaxModelBytes) return too_large(what, bytes.size());
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  return parse<M>(in, what, kind);
}

bool safe_relative(const std::string& location) {
  const fs::path p(location);
  if (location.empty() || p.is_absolute() || p.has_root_name()) return false;
  for (const fs::path& part : p)
    if (part == "..") return false;
  return true;
}

Result<uint64_t> parse_u64(const std::string& s) {
  if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos)
    return Status(Code::parse_error, "'" + s + "' is not a byte count");
  return std::stoull(s);
}

Result<std::string> external_bytes(const onnx::TensorProto& t, const DataFolder& dir,
                                   uint64_t want) {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset") {
      DUET_ASSIGN_OR_RETURN(offset, parse_u64(kv.value()));
    } else if (kv.key() == "length") {
      DUET_ASSIGN_OR_RETURN(length, parse_u64(kv.value()));
    }
  }
  if (location.find('\0') != std::string::npos || !safe_relative(location))
    return Status(Code::invalid_argument,
                  "external data location '" + location +
                      "': expected a relative path inside the model's folder");
  const std::string path = (fs::path(dir.base) / location).string();
  FileRules rules;
  rules.kind = "external data file";
  rules.inside = &dir.folder;
  DUET_ASSIGN_OR_RETURN(OpenFile f, open_file(path, rules));
  const uint64_t size = f.size();
  if (length && *length != want)
    return Status(Code::parse_error, "external data length " + std::to_string(*length) +
                                         " bytes, the tensor's type and shape need " +
                                         std::to_string(want));
  if (offset > size || want > size - offset)
    return Status(Code::parse_error, "external data '" + location + "': bytes [" +
                                         std::to_string(offset) + ", " +
                                         std::to_string(offset + want) + ") past its end (" +
                                         std::to_string(size) + " bytes)");
  DUET_TRY(check_host_bytes(want, "external data '" + location + "'"));
  std::string bytes;
  try {
    bytes.resize(static_cast<size_t>(want));
  } catch (const std::bad_alloc&) {
    return Status(Code::out_of_memory, "external data '" + location + "': cannot hold its " +
                                           std::to_string(want) + " bytes");
  }
  for (uint64_t done = 0; done < want;) {
    const ssize_t n = ::pread(f.fd(), bytes.data() + done, static_cast<size_t>(want - done),
                              static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return Status(Code::io_error, "reading external data '" + path + "' failed" +
                                        (n < 0 ? ": " + std::string(std::strerror(errno)) : ""));
    done += static_cast<uint64_t>(n);
  }
  return bytes;
}

template <class T, class Field>
std::string pack(const Field& field) {
  std::string b(static_cast<size_t>(field.size()) * sizeof(T), '\0');
  for (int i = 0; i < field.size(); ++i) {
    const T v = static_cast<T>(field.Get(i));
    std::memcpy(b.data() + static_cast<size_t>(i) * sizeof(T), &v, sizeof(T));
  }
  return b;
}

// The typed field that holds an element type's values when raw_data is not used.
Result<std::string> typed_bytes(const onnx::TensorProto& t) {
  switch (t.data_type()) {
    case kFloat:
      return pack<float>(t.float_data());
    case kDouble:
      return pack<double>(t.double_data());
    case kInt64:
      return pack<int64_t>(t.int64_data());
    case kInt32:
      return pack<int32_t>(t.int32_data());
    case kInt16:
      return pack<int16_t>(t.int32_data());
    case kInt8:
      return pack<int8_t>(t.int32_data());
    case kUint8:
    case kBool:
      return pack<uint8_t>(t.int32_data());
    case kUint16:
    case kFloat16:
    case kBfloat16:
      return pack<uint16_t>(t.int32_data());  // bit patterns
    case kUint32:
      return pack<uint32_t>(t.uint64_data());
    case kUint64:
      return pack<uint64_t>(t.uint64_data());
    default:
      return Status(Code::unsupported, elem_name(t.data_type()) + " tensors are not read");
  }
}

}  // namespace

Result<std::string> read_file(const std::string& path, uint64_t limit) {
  return read_whole_file(path, limit, "tensor file");
}

Result<onnx::ModelProto> parse_model(std::span<const std::byte> bytes, std::string_view what) {
  return parse<onnx::ModelProto>(bytes, what, "model");
}

Result<onnx::ModelProto> read_model(const std::string& path) {
  FileRules rules;
  rules.kind = "model file";
  DUET_ASSIGN_OR_RETURN(OpenFile f, open_file(path, rules));
  if (f.size() > kOnnxMaxModelBytes) return too_large(path, f.size());
  // Mapped, not read: the parsed message's strings are the only copy of the weights that
  // counts (mapped pages are the file's and can be dropped).
  DUET_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> map, map_file(f));
  return parse<onnx::ModelProto>(map->bytes(), path, "model");
}

DataFolder DataFolder::of_model_file(const std::string& path) {
  const std::string dir = fs::path(path).parent_path().string();
  return {dir.empty() ? "." : dir, ModelFolder::of_model_file(path)};
}

DataFolder DataFolder::of_dir(const std::string& dir) {
  return {dir.empty() ? "." : dir, ModelFolder::of_dir(dir.empty() ? "." : dir)};
}

Result<onnx::TensorProto> parse_tensor(std::span<const std::byte> bytes, std::string_view what) {
  return parse<onnx::TensorProto>(bytes, what, "tensor");
}

bool is_external(const onnx::TensorProto& t) {
  return t.has_data_location() && t.data_location() == onnx::TensorProto::EXTERNAL;
}

Result<Array> tensor_array(onnx::TensorProto& t, const DataFolder& dir) {
  const std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  const int elem = t.data_type();
  auto where = [&](const Status& s) {
    return Status(s.code(), "tensor '" + t.name() + "': " + s.message());
  };
  if (t.has_segment()) return where(Status(Code::unsupported, "segmented tensors are not read"));
  const int es = elem_size(elem);
  if (es == 0) return where(Status(Code::unsupported, elem_name(elem) + " tensors are not read"));
  auto n = count(dims);
  if (!n.ok()) return where(n.status());
  if (*n > std::numeric_limits<int64_t>::max() / es)
    return where(Status(Code::invalid_argument, "size overflows"));
  std::string bytes;
  if (is_external(t)) {
    auto b = external_bytes(t, dir, static_cast<uint64_t>(*n * es));
    if (!b.ok()) return where(b.status());
    bytes = std::move(*b);
  } else if (t.has_raw_data()) {
    bytes.swap(*t.mutable_raw_data());
    t.clear_raw_data();
  } else {
    auto b = typed_bytes(t);
    if (!b.ok()) return where(b.status());
    bytes = std::move(*b);
  }
  auto a = Array::from_bytes(elem, dims, std::move(bytes));
  if (!a.ok()) return where(a.status());
  return a;
}

}  // namespace duet::onnx_import
