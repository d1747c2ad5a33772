// Threads on an emulated CUDA device (the CUDA device over the fake driver, kernels on the host
// emulator, an A100's record): several threads on one engine and one engine per thread, the
// device shared, every answer against the float64 reference. (tests/concurrency/ does the same on
// the CPU and Vulkan through libduet.so.)
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "duet/engine.h"
#include "duet/graph_file.h"
#include "emulated.h"
#include "support/small_graph.h"

namespace duet {
namespace {

constexpr int kRows = 4;

bool run_checked(Engine& e, float seed) {
  const std::vector<float> x = test_support::small_graph_input(kRows, seed);
  HostTensor t = HostTensor::empty(DType::f32, std::vector<int64_t>{kRows, 16});
  std::copy(x.begin(), x.end(), t.data<float>());
  auto out = e.run({{"x", t}});
  if (!out.ok() || !out->count("y")) return false;
  return test_support::small_graph_error(x, out->at("y").data<float>(), kRows) < 1e-5;
}

std::unique_ptr<Engine> engine_on(Device* d) {
  auto g = graph_from_json(test_support::small_graph_json(kRows));
  EXPECT_TRUE(g.ok()) << g.status().message();
  if (!g.ok()) return nullptr;
  auto e = Engine::create(std::move(*g), {d});
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(*e) : nullptr;
}

TEST(EmuConcurrency, ThreadsShareOneEngineAndEachHasItsOwnOnOneEmulatedCudaDevice) {
  std::unique_ptr<Device> dev = cuda::testing::open_emulated("a100");
  ASSERT_TRUE(dev);
  std::unique_ptr<Engine> shared = engine_on(dev.get());
  ASSERT_TRUE(shared);
  constexpr int kThreads = 3, kRuns = 2;
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRuns; ++r) good += run_checked(*shared, float(t * 10 + r));
    });
    threads.emplace_back([&, t] {
      std::unique_ptr<Engine> own = engine_on(dev.get());
      for (int r = 0; own && r < kRuns; ++r) good += run_checked(*own, float(t * 10 + r + 5));
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(good.load(), 2 * kThreads * kRuns);
}

}  // namespace
}  // namespace duet
