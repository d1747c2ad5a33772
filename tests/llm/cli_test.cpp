// duet-llama as a user runs it: text streamed to stdout, the rest to stderr, and bad input a
// clear message with exit status 2. Runs that open a model use the CPU alone (no Vulkan loader).
#include <gtest/gtest.h>

#include "duet/llm.h"
#include "tools/cli_fixture.h"

namespace {

using duet_cli_test::Cli;
using duet_cli_test::CliRun;

const std::string kFixture = std::string(DUET_LLAMA_DATA) + "/llamacpp_tiny.gguf";
const std::string kCpu = "DUET_VULKAN_LOADER=/nonexistent";

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

using LlamaCli = Cli;

TEST_F(LlamaCli, PrintsTheGreedyTextAsTheLibraryMakesIt) {
  CliRun r = duet(kFixture + " --prompt 'the quick brown fox' -n 8 --temp 0 --print-ids", kCpu);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_HAS(r.err, "llama: 2 layers, embedding 32, heads 4/2, ff 48, vocab 72, context 64");
  EXPECT_HAS(r.err, "stop: length after 8 tokens");
  // The same generation through the library: the same ids, the text their pieces.
  duet::llm::ModelOptions o;
  o.devices = {"cpu:0"};
  o.policy = "";
  auto g = duet::llm::Generator::open(kFixture, o);
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE((*g)->feed(*(*g)->tokenize("the quick brown fox")).ok());
  duet::llm::GenerateOptions go;
  go.max_tokens = 8;
  go.sampling = duet::llm::SamplerOptions::greedy();
  auto want = (*g)->generate(go);
  ASSERT_TRUE(want.ok());
  std::string ids = "ids:";
  for (int32_t id : want->tokens) ids += " " + std::to_string(id);
  EXPECT_EQ(r.out, want->text + "\n" + ids + "\n");
}

TEST_F(LlamaCli, HelpAndBadOptionsExitAsTheySay) {
  CliRun r = duet("--help");
  EXPECT_EQ(r.status, 0);
  EXPECT_HAS(r.out, "--prompt TEXT");
  struct Case {
    std::string args, message;
  };
  const Case cases[] = {
      {kFixture + " -n 0", "-n: expected a token count from 1 to 16777216, got '0'"},
      {kFixture + " --prompt ''", "--prompt: the prompt is empty"},
      {kFixture + " --prompt a --prompt-ids 1", "one prompt only: --prompt and --prompt-ids"},
      {kFixture + " --temp -1", "temperature"},
      {kFixture + " --top-p 1.5", "top_p"},
      {kFixture + " --cache-dtype i8", "--cache-dtype: expected f16, f32 or bf16"},
      {kFixture + " --frobnicate", "unknown option --frobnicate"},
      {kFixture + " --prompt-ids 1,x", "--prompt-ids: expected ids like 1,2,3"},
      {kFixture + " -f " + path("missing.txt"), "cannot read"},
      // A directory once ended in an uncaught exception (abort); /dev/zero would read forever.
      {kFixture + " -f " + path(""), "not a regular file"},
      {kFixture + " -f /dev/zero", "not a regular file"},
      {kFixture + " --stop ''", "--stop: the stop text is empty"},
      {"", "a model file is needed"},
  };
  for (const Case& c : cases) {
    r = duet(c.args, kCpu);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.err;
    EXPECT_HAS(r.err, c.message);
  }
}

TEST_F(LlamaCli, BadPromptsAreClearErrors) {
  CliRun r = duet(kFixture + " -f " + write("bad.txt", "caf\xC3 au lait"), kCpu);
  EXPECT_EQ(r.status, 2);
  EXPECT_HAS(r.err, "-f: the prompt is not valid UTF-8 (byte 195 at offset 3)");
  r = duet(kFixture + " --bench-prompt 65", kCpu);
  EXPECT_EQ(r.status, 2);
  EXPECT_HAS(r.err, "the prompt has 65 tokens, more than the context's 64 (--ctx)");
  r = duet(kFixture + " --prompt-ids 1,72", kCpu);
  EXPECT_EQ(r.status, 2);
  EXPECT_HAS(r.err, "token id 72 is outside the vocabulary [0, 72)");
}

// The fixture without its tokenizer: ids in and out, with a warning naming what is missing; a
// text prompt is an error.
TEST_F(LlamaCli, AModelWithoutATokenizerGeneratesFromIds) {
  auto f = duet::read_gguf(kFixture);
  ASSERT_TRUE(f.ok());
  std::vector<std::pair<std::string, duet::GgufValue>> meta;
  for (const auto& kv : f->metadata)
    if (kv.first.rfind("tokenizer.", 0) != 0 && kv.first != "general.alignment") meta.push_back(kv);
  std::vector<std::pair<std::string, duet::HostTensor>> tensors;
  for (const auto& t : f->tensors) tensors.emplace_back(t.name, *f->tensor(t.name));
  ASSERT_TRUE(duet::write_gguf(path("bare.gguf"), meta, tensors).ok());
  CliRun r = duet(path("bare.gguf") + " --prompt-ids 1,17,5 -n 3 --temp 0", kCpu);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_HAS(r.err, "warning: no usable tokenizer, so prompts and output are token ids");
  EXPECT_HAS(r.err, "key 'tokenizer.ggml.model'");
  EXPECT_EQ(duet_cli_test::lines(r.out), 1);  // "ID ID ID "
  r = duet(path("bare.gguf") + " --prompt hello", kCpu);
  EXPECT_EQ(r.status, 2);
  EXPECT_HAS(r.err, "--prompt: the model has no usable tokenizer; give the prompt as ids");
}

}  // namespace
