// Text to token ids and back, read from a GGUF file's tokenizer.ggml.* metadata as llama.cpp
// writes it:
//
//   "llama"  SentencePiece BPE: spaces become U+2581, a space is put before the text
//            (tokenizer.ggml.add_space_prefix, default true), adjacent pieces merge best score
//            first (tokenizer.ggml.scores), a piece missing from the vocabulary falls back to
//            its bytes (<0xXX> tokens), else to the unknown token.
//   "gpt2"   byte-level BPE: the text is split by the pre-tokenizer named in tokenizer.ggml.pre
//            ("default": GPT-2's; "llama-bpe" (Llama 3), "qwen2", "smaug-bpe"), each piece's
//            bytes become characters (GPT-2's byte-to-unicode table) and merge by their rank in
//            tokenizer.ggml.merges; Llama 3's first looks the whole piece up (ignore_merges).
//
// Special tokens (control and user-defined, tokenizer.ggml.token_type) are found in the text
// first: user-defined ones always, control ones (<s>, <|begin_of_text|>, ...) when asked
// (EncodeOptions::parse_special), longest first at each position. BOS and EOS are added as the
// file says (tokenizer.ggml.add_bos_token / add_eos_token; defaults as llama.cpp's).
//
// Decoding joins the tokens' bytes; text out is always valid UTF-8 (see Utf8Stream). A token's
// bytes alone may not be (a byte token, or a byte-level piece cut inside a character).
//
// A Tokenizer is immutable after from_gguf and may be used by several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "duet/export.h"
#include "duet/gguf.h"
#include "duet/status.h"

namespace duet::llm {

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6,
};

struct DUET_API EncodeOptions {
  bool add_special = true;     // BOS / EOS where the file asks for them
  bool parse_special = false;  // control tokens written in the text become those tokens
};

class DUET_API Tokenizer {
 public:
  // The file's tokenizer. Errors: Code::not_found when the file has none (no
  // tokenizer.ggml.model or tokens), Code::unsupported for a kind or pre-tokenizer this
  // library does not have, Code::invalid_argument for malformed metadata; each names the key.
  static Result<Tokenizer> from_gguf(const GgufFile& file);

  std::string_view kind() const;  // "llama" or "gpt2"
  std::string_view pre() const;   // the pre-tokenizer ("" for "llama")
  int32_t size() const;           // tokens in the vocabulary
  int32_t bos() const;            // -1 when the file has none
  int32_t eos() const;
  bool add_bos() const;
  bool add_eos() const;
  // Ends generation: EOS, and the end-of-turn tokens the file names or has (<|eot_id|>, ...).
  bool is_end(int32_t id) const;
  TokenType type(int32_t id) const;  // undefined for an id out of range
  // The token's string as the file stores it ("▁the", "Ġthe", "<0x0A>", "<s>").
  const std::string& text(int32_t id) const;

  // Token ids of UTF-8 text. Invalid UTF-8 is an error naming the byte offset.
  Result<std::vector<int32_t>> encode(std::string_view text, EncodeOptions opts = {}) const;
  // The bytes a token stands for in running text: SentencePiece's U+2581 is a space, a byte
  // token is its byte, a byte-level piece its bytes. Control tokens give "" unless `special`
  // (then their text); an id out of range gives "".
  std::string piece(int32_t id, bool special = false) const;
  // The text of a whole sequence, as SentencePiece and llama.cpp decode it: pieces joined, the
  // space put before the text removed ("llama" with add_space_prefix), invalid UTF-8 replaced
  // by U+FFFD.
  std::string decode(std::span<const int32_t> ids, bool special = false) const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// Bytes in, valid UTF-8 out, for text that arrives a token at a time: a sequence cut at the end
// of what has arrived is held back until its last byte comes; bytes that cannot be part of a
// valid sequence become U+FFFD.
class DUET_API Utf8Stream {
 public:
  std::string push(std::string_view bytes);
  // What is held back, as U+FFFD (the stream ended inside a sequence); the stream is empty
  // after.
  std::string finish();
  bool holding() const { return !held_.empty(); }

 private:
  std::string held_;
};

// `text` with every byte that does not start a valid sequence replaced by U+FFFD (one per maximal
// invalid subsequence, as Unicode recommends).
DUET_API std::string valid_utf8(std::string_view text);
// The offset of the first byte of `text` that does not start a valid UTF-8 sequence (overlong
// forms, surrogates and values past U+10FFFF are invalid), or std::string_view::npos.
DUET_API size_t first_invalid_utf8(std::string_view text);

}  // namespace duet::llm
