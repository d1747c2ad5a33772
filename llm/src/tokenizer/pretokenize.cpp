#include "tokenizer/pretokenize.h"

#include <string>

#include "tokenizer/unicode.h"

namespace duet::llm {
namespace {

enum : uint8_t { kLetter = 1, kNumber = 2, kSpace = 4, kNewline = 8, kBlank = 16 };

// The text as code points with what the patterns ask of each, and where each starts.
struct Chars {
  std::vector<char32_t> cp;
  std::vector<uint8_t> flags;
  std::vector<size_t> at;  // byte offset; at[n] is the text's size

  void read(std::string_view s) {
    cp.clear();
    flags.clear();
    at.clear();
    for (size_t i = 0; i < s.size();) {
      unicode::Decoded d = unicode::decode(s, i);
      if (d.len == 0) d = {0xFFFD, 1};  // the caller checked; stay total anyway
      uint8_t f = 0;
      if (d.cp < 0x80) {
        const char32_t c = d.cp;
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
          f = kLetter;
        else if (c >= '0' && c <= '9')
          f = kNumber;
        else if (unicode::is_whitespace(c))
          f = kSpace;
      } else {
        const unicode::Cat c = unicode::category(d.cp);
        if (c == unicode::Cat::letter)
          f = kLetter;
        else if (c == unicode::Cat::number)
          f = kNumber;
        else if (unicode::is_whitespace(d.cp))
          f = kSpace;
      }
      if (d.cp == '\r' || d.cp == '\n') f |= kNewline;
      if (d.cp == ' ') f |= kBlank;
      cp.push_back(d.cp);
      flags.push_back(f);
      at.push_back(i);
      i += static_cast<size_t>(d.len);
    }
    at.push_back(s.size());
  }
};

class Matcher {
 public:
  Matcher(const Chars& c) : c_(c), n_(c.cp.size()) {}

  bool letter(size_t i) const { return i < n_ && (c_.flags[i] & kLetter); }
  bool number(size_t i) const { return i < n_ && (c_.flags[i] & kNumber); }
  bool space(size_t i) const { return i < n_ && (c_.flags[i] & kSpace); }
  bool newline(size_t i) const { return i < n_ && (c_.flags[i] & kNewline); }
  bool blank(size_t i) const { return i < n_ && (c_.flags[i] & kBlank); }
  // [^\s\p{L}\p{N}]
  bool other(size_t i) const { return i < n_ && !(c_.flags[i] & (kLetter | kNumber | kSpace)); }

  size_t run_letters(size_t i) const {
    while (letter(i)) ++i;
    return i;
  }
  size_t run_spaces(size_t i) const {
    while (space(i)) ++i;
    return i;
  }

  // 's|'t|'re|'ve|'m|'ll|'d, ASCII letters folded when `fold` (and U+017F, which folds to s).
  size_t contraction(size_t i, bool fold) const {
    if (i + 1 >= n_ || c_.cp[i] != '\'') return 0;
    auto lower = [&](size_t k) -> char32_t {
      if (k >= n_) return 0;
      const char32_t c = c_.cp[k];
      if (!fold) return c;
      if (c == 0x17F) return 's';
      return c >= 'A' && c <= 'Z' ? c + 32 : c;
    };
    const char32_t a = lower(i + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    const char32_t b = lower(i + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    return 0;
  }

  // \s+(?!\S), then \s+: a run of white space, less its last character when a non-space follows
  // (that character goes with what follows), unless the run is one character.
  size_t spaces(size_t i) const {
    const size_t j = run_spaces(i);
    if (j == n_ || j - i < 2) return j;
    return j - 1;
  }

  size_t gpt2(size_t i) const {
    if (size_t e = contraction(i, false)) return e;
    const size_t s = blank(i) ? i + 1 : i;  // ' ?'
    if (letter(s)) return run_letters(s);
    if (number(s)) {
      size_t j = s;
      while (number(j)) ++j;
      return j;
    }
    if (other(s)) {
      size_t j = s;
      while (other(j)) ++j;
      return j;
    }
    if (space(i)) return spaces(i);
    return i + 1;
  }

  size_t llama3(size_t i, size_t max_digits) const {
    if (size_t e = contraction(i, true)) return e;
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (letter(i)) return run_letters(i);
    if (i < n_ && !number(i) && !newline(i) && letter(i + 1)) return run_letters(i + 1);
    // \p{N}{1,3}
    if (number(i)) {
      size_t j = i;
      while (j - i < max_digits && number(j)) ++j;
      return j;
    }
    //  ?[^\s\p{L}\p{N}]+[\r\n]*
    const size_t s = blank(i) && other(i + 1) ? i + 1 : i;
    if (other(s)) {
      size_t j = s;
      while (other(j)) ++j;
      while (newline(j)) ++j;
      return j;
    }
    if (space(i)) {
      // \s*[\r\n]+: up to the last line break of the run of white space.
      const size_t j = run_spaces(i);
      for (size_t k = j; k > i; --k)
        if (newline(k - 1)) return k;
      return spaces(i);
    }
    return i + 1;
  }

 private:
  const Chars& c_;
  size_t n_;
};

}  // namespace

void pretokenize(Pre pre, std::string_view text, std::vector<std::pair<size_t, size_t>>& out) {
  thread_local Chars chars;
  chars.read(text);
  const Matcher m(chars);
  const size_t n = chars.cp.size();
  for (size_t i = 0; i < n;) {
    size_t j = pre == Pre::gpt2 ? m.gpt2(i) : m.llama3(i, pre == Pre::qwen2 ? 1 : 3);
    if (j <= i) j = i + 1;
    out.emplace_back(chars.at[i], chars.at[j] - chars.at[i]);
    i = j;
  }
}

}  // namespace duet::llm
