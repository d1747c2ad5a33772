// Concurrency through the embedding surface (libduet.so), on every device kind this machine has
// (the CPU, Vulkan: lavapipe in CI): several threads on one engine through the C and the C++
// APIs, one engine per thread with the devices shared, engines of both kinds at once, and
// engines made and destroyed while others run. Every run is checked against a float64
// reference, so a lost update shows as a wrong answer as well as a ThreadSanitizer report (the
// tsan preset runs these tests over an instrumented library: docs/reliability.md).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "duet/backends.h"
#include "duet/duet.h"
#include "duet/engine.h"
#include "duet/graph_file.h"
#include "support/small_graph.h"

namespace {

using duet::test_support::small_graph_error;
using duet::test_support::small_graph_input;
using duet::test_support::small_graph_json;
constexpr int kK = duet::test_support::kSmallGraphWidth, kN = kK;

constexpr double kTolerance = 1e-5;  // f32 throughout; values of softmax are below 1

// Runs `body(thread)` on `threads` threads at once (released together) and joins them.
template <class F>
void on_threads(int threads, F body) {
  std::atomic<int> ready{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      ++ready;
      while (ready.load() < threads) std::this_thread::yield();
      body(t);
    });
  for (std::thread& t : ts) t.join();
}

// Failures seen on worker threads, reported by the test's own thread.
struct Failures {
  std::atomic<int> good{0};
  std::mutex m;
  std::vector<std::string> messages;
  void fail(std::string why) {
    std::lock_guard<std::mutex> g(m);
    messages.push_back(std::move(why));
  }
  std::string first() {
    std::lock_guard<std::mutex> g(m);
    return messages.empty() ? "" : messages.front();
  }
};

// ---- the C++ API ------------------------------------------------------------------------

// This machine's devices, opened once for the test program and shared by every engine of the
// C++ tests (as an application shares one registry); closed after the last test, before exit
// (the Vulkan validation layers are finalized by then).
std::shared_ptr<duet::Registry> shared_devices;

const std::shared_ptr<duet::Registry>& registry() {
  if (!shared_devices) shared_devices = std::make_shared<duet::Registry>(duet::open_registry());
  return shared_devices;
}

struct CloseDevices : ::testing::Environment {
  void TearDown() override { shared_devices.reset(); }
};
[[maybe_unused]] ::testing::Environment* const close_devices =
    ::testing::AddGlobalTestEnvironment(new CloseDevices);

duet::Device* device_or_skip_reason(const std::string& id, std::string* why) {
  duet::Device* d = registry()->find(id);
  if (d) return d;
  const std::string backend = id.substr(0, id.find(':'));
  *why = id + " is not on this machine";
  for (const duet::BackendReport& b : registry()->backends())
    if (b.backend == backend && !b.reason.empty()) *why += ": " + b.reason;
  return nullptr;
}

duet::Graph parsed(int rows) {
  auto g = duet::graph_from_json(small_graph_json(rows));
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? std::move(*g) : duet::Graph();
}

// One run of `e` on rows of `seed`, checked; false (with the reason in `f`) when it failed.
bool run_and_check(duet::Engine& e, int rows, float seed, Failures& f, const std::string& who) {
  const std::vector<float> x = small_graph_input(rows, seed);
  duet::HostTensor t = duet::HostTensor::empty(duet::DType::f32, std::vector<int64_t>{rows, kK});
  std::copy(x.begin(), x.end(), t.data<float>());
  auto out = e.run({{"x", t}});
  if (!out.ok()) {
    f.fail(who + ": " + out.status().message());
    return false;
  }
  auto y = out->find("y");
  const double err =
      small_graph_error(x, y == out->end() ? nullptr : y->second.data<float>(), rows);
  if (!(err < kTolerance) || y->second.numel() != rows * kN) {
    f.fail(who + ": rows " + std::to_string(rows) + " off by " + std::to_string(err));
    return false;
  }
  ++f.good;
  return true;
}

class Concurrency : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    device_ = device_or_skip_reason(GetParam(), &why);
    if (!device_) GTEST_SKIP() << why;
  }
  duet::Device* device_ = nullptr;
};

TEST_P(Concurrency, SeveralThreadsShareOneEngineThroughTheCppApi) {
  auto e = duet::Engine::create(parsed(4), {device_}, {}, registry());
  ASSERT_TRUE(e.ok()) << e.status().message();
  duet::Engine& engine = **e;
  constexpr int kThreads = 4, kRuns = 4;
  Failures f;
  std::atomic<bool> running{true};
  // One more thread reads the plan in words and the number of plans while the others run, and
  // the runners alternate between two shapes, so that runs re-plan under each other.
  std::thread reader([&] {
    while (running.load()) {
      if (engine.explain().find("matmul") == std::string::npos) f.fail("explain lost the matmul");
      if (engine.plans_made() < 1) f.fail("no plan made");
    }
  });
  on_threads(kThreads, [&](int t) {
    for (int r = 0; r < kRuns; ++r)
      run_and_check(engine, (t + r) % 2 ? 8 : 4, float(t * 100 + r), f,
                    "thread " + std::to_string(t));
  });
  running = false;
  reader.join();
  EXPECT_EQ(f.good.load(), kThreads * kRuns) << f.first();
  EXPECT_GE(engine.plans_made(), 2) << "both shapes ran";
}

TEST_P(Concurrency, OneEnginePerThreadOnASharedDeviceThroughTheCppApi) {
  constexpr int kThreads = 4, kRuns = 3;
  Failures f;
  // Each thread makes its engine (planned and its constants uploaded while the others do the
  // same), runs it and destroys it while others may still run theirs on the same device.
  on_threads(kThreads, [&](int t) {
    auto e = duet::Engine::create(parsed(4 + t), {device_}, {}, registry());
    if (!e.ok()) return f.fail("engine " + std::to_string(t) + ": " + e.status().message());
    for (int r = 0; r < kRuns; ++r)
      run_and_check(**e, 4 + t, float(t * 10 + r), f, "engine " + std::to_string(t));
  });
  EXPECT_EQ(f.good.load(), kThreads * kRuns) << f.first();
}

// ---- the C API --------------------------------------------------------------------------

struct CGraph {
  duet_graph* g = nullptr;
  ~CGraph() { duet_graph_destroy(g); }
};
struct CEngine {
  duet_engine* e = nullptr;
  ~CEngine() { duet_engine_destroy(e); }
};
struct CTensor {
  duet_tensor* t = nullptr;
  ~CTensor() { duet_tensor_destroy(t); }
};

// One run through the C API, checked.
bool c_run_and_check(duet_engine* e, int rows, float seed, Failures& f, const std::string& who) {
  const std::vector<float> x = small_graph_input(rows, seed);
  const int64_t shape[2] = {rows, kK};
  CTensor in, out;
  if (duet_tensor_create(DUET_F32, shape, 2, x.data(), &in.t) != DUET_OK) {
    f.fail(who + ": " + duet_last_error());
    return false;
  }
  const char* names[1] = {"x"};
  const duet_tensor* inputs[1] = {in.t};
  if (duet_engine_run(e, names, inputs, 1, &out.t, 1) != DUET_OK) {
    f.fail(who + ": " + duet_last_error());  // the message of this thread's call
    return false;
  }
  const double err =
      duet_tensor_numel(out.t) == rows * kN
          ? small_graph_error(x, static_cast<const float*>(duet_tensor_data(out.t)), rows)
          : INFINITY;
  if (!(err < kTolerance)) {
    f.fail(who + ": rows " + std::to_string(rows) + " off by " + std::to_string(err));
    return false;
  }
  ++f.good;
  return true;
}

std::string device_policy(const std::string& device) {
  return "device=" + device;
}

TEST_P(Concurrency, SeveralThreadsShareOneEngineThroughTheCApi) {
  CGraph g;
  ASSERT_EQ(duet_graph_parse(small_graph_json(4).c_str(), nullptr, &g.g), DUET_OK)
      << duet_last_error();
  CEngine e;
  ASSERT_EQ(duet_engine_create(g.g, device_policy(GetParam()).c_str(), &e.e), DUET_OK)
      << duet_last_error();
  constexpr int kThreads = 4, kRuns = 4;
  Failures f;
  std::atomic<bool> running{true};
  std::thread reader([&] {
    while (running.load()) {
      char* text = nullptr;
      if (duet_engine_explain(e.e, &text) != DUET_OK) f.fail(duet_last_error());
      duet_string_free(text);
      if (duet_engine_output_count(e.e) != 1) f.fail("the output count changed");
    }
  });
  on_threads(kThreads, [&](int t) {
    for (int r = 0; r < kRuns; ++r)
      c_run_and_check(e.e, (t + r) % 2 ? 8 : 4, float(t * 100 + r), f,
                      "thread " + std::to_string(t));
  });
  running = false;
  reader.join();
  EXPECT_EQ(f.good.load(), kThreads * kRuns) << f.first();
}

TEST_P(Concurrency, OneEnginePerThreadThroughTheCApi) {
  // Each thread parses its own graph and makes its own engine; the devices are the C API's
  // (opened by the first engine, closed with the last): threads open and close them as well.
  constexpr int kThreads = 4, kRuns = 2;
  Failures f;
  const std::string policy = device_policy(GetParam());
  on_threads(kThreads, [&](int t) {
    for (int round = 0; round < 2; ++round) {
      CGraph g;
      CEngine e;
      if (duet_graph_parse(small_graph_json(4 + t).c_str(), nullptr, &g.g) != DUET_OK ||
          duet_engine_create(g.g, policy.c_str(), &e.e) != DUET_OK)
        return f.fail("engine " + std::to_string(t) + ": " + duet_last_error());
      for (int r = 0; r < kRuns; ++r)
        c_run_and_check(e.e, 4 + t, float(t * 10 + r + round), f, "engine " + std::to_string(t));
    }
  });
  EXPECT_EQ(f.good.load(), kThreads * kRuns * 2) << f.first();
}

INSTANTIATE_TEST_SUITE_P(Devices, Concurrency, ::testing::Values("cpu:0", "vulkan:0"),
                         [](const auto& p) { return p.param.substr(0, p.param.find(':')); });

// Engines of every device kind at once, through both APIs, from one registry and the C API's.
TEST(ConcurrencyAcrossDevices, EnginesOnEveryDeviceRunAtOnceThroughBothApis) {
  std::vector<std::string> ids;
  for (duet::Device* d : registry()->devices())
    if (d->id() == "cpu:0" || d->id() == "vulkan:0") ids.push_back(d->id());
  ASSERT_FALSE(ids.empty());
  Failures f;
  std::vector<std::unique_ptr<duet::Engine>> cpp;
  std::vector<CEngine> c(ids.size());
  CGraph g;
  ASSERT_EQ(duet_graph_parse(small_graph_json(4).c_str(), nullptr, &g.g), DUET_OK)
      << duet_last_error();
  for (size_t i = 0; i < ids.size(); ++i) {
    auto e = duet::Engine::create(parsed(4), {registry()->find(ids[i])}, {}, registry());
    ASSERT_TRUE(e.ok()) << ids[i] << ": " << e.status().message();
    cpp.push_back(std::move(*e));
    ASSERT_EQ(duet_engine_create(g.g, device_policy(ids[i]).c_str(), &c[i].e), DUET_OK)
        << duet_last_error();
  }
  constexpr int kRuns = 3;
  const int engines = int(ids.size());
  on_threads(2 * engines, [&](int t) {
    const size_t i = size_t(t % engines);
    for (int r = 0; r < kRuns; ++r) {
      if (t < engines)
        run_and_check(*cpp[i], 4, float(t + r), f, "C++ on " + ids[i]);
      else
        c_run_and_check(c[i].e, 4, float(t + r), f, "C on " + ids[i]);
    }
  });
  EXPECT_EQ(f.good.load(), 2 * engines * kRuns) << f.first();
}

}  // namespace
