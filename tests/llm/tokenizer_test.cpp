// The tokenizers against the tokenizers their vocabularies come from: sentencepiece itself for
// SentencePiece BPE, a Python reference over the pre-tokenizers' own regular expressions for
// byte-level BPE (tools/make_tokenizer_fixtures.py wrote both fixtures), and the vocabulary of a
// file llama.cpp's converter wrote.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "duet/gguf.h"
#include "duet/tokenizer.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/unicode.h"

namespace {

using duet::llm::EncodeOptions;
using duet::llm::Tokenizer;
using duet::llm::TokenType;
using json = nlohmann::json;

Tokenizer load(const std::string& file) {
  auto f = duet::read_gguf(std::string(DUET_TEST_DATA) + "/" + file);
  EXPECT_TRUE(f.ok()) << f.status().message();
  auto t = Tokenizer::from_gguf(*f);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return std::move(*t);
}

json cases(const std::string& file) {
  std::ifstream in(std::string(DUET_TEST_DATA) + "/" + file);
  return json::parse(in);
}

std::string show(const std::string& s) {
  return duet::llm::valid_utf8(s);
}

TEST(Tokenizer, SentencePieceGivesSentencePiecesIds) {
  const Tokenizer t = load("spm.gguf");
  EXPECT_EQ(t.kind(), "llama");
  EXPECT_EQ(t.bos(), 1);
  EXPECT_TRUE(t.add_bos());
  const json j = cases("spm.json");
  ASSERT_GT(j["cases"].size(), 10u);
  for (const json& c : j["cases"]) {
    const std::string text = c["text"];
    auto ids = t.encode(text);
    ASSERT_TRUE(ids.ok()) << ids.status().message();
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>()) << "text: '" << show(text) << "'";
    std::vector<int32_t> body(ids->begin() + 1, ids->end());  // without BOS
    EXPECT_EQ(t.decode(body), c["decoded"].get<std::string>()) << "text: '" << show(text) << "'";
  }
}

TEST(Tokenizer, ByteLevelBpeGivesTheReferencesIds) {
  for (const char* name : {"bpe_llama3", "bpe_qwen2", "bpe_gpt2"}) {
    SCOPED_TRACE(name);
    const Tokenizer t = load(std::string(name) + ".gguf");
    EXPECT_EQ(t.kind(), "gpt2");
    const json j = cases(std::string(name) + ".json");
    for (const json& c : j["cases"]) {
      const std::string text = c["text"];
      EncodeOptions o;
      o.parse_special = c.value("special", false);
      auto ids = t.encode(text, o);
      ASSERT_TRUE(ids.ok()) << ids.status().message();
      EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>()) << "text: '" << show(text) << "'";
      // Byte-level pieces give the text back exactly.
      const size_t skip = j["bos"].size();
      std::vector<int32_t> body(ids->begin() + static_cast<std::ptrdiff_t>(skip), ids->end());
      EXPECT_EQ(t.decode(body, o.parse_special), text);
    }
  }
}

TEST(Tokenizer, PreTokenizersSplitAsTheirPatterns) {
  const std::pair<const char*, duet::llm::Pre> pres[] = {{"bpe_llama3", duet::llm::Pre::llama3},
                                                         {"bpe_qwen2", duet::llm::Pre::qwen2},
                                                         {"bpe_gpt2", duet::llm::Pre::gpt2}};
  for (const auto& [name, pre] : pres) {
    const json j = cases(std::string(name) + ".json");
    for (const json& c : j["pieces"]) {
      const std::string text = c["text"];
      std::vector<std::pair<size_t, size_t>> cut;
      duet::llm::pretokenize(pre, text, cut);
      std::vector<std::string> got;
      for (auto [at, len] : cut) got.push_back(text.substr(at, len));
      EXPECT_EQ(got, c["pieces"].get<std::vector<std::string>>())
          << name << ", text: '" << show(text) << "'";
    }
  }
}

// The file llama.cpp's converter wrote (tests/llama/data): its vocabulary is a sentencepiece
// model trained as tools/make_llamacpp_fixture.py does, with NFKC normalization (texts here are
// plain ASCII with single spaces, which it leaves alone); the ids are that model's.
TEST(Tokenizer, ReadsTheVocabularyLlamaCppsConverterWrote) {
  auto f = duet::read_gguf(std::string(DUET_LLAMA_DATA) + "/llamacpp_tiny.gguf");
  ASSERT_TRUE(f.ok());
  auto t = Tokenizer::from_gguf(*f);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->size(), 72);
  EXPECT_EQ(t->bos(), 1);
  EXPECT_EQ(t->eos(), 2);
  EXPECT_TRUE(t->is_end(2));
  EXPECT_EQ(t->type(1), TokenType::control);
  EXPECT_EQ(*t->encode("the quick brown fox jumps over the lazy dog"),
            (std::vector<int32_t>{1,  6,  27, 20, 26, 27, 9, 19, 31, 27, 25, 27,
                                  14, 15, 36, 27, 18, 12, 6, 22, 23, 27, 24}));
  EXPECT_EQ(*t->encode("a lazy fox 1234 runs"),
            (std::vector<int32_t>{1, 4, 22, 23, 27, 25, 27, 40, 56, 55, 58, 27, 21, 17}));
  EXPECT_EQ(*t->encode("hello"), (std::vector<int32_t>{1, 27, 3, 48, 48, 29}));
  EXPECT_EQ(t->decode(std::vector<int32_t>{1, 6, 27, 24}), "the dog");
  // No byte tokens: a character it has no piece for is the unknown token.
  EXPECT_EQ(*t->encode("é", {.add_special = false}), (std::vector<int32_t>{27, 0}));
}

TEST(Tokenizer, SpecialTokensAreReadOnlyWhenAsked) {
  const Tokenizer t = load("bpe_llama3.gguf");
  const std::string text = "<|eot_id|>";
  auto plain = t.encode(text, {.add_special = false, .parse_special = false});
  auto special = t.encode(text, {.add_special = false, .parse_special = true});
  ASSERT_TRUE(plain.ok() && special.ok());
  ASSERT_EQ(special->size(), 1u);
  EXPECT_EQ(t.type((*special)[0]), TokenType::control);
  EXPECT_TRUE(t.is_end((*special)[0]));
  EXPECT_GT(plain->size(), 1u);
  // Control tokens print nothing unless asked; user-defined ones print their text.
  EXPECT_EQ(t.piece((*special)[0]), "");
  EXPECT_EQ(t.piece((*special)[0], true), "<|eot_id|>");
  auto think = t.encode("<think>", {.add_special = false});
  ASSERT_EQ(think->size(), 1u);
  EXPECT_EQ(t.piece((*think)[0]), "<think>");
}

TEST(Tokenizer, InvalidUtf8IsAnErrorNamingTheByte) {
  const Tokenizer t = load("spm.gguf");
  for (const std::string& bad : {std::string("ok \xFF"), std::string("\xC0\xAF"),
                                 std::string("\xED\xA0\x80"), std::string("cut \xE2\x82")}) {
    auto r = t.encode(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), duet::Code::invalid_argument);
    EXPECT_NE(r.status().message().find("not valid UTF-8"), std::string::npos);
  }
  EXPECT_NE(t.encode("ok \xFF").status().message().find("byte 255 at offset 3"), std::string::npos);
}

TEST(Tokenizer, EmptyTextIsBosOnlyWhenTheFileAddsIt) {
  EXPECT_EQ(*load("spm.gguf").encode(""), (std::vector<int32_t>{1}));
  EXPECT_TRUE(load("spm.gguf").encode("", {.add_special = false})->empty());
  EXPECT_TRUE(load("bpe_qwen2.gguf").encode("")->empty());
}

// A byte token, or a byte-level piece cut inside a character, is not valid UTF-8 alone; the
// stream holds it back until the character is whole.
TEST(Tokenizer, PiecesThatAreNotValidUtf8AloneJoinIntoText) {
  for (const char* file : {"spm.gguf", "bpe_llama3.gguf"}) {
    SCOPED_TRACE(file);
    const Tokenizer t = load(file);
    const std::string text = "日本語 🦙 naïve";
    auto ids = t.encode(text, {.add_special = false});
    ASSERT_TRUE(ids.ok());
    bool some_invalid = false;
    duet::llm::Utf8Stream s;
    std::string out;
    for (int32_t id : *ids) {
      const std::string p = t.piece(id);
      some_invalid = some_invalid || duet::llm::unicode::first_invalid(p) != std::string::npos;
      const std::string part = s.push(p);
      EXPECT_EQ(duet::llm::unicode::first_invalid(part), std::string::npos);
      out += part;
    }
    out += s.finish();
    EXPECT_TRUE(some_invalid) << "the text should need byte pieces";
    EXPECT_EQ(out, std::string(file) == std::string("spm.gguf") ? " " + text : text);
  }
}

TEST(Utf8Stream, HoldsBackIncompleteCharactersAndReplacesInvalidBytes) {
  duet::llm::Utf8Stream s;
  EXPECT_EQ(s.push("a\xF0\x9F"), "a");
  EXPECT_TRUE(s.holding());
  EXPECT_EQ(s.push("\xA6"), "");
  EXPECT_EQ(s.push("\x99!"), "\xF0\x9F\xA6\x99!");
  EXPECT_EQ(s.push("\xFF"), "\xEF\xBF\xBD");        // never valid
  EXPECT_EQ(s.push("\xE2\x82x"), "\xEF\xBF\xBDx");  // cut short: one replacement
  EXPECT_EQ(s.push("\xE2"), "");
  EXPECT_EQ(s.finish(), "\xEF\xBF\xBD");  // the stream ended inside a character
  EXPECT_FALSE(s.holding());
  EXPECT_EQ(duet::llm::valid_utf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(Tokenizer, MissingOrUnknownTokenizersAreErrorsNamingTheKey) {
  auto missing = duet::parse_gguf(
      *duet::encode_gguf({{"general.architecture", duet::GgufValue::of_string("llama")}}, {}));
  ASSERT_TRUE(missing.ok());
  auto r = Tokenizer::from_gguf(*missing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), duet::Code::not_found);
  EXPECT_NE(r.status().message().find("tokenizer.ggml.model"), std::string::npos);

  auto unknown = duet::parse_gguf(
      *duet::encode_gguf({{"tokenizer.ggml.model", duet::GgufValue::of_string("bert")}}, {}));
  r = Tokenizer::from_gguf(*unknown);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), duet::Code::unsupported);
  EXPECT_NE(r.status().message().find("\"bert\""), std::string::npos);

  auto pre = duet::parse_gguf(
      *duet::encode_gguf({{"tokenizer.ggml.model", duet::GgufValue::of_string("gpt2")},
                          {"tokenizer.ggml.pre", duet::GgufValue::of_string("chatglm-bpe")}},
                         {}));
  r = Tokenizer::from_gguf(*pre);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tokenizer.ggml.pre"), std::string::npos);
}

TEST(Unicode, CategoriesAndWhiteSpace) {
  using duet::llm::unicode::Cat;
  using duet::llm::unicode::category;
  EXPECT_EQ(category(U'a'), Cat::letter);
  EXPECT_EQ(category(U'é'), Cat::letter);
  EXPECT_EQ(category(U'語'), Cat::letter);
  EXPECT_EQ(category(U'7'), Cat::number);
  EXPECT_EQ(category(U'Ⅻ'), Cat::number);
  EXPECT_EQ(category(0x301), Cat::mark);
  EXPECT_EQ(category(U'!'), Cat::punct);
  EXPECT_EQ(category(0x1F999), Cat::symbol);  // 🦙
  EXPECT_EQ(category(0x10FFFF), Cat::other);
  EXPECT_TRUE(duet::llm::unicode::is_whitespace(0x3000));
  EXPECT_FALSE(duet::llm::unicode::is_whitespace(0x1C));
}

}  // namespace
