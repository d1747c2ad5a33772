// Bounded reads: every file duet reads whole has a cap, and every size a file declares is checked
// against what this machine can hold before anything is allocated. Writes never clobber: a file
// appears whole or not at all, and only a regular file is ever replaced (docs/reliability.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "duet/status.h"

namespace duet {

// The most bytes read from a graph file (JSON; large weights live in .safetensors or .gguf files
// beside it), a capability profile and the JSON sidecar of an int4 checkpoint.
inline constexpr uint64_t kGraphFileMaxBytes = uint64_t{256} << 20;
inline constexpr uint64_t kProfileMaxBytes = uint64_t{1} << 20;
inline constexpr uint64_t kSidecarMaxBytes = uint64_t{64} << 20;

// An error about a file or a field, which is not a tensor: "<where>: expected ..., got ...".
inline Status at(std::string_view where, const Err& err) {
  return Status(err).with_context(where);
}

// This machine's physical memory in bytes (the most a single host allocation may ask for).
uint64_t host_memory_bytes();

// invalid_argument naming `what` when `bytes` is more than this machine's memory.
Status check_host_bytes(uint64_t bytes, std::string_view what);

// The whole of `path` (a `kind` file: "graph file", "profile"), at most `cap` bytes. A folder is
// refused at once; a regular file larger than the cap before it is read; a stream (a pipe, a
// device such as /dev/zero) once it has given more than the cap.
Result<std::string> read_whole_file(const std::string& path, uint64_t cap, std::string_view kind);

// Whether `path` may receive an output (named by `option`, "--outputs"): a regular file, which
// is replaced, or a new name in an existing folder. Every file duet writes goes through it. A
// folder, device, fifo or socket is refused (invalid_argument), never replaced; a symbolic link is
// followed (the file it names is replaced, the link stays). An empty path (option not given)
// passes. Commands check every output before any work.
Status check_output_target(const std::string& path, std::string_view option);
// Writes `content` to a temporary file beside `path` (beside the file a symbolic link names) and
// renames it into place, so a failure never leaves a partial file that looks complete.
Status write_file_atomically(const std::string& path, std::string_view content);

}  // namespace duet
