#include "duet/internal/files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "duet/internal/env.h"
#include "duet/policy.h"

namespace duet {

namespace fs = std::filesystem;

namespace {

std::string errno_text(int err) {
  return std::strerror(err);
}

const char* type_name(mode_t m) {
  return S_ISDIR(m)    ? "a folder"
         : S_ISCHR(m)  ? "a character device"
         : S_ISBLK(m)  ? "a block device"
         : S_ISFIFO(m) ? "a fifo"
         : S_ISSOCK(m) ? "a socket"
                       : "a special file";
}

// The real path of an open descriptor (what it is, whatever links led to it).
std::string real_path_of(int fd, const std::string& path) {
  char buf[PATH_MAX + 1];
  const std::string proc = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(proc.c_str(), buf, PATH_MAX);
  if (n > 0) return std::string(buf, static_cast<size_t>(n));
  std::error_code ec;
  const fs::path p = fs::canonical(path, ec);
  return ec ? std::string() : p.string();
}

bool inside_dir(const std::string& file, const std::string& dir) {
  if (dir.empty() || file.size() <= dir.size()) return false;
  if (dir == "/") return true;
  return file.compare(0, dir.size(), dir) == 0 && file[dir.size()] == '/';
}

std::string real_dir(const std::string& dir) {
  std::error_code ec;
  const fs::path p = fs::canonical(dir.empty() ? "." : dir, ec);
  return ec ? std::string() : p.string();
}

}  // namespace

uint64_t import_memory_budget(uint64_t asked) {
  if (asked > 0) return asked;
  const auto env = env_int("DUET_IMPORT_MEMORY", int64_t{1} << 20, INT64_MAX, "1 GiB");
  return env ? static_cast<uint64_t>(*env) : kDefaultImportMemory;
}

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

ModelFolder ModelFolder::of_model_file(const std::string& model_path) {
  ModelFolder m;
  const std::string logical = real_dir(fs::path(model_path).parent_path().string());
  if (!logical.empty()) m.dirs.push_back(logical);
  std::error_code ec;
  const fs::path real = fs::canonical(model_path, ec);
  if (!ec) {
    const std::string physical = real.parent_path().string();
    if (!physical.empty() && physical != logical) m.dirs.push_back(physical);
  }
  return m;
}

ModelFolder ModelFolder::of_dir(const std::string& dir) {
  ModelFolder m;
  const std::string d = real_dir(dir);
  if (!d.empty()) m.dirs.push_back(d);
  return m;
}

OpenFile::OpenFile(OpenFile&& o) noexcept
    : fd_(o.fd_),
      regular_(o.regular_),
      size_(o.size_),
      path_(std::move(o.path_)),
      name_(std::move(o.name_)) {
  o.fd_ = -1;
}

OpenFile& OpenFile::operator=(OpenFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    regular_ = o.regular_;
    size_ = o.size_;
    path_ = std::move(o.path_);
    name_ = std::move(o.name_);
    o.fd_ = -1;
  }
  return *this;
}

OpenFile::~OpenFile() {
  if (fd_ >= 0) ::close(fd_);
}

Result<OpenFile> open_file(const std::string& path, const FileRules& rules) {
  OpenFile f;
  f.path_ = path;
  f.name_ = std::string(rules.kind) + " '" + path + "'";
  const std::string& name = f.name_;
  if (path.empty())
    return at(name, Err(Code::invalid_argument).expected("a file name").got("an empty name"));
  if (path.find('\0') != std::string::npos)
    return at(name, Err(Code::invalid_argument).expected("a file name").got("a NUL byte in it"));
  // Non-blocking until the type is known: opening a fifo for reading would otherwise wait for a
  // writer that may never come.
  f.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (f.fd_ < 0) {
    const int err = errno;
    return at(name, Err(err == ENOENT ? Code::not_found : Code::io_error)
                        .note("cannot open: " + errno_text(err)));
  }
  struct stat st {};
  if (::fstat(f.fd_, &st) != 0)
    return at(name, Err(Code::io_error).note("cannot stat: " + errno_text(errno)));
  f.regular_ = S_ISREG(st.st_mode);
  if (!f.regular_) {
    const bool stream_kind = S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode);
    if (!rules.stream || !stream_kind)
      return at(name, Err(Code::invalid_argument)
                          .expected(S_ISDIR(st.st_mode) ? "a file"
                                    : rules.stream      ? "a file or a stream"
                                                        : "a regular file")
                          .got(type_name(st.st_mode)));
  }
  if (rules.inside) {
    // A file the model names: what it really is must lie in the model's folder, and it must not
    // be a second name (a hard link) of a file elsewhere.
    const std::string real = real_path_of(f.fd_, path);
    bool ok = false;
    for (const std::string& dir : rules.inside->dirs) ok = ok || inside_dir(real, dir);
    if (!ok)
      return at(name, Err(Code::invalid_argument)
                          .expected("a file inside the model's folder" +
                                    (rules.inside->dirs.empty()
                                         ? std::string()
                                         : " ('" + rules.inside->dirs.front() + "')"))
                          .got(real.empty() ? std::string("a path that cannot be resolved")
                                            : "'" + real + "' (symbolic links followed)"));
    if (f.regular_ && st.st_nlink > 1)
      return at(name, Err(Code::invalid_argument)
                          .expected("a file with one name (a hard link can make a file elsewhere "
                                    "look as if it were inside the model's folder)")
                          .got(std::to_string(st.st_nlink) + " hard links"));
  }
  if (f.regular_) {
    f.size_ = static_cast<uint64_t>(st.st_size);
    if (f.size_ > rules.max_bytes)
      return at(name, Err(Code::invalid_argument)
                          .expected("at most " + format_bytes(rules.max_bytes) +
                                    " (the most read from a " + std::string(rules.kind) + ")")
                          .got(std::to_string(f.size_) + " bytes"));
  }
  // Reads block again: a stream asked for is waited on like any input.
  const int flags = ::fcntl(f.fd_, F_GETFL);
  if (flags >= 0) ::fcntl(f.fd_, F_SETFL, flags & ~O_NONBLOCK);
  return f;
}

Result<std::string> read_all(OpenFile& f, uint64_t max_bytes) {
  auto too_large = [&](const std::string& got) {
    return at(f.name(), Err(Code::invalid_argument)
                            .expected("at most " + format_bytes(max_bytes) + " (the most read)")
                            .got(got));
  };
  if (f.regular() && f.size() > max_bytes) return too_large(std::to_string(f.size()) + " bytes");
  std::string text;
  try {
    if (f.regular()) text.reserve(static_cast<size_t>(f.size()));
  } catch (const std::exception&) {
    return at(
        f.name(),
        Err(Code::out_of_memory).note("cannot hold its " + std::to_string(f.size()) + " bytes"));
  }
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(f.fd(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return at(f.name(), Err(Code::io_error).note("reading failed: " + errno_text(errno)));
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > max_bytes)
      return too_large(f.regular() ? "a file that grew while it was read"
                                   : "more (a stream that did not end)");
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

std::string read_prefix(const OpenFile& f, size_t n) {
  std::string s(n, '\0');
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(f.fd(), s.data() + got, n - got, static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  s.resize(got);
  return s;
}

Result<std::string> read_whole_file(const std::string& path, uint64_t cap, std::string_view kind,
                                    bool stream) {
  FileRules rules;
  rules.kind = kind;
  rules.max_bytes = cap;
  rules.stream = stream;
  DUET_ASSIGN_OR_RETURN(OpenFile f, open_file(path, rules));
  return read_all(f, cap);
}

MappedFile::~MappedFile() {
  if (p_) ::munmap(p_, n_);
}

Result<std::shared_ptr<MappedFile>> map_file(const OpenFile& f) {
  if (!f.regular())
    return at(f.name(), Err(Code::invalid_argument).expected("a regular file").got("a stream"));
  if (f.size() > static_cast<uint64_t>(SIZE_MAX))
    return at(f.name(), Err(Code::invalid_argument)
                            .expected("a file this machine can address")
                            .got(std::to_string(f.size()) + " bytes"));
  const size_t n = static_cast<size_t>(f.size());
  if (n == 0) return std::shared_ptr<MappedFile>(new MappedFile(nullptr, 0));
  // Read-only and shared: nothing is committed against memory, so a file larger than memory
  // and swap maps, and its pages are read when touched.
  void* p = ::mmap(nullptr, n, PROT_READ, MAP_SHARED, f.fd(), 0);
  if (p == MAP_FAILED)
    return at(f.name(), Err(Code::io_error)
                            .note("memory-mapping " + std::to_string(n) +
                                  " bytes failed: " + errno_text(errno)));
  return std::shared_ptr<MappedFile>(new MappedFile(p, n));
}

namespace {

// The file a write to `path` replaces or creates: the end of a chain of symbolic links (followed,
// so that links stay links, also a link to a name that does not exist yet), else `path` itself.
std::string write_target(const std::string& path) {
  fs::path p(path);
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p.string();
    char buf[PATH_MAX + 1];
    const ssize_t n = ::readlink(p.c_str(), buf, PATH_MAX);
    if (n <= 0) return p.string();
    const fs::path to(std::string(buf, static_cast<size_t>(n)));
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  return p.string();  // a loop: stat below reports it
}

std::string random_suffix() {
  unsigned char r[12] = {};
  size_t got = 0;
  while (got < sizeof r) {
    const ssize_t n = ::getrandom(r + got, sizeof r - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  if (got < sizeof r) {  // no randomness: the pid and the address of a stack variable
    const uint64_t x = static_cast<uint64_t>(::getpid()) ^ reinterpret_cast<uintptr_t>(&got);
    std::memcpy(r, &x, sizeof x);
  }
  std::string s;
  char hex[3];
  for (unsigned char c : r) {
    std::snprintf(hex, sizeof hex, "%02x", c);
    s += hex;
  }
  return s;
}

}  // namespace

Status check_output_target(const std::string& path, std::string_view option) {
  const std::string what = std::string(option) + " '" + path + "'";
  if (path.empty()) return {};  // not given
  const std::string target = write_target(path);
  struct stat st {};
  if (::lstat(target.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode))
      return at(what, Err(Code::invalid_argument)
                          .expected("a chain of symbolic links that ends")
                          .got("a loop (or more than 40 links)"));
    if (!S_ISREG(st.st_mode))
      return at(what,
                Err(Code::invalid_argument)
                    .expected("a regular file or a new name (anything else is never replaced)")
                    .got(type_name(st.st_mode)));
    return {};
  }
  fs::path dir = fs::path(target).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return at(what, Err(Code::invalid_argument)
                        .expected("a file in an existing folder")
                        .got("no folder '" + dir.string() + "'"));
  return {};
}

Status write_file_atomically(const std::string& path, std::string_view content) {
  DUET_TRY(check_output_target(path, "output"));
  const std::string target = write_target(path);
  auto fail = [&](const std::string& what, int err) {
    return Status(Code::io_error, "cannot " + what + " " + path + ": " + errno_text(err));
  };
  struct stat old {};
  const bool replacing = ::lstat(target.c_str(), &old) == 0 && S_ISREG(old.st_mode);
  // Exclusive, never through a link, under a name no one can guess: a link planted at a
  // predictable name cannot redirect the write.
  const fs::path t(target);
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    tmp =
        (t.parent_path() / ("." + t.filename().string() + ".partial-" + random_suffix())).string();
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) return fail("write", errno);
  }
  if (fd < 0) return fail("write", EEXIST);
  auto abandon = [&](const Status& s) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  };
  if (replacing) {
    struct stat now {};
    if (::fstat(fd, &now) == 0 && (now.st_uid != old.st_uid || now.st_gid != old.st_gid) &&
        ::fchown(fd, old.st_uid, old.st_gid) != 0)
      return abandon(Status(Code::io_error, "cannot replace " + path + ": its owner (uid " +
                                                std::to_string(old.st_uid) + ", gid " +
                                                std::to_string(old.st_gid) +
                                                ") could not be kept: " + errno_text(errno)));
    if (::fchmod(fd, old.st_mode & 07777) != 0) return abandon(fail("write", errno));
  }
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return abandon(fail("write", errno));
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return fail("write", err);
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Status(Code::io_error,
                  "cannot move the finished " + path + " into place: " + errno_text(err));
  }
  return {};
}

}  // namespace duet
