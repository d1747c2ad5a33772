#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>

namespace duet::llm::unicode {
namespace {

Cat lookup(char32_t cp) {
  const uint32_t key = static_cast<uint32_t>(cp) << 3 | 7;
  const uint32_t* end = kCategoryRanges + kCategoryRangeCount;
  const uint32_t* it = std::upper_bound(kCategoryRanges, end, key);
  return static_cast<Cat>(it[-1] & 7);  // the table starts at code point 0
}

// Latin-1 is most of most text: looked up once.
const std::array<Cat, 256>& latin1() {
  static const std::array<Cat, 256> table = [] {
    std::array<Cat, 256> t{};
    for (char32_t c = 0; c < 256; ++c) t[c] = lookup(c);
    return t;
  }();
  return table;
}

}  // namespace

Cat category(char32_t cp) {
  if (cp < 256) return latin1()[cp];
  if (cp > 0x10FFFF) return Cat::other;
  return lookup(cp);
}

bool is_whitespace(char32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  if (cp < 0x85) return false;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

int sequence_length(unsigned char b) {
  if (b < 0x80) return 1;
  if (b < 0xC2) return 0;
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  if (b < 0xF5) return 4;
  return 0;
}

Decoded decode(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  const int n = sequence_length(b0);
  if (n == 1) return {b0, 1};
  if (n == 0 || i + static_cast<size_t>(n) > s.size()) return {};
  char32_t cp = b0 & (0xFF >> (n + 1));
  for (int k = 1; k < n; ++k) {
    const unsigned char b = byte(i + static_cast<size_t>(k));
    if ((b & 0xC0) != 0x80) return {};
    cp = cp << 6 | (b & 0x3F);
  }
  // Overlong 3- and 4-byte forms, surrogates, and values past U+10FFFF.
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
      (cp >= 0xD800 && cp <= 0xDFFF))
    return {};
  return {cp, n};
}

size_t first_invalid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const Decoded d = decode(s, i);
    if (d.len == 0) return i;
    i += static_cast<size_t>(d.len);
  }
  return std::string_view::npos;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace duet::llm::unicode
