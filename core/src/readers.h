// The model-file readers over a file opened by open_file (duet/internal/files.h), so that a
// file a model names is opened once, under the model's rules, and read from that descriptor.
#pragma once

#include "duet/gguf.h"
#include "duet/internal/files.h"
#include "duet/safetensors.h"

namespace duet {

// Both map the file read-only (duet/internal/files.h: map_file).
Result<GgufFile> read_gguf(const OpenFile& file);
Result<SafetensorsFile> read_safetensors(const OpenFile& file);
// Whether an open regular file starts with GGUF's magic.
bool is_gguf(const OpenFile& file);

}  // namespace duet
