#include "duet/internal/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "duet/policy.h"

namespace duet {

uint64_t host_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return uint64_t{1} << 40;  // unknown: a generous bound
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

Status check_host_bytes(uint64_t bytes, std::string_view what) {
  const uint64_t have = host_memory_bytes();
  if (bytes <= have) return {};
  return at(what, Err(Code::invalid_argument)
                      .expected("at most this machine's memory (" + format_bytes(have) + ")")
                      .got(format_bytes(bytes)));
}

Result<std::string> read_whole_file(const std::string& path, uint64_t cap, std::string_view kind) {
  const std::string name = std::string(kind) + " '" + path + "'";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return at(name, Err(errno == ENOENT ? Code::not_found : Code::io_error)
                        .note(std::string("cannot open: ") + std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return at(name, Err(Code::io_error).note(std::string("cannot stat: ") + std::strerror(err)));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return at(name, Err(Code::invalid_argument).expected("a file").got("a folder"));
  }
  auto too_large = [&](const std::string& got) {
    return at(name, Err(Code::invalid_argument)
                        .expected("at most " + format_bytes(cap) + " (the most read from a " +
                                  std::string(kind) + ")")
                        .got(got));
  };
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > cap) {
    ::close(fd);
    return too_large(std::to_string(st.st_size) + " bytes");
  }
  std::string text;
  if (S_ISREG(st.st_mode)) text.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return at(name,
                Err(Code::io_error).note(std::string("reading failed: ") + std::strerror(err)));
    }
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > cap) {
      ::close(fd);
      return too_large("more (a stream that did not end)");
    }
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

namespace {

// The file a write to `path` replaces: the target of a symbolic link (followed, so the link stays
// a link), else `path` itself.
std::string write_target(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_symlink(path, ec)) return path;
  const auto target = std::filesystem::weakly_canonical(path, ec);
  return ec ? path : target.string();
}

}  // namespace

Status check_output_target(const std::string& path, std::string_view option) {
  const std::string what = std::string(option) + " '" + path + "'";
  if (path.empty()) return {};  // not given
  const std::string target = write_target(path);
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      return at(what,
                Err(Code::invalid_argument)
                    .expected("a regular file or a new name (anything else is never replaced)")
                    .got(S_ISDIR(st.st_mode)    ? "a folder"
                         : S_ISCHR(st.st_mode)  ? "a character device"
                         : S_ISBLK(st.st_mode)  ? "a block device"
                         : S_ISFIFO(st.st_mode) ? "a fifo"
                         : S_ISSOCK(st.st_mode) ? "a socket"
                                                : "a special file"));
    return {};
  }
  std::filesystem::path dir = std::filesystem::path(target).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return at(what, Err(Code::invalid_argument)
                        .expected("a file in an existing folder")
                        .got("no folder '" + dir.string() + "'"));
  return {};
}

Status write_file_atomically(const std::string& path, std::string_view content) {
  DUET_TRY(check_output_target(path, "output"));
  const std::string target = write_target(path);
  // Unique per process, so two runs writing the same path cannot interleave their partial files.
  const std::string tmp = target + ".partial-" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) return Status(Code::io_error, "cannot write " + path + ": " + std::strerror(errno));
    f.write(content.data(), static_cast<std::streamsize>(content.size()));
    f.flush();
    if (!f) {
      const std::string why = std::strerror(errno);
      std::remove(tmp.c_str());
      return Status(Code::io_error, "cannot write " + path + ": " + why);
    }
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return Status(Code::io_error, "cannot move the finished " + path + " into place: " + why);
  }
  return {};
}

}  // namespace duet
