// Errors are values. A Status says what went wrong in one sentence that names the op, the tensor,
// the device and what was expected; a Result<T> is a value or such a Status.
#pragma once

#include <cassert>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "duet/export.h"

namespace duet {

enum class Code : int {
  ok = 0,
  invalid_argument,  // the caller gave something malformed: shapes, dtypes, attributes
  unsupported,       // well-formed, but this device/backend/build cannot do it
  out_of_memory,
  not_found,    // unknown device, op, tensor name, file
  io_error,     // reading or writing a file failed
  parse_error,  // a file's content is malformed
  device_lost,  // a device failed in a way that poisons later work on it
  internal,     // a bug in duet
};

DUET_API std::string_view code_name(Code code);

// `text` made fit for a one-line message: control bytes (a NUL included) written as \xNN, and
// more than `max` bytes cut at a character boundary and followed by "... (N bytes)".
DUET_API std::string clip_text(std::string_view text, size_t max = 200);

// The longest message kept whole (bytes); a longer one keeps its start and its end.
inline constexpr size_t kMaxMessageBytes = 16384;

class [[nodiscard]] DUET_API Status {
 public:
  Status() = default;
  // A message is kept to one readable line of at most kMaxMessageBytes: a NUL byte is written
  // as \x00 (it would cut the message short where it is read as a C string).
  Status(Code code, std::string message);

  static Status ok_status() { return {}; }
  bool ok() const { return code_ == Code::ok; }
  explicit operator bool() const { return ok(); }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefixes the message with where it happened: "graph 'llama': node 'attn0': <message>".
  Status with_context(std::string_view context) const;
  // "invalid_argument: <message>"
  std::string to_string() const;

 private:
  Code code_ = Code::ok;
  std::string message_;
};

// Builds the engine's standard error sentence:
//   "<op> '<node>': tensor '<name>' on <device>: expected <what>, got <what>"
// Every part is optional; the parts given appear in that order. Names and what was got come from
// outside (a file, a model): they are clipped (clip_text: 160 and 400 bytes).
class DUET_API Err {
 public:
  explicit Err(Code code) : code_(code) {}
  Err& op(std::string_view op_kind, std::string_view node = {});
  Err& tensor(std::string_view name);
  Err& device(std::string_view id);
  Err& expected(std::string_view what);
  Err& got(std::string_view what);
  Err& note(std::string_view text);  // free text after the rest
  operator Status() const;           // NOLINT: implicit on purpose, so `return Err(...)...;` reads

 private:
  Code code_;
  std::string op_, node_, tensor_, device_, expected_, got_, note_;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT
  Result(Status status) : v_(std::move(status)) {
    assert(!std::get<Status>(v_).ok() && "Result built from an ok Status");
  }
  Result(const Err& err) : Result(Status(err)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace duet

#define DUET_CONCAT_INNER(a, b) a##b
#define DUET_CONCAT(a, b) DUET_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function when it is an error.
#define DUET_TRY(expr)                                   \
  do {                                                   \
    ::duet::Status duet_try_status_ = (expr);            \
    if (!duet_try_status_.ok()) return duet_try_status_; \
  } while (0)

// `DUET_ASSIGN_OR_RETURN(auto x, make_x());` declares x from a Result or returns its error.
#define DUET_ASSIGN_OR_RETURN(lhs, expr) \
  DUET_ASSIGN_OR_RETURN_IMPL(DUET_CONCAT(duet_result_, __LINE__), lhs, expr)
#define DUET_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
