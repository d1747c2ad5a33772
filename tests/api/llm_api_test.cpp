// Text generation through libduet.so: the C API (duet/duet_llm.h, also from a C99 file) and the
// C++ one (duet/llm.h) on the llama.cpp-converted fixture, greedy tokens equal to its float64
// reference, and every error a status with a message.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "api/c_smoke.h"
#include "duet/duet_llm.h"
#include "duet/llm.h"
#include "duet/safetensors.h"

namespace {

const std::string kModel = std::string(DUET_LLAMA_DATA) + "/llamacpp_tiny.gguf";

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

struct Llm {
  duet_llm* m = nullptr;
  ~Llm() { duet_llm_destroy(m); }
};

Llm open_cpu() {
  duet_llm_options o;
  duet_llm_options_init(&o);
  o.devices = "cpu:0";
  o.policy = "";
  Llm l;
  EXPECT_EQ(duet_llm_open(kModel.c_str(), &o, &l.m), DUET_OK) << duet_last_error();
  return l;
}

// The greedy tokens of the fixture's reference after its prompt.
std::vector<int32_t> reference(std::vector<int32_t>& prompt) {
  auto f =
      duet::load_safetensors(std::string(DUET_LLAMA_DATA) + "/llamacpp_tiny.expected.safetensors");
  EXPECT_TRUE(f.ok());
  const duet::HostTensor& p = f->at("prompt");
  const duet::HostTensor& t = f->at("tokens");
  prompt.assign(p.data<int32_t>(), p.data<int32_t>() + p.numel());
  return std::vector<int32_t>(t.data<int32_t>() + p.numel(), t.data<int32_t>() + t.numel());
}

TEST(LlmApi, CGeneratesTheReferencesTokens) {
  Llm l = open_cpu();
  ASSERT_TRUE(l.m);
  EXPECT_EQ(duet_llm_context(l.m), 64);
  EXPECT_EQ(duet_llm_vocab_size(l.m), 72);
  EXPECT_EQ(duet_llm_has_tokenizer(l.m), 1);
  EXPECT_EQ(duet_llm_bos(l.m), 1);
  EXPECT_TRUE(duet_llm_is_end(l.m, 2));
  std::vector<int32_t> prompt;
  const std::vector<int32_t> want = reference(prompt);
  ASSERT_EQ(duet_llm_feed(l.m, prompt.data(), prompt.size()), DUET_OK) << duet_last_error();
  // One token at a time (greedy when the sampling is NULL).
  std::vector<int32_t> got;
  for (size_t i = 0; i < want.size(); ++i) {
    int32_t t = -1;
    ASSERT_EQ(duet_llm_step(l.m, nullptr, &t), DUET_OK) << duet_last_error();
    got.push_back(t);
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(duet_llm_position(l.m), static_cast<int64_t>(prompt.size() + want.size()));
  duet_llm_timings t{};
  ASSERT_EQ(duet_llm_get_timings(l.m, &t), DUET_OK);
  EXPECT_EQ(t.prompt_tokens, static_cast<int64_t>(prompt.size()));
  EXPECT_EQ(t.decode_tokens, static_cast<int64_t>(want.size()) - 1);  // the last one is pending
  // Reset, and the whole generation in one call.
  ASSERT_EQ(duet_llm_reset(l.m), DUET_OK);
  EXPECT_EQ(duet_llm_position(l.m), 0);
  ASSERT_EQ(duet_llm_feed(l.m, prompt.data(), prompt.size()), DUET_OK);
  duet_llm_generate_options g;
  duet_llm_generate_options_init(&g);
  g.max_tokens = static_cast<int32_t>(want.size());
  g.sampling.temperature = 0;
  g.stop_at_end = 0;
  std::vector<int32_t> streamed;
  auto cb = [](void* user, int32_t token, const char* text, size_t length) {
    EXPECT_EQ(text[length], '\0');
    static_cast<std::vector<int32_t>*>(user)->push_back(token);
    return 1;
  };
  duet_llm_stop reason = DUET_LLM_STOP_MAX_ENUM;
  size_t made = 0;
  ASSERT_EQ(duet_llm_generate(l.m, &g, cb, &streamed, &reason, &made), DUET_OK)
      << duet_last_error();
  EXPECT_EQ(streamed, want);
  EXPECT_EQ(reason, DUET_LLM_STOP_LENGTH);
  EXPECT_EQ(made, want.size());
}

TEST(LlmApi, AC99ProgramGeneratesText) {
  char text[512] = {0}, error[512] = {0};
  int32_t tokens[64];
  size_t count = 0;
  ASSERT_TRUE(duet_c_llm(kModel.c_str(), "the quick brown fox", 6, text, sizeof text, tokens,
                         &count, error, sizeof error))
      << error;
  EXPECT_EQ(count, 6u);
  // The text is the tokens' pieces: what detokenizing them gives, with the space before it.
  Llm l = open_cpu();
  char* back = nullptr;
  ASSERT_EQ(duet_llm_detokenize(l.m, tokens, count, &back), DUET_OK);
  std::string streamed(text);
  if (!streamed.empty() && streamed[0] == ' ') streamed.erase(0, 1);  // decode drops it
  EXPECT_EQ(std::string(back), streamed);
  duet_string_free(back);
}

TEST(LlmApi, TokenizeReportsTheCountItNeeds) {
  Llm l = open_cpu();
  size_t n = 0;
  ASSERT_EQ(duet_llm_tokenize(l.m, "the lazy dog", static_cast<size_t>(-1), DUET_LLM_ADD_SPECIAL,
                              nullptr, 0, &n),
            DUET_ERROR_INVALID_ARGUMENT);
  EXPECT_HAS(duet_last_error(), "more than the capacity 0");
  std::vector<int32_t> ids(n);
  ASSERT_EQ(duet_llm_tokenize(l.m, "the lazy dog", 12, DUET_LLM_ADD_SPECIAL, ids.data(), n, &n),
            DUET_OK);
  EXPECT_EQ(ids.front(), 1);
  char* text = nullptr;
  ASSERT_EQ(duet_llm_detokenize(l.m, ids.data(), ids.size(), &text), DUET_OK);
  EXPECT_STREQ(text, "the lazy dog");
  duet_string_free(text);
}

TEST(LlmApi, EveryErrorIsAStatusWithAMessage) {
  duet_llm* m = nullptr;
  EXPECT_EQ(duet_llm_open("/nonexistent/model.gguf", nullptr, &m), DUET_ERROR_NOT_FOUND);
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(duet_llm_open(nullptr, nullptr, &m), DUET_ERROR_INVALID_ARGUMENT);
  EXPECT_HAS(duet_last_error(), "path is NULL");
  duet_llm_options o;
  duet_llm_options_init(&o);
  o.cache_dtype = DUET_I8;
  EXPECT_EQ(duet_llm_open(kModel.c_str(), &o, &m), DUET_ERROR_INVALID_ARGUMENT);
  EXPECT_HAS(duet_last_error(), "cache_dtype");
  o.cache_dtype = -1;
  o.devices = "cpu:7";
  EXPECT_EQ(duet_llm_open(kModel.c_str(), &o, &m), DUET_ERROR_NOT_FOUND);

  // A split over MPI ranks (options.distributed) outside mpirun, or in a build without MPI;
  // its options without it (tests/dist/c_llm_dist.c runs it under mpirun).
  EXPECT_EQ(o.distributed, 0);
  EXPECT_EQ(o.every_rank, 0);
  EXPECT_EQ(o.timeout_s, 0.0);
  o.devices = "cpu:0";
  o.distributed = 1;
  EXPECT_EQ(duet_llm_open(kModel.c_str(), &o, &m), DUET_ERROR_UNSUPPORTED);
  EXPECT_EQ(m, nullptr);
  const std::string why = duet_last_error();
  EXPECT_TRUE(why.find("not started by mpirun (mpirun -np N") != std::string::npos ||
              why.find("built without MPI") != std::string::npos)
      << why;
  o.distributed = 0;
  o.every_rank = 1;
  EXPECT_EQ(duet_llm_open(kModel.c_str(), &o, &m), DUET_ERROR_INVALID_ARGUMENT);
  EXPECT_HAS(duet_last_error(), "every_rank and timeout_s go with distributed");

  Llm l = open_cpu();
  // A handle of one process is rank 0 of 1, with no ranks to serve or finish.
  EXPECT_EQ(duet_llm_rank(l.m), 0);
  EXPECT_EQ(duet_llm_ranks(l.m), 1);
  EXPECT_EQ(duet_llm_rank(nullptr), -1);
  EXPECT_EQ(duet_llm_ranks(nullptr), 0);
  EXPECT_EQ(duet_llm_serve(l.m), DUET_ERROR_INVALID_ARGUMENT);
  EXPECT_HAS(duet_last_error(), "not split over ranks");
  EXPECT_EQ(duet_llm_finish(l.m), DUET_OK);
  int32_t t = 0;
  EXPECT_EQ(duet_llm_step(l.m, nullptr, &t), DUET_ERROR_INVALID_ARGUMENT);
  EXPECT_HAS(duet_last_error(), "feed a prompt first");
  size_t n = 0;
  int32_t ids[8];
  EXPECT_EQ(duet_llm_tokenize(l.m, "bad \xff", static_cast<size_t>(-1), 0, ids, 8, &n),
            DUET_ERROR_INVALID_ARGUMENT);
  EXPECT_HAS(duet_last_error(), "not valid UTF-8");
  EXPECT_EQ(duet_llm_tokenize(l.m, "x", 1, 64, ids, 8, &n), DUET_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(duet_llm_feed(l.m, nullptr, 0), DUET_ERROR_INVALID_ARGUMENT);
  const int32_t too_big = 1000;
  EXPECT_EQ(duet_llm_feed(l.m, &too_big, 1), DUET_ERROR_INVALID_ARGUMENT);
  EXPECT_HAS(duet_last_error(), "ids in [0, 72)");
  const int32_t one = 1;
  ASSERT_EQ(duet_llm_feed(l.m, &one, 1), DUET_OK);
  duet_llm_sampling s;
  duet_llm_sampling_init(&s);
  s.top_p = 2;
  EXPECT_EQ(duet_llm_step(l.m, &s, &t), DUET_ERROR_INVALID_ARGUMENT);
  EXPECT_HAS(duet_last_error(), "top_p");
  duet_llm_generate_options g;
  duet_llm_generate_options_init(&g);
  g.max_tokens = 0;
  EXPECT_EQ(duet_llm_generate(l.m, &g, nullptr, nullptr, nullptr, nullptr),
            DUET_ERROR_INVALID_ARGUMENT);
  // A callback that calls its own handle: the inner call fails, the generation goes on.
  g.max_tokens = 2;
  struct Ctx {
    duet_llm* m;
    duet_status inner;
  } ctx{l.m, DUET_OK};
  auto cb = [](void* user, int32_t, const char*, size_t) {
    auto* c = static_cast<Ctx*>(user);
    c->inner = duet_llm_reset(c->m);
    return 1;
  };
  EXPECT_EQ(duet_llm_generate(l.m, &g, cb, &ctx, nullptr, nullptr), DUET_OK) << duet_last_error();
  EXPECT_EQ(ctx.inner, DUET_ERROR_INVALID_ARGUMENT);
}

TEST(LlmApi, AFileWithoutATokenizerSaysSoAndGeneratesFromIds) {
  // The fixture's model without its tokenizer.* keys.
  auto f = duet::read_gguf(kModel);
  ASSERT_TRUE(f.ok());
  std::vector<std::pair<std::string, duet::GgufValue>> meta;
  for (const auto& kv : f->metadata)
    if (kv.first.rfind("tokenizer.", 0) != 0 && kv.first != "general.alignment") meta.push_back(kv);
  std::vector<std::pair<std::string, duet::HostTensor>> tensors;
  for (const auto& t : f->tensors) tensors.emplace_back(t.name, *f->tensor(t.name));
  const std::string path = testing::TempDir() + "/no_tokenizer.gguf";
  ASSERT_TRUE(duet::write_gguf(path, meta, tensors).ok());
  duet_llm_options o;
  duet_llm_options_init(&o);
  o.devices = "cpu:0";
  Llm l;
  ASSERT_EQ(duet_llm_open(path.c_str(), &o, &l.m), DUET_OK) << duet_last_error();
  EXPECT_EQ(duet_llm_has_tokenizer(l.m), 0);
  char* notes = nullptr;
  ASSERT_EQ(duet_llm_notes(l.m, &notes), DUET_OK);
  EXPECT_HAS(notes, "tokenizer.ggml.model");
  duet_string_free(notes);
  size_t n = 0;
  EXPECT_EQ(duet_llm_tokenize(l.m, "hi", 2, 0, nullptr, 0, &n), DUET_ERROR_UNSUPPORTED);
  const int32_t prompt[] = {1, 17, 5};
  ASSERT_EQ(duet_llm_feed(l.m, prompt, 3), DUET_OK);
  int32_t t = -1;
  EXPECT_EQ(duet_llm_step(l.m, nullptr, &t), DUET_OK);
  EXPECT_GE(t, 0);
}

// The C++ classes are exported too: a Tokenizer and a Generator through libduet.so.
TEST(LlmApi, CppGeneratorThroughTheSharedLibrary) {
  duet::llm::ModelOptions o;
  o.devices = {"cpu:0"};
  o.policy = "";
  auto g = duet::llm::Generator::open(kModel, o);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto ids = (*g)->tokenize("the lazy dog");
  ASSERT_TRUE(ids.ok());
  ASSERT_TRUE((*g)->feed(*ids).ok());
  duet::llm::GenerateOptions go;
  go.max_tokens = 3;
  go.sampling.seed = 5;
  auto r = (*g)->generate(go);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_GE(r->tokens.size(), 1u);
}

}  // namespace
