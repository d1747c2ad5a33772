// Every file duet reads or writes on behalf of a model goes through here (docs/security.md):
//
// - open_file: one way to open a file. O_NONBLOCK until its type is known (a fifo never hangs
//   the open), a regular file only unless the caller reads streams, a size cap per kind of file,
//   and for a file a model names (external data, a constant's file) its real path, symbolic links
//   resolved, inside the model's folder and a single hard link.
// - read_all: the whole of an open file or stream, read once, within its cap.
// - map_file: a regular file memory-mapped read-only and shared (pages are the file's, read on
//   demand; a file larger than memory opens).
// - write_file_atomically: a temporary file created exclusively (never through a link) beside
//   the target under an unpredictable name, renamed into place when complete; the replaced
//   file's mode and owner are kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "duet/status.h"

namespace duet {

// The most bytes read from a graph file (JSON; large weights live in .safetensors or .gguf files
// beside it), a capability profile and the JSON sidecar of an int4 checkpoint.
inline constexpr uint64_t kGraphFileMaxBytes = uint64_t{256} << 20;
inline constexpr uint64_t kProfileMaxBytes = uint64_t{1} << 20;
inline constexpr uint64_t kSidecarMaxBytes = uint64_t{64} << 20;
inline constexpr uint64_t kCalibrationMaxBytes = uint64_t{16} << 20;

// The memory a reader may spend on what a file describes (a parsed JSON document, GGUF metadata,
// values an ONNX model evaluates at import): `asked` when not 0 (the load options), else
// DUET_IMPORT_MEMORY (bytes, at least 1 MiB) when set, else 1 GiB.
inline constexpr uint64_t kDefaultImportMemory = uint64_t{1} << 30;
uint64_t import_memory_budget(uint64_t asked = 0);

// An error about a file or a field, which is not a tensor: "<where>: expected ..., got ...".
inline Status at(std::string_view where, const Err& err) {
  return Status(err).with_context(where);
}

// This machine's physical memory in bytes (the most a single host allocation may ask for).
uint64_t host_memory_bytes();

// invalid_argument naming `what` when `bytes` is more than this machine's memory.
Status check_host_bytes(uint64_t bytes, std::string_view what);

// The folders a model's own files must lie in, as real paths: the folder the model was loaded
// from, and the folder of the file it really is when the model file is a symbolic link (a
// download cache keeps a snapshot's files as links into a folder of blobs).
struct ModelFolder {
  std::vector<std::string> dirs;
  static ModelFolder of_model_file(const std::string& model_path);
  static ModelFolder of_dir(const std::string& dir);
};

struct FileRules {
  std::string_view kind = "file";  // for messages: "graph file", "external data", ...
  uint64_t max_bytes = UINT64_MAX;
  bool stream = false;                  // a pipe or character device is read as a stream
  const ModelFolder* inside = nullptr;  // a file the model names: where it must lie
};

// An open file (closed when destroyed). `regular` files have a known size.
class OpenFile {
 public:
  OpenFile() = default;
  OpenFile(OpenFile&& o) noexcept;
  OpenFile& operator=(OpenFile&& o) noexcept;
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
  ~OpenFile();

  int fd() const { return fd_; }
  bool regular() const { return regular_; }
  uint64_t size() const { return size_; }  // regular files
  const std::string& path() const { return path_; }
  const std::string& name() const { return name_; }  // "graph file 'x.json'", for messages

 private:
  friend Result<OpenFile> open_file(const std::string& path, const FileRules& rules);
  int fd_ = -1;
  bool regular_ = false;
  uint64_t size_ = 0;
  std::string path_, name_;
};

// Opens `path` under `rules`. A folder, a fifo, a device or a socket is refused (naming which)
// unless rules.stream allows the last three; a regular file larger than rules.max_bytes is
// refused from its size; a file a model names outside its folder, or with more than one link,
// is refused. Errors name rules.kind and the path.
Result<OpenFile> open_file(const std::string& path, const FileRules& rules);
// Everything left in `f`, at most `max_bytes`: a regular file by its size, a stream until it
// ends (once: a stream is never read twice) or has given more than the cap.
Result<std::string> read_all(OpenFile& f, uint64_t max_bytes);
// The first `n` bytes of a regular file (fewer when it is shorter), without moving its offset.
std::string read_prefix(const OpenFile& f, size_t n);

// The whole of `path` (a `kind` file: "graph file", "profile"), at most `cap` bytes; streams
// only when `stream`.
Result<std::string> read_whole_file(const std::string& path, uint64_t cap, std::string_view kind,
                                    bool stream = false);

// A regular file mapped read-only and shared: writing through `data` faults. The mapping lives
// as long as the object.
class MappedFile {
 public:
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();
  std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(p_), n_}; }

 private:
  MappedFile(void* p, size_t n) : p_(p), n_(n) {}
  friend Result<std::shared_ptr<MappedFile>> map_file(const OpenFile& f);
  void* p_ = nullptr;
  size_t n_ = 0;
};
Result<std::shared_ptr<MappedFile>> map_file(const OpenFile& f);

// Whether `path` may receive an output (named by `option`, "--outputs"): a regular file, which
// is replaced, or a new name in an existing folder. Every file duet writes goes through it. A
// folder, device, fifo or socket is refused (invalid_argument), never replaced; a symbolic link is
// followed, also one that names no file yet (the file it names is written, the link stays). An
// empty path (option not given) passes. Commands check every output before any work.
Status check_output_target(const std::string& path, std::string_view option);
// Writes `content` to a new temporary file beside the target (O_CREAT | O_EXCL | O_NOFOLLOW, an
// unpredictable name; beside the file a symbolic link names) and renames it into place, so a
// failure never leaves a partial file that looks complete. A replaced file's permissions and
// owner are kept (an owner this process cannot give back is an error, and nothing is replaced).
Status write_file_atomically(const std::string& path, std::string_view content);

}  // namespace duet
