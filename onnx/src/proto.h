// Reading ONNX protobuf messages: models (size-capped, parse depth-limited) and tensors, with
// their data inline (raw_data or the typed fields) or in external files.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include <onnx/onnx_pb.h>

#include "array.h"
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

// The tensor's data. Inline raw_data is moved out of `t` (the message is left without it).
// External data is read from `base_dir`: a relative location inside it, offset and length
// inside the file.
Result<Array> tensor_array(onnx::TensorProto& t, const std::string& base_dir);

}  // namespace duet::onnx_import
