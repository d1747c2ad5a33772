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
  // The memory reading the model may spend on what it describes (a graph file's parsed JSON, an
  // ONNX model's values evaluated at import), in bytes; 0: DUET_IMPORT_MEMORY when set, else
  // 1 GiB (docs/security.md). The model's own tensors are not counted.
  uint64_t memory_budget = 0;
  // ONNX only: symbolic dims, input shapes, notes. Its load_constants is taken from above.
  OnnxOptions onnx;
};

// The format of a file by its first non-blank byte, or an error when it cannot be read. A stream
// (a pipe) can only be looked at by reading it: use load_model, which reads it once.
DUET_API Result<ModelFormat> model_format(const std::string& path);
// A regular file, or a stream read once (at most 256 MiB, either format). `format`, when not
// null, receives the format it was.
DUET_API Result<Graph> load_model(const std::string& path, const ModelOptions& options = {},
                                  ModelFormat* format = nullptr);

}  // namespace duet
