// Where graph constants come from: tensors of .gguf and .safetensors files, and GPTQ/AWQ int4
// modules of safetensors checkpoints. Files are opened once per graph load and kept; a GGUF file
// stays memory-mapped for as long as a constant borrows its bytes.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "duet/host_tensor.h"
#include "duet/status.h"

namespace duet {

struct ModelFolder;

class ConstantFiles {
 public:
  // Files are opened under the model's rules: inside `folder` (symbolic links resolved), one hard
  // link, never a fifo or a device (duet/internal/files.h).
  explicit ConstantFiles(const ModelFolder& folder);
  ~ConstantFiles();
  // The tensor `key` of `path` as the declared dtype and shape: a GGUF tensor (by its name; GGUF's
  // innermost-first dimensions reversed), a safetensors tensor, or a safetensors int4 module
  // (key = the module prefix). A mismatch with the declaration is an error naming both.
  Result<HostTensor> load(const std::string& path, const std::string& key, DType dtype,
                          const std::vector<int64_t>& shape);

 private:
  struct Open;
  const ModelFolder& folder_;
  std::map<std::string, std::unique_ptr<Open>> files_;
};

}  // namespace duet
