// Reading ONNX protobuf messages: models (size-capped, parse depth-limited) and tensors, with
// their data inline (raw_data or the typed fields) or in external files.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include <onnx/onnx_pb.h>

#include "array.h"
#include "duet/internal/files.h"
#include "duet/onnx.h"

namespace duet::onnx_import {

// The bytes of a file, refused beyond `limit` bytes; errors name the file.
Result<std::string> read_file(const std::string& path, uint64_t limit);

// A parsed ModelProto; `what` names it in errors.
Result<onnx::ModelProto> parse_model(std::span<const std::byte> bytes, std::string_view what);
// A ModelProto read straight from a file (the file's bytes are never held beside the parsed
// message).
Result<onnx::ModelProto> read_model(const std::string& path);
Result<onnx::TensorProto> parse_tensor(std::span<const std::byte> bytes, std::string_view what);

// Whether a tensor's data lives in an external file.
bool is_external(const onnx::TensorProto& t);

// Where a model's external data lies: locations are relative to `base`, and the files they name
// must lie in `folder` once symbolic links are resolved.
struct DataFolder {
  std::string base;
  ModelFolder folder;
  static DataFolder of_model_file(const std::string& path);
  static DataFolder of_dir(const std::string& dir);
};

// The tensor's data. Inline raw_data is moved out of `t` (the message is left without it).
// External data is read from `dir`: a relative location inside it (no NUL byte, no `..`, not
// absolute, inside the model's folder with links resolved, one hard link, a regular file), offset
// and length inside the file, at most this machine's memory.
Result<Array> tensor_array(onnx::TensorProto& t, const DataFolder& dir);

}  // namespace duet::onnx_import
