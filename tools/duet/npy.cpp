#include "duet/npy.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <limits>
#include <optional>

#include "duet/internal/files.h"

namespace duet::cli {

namespace {

struct Kind {
  std::string_view st;     // safetensors name
  std::string_view descr;  // NumPy's, little-endian
};
constexpr Kind kKinds[] = {
    {"BOOL", "|b1"}, {"U8", "|u1"},  {"I8", "|i1"},  {"I16", "<i2"}, {"U16", "<u2"}, {"F16", "<f2"},
    {"I32", "<i4"},  {"U32", "<u4"}, {"F32", "<f4"}, {"F64", "<f8"}, {"I64", "<i8"}, {"U64", "<u8"},
};

Status bad(std::string_view what, std::string_view field, std::string_view expected,
           std::string_view got, Code code = Code::parse_error) {
  std::string m(what);
  if (!field.empty()) m += ": field '" + std::string(field) + "'";
  m += ": expected " + std::string(expected) + ", got " + std::string(got);
  return Status(code, m);
}

// A cursor over the header's Python dict literal.
struct Literal {
  std::string_view s;
  size_t i = 0;
  void space() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  bool eat(char c) {
    space();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  std::optional<std::string> string() {
    space();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) return std::nullopt;
    const char q = s[i++];
    const size_t end = s.find(q, i);
    if (end == std::string_view::npos) return std::nullopt;
    std::string out(s.substr(i, end - i));
    i = end + 1;
    return out;
  }
  std::string_view word() {
    space();
    const size_t b = i;
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
    return s.substr(b, i - b);
  }
  // What follows, for messages.
  std::string rest() const {
    std::string r(s.substr(std::min(i, s.size()), 24));
    return r.empty() ? "the end of the header" : "'" + r + "'";
  }
};

}  // namespace

std::string_view npy_descr(std::string_view st_dtype) {
  for (const Kind& k : kKinds)
    if (k.st == st_dtype) return k.descr;
  return {};
}

int st_element_bytes(std::string_view st) {
  if (st == "BOOL" || st == "U8" || st == "I8" || st.starts_with("F8")) return 1;
  if (st == "I16" || st == "U16" || st == "F16" || st == "BF16") return 2;
  if (st == "I32" || st == "U32" || st == "F32") return 4;
  if (st == "I64" || st == "U64" || st == "F64") return 8;
  return 0;
}

Result<RawArray> parse_npy(std::span<const std::byte> bytes, std::string_view what) {
  static constexpr char kMagic[] = "\x93NUMPY";
  if (bytes.size() < 10 || std::memcmp(bytes.data(), kMagic, 6) != 0)
    return bad(what, "", "a .npy file (starting with \\x93NUMPY)",
               bytes.size() < 10 ? std::to_string(bytes.size()) + " bytes" : "other bytes");
  const int major = static_cast<int>(bytes[6]), minor = static_cast<int>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0)
    return bad(what, "version", "1.0, 2.0 or 3.0",
               std::to_string(major) + "." + std::to_string(minor));
  const size_t prefix = major == 1 ? 10 : 12;
  if (bytes.size() < prefix) return bad(what, "header length", "4 bytes", "a truncated file");
  uint64_t hlen = 0;
  for (size_t b = 0; b < prefix - 8; ++b) hlen |= static_cast<uint64_t>(bytes[8 + b]) << (8 * b);
  if (hlen > bytes.size() - prefix)
    return bad(what, "header length",
               "at most the " + std::to_string(bytes.size() - prefix) + " bytes after it",
               std::to_string(hlen) + " (truncated file)");
  Literal h{std::string_view(reinterpret_cast<const char*>(bytes.data()) + prefix, hlen)};

  std::optional<std::string> descr;
  std::optional<bool> fortran;
  std::optional<std::vector<int64_t>> shape;
  if (!h.eat('{')) return bad(what, "header", "a dict literal '{...}'", h.rest());
  while (!h.eat('}')) {
    auto key = h.string();
    if (!key) return bad(what, "header", "a quoted key or '}'", h.rest());
    if (!h.eat(':')) return bad(what, *key, "':' after the key", h.rest());
    if (*key == "descr") {
      h.space();
      if (h.i < h.s.size() && h.s[h.i] == '[')
        return bad(what, "descr", "a plain dtype", "a structured dtype (not supported)",
                   Code::invalid_argument);
      descr = h.string();
      if (!descr) return bad(what, "descr", "a quoted dtype such as '<f4'", h.rest());
    } else if (*key == "fortran_order") {
      const std::string_view w = h.word();
      if (w != "True" && w != "False") return bad(what, *key, "True or False", h.rest());
      fortran = w == "True";
    } else if (*key == "shape") {
      if (!h.eat('(')) return bad(what, *key, "a tuple of sizes", h.rest());
      std::vector<int64_t> dims;
      while (!h.eat(')')) {
        h.space();
        const size_t b = h.i;
        uint64_t v = 0;
        while (h.i < h.s.size() && std::isdigit(static_cast<unsigned char>(h.s[h.i]))) {
          const uint64_t d = static_cast<uint64_t>(h.s[h.i++] - '0');
          if (v > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - d) / 10)
            return bad(what, *key, "sizes that fit in 64 bits",
                       "'" + std::string(h.s.substr(b, 24)) + "...'", Code::invalid_argument);
          v = v * 10 + d;
        }
        if (h.i == b) return bad(what, *key, "a non-negative integer", h.rest());
        if (h.i < h.s.size() && h.s[h.i] == 'L') ++h.i;  // written by Python 2
        dims.push_back(static_cast<int64_t>(v));
        if (!h.eat(',') && !(h.space(), h.i < h.s.size() && h.s[h.i] == ')'))
          return bad(what, *key, "',' or ')'", h.rest());
      }
      shape = std::move(dims);
    } else {
      return bad(what, "header", "the keys 'descr', 'fortran_order' and 'shape'", "'" + *key + "'");
    }
    if (!h.eat(',') && !(h.space(), h.i < h.s.size() && h.s[h.i] == '}'))
      return bad(what, "header", "',' or '}'", h.rest());
  }
  if (!descr || !fortran || !shape)
    return bad(what, "header", "the keys 'descr', 'fortran_order' and 'shape'",
               std::string(!descr     ? "no 'descr'"
                           : !fortran ? "no 'fortran_order'"
                                      : "no 'shape'"));

  // The dtype: byte order, kind, size.
  RawArray a;
  const std::string& d = *descr;
  bool swap = false;
  std::string canon = d;
  if (d.size() >= 2 && (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=')) {
    swap = d[0] == '>';
    canon = (d.size() == 3 && d[2] == '1' ? "|" : "<") + d.substr(1);
  }
  for (const Kind& k : kKinds)
    if (k.descr == canon) a.dtype = k.st;
  if (a.dtype.empty()) {
    std::string known;
    for (const Kind& k : kKinds) known += (known.empty() ? "" : ", ") + std::string(k.descr);
    return bad(what, "descr", "one of " + known, "'" + d + "'", Code::invalid_argument);
  }
  const int esize = st_element_bytes(a.dtype);
  swap = swap && esize > 1;
  if (*fortran) {
    int big = 0;
    for (int64_t n : *shape) big += n > 1;
    if (big > 1)  // one dimension of more than 1 element is laid out the same in either order
      return bad(what, "fortran_order", "False (C order; save with numpy.ascontiguousarray)",
                 "True", Code::invalid_argument);
  }
  uint64_t n = static_cast<uint64_t>(esize);
  for (int64_t dim : *shape)
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(dim), &n))
      return bad(what, "shape", "a size that fits in 64 bits", "an overflowing product",
                 Code::invalid_argument);
  const uint64_t avail = bytes.size() - prefix - hlen;
  if (n != avail)
    return bad(
        what, "shape", "data of " + std::to_string(avail) + " bytes after the header to match",
        std::to_string(n) + " bytes for " + d + " " +
            [&] {
              std::string s = "(";
              for (size_t i = 0; i < shape->size(); ++i)
                s += (i ? ", " : "") + std::to_string((*shape)[i]);
              return s + ")";
            }() +
            (n > avail ? " (truncated file)" : " (trailing bytes)"),
        Code::invalid_argument);
  a.shape = std::move(*shape);
  a.data.assign(bytes.begin() + static_cast<ptrdiff_t>(prefix + hlen), bytes.end());
  if (swap)
    for (size_t i = 0; i < a.data.size(); i += static_cast<size_t>(esize))
      std::reverse(a.data.begin() + static_cast<ptrdiff_t>(i),
                   a.data.begin() + static_cast<ptrdiff_t>(i) + esize);
  if (a.dtype == "BOOL")
    for (std::byte b : a.data)
      if (static_cast<uint8_t>(b) > 1)
        return bad(what, "data", "bool bytes 0 or 1", std::to_string(static_cast<int>(b)),
                   Code::invalid_argument);
  return a;
}

Result<RawArray> read_npy(const std::string& path) {
  const std::string what = "npy file '" + path + "'";
  auto text = read_whole_file(path, host_memory_bytes(), "npy file");
  if (!text.ok()) return text.status();
  return parse_npy(std::as_bytes(std::span(text->data(), text->size())), what);
}

Result<std::string> encode_npy(const RawArray& a) {
  const std::string_view descr = npy_descr(a.dtype);
  if (descr.empty())
    return Status(Code::invalid_argument,
                  "dtype " + a.dtype + ": NumPy has no type for it (no .npy descr)");
  std::string h = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < a.shape.size(); ++i) h += (i ? ", " : "") + std::to_string(a.shape[i]);
  h += a.shape.size() == 1 ? ",), }" : "), }";
  // Spaces and a newline so that the data starts on a 64-byte boundary, as NumPy writes it.
  auto padded = [&](size_t prefix) { return (prefix + h.size() + 1 + 63) / 64 * 64; };
  const bool v1 = padded(10) - 10 <= 65535;  // version 1.0 holds the length in 2 bytes
  const size_t prefix = v1 ? 10 : 12;
  const size_t total = padded(prefix);
  h.append(total - prefix - h.size() - 1, ' ');
  h += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(v1 ? 1 : 2);
  out += '\0';
  const uint64_t hlen = h.size();
  for (size_t b = 0; b < prefix - 8; ++b) out += static_cast<char>((hlen >> (8 * b)) & 0xff);
  out += h;
  out.append(reinterpret_cast<const char*>(a.data.data()), a.data.size());
  return out;
}

}  // namespace duet::cli
