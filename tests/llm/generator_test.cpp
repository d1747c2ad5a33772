// Generation (duet/llm.h) on tiny models on the CPU: greedy tokens equal to the decoder's own
// and to the llama.cpp fixture's float64 reference, text streamed as the tokenizer decodes it,
// every stop (length, end token, stop string, callback, full context), seeds, chunked prefill,
// reset, a file without a tokenizer, and the errors.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "duet/llm.h"
#include "duet/safetensors.h"

namespace duet::llm {
namespace {

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

GgufValue u32(int64_t v) {
  return GgufValue::of_int(GgufType::u32, v);
}

// A random-weight Llama GGUF (2 layers, E = 32) with the tokenizer metadata of a fixture file
// (its vocabulary is the model's), `eos` overriding the end-of-sequence id when >= 0.
std::string tiny_model(const std::string& name, const char* tokenizer_file, int64_t eos = -1,
                       int64_t vocab_without_tokenizer = 50) {
  std::vector<std::pair<std::string, GgufValue>> meta = {
      {"general.architecture", GgufValue::of_string("llama")},
      {"llama.block_count", u32(2)},
      {"llama.embedding_length", u32(32)},
      {"llama.feed_forward_length", u32(48)},
      {"llama.attention.head_count", u32(4)},
      {"llama.attention.head_count_kv", u32(2)},
      {"llama.context_length", u32(96)},
  };
  int64_t vocab = vocab_without_tokenizer;
  if (tokenizer_file) {
    auto f = read_gguf(std::string(DUET_TEST_DATA) + "/" + tokenizer_file);
    EXPECT_TRUE(f.ok());
    for (const auto& [k, v] : f->metadata) {
      if (k.rfind("tokenizer.", 0) != 0) continue;
      if (k == "tokenizer.ggml.tokens") vocab = static_cast<int64_t>(v.size());
      meta.emplace_back(k, k == "tokenizer.ggml.eos_token_id" && eos >= 0 ? u32(eos) : v);
    }
  }
  std::vector<std::pair<std::string, HostTensor>> tensors;
  uint32_t seed = 1;
  auto add = [&](const std::string& n, std::vector<int64_t> shape, float scale) {
    std::mt19937 rng(seed++);
    std::uniform_real_distribution<float> u(-scale, scale);
    HostTensor t = HostTensor::empty(DType::f32, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
    tensors.emplace_back(n, t);
  };
  add("token_embd.weight", {vocab, 32}, 1.0f);
  add("output_norm.weight", {32}, 1.0f);
  add("output.weight", {vocab, 32}, 0.5f);
  for (int l = 0; l < 2; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn_norm.weight", {32}, 1.0f);
    add(p + "attn_q.weight", {32, 32}, 0.2f);
    add(p + "attn_k.weight", {16, 32}, 0.2f);
    add(p + "attn_v.weight", {16, 32}, 0.2f);
    add(p + "attn_output.weight", {32, 32}, 0.2f);
    add(p + "ffn_norm.weight", {32}, 1.0f);
    add(p + "ffn_gate.weight", {48, 32}, 0.2f);
    add(p + "ffn_up.weight", {48, 32}, 0.2f);
    add(p + "ffn_down.weight", {32, 48}, 0.2f);
  }
  const std::string path = std::string(DUET_TEST_TMPDIR) + "/" + name + ".gguf";
  Status s = write_gguf(path, meta, tensors);
  EXPECT_TRUE(s.ok()) << s.message();
  return path;
}

std::unique_ptr<Generator> open(const std::string& path, ModelOptions o = {}) {
  if (o.devices.empty()) o.devices = {"cpu:0"};
  o.policy = "";
  auto g = Generator::open(path, o);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? std::move(*g) : nullptr;
}

GenerateOptions greedy(int n) {
  GenerateOptions o;
  o.max_tokens = n;
  o.sampling = SamplerOptions::greedy();
  o.stop_at_end = false;
  return o;
}

// The llama.cpp-converted fixture: greedy generation gives the float64 reference's tokens.
TEST(Generator, GreedyTokensAreTheReferencesOnTheLlamaCppFixture) {
  auto g = open(std::string(DUET_LLAMA_DATA) + "/llamacpp_tiny.gguf");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->context(), 64);  // llama.context_length
  ASSERT_NE(g->tokenizer(), nullptr);
  auto expected =
      load_safetensors(std::string(DUET_LLAMA_DATA) + "/llamacpp_tiny.expected.safetensors");
  ASSERT_TRUE(expected.ok());
  const HostTensor& prompt = expected->at("prompt");
  const HostTensor& tokens = expected->at("tokens");
  std::vector<int32_t> p(prompt.data<int32_t>(), prompt.data<int32_t>() + prompt.numel());
  ASSERT_TRUE(g->feed(p).ok());
  std::string streamed;
  auto r = g->generate(greedy(6), [&](int32_t, std::string_view t) {
    streamed += t;
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::vector<int32_t> want(tokens.data<int32_t>() + p.size(),
                            tokens.data<int32_t>() + tokens.numel());
  EXPECT_EQ(r->tokens, want);
  EXPECT_EQ(r->reason, StopReason::length);
  std::string pieces;
  for (int32_t id : r->tokens) pieces += g->tokenizer()->piece(id);
  EXPECT_EQ(streamed, pieces);
  EXPECT_EQ(r->text, streamed);
  EXPECT_EQ(g->position(), static_cast<int64_t>(p.size() + 6));
}

TEST(Generator, TextInTextOutWithAByteLevelTokenizer) {
  auto g = open(tiny_model("bpe", "bpe_llama3.gguf"));
  ASSERT_TRUE(g);
  auto ids = g->tokenize("Hello world, naïve 🦙");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ((*ids)[0], g->tokenizer()->bos());
  EXPECT_EQ(*g->detokenize(*ids), "Hello world, naïve 🦙");
  ASSERT_TRUE(g->feed(*ids).ok());
  auto a = g->generate(greedy(12));
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->tokens.size(), 12u);
  EXPECT_EQ(a->text, valid_utf8(a->text));
  // Reset and again: the same tokens (the cache was emptied).
  ASSERT_TRUE(g->reset().ok());
  EXPECT_EQ(g->position(), 0);
  ASSERT_TRUE(g->feed(*ids).ok());
  auto b = g->generate(greedy(12));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->tokens, b->tokens);
  // step() gives the same tokens one at a time.
  ASSERT_TRUE(g->reset().ok());
  ASSERT_TRUE(g->feed(*ids).ok());
  Sampler s(SamplerOptions::greedy());
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(*g->step(s), a->tokens[i]);
}

TEST(Generator, TheSameSeedGivesTheSameText) {
  auto g = open(tiny_model("seed", "bpe_qwen2.gguf"));
  ASSERT_TRUE(g);
  GenerateOptions o;
  o.max_tokens = 16;
  o.sampling.temperature = 1.5f;
  o.sampling.top_k = 0;
  o.sampling.seed = 1234;
  std::vector<std::vector<int32_t>> runs;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(g->reset().ok());
    ASSERT_TRUE(g->feed(*g->tokenize("Once upon a time")).ok());
    auto r = g->generate(o);
    ASSERT_TRUE(r.ok());
    runs.push_back(r->tokens);
  }
  EXPECT_EQ(runs[0], runs[1]);
}

TEST(Generator, StopsAtTheEndTokenAStopStringTheCallbackAndAFullContext) {
  const std::string first_path = tiny_model("stop", "bpe_llama3.gguf");
  auto g = open(first_path);
  ASSERT_TRUE(g);
  const std::vector<int32_t> prompt = *g->tokenize("The quick brown fox");
  ASSERT_TRUE(g->feed(prompt).ok());
  auto free_run = g->generate(greedy(24));
  ASSERT_TRUE(free_run.ok());
  const std::string text = free_run->text;
  ASSERT_GE(text.size(), 8u);

  // The first token made the end token: one token, and no text for it.
  auto e = open(tiny_model("stop_eos", "bpe_llama3.gguf", free_run->tokens[0]));
  ASSERT_TRUE(e && e->feed(prompt).ok());
  GenerateOptions until_end = greedy(24);
  until_end.stop_at_end = true;
  auto r = e->generate(until_end);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->reason, StopReason::end_token);
  EXPECT_EQ(r->tokens.size(), 1u);
  EXPECT_EQ(r->text, "");

  // A stop string from the middle of the text: everything before its first occurrence.
  // (two whole characters: a stop string is valid UTF-8)
  auto boundary = [&](size_t i) {
    while (i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) ++i;
    return i;
  };
  const size_t from = boundary(text.size() / 2);
  const std::string stop = text.substr(from, boundary(boundary(from + 1) + 1) - from);
  ASSERT_FALSE(stop.empty());
  ASSERT_TRUE(g->reset().ok() && g->feed(prompt).ok());
  GenerateOptions with_stop = greedy(24);
  with_stop.stop = {"never appears", stop};
  std::string streamed;
  r = g->generate(with_stop, [&](int32_t, std::string_view t) {
    streamed += t;
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->reason, StopReason::stop_string);
  EXPECT_EQ(r->text, text.substr(0, text.find(stop)));
  EXPECT_EQ(streamed, r->text);

  // The callback says stop.
  ASSERT_TRUE(g->reset().ok() && g->feed(prompt).ok());
  r = g->generate(greedy(24), [](int32_t, std::string_view) { return false; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->reason, StopReason::callback);
  EXPECT_EQ(r->tokens.size(), 1u);

  // A context three tokens longer than the prompt: three tokens run, the fourth has no room.
  ModelOptions small;
  small.context = static_cast<int64_t>(prompt.size()) + 3;
  auto c = open(first_path, small);
  ASSERT_TRUE(c && c->feed(prompt).ok());
  r = c->generate(greedy(24));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->reason, StopReason::context_full);
  EXPECT_EQ(r->tokens,
            std::vector<int32_t>(free_run->tokens.begin(), free_run->tokens.begin() + 4));
  EXPECT_EQ(c->position(), small.context + 1);  // the last one is pending
  auto again = c->generate(greedy(1));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->reason, StopReason::context_full);
  EXPECT_TRUE(again->tokens.empty());
}

TEST(Generator, ChunkedPrefillGivesTheSameTokens) {
  const std::string path = tiny_model("chunks", "bpe_gpt2.gguf");
  std::vector<int32_t> want;
  for (int64_t chunk : {512, 3}) {
    ModelOptions o;
    o.prefill_chunk = chunk;
    auto g = open(path, o);
    ASSERT_TRUE(g);
    ASSERT_TRUE(g->feed(*g->tokenize("one two three four five six seven eight nine ten")).ok());
    auto r = g->generate(greedy(6));
    ASSERT_TRUE(r.ok());
    if (want.empty()) want = r->tokens;
    EXPECT_EQ(r->tokens, want) << "chunk " << chunk;
    EXPECT_GT(g->timings().runs, chunk == 3 ? 4 : 1);
  }
}

TEST(Generator, AFileWithoutATokenizerGeneratesFromIdsAndSaysWhatIsMissing) {
  auto g = open(tiny_model("no_tokenizer", nullptr));
  ASSERT_TRUE(g);
  EXPECT_EQ(g->tokenizer(), nullptr);
  ASSERT_EQ(g->notes().size(), 1u);
  EXPECT_HAS(g->notes()[0], "tokenizer.ggml.model");
  auto t = g->tokenize("hello");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), Code::unsupported);
  ASSERT_TRUE(g->feed(std::vector<int32_t>{1, 2, 3}).ok());
  auto r = g->generate(greedy(3));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tokens.size(), 3u);
  EXPECT_EQ(r->text, "");
}

TEST(Generator, TheCacheIsF32WhereAttentionComputesInF32AndWhatIsAskedOtherwise) {
  const std::string path = tiny_model("cache", "bpe_llama3.gguf");
  auto g = open(path);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->cache_dtype(), DType::f32);  // the CPU computes attention in f32
  EXPECT_HAS(g->explain(), "KV cache: f32: attention of layer 0 on cpu:0 computes in f32");
  ModelOptions o;
  o.cache_dtype = DType::f16;
  auto h = open(path, o);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->cache_dtype(), DType::f16);
  EXPECT_HAS(h->explain(), "KV cache: f16: asked for");
}

TEST(Generator, BadInputIsAnErrorAndChangesNothing) {
  auto g = open(tiny_model("errors", "bpe_llama3.gguf"));
  ASSERT_TRUE(g);
  auto expect_error = [](const Status& s, const char* part) {
    EXPECT_FALSE(s.ok());
    EXPECT_HAS(s.message(), part);
  };
  expect_error(g->generate(greedy(4)).status(), "feed a prompt first");
  expect_error(g->feed({}), "at least one token");
  expect_error(g->feed(std::vector<int32_t>{1, 100000}), "ids in [0,");
  expect_error(g->feed(std::vector<int32_t>(200, 5)), "the context holds 96 tokens");
  expect_error(g->tokenize("bad \xC3").status(), "not valid UTF-8");
  EXPECT_EQ(g->position(), 0);
  ASSERT_TRUE(g->feed(std::vector<int32_t>{1, 2}).ok());
  expect_error(g->generate(greedy(0)).status(), "max_tokens");
  GenerateOptions bad = greedy(4);
  bad.sampling.top_p = 0;
  expect_error(g->generate(bad).status(), "top_p");
  bad = greedy(4);
  bad.stop = {""};
  expect_error(g->generate(bad).status(), "stop string is empty");
  // The callback may not call back into its generator.
  Status inner;
  auto r = g->generate(greedy(2), [&](int32_t, std::string_view) {
    inner = g->feed(std::vector<int32_t>{1});
    return true;
  });
  ASSERT_TRUE(r.ok());
  expect_error(inner, "called from its own callback");

  ModelOptions o;
  o.devices = {"nosuch:3"};
  auto missing = Generator::open(tiny_model("errors2", nullptr), o);
  ASSERT_FALSE(missing.ok());
  EXPECT_HAS(missing.status().message(), "no device 'nosuch:3'");
  o.devices = {"cpu:0"};
  o.policy = "precision=banana";
  EXPECT_FALSE(Generator::open(tiny_model("errors3", nullptr), o).ok());
}

// Calls on one generator from two threads take turns (the sanitizer builds check the rest): each
// call succeeds, or fails as documented when the other thread emptied the context in between.
TEST(Generator, TwoThreadsShareOneGenerator) {
  auto g = open(tiny_model("threads", "bpe_llama3.gguf"));
  ASSERT_TRUE(g);
  auto work = [&] {
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(g->feed(std::vector<int32_t>{1, 2, 3}).ok());
      auto r = g->generate(greedy(2));
      if (!r.ok()) {
        EXPECT_HAS(r.status().message(), "feed a prompt first");
      }
      EXPECT_TRUE(g->reset().ok());
    }
  };
  std::thread a(work), b(work);
  a.join();
  b.join();
}

}  // namespace
}  // namespace duet::llm
