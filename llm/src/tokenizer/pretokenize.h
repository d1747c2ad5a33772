// The pre-tokenizers of byte-level BPE models: the regular expressions of their tokenizer.json
// matched by hand over Unicode categories (no regex engine), alternatives tried in order at each
// position as the regex engine would.
//
//   gpt2    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   llama3  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//           ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   qwen2   llama3's with \p{N} (one digit) for \p{N}{1,3}
#pragma once

#include <cstddef>
#include <string_view>
#include <utility>
#include <vector>

namespace duet::llm {

enum class Pre { gpt2, llama3, qwen2 };

// Splits valid UTF-8 text into pieces (byte offset, byte length) that cover it in order.
void pretokenize(Pre pre, std::string_view text, std::vector<std::pair<size_t, size_t>>& out);

}  // namespace duet::llm
