// Allocation fault injection (duet/internal/fault.h, builds with DUET_FAULT_INJECTION=ON: the
// debug presets): a representative run (a graph with constants and four op kinds parsed,
// planned, its constants uploaded, run and checked) is made once to count its allocations, then
// once for every allocation n with the n-th failing. Each failure must come back as an
// out_of_memory error naming the bytes and where they were wanted (the tensor, the device or
// host memory), never as an exception, a crash or a wrong answer; afterwards the engine that
// failed (when it was made) and a new one both run the graph correctly. Under the sanitizer
// presets LeakSanitizer checks at exit that no failure leaked what was already allocated.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "duet/backends.h"
#include "duet/engine.h"
#include "duet/graph_file.h"
#include "duet/internal/fault.h"
#include "support/small_graph.h"

namespace duet {
namespace {

using test_support::small_graph_error;
using test_support::small_graph_input;
using test_support::small_graph_json;

constexpr int kRows = 8;

// Runs `e` once and checks the answer; a wrong answer is an error too. The input tensor is an
// allocation of the run as well (made the way that reports a failure as an error).
Status run_checked(Engine& e, float seed) {
  const std::vector<float> x = small_graph_input(kRows, seed);
  const TensorDesc d = TensorDesc::contiguous(DType::f32, std::vector<int64_t>{kRows, 16});
  DUET_ASSIGN_OR_RETURN(HostTensor t, HostTensor::with_storage(d, uint64_t(d.nbytes())));
  std::copy(x.begin(), x.end(), t.data<float>());
  DUET_ASSIGN_OR_RETURN(auto out, e.run({{"x", t}}));
  auto y = out.find("y");
  const double err =
      small_graph_error(x, y == out.end() ? nullptr : y->second.data<float>(), kRows);
  if (!(err < 1e-5)) return Status(Code::internal, "wrong answer, off by " + std::to_string(err));
  return {};
}

// Parses the graph, makes an engine on `device` (planned, constants uploaded) and runs it once.
Status make_and_run(Device* device, std::unique_ptr<Engine>* engine, float seed) {
  DUET_ASSIGN_OR_RETURN(Graph g, graph_from_json(small_graph_json(kRows)));
  DUET_ASSIGN_OR_RETURN(*engine, Engine::create(std::move(g), {device}));
  return run_checked(**engine, seed);
}

// The device to sweep: "cpu:0", "vulkan:0", or "vulkan:0+staging" (copies through staging
// buffers, as on a GPU whose memory the host cannot map).
class AllocationFaults : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!fault::available())
      GTEST_SKIP() << "built without DUET_FAULT_INJECTION (the debug presets have it)";
    const std::string id = GetParam().substr(0, GetParam().find('+'));
    BackendOptions o;
    // Vulkan memory blocks of 256 bytes: every tensor gets a block of its own (a VkBuffer and a
    // vkAllocateMemory), so that the sweep fails each (with 256 MiB blocks one allocation made
    // when the device opened serves every tensor of the graph).
    o.values["vulkan.block_bytes"] = "256";
    if (GetParam().ends_with("+staging")) o.values["vulkan.force_staging"] = "1";
    registry_ = std::make_unique<Registry>(open_registry(o));
    device_ = registry_->find(id);
    if (!device_) GTEST_SKIP() << id << " is not on this machine";
  }
  void TearDown() override { fault::reset(); }

  std::unique_ptr<Registry> registry_;
  Device* device_ = nullptr;
};

TEST_P(AllocationFaults, EveryAllocationOfAPlanAndRunFailsAsAnErrorAndTheEngineRunsAfterwards) {
  fault::reset();
  {
    std::unique_ptr<Engine> e;
    const Status clean = make_and_run(device_, &e, 1);
    ASSERT_TRUE(clean.ok()) << clean.message();
  }
  const int64_t total = fault::allocations();
  ASSERT_GE(total, 5) << "the run allocates host tensors, constants and the memory plan";
  int64_t failed = 0;
  for (int64_t n = 0; n < total; ++n) {
    SCOPED_TRACE("allocation " + std::to_string(n) + " of " + std::to_string(total));
    fault::reset();
    fault::arm(n);
    std::unique_ptr<Engine> e;
    Status s;
    try {
      s = make_and_run(device_, &e, float(n));
    } catch (const std::exception& x) {
      ADD_FAILURE() << "an exception escaped: " << x.what();
    }
    const bool fired = fault::fired();
    fault::disarm();
    if (!fired) continue;  // this run made fewer allocations (a cache was warm)
    ++failed;
    if (std::getenv("DUET_TEST_VERBOSE"))
      std::printf("allocation %lld: %s\n", static_cast<long long>(n), s.message().c_str());
    EXPECT_FALSE(s.ok()) << "an allocation failed and the run said nothing";
    EXPECT_EQ(s.code(), Code::out_of_memory) << s.message();
    EXPECT_NE(s.message().find(" bytes"), std::string::npos) << s.message();
    const bool where = s.message().find("host memory") != std::string::npos ||
                       s.message().find(device_->id()) != std::string::npos;
    EXPECT_TRUE(where) << "names neither host memory nor " << device_->id() << ": " << s.message();
    // The engine that failed (when it was made) still runs, and so does a new one.
    if (e) {
      const Status again = run_checked(*e, 7);
      EXPECT_TRUE(again.ok()) << "the engine after the failure: " << again.message();
    }
    std::unique_ptr<Engine> fresh;
    const Status after = make_and_run(device_, &fresh, 9);
    EXPECT_TRUE(after.ok()) << "a new engine after the failure: " << after.message();
  }
  EXPECT_GE(failed, total / 2) << "most of the counted allocations were made to fail";
  RecordProperty("allocations_failed", std::to_string(failed));
}

INSTANTIATE_TEST_SUITE_P(Devices, AllocationFaults,
                         ::testing::Values("cpu:0", "vulkan:0", "vulkan:0+staging"),
                         [](const auto& p) {
                           std::string name = p.param.substr(0, p.param.find(':'));
                           return p.param.ends_with("+staging") ? name + "_staging" : name;
                         });

}  // namespace
}  // namespace duet
