// The Llama example against an independent float64 forward pass: tiny GGUF files written here
// (random weights, 2 layers, GQA), the logits of a prefill and of every decode step compared
// with the whole sequence recomputed in float64, and greedy decoding with the cache giving the
// tokens that re-running the whole sequence gives.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "duet/builtin_engine.h"
#include "duet/llama.h"
#include "duet/quantize.h"
#include "duet/safetensors.h"

namespace duet::llama {
namespace {

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

constexpr int64_t L = 2, E = 64, H = 4, HKV = 2, HD = 16, FF = 96, V = 80;
constexpr double kTheta = 10000.0, kEps = 1e-5;

using Mat = std::vector<double>;  // row-major

struct Weights {
  Mat embd, out_norm, output;
  struct Layer {
    Mat attn_norm, q, k, v, o, ffn_norm, gate, up, down;
  };
  std::vector<Layer> layers;
};

// Random weights as stored in `t` (rows of K), and their exact values in float64.
struct Store {
  std::vector<std::pair<std::string, HostTensor>> tensors;
  uint32_t seed = 1;
  Mat add(const std::string& name, int64_t n, int64_t k, DType t, double scale) {
    std::mt19937 rng(seed++);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    HostTensor f =
        HostTensor::empty(DType::f32, n > 1 ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k});
    for (int64_t i = 0; i < f.numel(); ++i) f.data<float>()[i] = static_cast<float>(scale) * u(rng);
    HostTensor stored = f;
    if (is_quantized(t)) {
      stored = *quantize(f, t, name);
      tensors.emplace_back(name, stored);
      return dequantize(stored, DType::f32)->to_doubles();
    }
    if (t != DType::f32) {
      stored = HostTensor::empty(t, f.desc().dims());
      stored.from_doubles(f.to_doubles());
    }
    tensors.emplace_back(name, stored);
    return stored.to_doubles();
  }
};

GgufValue u32(int64_t v) {
  return GgufValue::of_int(GgufType::u32, v);
}

// Writes a Llama GGUF with weights of dtype `t` (norms in f32) and returns the weights.
Weights write_model(const std::string& path, DType t, bool tied = false) {
  Store s;
  Weights w;
  const double se = 1.0 / std::sqrt(static_cast<double>(E));
  w.embd = s.add("token_embd.weight", V, E, t, 1.0);
  w.out_norm = s.add("output_norm.weight", 1, E, DType::f32, 1.0);
  if (!tied) w.output = s.add("output.weight", V, E, t, se);
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    Weights::Layer y;
    y.attn_norm = s.add(p + "attn_norm.weight", 1, E, DType::f32, 1.0);
    y.q = s.add(p + "attn_q.weight", E, E, t, se);
    y.k = s.add(p + "attn_k.weight", HKV * HD, E, t, se);
    y.v = s.add(p + "attn_v.weight", HKV * HD, E, t, se);
    y.o = s.add(p + "attn_output.weight", E, E, t, se);
    y.ffn_norm = s.add(p + "ffn_norm.weight", 1, E, DType::f32, 1.0);
    y.gate = s.add(p + "ffn_gate.weight", FF, E, t, se);
    y.up = s.add(p + "ffn_up.weight", FF, E, t, se);
    y.down = s.add(p + "ffn_down.weight", E, FF, t, 1.0 / std::sqrt(static_cast<double>(FF)));
    w.layers.push_back(std::move(y));
  }
  if (tied) w.output = w.embd;
  std::vector<std::pair<std::string, GgufValue>> meta = {
      {"general.architecture", GgufValue::of_string("llama")},
      {"llama.block_count", u32(L)},
      {"llama.embedding_length", u32(E)},
      {"llama.feed_forward_length", u32(FF)},
      {"llama.attention.head_count", u32(H)},
      {"llama.attention.head_count_kv", u32(HKV)},
      {"llama.rope.freq_base", GgufValue::of_float(GgufType::f32, kTheta)},
      {"llama.attention.layer_norm_rms_epsilon", GgufValue::of_float(GgufType::f32, kEps)},
      {"llama.context_length", u32(128)},
  };
  Status st = write_gguf(path, meta, s.tensors);
  EXPECT_TRUE(st.ok()) << st.message();
  return w;
}

// y[n] = sum_k x[k] w[n, k]
std::vector<double> linear(const std::vector<double>& x, const Mat& w, int64_t n, int64_t k) {
  std::vector<double> y(static_cast<size_t>(n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j) y[i] += x[j] * w[i * k + j];
  return y;
}

std::vector<double> rmsnorm(const std::vector<double>& x, const Mat& w) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + kEps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * w[i];
  return y;
}

// Adjacent pairs (llama.cpp's rotation for llama), all of the head dim rotated.
void rope(double* h, int64_t pos) {
  for (int64_t i = 0; i < HD / 2; ++i) {
    const double f = std::pow(kTheta, -2.0 * static_cast<double>(i) / HD);
    const double a = static_cast<double>(pos) * f, c = std::cos(a), s = std::sin(a);
    const double x0 = h[2 * i], x1 = h[2 * i + 1];
    h[2 * i] = x0 * c - x1 * s;
    h[2 * i + 1] = x0 * s + x1 * c;
  }
}

// The logits of every position of `tokens`, the whole sequence at once (no cache).
std::vector<std::vector<double>> reference(const Weights& w, const std::vector<int32_t>& tokens) {
  const int64_t T = static_cast<int64_t>(tokens.size());
  std::vector<std::vector<double>> x(T);
  for (int64_t t = 0; t < T; ++t)
    x[t].assign(w.embd.begin() + tokens[t] * E, w.embd.begin() + (tokens[t] + 1) * E);
  for (const Weights::Layer& y : w.layers) {
    std::vector<std::vector<double>> q(T), k(T), v(T);
    for (int64_t t = 0; t < T; ++t) {
      const auto h = rmsnorm(x[t], y.attn_norm);
      q[t] = linear(h, y.q, E, E);
      k[t] = linear(h, y.k, HKV * HD, E);
      v[t] = linear(h, y.v, HKV * HD, E);
      for (int64_t hh = 0; hh < H; ++hh) rope(&q[t][hh * HD], t);
      for (int64_t hh = 0; hh < HKV; ++hh) rope(&k[t][hh * HD], t);
    }
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> a(E, 0.0);
      for (int64_t hh = 0; hh < H; ++hh) {
        const int64_t g = hh / (H / HKV);
        std::vector<double> s(t + 1);
        double mx = -1e300;
        for (int64_t j = 0; j <= t; ++j) {
          double d = 0;
          for (int64_t e = 0; e < HD; ++e) d += q[t][hh * HD + e] * k[j][g * HD + e];
          s[j] = d / std::sqrt(static_cast<double>(HD));
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t j = 0; j <= t; ++j)
          for (int64_t e = 0; e < HD; ++e) a[hh * HD + e] += s[j] / sum * v[j][g * HD + e];
      }
      const auto o = linear(a, y.o, E, E);
      for (int64_t e = 0; e < E; ++e) x[t][e] += o[e];
      const auto h = rmsnorm(x[t], y.ffn_norm);
      auto g = linear(h, y.gate, FF, E);
      const auto u = linear(h, y.up, FF, E);
      for (int64_t e = 0; e < FF; ++e) g[e] = g[e] / (1.0 + std::exp(-g[e])) * u[e];
      const auto d = linear(g, y.down, E, FF);
      for (int64_t e = 0; e < E; ++e) x[t][e] += d[e];
    }
  }
  std::vector<std::vector<double>> logits(T);
  for (int64_t t = 0; t < T; ++t) logits[t] = linear(rmsnorm(x[t], w.out_norm), w.output, V, E);
  return logits;
}

// Largest difference relative to the largest reference logit of the row.
double rel_err(const HostTensor& got, int64_t row, const std::vector<double>& want) {
  const std::vector<double> g = got.to_doubles();
  double err = 0, mx = 0;
  for (int64_t i = 0; i < V; ++i) {
    err = std::max(err, std::abs(g[row * V + i] - want[i]));
    mx = std::max(mx, std::abs(want[i]));
  }
  return err / mx;
}

std::string tmp(const std::string& name) {
  return std::string(DUET_TEST_TMPDIR) + "/" + name;
}

// f16 weights: f16 storage of the activations too. Block formats: the CPU's integer kernels
// quantize the activations to 8 bits per 32 (as ggml does), about 0.4% of each block's largest
// value per element, against a reference that multiplies the exact activations.
double tolerance(DType t) {
  if (is_quantized(t)) return 2e-2;
  return t == DType::f16 ? 2e-2 : 2e-4;
}

// A prefill of 5 tokens (logits of every row), then decode steps fed the reference's greedy
// tokens: every row matches the whole sequence recomputed in float64.
// With an f16 cache, K and V are rounded to f16 once as they are written (and q with them, which
// attention reads in the cache's dtype): about 1e-3 of each logit.
void logits_match(Device& dev, DType t, bool tied = false, DType cache = DType::f32) {
  const std::string path =
      tmp("tiny_" + std::string(dtype_name(t)) + (tied ? "_tied" : "") + ".gguf");
  const Weights w = write_model(path, t, tied);
  BuildOptions o;
  o.max_context = 32;
  o.all_logits = true;
  o.cache_dtype = cache;
  const double tol = std::max(tolerance(t), cache == DType::f16 ? 1e-2 : 0.0);
  auto m = Model::open(path, {&dev}, o);
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::vector<int32_t> seq = {3, 41, 7, 79, 0};
  auto logits = (*m)->forward(seq);
  ASSERT_TRUE(logits.ok()) << logits.status().message();
  auto ref = reference(w, seq);
  const std::string what = std::string(dtype_name(t)) + " weights, " +
                           std::string(dtype_name(cache)) + " cache on " + dev.id();
  for (int64_t r = 0; r < 5; ++r)
    EXPECT_LE(rel_err(*logits, r, ref[r]), tol) << what << " prefill row " << r;
  const int plans = (*m)->engine().plans_made();
  for (int step = 0; step < 6; ++step) {
    const auto& last = ref.back();
    const int32_t next =
        static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
    seq.push_back(next);
    logits = (*m)->forward(std::span<const int32_t>(&seq.back(), 1));
    ASSERT_TRUE(logits.ok()) << logits.status().message();
    ref = reference(w, seq);
    EXPECT_LE(rel_err(*logits, 0, ref.back()), tol) << what << " decode step " << step;
  }
  EXPECT_EQ((*m)->engine().plans_made(), plans + 1) << "decode steps share one plan";
}

Device& cpu() {
  return *shared_registry()->find("cpu:0");
}
Device* vulkan() {
  for (Device* d : shared_registry()->devices())
    if (d->caps().backend == BackendKind::vulkan) return d;
  return nullptr;
}

TEST(Llama, LogitsMatchTheFloat64ForwardOnTheCpu) {
  for (DType t : {DType::f32, DType::f16, DType::q8_0, DType::q4_0}) logits_match(cpu(), t);
  logits_match(cpu(), DType::f32, true);
}

TEST(Llama, LogitsMatchTheFloat64ForwardOnVulkan) {
  Device* vk = vulkan();
  if (!vk) GTEST_SKIP() << "no Vulkan device opened on this machine (duet devices says why)";
  for (DType t : {DType::f32, DType::f16}) logits_match(*vk, t);
}

TEST(Llama, AnF16CacheMatchesTheFloat64ForwardWithinF16) {
  logits_match(cpu(), DType::f32, false, DType::f16);
  if (Device* vk = vulkan()) logits_match(*vk, DType::f32, false, DType::f16);
}

// A file as llama.cpp's converter writes it (tools/make_llamacpp_fixture.py: a random Hugging
// Face checkpoint through convert_hf_to_gguf.py, f32): its metadata keys, the Q and K rows it
// permutes for llama's adjacent-pair rotation, a tied output (no output.weight) and its
// tokenizer. The logits of every position, prefill then decode steps, match an independent
// float64 forward pass of the checkpoint in Hugging Face's conventions, and greedy decoding
// gives its tokens.
void llamacpp_file(Device& dev) {
  const std::string dir = DUET_TEST_DATA;
  auto want = load_safetensors(dir + "/llamacpp_tiny.expected.safetensors");
  ASSERT_TRUE(want.ok()) << want.status().message();
  const HostTensor& ref = want->at("logits");
  const int32_t* tok = want->at("tokens").data<int32_t>();
  const int64_t T = want->at("tokens").numel(), P = want->at("prompt").numel(),
                nv = ref.desc().dim(1);
  const std::vector<double> r = ref.to_doubles();
  BuildOptions o;
  o.max_context = 16;
  o.all_logits = true;
  auto m = Model::open(dir + "/llamacpp_tiny.gguf", {&dev}, o);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const Config& c = (*m)->config();
  EXPECT_EQ(c.heads, 4);
  EXPECT_EQ(c.kv_heads, 2);
  EXPECT_EQ(c.vocab, nv);
  EXPECT_TRUE(c.tied_output);
  EXPECT_EQ(c.rope_mode, RopeMode::gptj);
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  EXPECT_FLOAT_EQ(c.eps, 1e-6f);
  ASSERT_EQ(static_cast<int64_t>((*m)->vocab().size()), nv);
  EXPECT_EQ((*m)->vocab()[1], "<s>");
  auto check = [&](const HostTensor& got, int64_t row, int64_t pos) {
    const std::vector<double> g = got.to_doubles();
    double err = 0, mx = 0;
    for (int64_t i = 0; i < nv; ++i) {
      err = std::max(err, std::abs(g[row * nv + i] - r[pos * nv + i]));
      mx = std::max(mx, std::abs(r[pos * nv + i]));
    }
    EXPECT_LE(err / mx, 2e-4) << "position " << pos << " on " << dev.id();
  };
  auto l = (*m)->forward(std::span<const int32_t>(tok, P));
  ASSERT_TRUE(l.ok()) << l.status().message();
  for (int64_t p = 0; p < P; ++p) check(*l, p, p);
  for (int64_t p = P; p < T; ++p) {
    l = (*m)->forward(std::span<const int32_t>(tok + p, 1));
    ASSERT_TRUE(l.ok()) << l.status().message();
    check(*l, 0, p);
  }
  ASSERT_TRUE((*m)->reset().ok());
  o.all_logits = false;
  m = Model::open(dir + "/llamacpp_tiny.gguf", {&dev}, o);
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto ids = (*m)->generate(std::span<const int32_t>(tok, P), static_cast<int>(T - P));
  ASSERT_TRUE(ids.ok()) << ids.status().message();
  EXPECT_EQ(*ids, std::vector<int32_t>(tok + P, tok + T)) << dev.id();
}

TEST(Llama, AFileConvertedByLlamaCppMatchesTheCheckpointsForwardPass) {
  llamacpp_file(cpu());
  if (Device* vk = vulkan()) llamacpp_file(*vk);
}

// Greedy tokens with the cache equal the tokens of re-running the whole sequence each time.
TEST(Llama, DecodingWithTheCacheGivesTheTokensOfRerunningTheSequence) {
  const std::string path = tmp("tiny_greedy.gguf");
  write_model(path, DType::f32);
  BuildOptions o;
  o.max_context = 24;
  auto m = Model::open(path, {&cpu()}, o);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const std::vector<int32_t> prompt = {5, 6, 7};
  StepStats s;
  auto ids = (*m)->generate(prompt, 10, -1, &s);
  ASSERT_TRUE(ids.ok()) << ids.status().message();
  ASSERT_EQ(ids->size(), 10u);
  EXPECT_EQ(s.decode_steps, 9);
  std::vector<int32_t> seq = prompt;
  for (size_t i = 0; i < ids->size(); ++i) {
    ASSERT_TRUE((*m)->reset().ok());
    auto l = (*m)->forward(seq);
    ASSERT_TRUE(l.ok()) << l.status().message();
    EXPECT_EQ(argmax(*l, 0), (*ids)[i]) << "token " << i;
    seq.push_back((*ids)[i]);
  }
  // The cache is full after 24 tokens: one more is an error, not a write past it.
  ASSERT_TRUE((*m)->reset().ok());
  auto full = (*m)->forward(std::vector<int32_t>(25, 1));
  ASSERT_FALSE(full.ok());
  EXPECT_HAS(full.status().message(), "cache holds 24");
}

// The seam duet-llama --distributed runs through: a runner made by the caller, over a graph whose
// weights were declared and bound afterwards, gives the ids of the model on an engine, and a reset
// between prompts reaches it.
TEST(Llama, ARunnerGivenByTheCallerGivesTheEnginesTokensAndIsReset) {
  const std::string path = tmp("tiny_runner.gguf");
  write_model(path, DType::f32);
  BuildOptions o;
  o.max_context = 16;
  o.prefill_chunk = 2;
  struct Counting final : Runner {
    std::unique_ptr<Engine> e;
    int runs = 0, resets = 0;
    Result<std::map<std::string, HostTensor>> run(
        const std::map<std::string, HostTensor>& in) override {
      ++runs;
      return e->run(in);
    }
    Status reset_states() override {
      ++resets;
      return e->reset_states();
    }
    std::string explain() const override { return "counting"; }
  };
  Counting* made = nullptr;
  size_t unbound = 0;
  auto factory = [&](const GgufFile& f, const Config& c,
                     const BuildOptions& b) -> Result<std::unique_ptr<Runner>> {
    BuildOptions declared = b;
    declared.declare_weights = true;
    DUET_ASSIGN_OR_RETURN(Graph g, build_graph(f, c, declared, 1));
    unbound = g.unbound_constants().size();
    DUET_TRY(bind_weights(f, g, b));
    auto r = std::make_unique<Counting>();
    DUET_ASSIGN_OR_RETURN(r->e, Engine::create(std::move(g), {&cpu()}));
    made = r.get();
    return std::unique_ptr<Runner>(std::move(r));
  };
  auto file = read_gguf(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto m = Model::open(std::move(*file), factory, o);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_FALSE((*m)->runs_here());
  EXPECT_EQ(unbound, static_cast<size_t>(3 + 9 * L)) << "every weight declared, none read";
  auto local = Model::open(path, {&cpu()}, o);
  ASSERT_TRUE(local.ok()) << local.status().message();
  const std::vector<int32_t> prompt = {5, 6, 7};
  auto want = (*local)->generate(prompt, 6);
  ASSERT_TRUE(want.ok()) << want.status().message();
  for (int again = 0; again < 2; ++again) {
    auto got = (*m)->generate(prompt, 6);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(*got, *want) << "prompt " << again;
    EXPECT_EQ(made->runs, (again + 1) * (2 + 5)) << "the prompt in runs of 2, then 5 steps";
    ASSERT_TRUE((*m)->reset().ok());
    EXPECT_EQ(made->resets, again + 1);
  }
}

// The per-token overhead's measurement: a decode step run profiled times every kernel step of
// the plan on its device, the kernels take no longer than the run's wall time, and the logits are
// those of a plain run of the same step.
TEST(Llama, AProfiledDecodeStepTimesEveryKernelWithinTheRunsWallTime) {
  const std::string path = tmp("tiny_profiled.gguf");
  write_model(path, DType::f16);
  std::vector<Device*> devices = {&cpu()};
  if (Device* vk = vulkan()) devices.push_back(vk);
  for (Device* d : devices) {
    SCOPED_TRACE(d->id());
    BuildOptions o;
    o.max_context = 16;
    auto m = Model::open(path, {d}, o);
    ASSERT_TRUE(m.ok()) << m.status().message();
    ASSERT_TRUE((*m)->forward(std::vector<int32_t>{3, 41, 7}).ok());
    ASSERT_TRUE((*m)->forward(std::vector<int32_t>{9}).ok());  // the one-row plan
    std::map<std::string, HostTensor> in;
    for (auto [name, v] : {std::pair{"tokens", 11}, std::pair{"pos", 4}, std::pair{"len", 5}}) {
      in[name] = HostTensor::empty(DType::i32, std::vector<int64_t>{1});
      in[name].data<int32_t>()[0] = v;
    }
    Engine& e = (*m)->engine();
    auto plain = e.run(in);
    ASSERT_TRUE(plain.ok()) << plain.status().message();
    RunProfile p;
    auto profiled = e.run_profiled(in, p);
    ASSERT_TRUE(profiled.ok()) << profiled.status().message();
    ASSERT_EQ(plain->size(), profiled->size());
    for (const auto& [name, t] : *plain)
      EXPECT_EQ(t.to_doubles(), profiled->at(name).to_doubles()) << name;
    const Plan& plan = e.plan();
    size_t kernels = 0;
    for (const PlanStep& s : plan.steps) kernels += !s.once && s.kind == StepKind::kernel;
    ASSERT_EQ(p.steps.size(), kernels);
    for (size_t i = 0; i < p.steps.size(); ++i) {
      const StepProfile& s = p.steps[i];
      ASSERT_EQ(plan.steps[static_cast<size_t>(s.step)].kind, StepKind::kernel);
      ASSERT_GE(s.device_seconds, 0.0) << plan.steps[static_cast<size_t>(s.step)].name;
      if (i) {
        ASSERT_LT(p.steps[i - 1].step, s.step);
        ASSERT_LE(p.steps[i - 1].end, s.start) << plan.steps[static_cast<size_t>(s.step)].name;
      }
    }
    EXPECT_GT(p.kernel_seconds(), 0.0);
    EXPECT_LE(p.kernel_seconds(), p.wall_seconds * 1.01 + 1e-5);
  }
}

TEST(Llama, AFileThatIsNotALlamaIsAnErrorNamingWhatIsWrong) {
  const std::string path = tmp("broken.gguf");
  std::vector<std::pair<std::string, GgufValue>> meta = {
      {"general.architecture", GgufValue::of_string("llama")},
      {"llama.block_count", u32(1)},
      {"llama.embedding_length", u32(E)},
      {"llama.feed_forward_length", u32(FF)}};
  HostTensor emb = HostTensor::empty(DType::f32, std::vector<int64_t>{V, E});
  ASSERT_TRUE(write_gguf(path, meta, {{"token_embd.weight", emb}}).ok());
  auto m = Model::open(path, {&cpu()});
  ASSERT_FALSE(m.ok());
  EXPECT_HAS(m.status().message(), "llama.attention.head_count");

  meta.push_back({"llama.attention.head_count", u32(H)});
  ASSERT_TRUE(write_gguf(path, meta, {{"token_embd.weight", emb}}).ok());
  m = Model::open(path, {&cpu()});
  ASSERT_FALSE(m.ok());
  EXPECT_HAS(m.status().message(), "output_norm.weight");
}

}  // namespace
}  // namespace duet::llama
