// Wording shared by messages and summaries: a count with its noun in the right number.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "duet/dtype.h"

namespace duet {

// "1 device", "2 devices", "0 cases", "1 infinity", "3 infinities". English plurals of the nouns
// duet counts: -y after a consonant becomes -ies, -s/-x/-ch/-sh take -es, the rest -s.
inline std::string counted(int64_t n, std::string_view noun) {
  std::string s = std::to_string(n) + " " + std::string(noun);
  if (n == 1 || noun.empty()) return s;
  const char last = noun.back();
  const char before = noun.size() > 1 ? noun[noun.size() - 2] : '\0';
  if (last == 'y' && std::string_view("aeiou").find(before) == std::string_view::npos) {
    s.back() = 'i';
    return s + "es";
  }
  if (last == 's' || last == 'x' || (last == 'h' && (before == 'c' || before == 's')))
    return s + "es";
  return s + "s";
}

// "f32, f16, bf16": the names of `types` from the dtype table, for messages that list what is
// accepted (dtype_names(kQuantizedDTypes): every block format).
inline std::string dtype_names(std::span<const DType> types) {
  std::string s;
  for (DType t : types) s += (s.empty() ? "" : ", ") + std::string(dtype_name(t));
  return s;
}

}  // namespace duet
