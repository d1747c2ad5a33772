#include "duet/tokenizer.h"

#include <algorithm>

#include "tokenizer/impl.h"
#include "tokenizer/unicode.h"

namespace duet::llm {
namespace {

using Impl = Tokenizer::Impl;

// A fragment of the text: raw text, or a special token found in it.
struct Fragment {
  std::string_view text;
  int32_t token = -1;
};

// The text cut at the special tokens found in it, leftmost first, the longest at a position.
void partition(const Impl& t, std::string_view text, bool parse_special,
               std::vector<Fragment>& out) {
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto& candidates = t.special_by_byte[static_cast<unsigned char>(text[i])];
    for (int32_t id : candidates) {
      if (!parse_special && t.type[static_cast<size_t>(id)] == TokenType::control) continue;
      const std::string& s = t.strings[static_cast<size_t>(id)];
      if (text.compare(i, s.size(), s) != 0) continue;
      if (i > start) out.push_back({text.substr(start, i - start)});
      out.push_back({{}, id});
      start = i + s.size();
      i = start - 1;
      break;
    }
  }
  if (start < text.size()) out.push_back({text.substr(start)});
}

// The longest prefix of the bytes at `i` that a valid sequence could start with: what one
// U+FFFD replaces (Unicode's "maximal subpart"), at least one byte.
size_t maximal_subpart(std::string_view s, size_t i) {
  const unsigned char b0 = static_cast<unsigned char>(s[i]);
  const int n = unicode::sequence_length(b0);
  if (n <= 1) return 1;
  size_t k = 1;
  for (; k < static_cast<size_t>(n) && i + k < s.size(); ++k) {
    const unsigned char b = static_cast<unsigned char>(s[i + k]);
    unsigned char lo = 0x80, hi = 0xBF;
    if (k == 1) {
      if (b0 == 0xE0) lo = 0xA0;
      if (b0 == 0xED) hi = 0x9F;
      if (b0 == 0xF0) lo = 0x90;
      if (b0 == 0xF4) hi = 0x8F;
    }
    if (b < lo || b > hi) break;
  }
  return k;
}

// The byte of a "<0xXX>" token, or -1.
int byte_value(const std::string& s) {
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (s.size() != 6 || s.compare(0, 3, "<0x") != 0 || s[5] != '>') return -1;
  const int hi = hex(s[3]), lo = hex(s[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

const char kReplacement[] = "\xEF\xBF\xBD";

}  // namespace

Result<Tokenizer> Tokenizer::from_gguf(const GgufFile& file) {
  DUET_ASSIGN_OR_RETURN(auto impl, read_tokenizer(file));
  return Tokenizer(std::move(impl));
}

std::string_view Tokenizer::kind() const {
  return impl_->kind_name;
}
std::string_view Tokenizer::pre() const {
  return impl_->kind == Impl::Kind::bpe ? std::string_view(impl_->pre_name) : std::string_view();
}
int32_t Tokenizer::size() const {
  return impl_->size();
}
int32_t Tokenizer::bos() const {
  return impl_->bos;
}
int32_t Tokenizer::eos() const {
  return impl_->eos;
}
bool Tokenizer::add_bos() const {
  return impl_->add_bos;
}
bool Tokenizer::add_eos() const {
  return impl_->add_eos;
}

bool Tokenizer::is_end(int32_t id) const {
  return std::binary_search(impl_->ends.begin(), impl_->ends.end(), id);
}

TokenType Tokenizer::type(int32_t id) const {
  return impl_->valid(id) ? impl_->type[static_cast<size_t>(id)] : TokenType::undefined;
}

const std::string& Tokenizer::text(int32_t id) const {
  static const std::string none;
  return impl_->valid(id) ? impl_->strings[static_cast<size_t>(id)] : none;
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text, EncodeOptions opts) const {
  const Impl& t = *impl_;
  if (size_t bad = unicode::first_invalid(text); bad != std::string_view::npos)
    return Status(Code::invalid_argument,
                  "tokenize: the text is not valid UTF-8: byte " +
                      std::to_string(static_cast<unsigned char>(text[bad])) + " at offset " +
                      std::to_string(bad));
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (opts.add_special && t.add_bos) out.push_back(t.bos);
  std::vector<Fragment> fragments;
  partition(t, text, opts.parse_special, fragments);
  // SentencePiece puts a space before the text, and llama.cpp before the text after each
  // special token (as Hugging Face's legacy Llama tokenizer does).
  bool after_special = true;
  std::string spaced;
  for (const Fragment& f : fragments) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    if (t.kind == Impl::Kind::spm) {
      std::string_view piece = f.text;
      if (t.add_space_prefix && after_special) {
        spaced.assign(" ");
        spaced.append(f.text);
        piece = spaced;
      }
      DUET_TRY(t.encode_spm(piece, out));
    } else {
      DUET_TRY(t.encode_bpe(f.text, out));
    }
    after_special = false;
  }
  if (opts.add_special && t.add_eos) out.push_back(t.eos);
  return out;
}

void Impl::append_piece(int32_t id, bool special, std::string& out) const {
  if (!valid(id)) return;
  const std::string& s = strings[static_cast<size_t>(id)];
  switch (type[static_cast<size_t>(id)]) {
    case TokenType::control:
      if (special) out += s;
      return;
    case TokenType::unknown:
      if (kind == Kind::spm)
        out += " \xE2\x81\x87 ";
      else if (special)
        out += s;
      return;
    case TokenType::byte:
      if (int b = byte_value(s); kind == Kind::spm && b >= 0) {
        out += static_cast<char>(b);
        return;
      }
      break;
    case TokenType::user_defined:
      out += s;
      return;
    default:
      break;
  }
  if (kind == Kind::spm) {
    for (size_t i = 0; i < s.size(); ++i) {
      if (s.compare(i, 3, "\xE2\x96\x81") == 0) {
        out += ' ';
        i += 2;
      } else {
        out += s[i];
      }
    }
    return;
  }
  // Byte-level: each character is a byte; a character outside GPT-2's table stands for itself.
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {  // printable ASCII stands for itself
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    unicode::Decoded d = unicode::decode(s, i);
    if (d.len == 0) {
      out += s[i++];
      continue;
    }
    if (d.cp < 0x144 && char_byte[d.cp] >= 0)
      out += static_cast<char>(char_byte[d.cp]);
    else
      out.append(s, i, static_cast<size_t>(d.len));
    i += static_cast<size_t>(d.len);
  }
}

std::string Tokenizer::piece(int32_t id, bool special) const {
  std::string out;
  impl_->append_piece(id, special, out);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool special) const {
  std::string bytes;
  bytes.reserve(ids.size() * 4);
  for (int32_t id : ids) impl_->append_piece(id, special, bytes);
  if (impl_->kind == Impl::Kind::spm && impl_->add_space_prefix && !bytes.empty() &&
      bytes[0] == ' ')
    bytes.erase(0, 1);
  return valid_utf8(bytes);
}

std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      out += s[i++];
      continue;
    }
    const unicode::Decoded d = unicode::decode(s, i);
    if (d.len > 0) {
      out.append(s, i, static_cast<size_t>(d.len));
      i += static_cast<size_t>(d.len);
    } else {
      out += kReplacement;
      i += maximal_subpart(s, i);
    }
  }
  return out;
}

size_t first_invalid_utf8(std::string_view text) {
  return unicode::first_invalid(text);
}

std::string Utf8Stream::push(std::string_view bytes) {
  held_.append(bytes);
  // Hold back the last sequence while it is a valid start that has not all arrived.
  size_t keep = held_.size();
  for (size_t back = 1; back <= 3 && back <= held_.size(); ++back) {
    const size_t at = held_.size() - back;
    const unsigned char b = static_cast<unsigned char>(held_[at]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const int n = unicode::sequence_length(b);
    if (n > static_cast<int>(back) && maximal_subpart(held_, at) == back) keep = at;
    break;
  }
  std::string out = valid_utf8(std::string_view(held_).substr(0, keep));
  held_.erase(0, keep);
  return out;
}

std::string Utf8Stream::finish() {
  std::string out = valid_utf8(held_);
  held_.clear();
  return out;
}

}  // namespace duet::llm
