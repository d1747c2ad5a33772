#include "duet/status.h"

namespace duet {

std::string_view code_name(Code code) {
  switch (code) {
    case Code::ok:
      return "ok";
    case Code::invalid_argument:
      return "invalid_argument";
    case Code::unsupported:
      return "unsupported";
    case Code::out_of_memory:
      return "out_of_memory";
    case Code::not_found:
      return "not_found";
    case Code::io_error:
      return "io_error";
    case Code::parse_error:
      return "parse_error";
    case Code::device_lost:
      return "device_lost";
    case Code::internal:
      return "internal";
  }
  return "unknown";
}

Status Status::with_context(std::string_view context) const {
  if (ok() || context.empty()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return Status(code_, std::move(m));
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  std::string s(code_name(code_));
  s += ": ";
  s += message_;
  return s;
}

Err& Err::op(std::string_view op_kind, std::string_view node) {
  op_ = op_kind;
  node_ = node;
  return *this;
}
Err& Err::tensor(std::string_view name) {
  tensor_ = name;
  return *this;
}
Err& Err::device(std::string_view id) {
  device_ = id;
  return *this;
}
Err& Err::expected(std::string_view what) {
  expected_ = what;
  return *this;
}
Err& Err::got(std::string_view what) {
  got_ = what;
  return *this;
}
Err& Err::note(std::string_view text) {
  note_ = text;
  return *this;
}

Err::operator Status() const {
  std::string m;
  auto part = [&m](const std::string& text) {
    if (!m.empty()) m += ": ";
    m += text;
  };
  if (!op_.empty()) part(node_.empty() || node_ == op_ ? op_ : op_ + " '" + node_ + "'");
  std::string where;
  if (!tensor_.empty()) where = "tensor '" + tensor_ + "'";
  if (!device_.empty()) where += (where.empty() ? "on " : " on ") + device_;
  if (!where.empty()) part(where);
  std::string what;
  if (!expected_.empty()) what = "expected " + expected_;
  if (!got_.empty()) what += (what.empty() ? "got " : ", got ") + got_;
  if (!what.empty()) part(what);
  if (!note_.empty()) part(note_);
  if (m.empty()) m = std::string(code_name(code_));
  return Status(code_, std::move(m));
}

}  // namespace duet
