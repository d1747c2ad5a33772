// `duet-llama --distributed`: a tiny Llama split over two ranks of this machine gives one
// process's greedy ids (a prompt over several runs, then decode steps reading the caches); a rank
// given another file (the llama.cpp fixture changed in one weight) is refused at start, by name,
// on every rank.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <sstream>

#include "duet/gguf.h"
#include "mpirun.h"

namespace {
using duet::test::Launch;
using duet::test::mpirun;
namespace fs = std::filesystem;

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

const std::string kFixture = std::string(DUET_LLAMA_DATA) + "/llamacpp_tiny.gguf";
// The CPU alone: no Vulkan loader, one device.
const std::string kCpu = "DUET_VULKAN_LOADER=/nonexistent";
const std::string kArgs =
    " --prompt-ids 5,6,7,8,9 -n 6 --temp 0 --ignore-eos --print-ids --prefill-chunk 3 "
    "--devices cpu:0";

// Random f32 weights, 2 layers, GQA, an output matrix of its own (a tied one makes a tiny random
// model repeat its last token, which would hide a wrong split).
std::string write_random_llama() {
  const int64_t E = 64, FF = 96, V = 80, KV = 32;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<std::pair<std::string, duet::HostTensor>> tensors;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float scale) {
    duet::HostTensor t = duet::HostTensor::empty(duet::DType::f32, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = scale * u(rng);
    tensors.emplace_back(name, t);
  };
  add("token_embd.weight", {V, E}, 1.0f);
  add("output_norm.weight", {E}, 1.0f);
  add("output.weight", {V, E}, 0.125f);
  for (int l = 0; l < 2; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn_norm.weight", {E}, 1.0f);
    add(p + "attn_q.weight", {E, E}, 0.125f);
    add(p + "attn_k.weight", {KV, E}, 0.125f);
    add(p + "attn_v.weight", {KV, E}, 0.125f);
    add(p + "attn_output.weight", {E, E}, 0.125f);
    add(p + "ffn_norm.weight", {E}, 1.0f);
    add(p + "ffn_gate.weight", {FF, E}, 0.125f);
    add(p + "ffn_up.weight", {FF, E}, 0.125f);
    add(p + "ffn_down.weight", {E, FF}, 0.1f);
  }
  auto u32 = [](int64_t v) { return duet::GgufValue::of_int(duet::GgufType::u32, v); };
  const std::vector<std::pair<std::string, duet::GgufValue>> meta = {
      {"general.architecture", duet::GgufValue::of_string("llama")},
      {"llama.block_count", u32(2)},
      {"llama.embedding_length", u32(E)},
      {"llama.feed_forward_length", u32(FF)},
      {"llama.attention.head_count", u32(4)},
      {"llama.attention.head_count_kv", u32(2)},
      {"llama.context_length", u32(64)},
  };
  const std::string path =
      std::string(DUET_TEST_TMPDIR) + "/random_llama." + std::to_string(getpid()) + ".gguf";
  duet::Status st = duet::write_gguf(path, meta, tensors);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

std::string ids_line(const std::string& output) {
  const size_t at = output.find("\nids:");  // the line --print-ids prints
  return at == std::string::npos ? std::string()
                                 : output.substr(at + 1, output.find('\n', at + 1) - at - 1);
}

TEST(DistributedLlama, TwoRanksGiveOneProcesssGreedyIds) {
  const std::string model = write_random_llama();
  const std::string args = model + kArgs;
  std::string single;
  {
    FILE* pipe = popen((kCpu + " " + DUET_LLAMA_BIN + " " + args + " 2>&1").c_str(), "r");
    char buf[4096];
    size_t n = 0;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) single.append(buf, n);
    ASSERT_EQ(WEXITSTATUS(pclose(pipe)), 0) << single;
  }
  const std::string want = ids_line(single);
  ASSERT_EQ(std::count(want.begin(), want.end(), ' '), 6) << single;
  std::istringstream ids(want.substr(4));
  const std::set<int> distinct{std::istream_iterator<int>(ids), {}};
  EXPECT_GT(distinct.size(), 2u) << "ids that differ token to token: " << want;
  Launch split = mpirun(2, DUET_LLAMA_BIN, args + " --distributed --every-rank --explain", kCpu);
  fs::remove(model);
  ASSERT_EQ(split.exit_code, 0) << split.output;
  EXPECT_HAS(split.output, "2 stages");
  EXPECT_HAS(split.output, "stage 1 on rank1");
  EXPECT_EQ(ids_line(split.output), want) << split.output;
}

// A model neither rank can hold: a memory budget two ranks of one host share (400 KiB, 200 KiB
// each, of a model of about 310 KiB) makes the planner put the second layer, and so its KV cache,
// on rank 1, without --every-rank; decoding there reads and writes that cache on rank 1 and gives
// one process's greedy ids.
TEST(DistributedLlama, ALayerAndItsCacheOnRank1GiveOneProcesssGreedyIds) {
  const std::string model = write_random_llama();
  const std::string args = model + kArgs + " --cache-dtype f32";
  std::string single;
  {
    FILE* pipe = popen((kCpu + " " + DUET_LLAMA_BIN + " " + args + " 2>&1").c_str(), "r");
    char buf[4096];
    size_t n = 0;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) single.append(buf, n);
    ASSERT_EQ(WEXITSTATUS(pclose(pipe)), 0) << single;
  }
  const std::string want = ids_line(single);
  ASSERT_FALSE(want.empty()) << single;
  Launch split =
      mpirun(2, DUET_LLAMA_BIN, args + " --distributed --explain --policy budget=400KiB", kCpu);
  fs::remove(model);
  ASSERT_EQ(split.exit_code, 0) << split.output;
  EXPECT_HAS(split.output, "no rank alone holds the graph's weights and states");
  // Stage 1 runs nodes of layer 1 that use its caches, and holds them.
  const size_t at = split.output.find("stage 1 on rank1: nodes ");
  ASSERT_NE(at, std::string::npos) << split.output;
  const size_t line2 = split.output.find('\n', at) + 1;
  const std::string memory = split.output.substr(line2, split.output.find('\n', line2) - line2);
  EXPECT_HAS(memory, "states 16.0 KiB") << "layer 1's K and V caches (64 x 32 f32 each)";
  EXPECT_HAS(memory, "rank1/cpu:0");
  EXPECT_EQ(ids_line(split.output), want) << split.output;
}

// The C API (duet_llm_* with options.distributed), from a C program linking libduet.so alone:
// the same greedy ids as one process, the prompt's chunks pipelined over the stages.
TEST(DistributedLlama, TheCApiSplitsTheModelWithOneProcesssIds) {
  const std::string model = write_random_llama();
  Launch r = mpirun(2, DUET_DIST_C_LLM, model + " 6", kCpu);
  fs::remove(model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_HAS(r.output, "c llm: 6 ids over 2 ranks, the same as one process's");
}

TEST(DistributedLlama, ARankGivenAnotherFileIsRefusedAtStart) {
  // The fixture with one weight of its output norm changed: same shapes, another model.
  auto f = duet::read_gguf(kFixture);
  ASSERT_TRUE(f.ok()) << f.status().message();
  const duet::GgufTensorInfo* norm = f->find("output_norm.weight");
  ASSERT_NE(norm, nullptr);
  std::ifstream in(kFixture, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  bytes[f->data_offset + norm->offset] ^= 0x40;
  const fs::path other =
      fs::path(DUET_TEST_TMPDIR) / ("other." + std::to_string(getpid()) + ".gguf");
  std::ofstream(other, std::ios::binary) << bytes;
  const std::string rest = kArgs + " --distributed --every-rank";
  Launch r =
      mpirun(1, DUET_LLAMA_BIN,
             kFixture + rest + " : -np 1 " + DUET_LLAMA_BIN + " " + other.string() + rest, kCpu);
  fs::remove(other);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_HAS(r.output, "every rank must load the same model");
  EXPECT_HAS(r.output, "rank 1 (");
  EXPECT_LT(r.seconds, 100) << "refused at start, not at a timeout";
}
}  // namespace
