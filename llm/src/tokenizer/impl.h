// The tokenizer's state, shared by its parts: the vocabulary read from the file (vocab.cpp), the
// special tokens found in text first (tokenizer.cpp), SentencePiece BPE (spm.cpp) and byte-level
// BPE over a pre-tokenizer (bpe.cpp, pretokenize.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "duet/tokenizer.h"
#include "tokenizer/pretokenize.h"

namespace duet::llm {

// How many distinct pieces one encode() remembers the tokens of (the most frequent come first in
// any text, so a bound keeps the table in cache without losing much).
inline constexpr size_t kSeenMax = 4096;

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using TokenIndex = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct Tokenizer::Impl {
  enum class Kind { spm, bpe };
  Kind kind = Kind::spm;
  std::string kind_name, pre_name;
  Pre pre = Pre::gpt2;

  std::vector<std::string> strings;  // each token as the file stores it
  std::vector<float> score;
  std::vector<TokenType> type;
  TokenIndex ids;  // text -> id (the first id of a text the vocabulary repeats)
  int32_t bos = -1, eos = -1, unk = -1;
  std::vector<int32_t> ends;  // ids that end generation, sorted
  bool add_bos = false, add_eos = false, add_space_prefix = false, ignore_merges = false;

  // Special tokens by their first byte, longest first.
  std::array<std::vector<int32_t>, 256> special_by_byte;

  // SentencePiece: whether text may be split before runs of U+2581 (no mergeable piece has a
  // U+2581 after another character), and the <0xXX> token of each byte (-1: none).
  bool spm_split = false;
  std::array<int32_t, 256> byte_token{};

  // Byte-level BPE: the token of each byte's character, the merges by pair of ids, and GPT-2's
  // byte <-> character tables.
  std::array<int32_t, 256> byte_char_token{};
  struct Merge {
    int32_t rank, result;
  };
  std::unordered_map<uint64_t, Merge> merges;
  std::array<char32_t, 256> byte_to_char{};
  std::array<int16_t, 0x144> char_byte{};  // -1: a character of no byte

  int32_t size() const { return static_cast<int32_t>(strings.size()); }
  bool valid(int32_t id) const { return id >= 0 && id < size(); }
  bool is_special(int32_t id) const {
    return type[static_cast<size_t>(id)] == TokenType::control ||
           type[static_cast<size_t>(id)] == TokenType::user_defined;
  }

  // Tokens of text with no special tokens in it, appended to `out`.
  Status encode_spm(std::string_view text, std::vector<int32_t>& out) const;
  Status encode_spm_segment(std::string_view escaped, std::vector<int32_t>& out) const;
  Status encode_bpe(std::string_view text, std::vector<int32_t>& out) const;
  // The token's bytes in running text, appended.
  void append_piece(int32_t id, bool special, std::string& out) const;
};

// Reads the vocabulary and its settings from the file (vocab.cpp).
Result<std::shared_ptr<const Tokenizer::Impl>> read_tokenizer(const GgufFile& file);

}  // namespace duet::llm
