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

std::string clip_text(std::string_view s, size_t max) {
  std::string out;
  size_t i = 0;
  for (; i < s.size(); ++i) {
    if (out.size() >= max) {
      // Back to the start of a UTF-8 character.
      while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80 && !out.empty()) {
        --i;
        out.pop_back();
      }
      break;
    }
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (i < s.size()) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

Status::Status(Code code, std::string message) : code_(code), message_(std::move(message)) {
  if (message_.find('\0') != std::string::npos) {
    std::string m;
    for (char c : message_) {
      if (c == '\0')
        m += "\\x00";
      else
        m += c;
    }
    message_ = std::move(m);
  }
  if (message_.size() > kMaxMessageBytes) {
    const size_t head = kMaxMessageBytes * 3 / 4, tail = kMaxMessageBytes / 8;
    message_ = message_.substr(0, head) + " ... (" + std::to_string(message_.size() - head - tail) +
               " bytes left out) ... " + message_.substr(message_.size() - tail);
  }
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
  op_ = clip_text(op_kind, 160);
  node_ = clip_text(node, 160);
  return *this;
}
Err& Err::tensor(std::string_view name) {
  tensor_ = clip_text(name, 160);
  return *this;
}
Err& Err::device(std::string_view id) {
  device_ = clip_text(id, 160);
  return *this;
}
Err& Err::expected(std::string_view what) {
  expected_ = what;
  return *this;
}
Err& Err::got(std::string_view what) {
  got_ = clip_text(what, 400);
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
