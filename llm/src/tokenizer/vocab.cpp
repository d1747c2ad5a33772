// The tokenizer's vocabulary and settings from tokenizer.ggml.* metadata, every key checked.
#include <algorithm>
#include <cmath>

#include "tokenizer/impl.h"
#include "tokenizer/unicode.h"

namespace duet::llm {
namespace {

using Impl = Tokenizer::Impl;

Status bad_key(const GgufFile& f, std::string_view key, std::string_view expected,
               std::string_view got, Code code = Code::invalid_argument) {
  return Status(code, f.what + ": key '" + std::string(key) + "': expected " +
                          std::string(expected) + ", got " + std::string(got));
}

// An optional token id key: -1 when absent.
Result<int32_t> id_key(const GgufFile& f, std::string_view key, int32_t size, int32_t dflt) {
  const GgufValue* v = f.find_metadata(key);
  if (!v) return dflt < size ? dflt : -1;
  auto i = v->as_int();
  if (!i) return bad_key(f, key, "a token id", v->str());
  // llama.cpp writes -1 (as u32: 4294967295) for "none".
  if (*i == -1 || *i == 0xFFFFFFFFll) return -1;
  if (*i < 0 || *i >= size)
    return bad_key(f, key, "an id below the vocabulary's " + std::to_string(size), v->str());
  return static_cast<int32_t>(*i);
}

Result<bool> bool_key(const GgufFile& f, std::string_view key, bool dflt) {
  const GgufValue* v = f.find_metadata(key);
  if (!v) return dflt;
  if (v->is_array() || v->ints.size() != 1) return bad_key(f, key, "a bool", v->str());
  return v->ints[0] != 0;  // a bool (or an integer: some writers use one)
}

// GPT-2's table: printable bytes stand for themselves, the others for code points from U+0100.
void byte_chars(Impl& t) {
  char32_t next = 256;
  t.char_byte.fill(-1);
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    t.byte_to_char[static_cast<size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
    t.char_byte[t.byte_to_char[static_cast<size_t>(b)]] = static_cast<int16_t>(b);
  }
}

Status read_merges(const GgufFile& f, Impl& t) {
  const GgufValue* m = f.find_metadata("tokenizer.ggml.merges");
  if (!m)
    return bad_key(f, "tokenizer.ggml.merges", "the merges of a gpt2 tokenizer", "none",
                   Code::not_found);
  if (!m->is_array() || m->value_type() != GgufType::string)
    return bad_key(f, "tokenizer.ggml.merges", "an array of strings", m->str());
  t.merges.reserve(m->strings.size());
  for (size_t r = 0; r < m->strings.size(); ++r) {
    const std::string& s = m->strings[r];
    const size_t sp = s.find(' ', 1);
    if (sp == std::string::npos || sp + 1 >= s.size())
      return bad_key(f, "tokenizer.ggml.merges", "entries \"A B\"",
                     "\"" + s + "\" at " + std::to_string(r));
    const auto a = t.ids.find(std::string_view(s).substr(0, sp));
    const auto b = t.ids.find(std::string_view(s).substr(sp + 1));
    const auto ab = t.ids.find(s.substr(0, sp) + s.substr(sp + 1));
    // A merge into a string that is not a token cannot be used; the tokenizers that wrote the
    // file refuse such vocabularies, so this one skips it.
    if (a == t.ids.end() || b == t.ids.end() || ab == t.ids.end()) continue;
    const uint64_t key = static_cast<uint64_t>(a->second) << 32 | static_cast<uint32_t>(b->second);
    t.merges.try_emplace(key, Impl::Merge{static_cast<int32_t>(r), ab->second});
  }
  return {};
}

// The pre-tokenizer a file names; llama.cpp's defaults for what the file does not say.
Status choose_pre(const GgufFile& f, Impl& t) {
  const GgufValue* p = f.find_metadata("tokenizer.ggml.pre");
  t.pre_name = "default";
  if (p) {
    auto s = p->as_string();
    if (!s) return bad_key(f, "tokenizer.ggml.pre", "a string", p->str());
    t.pre_name = *s;
  }
  const std::string& n = t.pre_name;
  if (n == "default" || n == "gpt2" || n == "gpt-2") {
    t.pre = Pre::gpt2;
  } else if (n == "llama-bpe" || n == "llama3" || n == "llama-v3" || n == "falcon3") {
    t.pre = Pre::llama3;
    t.ignore_merges = true;
    t.add_bos = true;
  } else if (n == "smaug-bpe") {
    t.pre = Pre::llama3;
  } else if (n == "qwen2" || n == "deepseek-r1-qwen") {
    t.pre = Pre::qwen2;
  } else {
    return bad_key(f, "tokenizer.ggml.pre",
                   "a pre-tokenizer duet has (default, gpt2, llama-bpe, smaug-bpe, qwen2)",
                   "\"" + n + "\"", Code::unsupported);
  }
  return {};
}

}  // namespace

Result<std::shared_ptr<const Impl>> read_tokenizer(const GgufFile& f) {
  auto t = std::make_shared<Impl>();
  const GgufValue* model = f.find_metadata("tokenizer.ggml.model");
  if (!model)
    return bad_key(f, "tokenizer.ggml.model", "the tokenizer's kind (llama or gpt2)", "none",
                   Code::not_found);
  auto kind = model->as_string();
  if (!kind) return bad_key(f, "tokenizer.ggml.model", "a string", model->str());
  t->kind_name = *kind;
  if (*kind == "llama") {
    t->kind = Impl::Kind::spm;
    t->add_bos = true;
    t->add_space_prefix = true;
  } else if (*kind == "gpt2") {
    t->kind = Impl::Kind::bpe;
    DUET_TRY(choose_pre(f, *t));
  } else {
    return bad_key(f, "tokenizer.ggml.model", "a kind duet has (llama, gpt2)", "\"" + *kind + "\"",
                   Code::unsupported);
  }

  const GgufValue* tokens = f.find_metadata("tokenizer.ggml.tokens");
  if (!tokens)
    return bad_key(f, "tokenizer.ggml.tokens", "the vocabulary", "none", Code::not_found);
  if (!tokens->is_array() || tokens->value_type() != GgufType::string || tokens->size() == 0 ||
      tokens->size() > (size_t{1} << 30))
    return bad_key(f, "tokenizer.ggml.tokens", "a non-empty array of strings", tokens->str());
  t->strings = tokens->strings;
  const size_t n = t->strings.size();
  const int32_t size = static_cast<int32_t>(n);

  t->score.assign(n, 0.0f);
  if (const GgufValue* s = f.find_metadata("tokenizer.ggml.scores")) {
    if (!s->is_array() || s->size() != n || s->floats.size() != n)
      return bad_key(f, "tokenizer.ggml.scores", std::to_string(n) + " floats", s->str());
    for (size_t i = 0; i < n; ++i) t->score[i] = static_cast<float>(s->floats[i]);
  }
  t->type.assign(n, TokenType::normal);
  if (const GgufValue* ty = f.find_metadata("tokenizer.ggml.token_type")) {
    if (!ty->is_array() || ty->size() != n || ty->ints.size() != n)
      return bad_key(f, "tokenizer.ggml.token_type", std::to_string(n) + " integers", ty->str());
    for (size_t i = 0; i < n; ++i) {
      const int64_t v = ty->ints[i];
      if (v < 0 || v > 6)
        return bad_key(f, "tokenizer.ggml.token_type", "types 0..6",
                       std::to_string(v) + " at " + std::to_string(i));
      t->type[i] = static_cast<TokenType>(v == 0 ? 1 : v);  // undefined: as a normal token
    }
  }
  t->ids.reserve(n);
  for (size_t i = 0; i < n; ++i) t->ids.try_emplace(t->strings[i], static_cast<int32_t>(i));

  const bool spm = t->kind == Impl::Kind::spm;
  DUET_ASSIGN_OR_RETURN(t->bos, id_key(f, "tokenizer.ggml.bos_token_id", size, spm ? 1 : -1));
  DUET_ASSIGN_OR_RETURN(t->eos, id_key(f, "tokenizer.ggml.eos_token_id", size, spm ? 2 : -1));
  DUET_ASSIGN_OR_RETURN(t->unk, id_key(f, "tokenizer.ggml.unknown_token_id", size, spm ? 0 : -1));
  DUET_ASSIGN_OR_RETURN(int32_t eot, id_key(f, "tokenizer.ggml.eot_token_id", size, -1));
  DUET_ASSIGN_OR_RETURN(int32_t eom, id_key(f, "tokenizer.ggml.eom_token_id", size, -1));
  DUET_ASSIGN_OR_RETURN(t->add_bos, bool_key(f, "tokenizer.ggml.add_bos_token", t->add_bos));
  DUET_ASSIGN_OR_RETURN(t->add_eos, bool_key(f, "tokenizer.ggml.add_eos_token", t->add_eos));
  DUET_ASSIGN_OR_RETURN(t->add_space_prefix,
                        bool_key(f, "tokenizer.ggml.add_space_prefix", t->add_space_prefix));
  if (t->add_bos && t->bos < 0)
    return bad_key(f, "tokenizer.ggml.bos_token_id", "a BOS token (add_bos_token is set)", "none");
  if (t->add_eos && t->eos < 0)
    return bad_key(f, "tokenizer.ggml.eos_token_id", "an EOS token (add_eos_token is set)", "none");

  // What ends generation: EOS, the end-of-turn ids the file names, and control tokens that end a
  // turn by their text in the chat formats llama.cpp knows them from.
  for (int32_t id : {t->eos, eot, eom})
    if (id >= 0) t->ends.push_back(id);
  for (const char* s : {"<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                        "<|endoftext|>", "<|end_of_text|>"}) {
    auto it = t->ids.find(std::string_view(s));
    if (it != t->ids.end() && t->type[static_cast<size_t>(it->second)] == TokenType::control)
      t->ends.push_back(it->second);
  }
  std::sort(t->ends.begin(), t->ends.end());
  t->ends.erase(std::unique(t->ends.begin(), t->ends.end()), t->ends.end());

  for (size_t i = 0; i < n; ++i) {
    const int32_t id = static_cast<int32_t>(i);
    if (t->is_special(id) && !t->strings[i].empty())
      t->special_by_byte[static_cast<unsigned char>(t->strings[i][0])].push_back(id);
  }
  for (auto& list : t->special_by_byte)
    std::stable_sort(list.begin(), list.end(), [&](int32_t a, int32_t b) {
      return t->strings[static_cast<size_t>(a)].size() > t->strings[static_cast<size_t>(b)].size();
    });

  t->byte_token.fill(-1);
  t->byte_char_token.fill(-1);
  if (spm) {
    t->spm_split = true;
    for (size_t i = 0; i < n && t->spm_split; ++i) {
      const TokenType ty = t->type[i];
      if (ty != TokenType::normal && ty != TokenType::user_defined && ty != TokenType::unused)
        continue;
      const std::string& s = t->strings[i];
      for (size_t at = s.find("\xE2\x96\x81", 1); at != std::string::npos;
           at = s.find("\xE2\x96\x81", at + 1))
        if (at < 3 || s.compare(at - 3, 3, "\xE2\x96\x81") != 0) t->spm_split = false;
    }
    static const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
      const std::string s = std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
      auto it = t->ids.find(s);
      if (it != t->ids.end() && t->type[static_cast<size_t>(it->second)] == TokenType::byte)
        t->byte_token[static_cast<size_t>(b)] = it->second;
    }
  } else {
    byte_chars(*t);
    for (int b = 0; b < 256; ++b) {
      std::string s;
      unicode::append(s, t->byte_to_char[static_cast<size_t>(b)]);
      auto it = t->ids.find(s);
      if (it != t->ids.end()) t->byte_char_token[static_cast<size_t>(b)] = it->second;
    }
    DUET_TRY(read_merges(f, *t));
  }
  return std::shared_ptr<const Impl>(std::move(t));
}

}  // namespace duet::llm
