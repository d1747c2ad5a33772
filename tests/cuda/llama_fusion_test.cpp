// The CUDA decode fusions on the model graph duet-llama runs: a GGUF written like
// tools/gpu/make_big.py's (every matrix q4_0, the output layer its own q4_0 matrix, f32 norms, a
// head dim of 128, grouped-query attention), opened through llm::Generator (which picks the f16
// KV cache and the prefill chunks duet-llama uses) on an emulated card. A decode step of the
// fused device launches fewer kernels than the unfused one, each fusion its own count, and its
// logits are the unfused run's and the CPU's within tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "cpu/cpu_backend.h"
#include "duet/gguf.h"
#include "duet/kernels/launch.h"
#include "duet/llama.h"
#include "duet/llm.h"
#include "duet/quantize.h"
#include "duet/registry.h"
#include "emulated.h"

namespace duet::cuda {
namespace {

using namespace duet::cuda::testing;

constexpr int64_t kLayers = 2, kEmbd = 256, kHeads = 2, kKvHeads = 1, kFf = 384, kVocab = 96;

GgufValue u32(int64_t v) {
  return GgufValue::of_int(GgufType::u32, v);
}

// Random weights of magnitude `scale` (q4_0 for matrices), norms near 1.
HostTensor weight(std::mt19937& rng, int64_t rows, int64_t cols, double scale) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<int64_t> shape =
      rows > 1 ? std::vector<int64_t>{rows, cols} : std::vector<int64_t>{cols};
  HostTensor t = HostTensor::empty(DType::f32, shape);
  std::vector<double> v(static_cast<size_t>(rows * cols));
  for (double& x : v) x = rows > 1 ? scale * u(rng) : 1.0 + 0.25 * u(rng);
  t.from_doubles(v);
  return rows > 1 ? *quantize(t, DType::q4_0, "w") : t;
}

std::string write_model() {
  std::mt19937 rng(7);
  const int64_t hd = kEmbd / kHeads;
  const double se = 2.0 / std::sqrt(static_cast<double>(kEmbd));
  std::vector<std::pair<std::string, HostTensor>> t;
  t.emplace_back("token_embd.weight", weight(rng, kVocab, kEmbd, 1.0));
  t.emplace_back("output_norm.weight", weight(rng, 1, kEmbd, 0));
  t.emplace_back("output.weight", weight(rng, kVocab, kEmbd, se));
  for (int64_t l = 0; l < kLayers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    t.emplace_back(p + "attn_norm.weight", weight(rng, 1, kEmbd, 0));
    t.emplace_back(p + "attn_q.weight", weight(rng, kEmbd, kEmbd, se));
    t.emplace_back(p + "attn_k.weight", weight(rng, kKvHeads * hd, kEmbd, se));
    t.emplace_back(p + "attn_v.weight", weight(rng, kKvHeads * hd, kEmbd, se));
    t.emplace_back(p + "attn_output.weight", weight(rng, kEmbd, kEmbd, se));
    t.emplace_back(p + "ffn_norm.weight", weight(rng, 1, kEmbd, 0));
    t.emplace_back(p + "ffn_gate.weight", weight(rng, kFf, kEmbd, se));
    t.emplace_back(p + "ffn_up.weight", weight(rng, kFf, kEmbd, se));
    t.emplace_back(p + "ffn_down.weight",
                   weight(rng, kEmbd, kFf, 2.0 / std::sqrt(static_cast<double>(kFf))));
  }
  const std::vector<std::pair<std::string, GgufValue>> meta = {
      {"general.architecture", GgufValue::of_string("llama")},
      {"llama.context_length", u32(64)},
      {"llama.embedding_length", u32(kEmbd)},
      {"llama.block_count", u32(kLayers)},
      {"llama.feed_forward_length", u32(kFf)},
      {"llama.attention.head_count", u32(kHeads)},
      {"llama.attention.head_count_kv", u32(kKvHeads)},
      {"llama.rope.freq_base", GgufValue::of_float(GgufType::f32, 500000.0)},
      {"llama.attention.layer_norm_rms_epsilon", GgufValue::of_float(GgufType::f32, 1e-5)},
      {"llama.rope.dimension_count", u32(hd)},
      {"llama.vocab_size", u32(kVocab)},
  };
  const std::string path = ::testing::TempDir() + "duet_cuda_fusion_llama.gguf";
  Status st = write_gguf(path, meta, t);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

const std::vector<int32_t> kPrompt = {3, 17, 42, 5, 77};
constexpr int kSteps = 3;  // decode steps: re-planned for one row, recorded, replayed

struct Decoded {
  std::vector<HostTensor> logits;  // of each decode step
  uint64_t last_step_kernels = 0;  // kernels the last (replayed) decode step ran
  std::string cache;               // the KV cache's dtype
};

// The prompt, then kSteps decode steps each feeding the argmax of the logits before it (the
// same ids for every run: the first run's).
Decoded decode(const std::string& path, std::shared_ptr<Registry> reg, const std::string& id,
               std::vector<int32_t>& ids) {
  Decoded d;
  llm::ModelOptions o;
  o.devices = {id};
  o.registry = std::move(reg);
  auto g = llm::Generator::open(path, o);
  EXPECT_TRUE(g.ok()) << g.status().message();
  if (!g.ok()) return d;
  d.cache = std::string(dtype_name((*g)->cache_dtype()));
  llama::Model& m = (*g)->model();
  auto logits = m.forward(kPrompt);
  EXPECT_TRUE(logits.ok()) << logits.status().message();
  if (!logits.ok()) return d;
  for (int i = 0; i < kSteps; ++i) {
    if (ids.size() <= static_cast<size_t>(i)) ids.push_back(llama::argmax(*logits, 0));
    const uint64_t before = kernels::emu::kernels_run();
    logits = m.forward(std::span<const int32_t>(&ids[static_cast<size_t>(i)], 1));
    d.last_step_kernels = kernels::emu::kernels_run() - before;
    EXPECT_TRUE(logits.ok()) << logits.status().message();
    if (!logits.ok()) return d;
    d.logits.push_back(*logits);
  }
  return d;
}

std::shared_ptr<Registry> emulated(const std::string& card,
                                   const std::map<std::string, std::string>& switches) {
  BackendOptions o;
  o.values[kEmulateOption] = card;
  for (const auto& [k, v] : switches) o.values[k] = v;
  return std::make_shared<Registry>(Registry::open({emulated_factory()}, o));
}

// The largest difference of a and b over the largest magnitude of b.
double max_diff(const HostTensor& a, const HostTensor& b) {
  const std::vector<double> x = a.to_doubles(), y = b.to_doubles();
  EXPECT_EQ(x.size(), y.size());
  double m = 0, big = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    m = std::max(m, std::abs(x[i] - y[i]));
    big = std::max(big, std::abs(y[i]));
  }
  return m / std::max(big, 1e-30);
}

// On the emulated H100 (an 8B step on an H200 on 2026-11-28 left the step time the same with
// DUET_CUDA_FUSE_ADD_NORM=0 and 1, and the engine's counts, of plan steps, cannot tell): each
// layer's two residual adds run inside the rmsnorm after them (the last one inside the output
// norm, whose output layer is a q4_0 mat-vec), and each layer's silu_mul quantizes ffn_down's
// activations, with the unfused runs' bits.
TEST(CudaLlamaFusion, TheDecodeFusionsFireOnDuetLlamasGraph) {
  const std::string path = write_model();
  std::vector<int32_t> ids;
  BackendOptions two;
  two.values["cpu.threads"] = "2";
  const Decoded cpu =
      decode(path, std::make_shared<Registry>(Registry::open({cpu::factory()}, two)), "cpu:0", ids);
  ASSERT_EQ(cpu.logits.size(), static_cast<size_t>(kSteps));
  const std::string id = "emu-h100:0";
  const Decoded fused = decode(path, emulated("h100", {}), id, ids);
  const Decoded no_add = decode(path, emulated("h100", {{"cuda.fuse_add_norm", "off"}}), id, ids);
  const Decoded no_silu =
      decode(path, emulated("h100", {{"cuda.fuse_silu_quant", "off"}}), id, ids);
  for (const Decoded* d : {&fused, &no_add, &no_silu})
    ASSERT_EQ(d->logits.size(), static_cast<size_t>(kSteps));
  EXPECT_EQ(fused.cache, "f16") << "duet-llama's KV cache on a CUDA device";
  std::printf(
      "kernels a decode step (%lld layers): %llu; %llu without fuse_add_norm, %llu without "
      "fuse_silu_quant\n",
      static_cast<long long>(kLayers), static_cast<unsigned long long>(fused.last_step_kernels),
      static_cast<unsigned long long>(no_add.last_step_kernels),
      static_cast<unsigned long long>(no_silu.last_step_kernels));
  EXPECT_EQ(fused.last_step_kernels + 2 * kLayers, no_add.last_step_kernels);
  EXPECT_EQ(fused.last_step_kernels + kLayers, no_silu.last_step_kernels);
  for (int i = 0; i < kSteps; ++i) {
    EXPECT_EQ(max_diff(fused.logits[i], no_add.logits[i]), 0.0) << "step " << i;
    EXPECT_EQ(max_diff(fused.logits[i], no_silu.logits[i]), 0.0) << "step " << i;
    // The CPU's f32 activations against int8 ones and an f16 cache: about 2% of the largest.
    EXPECT_LE(max_diff(fused.logits[i], cpu.logits[i]), 0.05) << "step " << i;
  }
}

}  // namespace
}  // namespace duet::cuda
