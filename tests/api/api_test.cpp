// The C API (duet/duet.h) through libduet.so, as an embedding program uses it: handles, status
// codes with per-thread messages, no exception crossing, several threads on one engine and
// several engines at once.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/c_smoke.h"
#include "duet/duet.h"

namespace {

namespace fs = std::filesystem;

// y = softmax(x @ w) over rows of 8, f32.
const char* kMatmulSoftmax = R"({"format": "duet-graph", "version": 1, "name": "mm_softmax",
  "inputs": [{"name": "x", "dtype": "f32", "shape": [4, 8]},
             {"name": "w", "dtype": "f32", "shape": [8, 8]}],
  "nodes": [{"name": "xw", "op": "matmul", "inputs": ["x", "w"]},
            {"name": "y", "op": "softmax", "inputs": ["xw"]}],
  "outputs": ["y"]})";

const char* kBf16Attention = R"({"format": "duet-graph", "version": 1, "name": "attn",
  "inputs": [{"name": "q", "dtype": "bf16", "shape": [1, 8, 128, 64]},
             {"name": "k", "dtype": "bf16", "shape": [1, 8, 128, 64]},
             {"name": "v", "dtype": "bf16", "shape": [1, 8, 128, 64]}],
  "nodes": [{"name": "attn", "op": "attention", "inputs": ["q", "k", "v"],
             "attrs": {"causal": true}}],
  "outputs": ["attn"]})";

// Owning wrappers so that a failed assertion does not leak.
struct Graph {
  duet_graph* g = nullptr;
  ~Graph() { duet_graph_destroy(g); }
};
struct Engine {
  duet_engine* e = nullptr;
  ~Engine() { duet_engine_destroy(e); }
};
struct Tensor {
  duet_tensor* t = nullptr;
  ~Tensor() { duet_tensor_destroy(t); }
};

Tensor f32_tensor(std::vector<int64_t> shape, const std::vector<float>& values) {
  Tensor t;
  EXPECT_EQ(duet_tensor_create(DUET_F32, shape.data(), static_cast<int>(shape.size()),
                               values.data(), &t.t),
            DUET_OK)
      << duet_last_error();
  return t;
}

// What the graph computes, in double.
std::vector<double> expected_mm_softmax(const std::vector<float>& x, const std::vector<float>& w) {
  std::vector<double> y(32);
  for (int r = 0; r < 4; ++r) {
    double row[8], mx = -INFINITY, sum = 0;
    for (int c = 0; c < 8; ++c) {
      row[c] = 0;
      for (int k = 0; k < 8; ++k) row[c] += double(x[r * 8 + k]) * double(w[k * 8 + c]);
      mx = std::max(mx, row[c]);
    }
    for (int c = 0; c < 8; ++c) sum += std::exp(row[c] - mx);
    for (int c = 0; c < 8; ++c) y[r * 8 + c] = std::exp(row[c] - mx) / sum;
  }
  return y;
}

std::vector<float> values(int n, float seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(seed + 0.37f * float(i));
  return v;
}

// Runs the matmul-softmax engine once with inputs drawn from `seed`; returns the largest error.
double run_once(duet_engine* e, float seed, std::string* error) {
  const std::vector<float> xv = values(32, seed), wv = values(64, seed + 1);
  Tensor x = f32_tensor({4, 8}, xv), w = f32_tensor({8, 8}, wv);
  const char* names[] = {"x", "w"};
  const duet_tensor* in[] = {x.t, w.t};
  Tensor y;
  if (duet_engine_run(e, names, in, 2, &y.t, 1) != DUET_OK) {
    *error = duet_last_error();
    return INFINITY;
  }
  const std::vector<double> want = expected_mm_softmax(xv, wv);
  std::vector<float> got(32);
  if (duet_tensor_to_float(y.t, got.data(), got.size()) != DUET_OK) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < 32; ++i) worst = std::max(worst, std::abs(double(got[i]) - want[i]));
  return worst;
}

TEST(CApi, VersionMacrosMatchTheLibrary) {
  EXPECT_STREQ(duet_version(), DUET_VERSION_STRING);
  // The build: version, then the commit (or why it is unknown), compiler and build type.
  const std::string build = duet_build_identity();
  EXPECT_EQ(build.rfind("duet " DUET_VERSION_STRING ", ", 0), 0u) << build;
  EXPECT_TRUE(build.find(", commit ") != std::string::npos ||
              build.find(", source revision unknown (") != std::string::npos)
      << build;
  EXPECT_EQ(duet_version_number(),
            DUET_VERSION_MAJOR * 10000 + DUET_VERSION_MINOR * 100 + DUET_VERSION_PATCH);
}

TEST(CApi, CProgramRunsAGraph) {
  float first = 0;
  char error[512] = {};
  ASSERT_TRUE(duet_c_smoke(&first, error, sizeof error)) << error;
  EXPECT_NEAR(first, 0.5f, 1e-6f);
}

TEST(CApi, EngineRunsAGraphAndMatchesTheMath) {
  Graph g;
  ASSERT_EQ(duet_graph_parse(kMatmulSoftmax, nullptr, &g.g), DUET_OK) << duet_last_error();
  EXPECT_STREQ(duet_graph_name(g.g), "mm_softmax");
  ASSERT_EQ(duet_graph_input_count(g.g), 2u);
  EXPECT_STREQ(duet_graph_input_name(g.g, 0), "x");
  EXPECT_STREQ(duet_graph_output_name(g.g, 0), "y");
  EXPECT_EQ(duet_graph_output_name(g.g, 1), nullptr);
  Engine e;
  ASSERT_EQ(duet_engine_create(g.g, "", &e.e), DUET_OK) << duet_last_error();
  duet_graph_destroy(g.g);  // the engine keeps its own copy
  g.g = nullptr;
  ASSERT_EQ(duet_engine_output_count(e.e), 1u);
  EXPECT_STREQ(duet_engine_output_name(e.e, 0), "y");
  std::string error;
  EXPECT_LT(run_once(e.e, 0.5f, &error), 1e-5) << error;
  char* text = nullptr;
  ASSERT_EQ(duet_engine_explain(e.e, &text), DUET_OK);
  EXPECT_NE(std::string(text).find("softmax 'y'"), std::string::npos) << text;
  duet_string_free(text);
}

#ifdef DUET_TEST_ONNX_MODELS
TEST(CApi, LoadsAndRunsAnOnnxModel) {
  const std::string dir = DUET_TEST_ONNX_MODELS;
  Graph g;
  EXPECT_EQ(duet_graph_load_onnx((dir + "/gpt2_block.onnx").c_str(), "batch=2,seq", &g.g),
            DUET_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(duet_last_error()).find("'seq'"), std::string::npos) << duet_last_error();
  ASSERT_EQ(duet_graph_load_onnx((dir + "/gpt2_block.onnx").c_str(), "batch=2,sequence=7", &g.g),
            DUET_OK)
      << duet_last_error();
  ASSERT_EQ(duet_graph_input_count(g.g), 1u);
  EXPECT_STREQ(duet_graph_input_name(g.g, 0), "x");
  Tensor x, want, y;
  ASSERT_EQ(duet_tensor_load((dir + "/gpt2_block.inputs.safetensors").c_str(), "x", &x.t), DUET_OK)
      << duet_last_error();
  ASSERT_EQ(duet_tensor_load((dir + "/gpt2_block.outputs.safetensors").c_str(), "y", &want.t),
            DUET_OK)
      << duet_last_error();
  Engine e;
  ASSERT_EQ(duet_engine_create(g.g, "", &e.e), DUET_OK) << duet_last_error();
  const char* names[] = {"x"};
  const duet_tensor* in[] = {x.t};
  ASSERT_EQ(duet_engine_run(e.e, names, in, 1, &y.t, 1), DUET_OK) << duet_last_error();
  const size_t n = static_cast<size_t>(duet_tensor_numel(want.t));
  ASSERT_EQ(static_cast<size_t>(duet_tensor_numel(y.t)), n);
  std::vector<float> a(n), b(n);
  ASSERT_EQ(duet_tensor_to_float(y.t, a.data(), n), DUET_OK);
  ASSERT_EQ(duet_tensor_to_float(want.t, b.data(), n), DUET_OK);
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(a[i], b[i], 1e-4) << i;
  // Loaded without sizes, the symbolic dimensions are 1 (the graph is made for one token); run
  // with other shapes, the model is imported again at them.
  Graph one;
  ASSERT_EQ(duet_graph_load((dir + "/gpt2_block.onnx").c_str(), &one.g), DUET_OK);
  Engine e1;
  ASSERT_EQ(duet_engine_create(one.g, "", &e1.e), DUET_OK) << duet_last_error();
  Tensor y1;
  ASSERT_EQ(duet_engine_run(e1.e, names, in, 1, &y1.t, 1), DUET_OK) << duet_last_error();
  ASSERT_EQ(static_cast<size_t>(duet_tensor_numel(y1.t)), n);
  ASSERT_EQ(duet_tensor_to_float(y1.t, a.data(), n), DUET_OK);
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(a[i], b[i], 1e-4) << i;
}
#endif

TEST(CApi, ErrorsAreStatusesWithAMessageNamingTheProblem) {
  Graph g;
  EXPECT_EQ(duet_graph_parse("{not json", nullptr, &g.g), DUET_ERROR_PARSE);
  EXPECT_EQ(g.g, nullptr);
  EXPECT_NE(std::string(duet_last_error()).find("malformed JSON"), std::string::npos)
      << duet_last_error();

  EXPECT_EQ(duet_graph_load("/nonexistent/g.json", &g.g), DUET_ERROR_NOT_FOUND);
  EXPECT_NE(std::string(duet_last_error()).find("/nonexistent/g.json"), std::string::npos);

  EXPECT_EQ(duet_graph_parse(nullptr, nullptr, &g.g), DUET_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(duet_last_error()).find("json is NULL"), std::string::npos)
      << duet_last_error();
  EXPECT_STREQ(duet_status_name(DUET_ERROR_PARSE), "parse_error");
}

TEST(CApi, MalformedPolicyIsRefusedNamingTheTerm) {
  Graph g;
  ASSERT_EQ(duet_graph_parse(kMatmulSoftmax, nullptr, &g.g), DUET_OK);
  Engine e;
  EXPECT_NE(duet_engine_create(g.g, "deny=cdua.flash", &e.e), DUET_OK);
  EXPECT_EQ(e.e, nullptr);
  EXPECT_NE(std::string(duet_last_error()).find("cdua"), std::string::npos) << duet_last_error();
}

TEST(CApi, APolicyThatLeavesNoDeviceIsAnError) {
  Graph g;
  ASSERT_EQ(duet_graph_parse(kMatmulSoftmax, nullptr, &g.g), DUET_OK);
  Engine e;
  EXPECT_NE(duet_engine_create(g.g, "deny=cpu,vulkan,cuda", &e.e), DUET_OK);
  EXPECT_NE(std::string(duet_last_error()).find("leaves no device"), std::string::npos)
      << duet_last_error();
}

TEST(CApi, RunRefusesWrongInputsAndWritesNoOutput) {
  Graph g;
  ASSERT_EQ(duet_graph_parse(kMatmulSoftmax, nullptr, &g.g), DUET_OK);
  Engine e;
  ASSERT_EQ(duet_engine_create(g.g, "", &e.e), DUET_OK) << duet_last_error();
  Tensor x = f32_tensor({4, 8}, values(32, 0));
  const char* names[] = {"x"};
  const duet_tensor* in[] = {x.t};
  duet_tensor* out = reinterpret_cast<duet_tensor*>(0x1);  // must stay untouched
  EXPECT_EQ(duet_engine_run(e.e, names, in, 1, &out, 1), DUET_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(duet_last_error()).find("'w'"), std::string::npos) << duet_last_error();
  EXPECT_EQ(out, reinterpret_cast<duet_tensor*>(0x1));
  EXPECT_EQ(duet_engine_run(e.e, names, in, 1, &out, 2), DUET_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(duet_last_error()).find("output_count 2"), std::string::npos);
}

TEST(CApi, TensorsDescribeThemselvesAndConvert) {
  const int64_t shape[] = {2, 3};
  const uint16_t halves[6] = {0x3C00, 0xC000, 0x3800, 0, 0x7C00, 0x3555};  // 1 -2 .5 0 inf ~1/3
  Tensor t;
  ASSERT_EQ(duet_tensor_create(DUET_F16, shape, 2, halves, &t.t), DUET_OK);
  EXPECT_EQ(duet_tensor_dtype(t.t), DUET_F16);
  EXPECT_EQ(duet_tensor_rank(t.t), 2);
  EXPECT_EQ(duet_tensor_dim(t.t, 1), 3);
  EXPECT_EQ(duet_tensor_dim(t.t, 2), 0);
  EXPECT_EQ(duet_tensor_numel(t.t), 6);
  EXPECT_EQ(duet_tensor_nbytes(t.t), 12u);
  float f[6];
  ASSERT_EQ(duet_tensor_to_float(t.t, f, 6), DUET_OK);
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], -2.0f);
  EXPECT_EQ(f[2], 0.5f);
  EXPECT_TRUE(std::isinf(f[4]));
  EXPECT_EQ(duet_tensor_to_float(t.t, f, 5), DUET_ERROR_INVALID_ARGUMENT);

  Tensor bad;
  EXPECT_EQ(duet_tensor_create(static_cast<duet_dtype>(9), shape, 2, nullptr, &bad.t),
            DUET_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(duet_tensor_create(DUET_F32, shape, 5, nullptr, &bad.t), DUET_ERROR_INVALID_ARGUMENT);
  const int64_t zero[] = {2, 0};
  EXPECT_EQ(duet_tensor_create(DUET_F32, zero, 2, nullptr, &bad.t), DUET_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(bad.t, nullptr);
}

// GCC says __SANITIZE_ADDRESS__, clang __has_feature(address_sanitizer).
#if defined(__SANITIZE_ADDRESS__)
#define DUET_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DUET_TEST_ASAN 1
#endif
#endif

TEST(CApi, AnAllocationFailureIsAStatusNotAnException) {
#if defined(DUET_TEST_ASAN)
  GTEST_SKIP() << "AddressSanitizer aborts on impossible allocations instead of throwing";
#else
  const int64_t huge[] = {int64_t(1) << 20, int64_t(1) << 20, 64};  // 256 TiB of f32
  Tensor t;
  EXPECT_EQ(duet_tensor_create(DUET_F32, huge, 3, nullptr, &t.t), DUET_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(t.t, nullptr);
  EXPECT_NE(std::string(duet_last_error()).find("out of host memory"), std::string::npos);
  // A size that does not even fit in 64 bits is a malformed argument.
  const int64_t overflow[] = {int64_t(1) << 30, int64_t(1) << 30, 64};
  EXPECT_EQ(duet_tensor_create(DUET_F32, overflow, 3, nullptr, &t.t), DUET_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(duet_last_error()).find("too large"), std::string::npos);
#endif
}

TEST(CApi, SafetensorsRoundTrip) {
  const fs::path file =
      fs::temp_directory_path() / ("duet-api-" + std::to_string(getpid()) + ".safetensors");
  Tensor a = f32_tensor({2, 2}, {1, 2, 3, 4});
  const char* names[] = {"a"};
  const duet_tensor* ts[] = {a.t};
  ASSERT_EQ(duet_tensors_save(file.c_str(), names, ts, 1), DUET_OK) << duet_last_error();
  Tensor back;
  ASSERT_EQ(duet_tensor_load(file.c_str(), "a", &back.t), DUET_OK) << duet_last_error();
  EXPECT_EQ(duet_tensor_numel(back.t), 4);
  EXPECT_EQ(static_cast<const float*>(duet_tensor_data(back.t))[3], 4.0f);
  Tensor missing;
  EXPECT_EQ(duet_tensor_load(file.c_str(), "b", &missing.t), DUET_ERROR_NOT_FOUND);
  EXPECT_NE(std::string(duet_last_error()).find("'b'"), std::string::npos) << duet_last_error();
  fs::remove(file);
}

TEST(CApi, DevicesJsonListsTheCpu) {
  char* text = nullptr;
  ASSERT_EQ(duet_devices_json(&text), DUET_OK) << duet_last_error();
  const nlohmann::json j = nlohmann::json::parse(text);
  duet_string_free(text);
  bool cpu = false;
  for (const auto& d : j["devices"]) cpu = cpu || d["id"] == "cpu:0";
  EXPECT_TRUE(cpu);
}

TEST(CApi, PlanForATuringProfileFallsBackToFp16TiledAttention) {
  Graph g;
  ASSERT_EQ(duet_graph_parse(kBf16Attention, nullptr, &g.g), DUET_OK) << duet_last_error();
  duet_plan* p = nullptr;
  ASSERT_EQ(duet_plan_create(g.g, "rtx2080ti", "", &p), DUET_OK) << duet_last_error();
  duet_plan_op op{};
  bool found = false;
  for (size_t i = 0; i < duet_plan_op_count(p); ++i) {
    ASSERT_EQ(duet_plan_op_info(p, i, &op), DUET_OK);
    if (std::string(op.op) != "attention") continue;  // not the casts around it
    found = true;
    EXPECT_STREQ(op.device, "cuda:0");
    EXPECT_STREQ(op.precision, "f16");
    EXPECT_STREQ(op.tier, "tiled");
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(duet_plan_op_info(p, 99, &op), DUET_ERROR_INVALID_ARGUMENT);
  char* text = nullptr;
  ASSERT_EQ(duet_plan_explain(p, &text), DUET_OK);
  EXPECT_NE(std::string(text).find("requires sm_80"), std::string::npos) << text;
  duet_string_free(text);
  duet_plan_destroy(p);

  EXPECT_EQ(duet_plan_create(g.g, "rtx9999", nullptr, &p), DUET_ERROR_NOT_FOUND);
  EXPECT_NE(std::string(duet_last_error()).find("rtx9999"), std::string::npos);
}

TEST(CApi, LastErrorIsPerThread) {
  Graph g;
  EXPECT_EQ(duet_graph_parse("{oops", nullptr, &g.g), DUET_ERROR_PARSE);
  const std::string mine = duet_last_error();
  std::string theirs;
  std::thread([&] {
    duet_graph* other = nullptr;
    EXPECT_EQ(duet_graph_load("/nonexistent/other.json", &other), DUET_ERROR_NOT_FOUND);
    theirs = duet_last_error();
  }).join();
  EXPECT_EQ(duet_last_error(), mine);
  EXPECT_NE(theirs, mine);
  EXPECT_NE(theirs.find("other.json"), std::string::npos);
}

TEST(CApi, SeveralThreadsRunOneEngine) {
  Graph g;
  ASSERT_EQ(duet_graph_parse(kMatmulSoftmax, nullptr, &g.g), DUET_OK);
  Engine e;
  ASSERT_EQ(duet_engine_create(g.g, "", &e.e), DUET_OK) << duet_last_error();
  constexpr int kThreads = 6, kRuns = 15;
  std::atomic<int> good{0};
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRuns; ++r)
        if (run_once(e.e, float(t * 100 + r), &errors[size_t(t)]) < 1e-5) ++good;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), kThreads * kRuns) << errors[0];
}

TEST(CApi, SeveralEnginesRunAtOnce) {
  Graph g;
  ASSERT_EQ(duet_graph_parse(kMatmulSoftmax, nullptr, &g.g), DUET_OK);
  constexpr int kEngines = 4, kRuns = 10;
  std::vector<Engine> engines(kEngines);
  for (Engine& e : engines) ASSERT_EQ(duet_engine_create(g.g, "", &e.e), DUET_OK);
  std::atomic<int> good{0};
  std::vector<std::string> errors(kEngines);
  std::vector<std::thread> threads;
  for (int i = 0; i < kEngines; ++i)
    threads.emplace_back([&, i] {
      for (int r = 0; r < kRuns; ++r)
        if (run_once(engines[size_t(i)].e, float(i * 1000 + r), &errors[size_t(i)]) < 1e-5) ++good;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), kEngines * kRuns) << errors[0];
}

TEST(CApi, NullHandlesAreSafe) {
  duet_graph_destroy(nullptr);
  duet_engine_destroy(nullptr);
  duet_plan_destroy(nullptr);
  duet_tensor_destroy(nullptr);
  duet_string_free(nullptr);
  EXPECT_EQ(duet_graph_input_count(nullptr), 0u);
  EXPECT_EQ(duet_tensor_data(nullptr), nullptr);
  EXPECT_EQ(duet_engine_run(nullptr, nullptr, nullptr, 0, nullptr, 0), DUET_ERROR_INVALID_ARGUMENT);
}

}  // namespace
