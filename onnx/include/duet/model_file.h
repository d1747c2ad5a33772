// Model files of either format, told apart by their content: duet-graph JSON (the first
// non-blank byte is '{') or ONNX (anything else: a serialised ModelProto).
#pragma once

#include <string>

#include "duet/export.h"
#include "duet/graph.h"
#include "duet/onnx.h"

namespace duet {

enum class ModelFormat : uint8_t { duet_json, onnx };

struct DUET_API ModelOptions {
  // Read constants' data (duet JSON: their safetensors files; ONNX: initializers).
  bool load_constants = true;
  // ONNX only: symbolic dims, input shapes, notes. Its load_constants is taken from above.
  OnnxOptions onnx;
};

// The format of a file by its first bytes, or an error when it cannot be read.
DUET_API Result<ModelFormat> model_format(const std::string& path);
DUET_API Result<Graph> load_model(const std::string& path, const ModelOptions& options = {});

}  // namespace duet
