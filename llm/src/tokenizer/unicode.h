// What the tokenizers need of Unicode: UTF-8 decoding and encoding, the general category class of
// a code point (from the generated table, unicode_table.cpp) and the White_Space property.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace duet::llm::unicode {

// The first letter of the general category: C (control, format, unassigned, private use,
// surrogate), L (letter), M (mark), N (number), P (punctuation), S (symbol), Z (separator).
enum class Cat : uint8_t { other = 0, letter, mark, number, punct, symbol, separator };

extern const char* const kUnicodeVersion;
extern const uint32_t kCategoryRangeCount;
extern const uint32_t kCategoryRanges[];

Cat category(char32_t cp);
// Unicode's White_Space property (what \s matches in the pre-tokenizers' patterns).
bool is_whitespace(char32_t cp);

// The code point at s[i] and its length in bytes; length 0 where the bytes there are not a
// complete, valid UTF-8 sequence (overlong forms, surrogates and values past U+10FFFF included).
struct Decoded {
  char32_t cp = 0;
  int len = 0;
};
Decoded decode(std::string_view s, size_t i);
// The offset of the first byte that does not start a valid sequence, or npos when all is valid.
size_t first_invalid(std::string_view s);
void append(std::string& out, char32_t cp);

// Bytes of a UTF-8 sequence announced by its first byte: 1..4, or 0 for a byte that cannot start
// one (a continuation byte, 0xC0, 0xC1, 0xF5..0xFF).
int sequence_length(unsigned char first);

}  // namespace duet::llm::unicode
