// Allocation fault injection (duet/internal/fault.h, builds with DUET_FAULT_INJECTION=ON: the
// debug presets): a representative run (a graph with constants and four op kinds parsed,
// planned, its constants uploaded, run and checked) is made once to count its allocations, then
// once for every allocation n with the n-th failing. Each failure must come back as an
// out_of_memory error naming the bytes and where they were wanted (the tensor, the device or
// host memory), never as an exception, a crash or a wrong answer; afterwards the engine that
// failed (when it was made) and a new one both run the graph correctly. Under the sanitizer
// presets LeakSanitizer checks at exit that no failure leaked what was already allocated.
// Two more sweeps reach what that run does not: the CPU kernels' scratch (a graph whose kernels
// pack, convert and gather), and the host staging of copies between the CPU and Vulkan (a graph
// split over both).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "duet/backends.h"
#include "duet/engine.h"
#include "duet/graph_file.h"
#include "duet/internal/fault.h"
#include "duet/quantize.h"
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

// Makes an engine into *engine and runs it once, checking the answer.
using MakeAndRun = std::function<Status(std::unique_ptr<Engine>* engine, float seed)>;
// Runs an engine made earlier once more, checking the answer.
using RunAgain = std::function<Status(Engine& engine)>;

// Counts the allocations of `make_and_run`, then repeats it once for every allocation with that
// one failing. Each failure must be an out_of_memory error naming the bytes and `where` (one of
// the strings); then the engine that failed (when it was made) and a new one must run correctly.
// Returns the messages of the failures.
std::vector<std::string> sweep(const MakeAndRun& make_and_run, const RunAgain& run_again,
                               const std::vector<std::string>& where) {
  fault::reset();
  {
    std::unique_ptr<Engine> e;
    const Status clean = make_and_run(&e, 1);
    EXPECT_TRUE(clean.ok()) << clean.message();
    if (!clean.ok()) return {};
  }
  const int64_t total = fault::allocations();
  EXPECT_GE(total, 5) << "the run allocates host tensors, constants and the memory plan";
  std::vector<std::string> messages;
  for (int64_t n = 0; n < total; ++n) {
    SCOPED_TRACE("allocation " + std::to_string(n) + " of " + std::to_string(total));
    fault::reset();
    fault::arm(n);
    std::unique_ptr<Engine> e;
    Status s;
    try {
      s = make_and_run(&e, float(n));
    } catch (const std::exception& x) {
      ADD_FAILURE() << "an exception escaped: " << x.what();
    }
    const bool fired = fault::fired();
    fault::disarm();
    if (!fired) continue;  // this run made fewer allocations (a cache was warm)
    messages.push_back(s.message());
    if (std::getenv("DUET_TEST_VERBOSE"))
      std::printf("allocation %lld: %s\n", static_cast<long long>(n), s.message().c_str());
    EXPECT_FALSE(s.ok()) << "an allocation failed and the run said nothing";
    EXPECT_EQ(s.code(), Code::out_of_memory) << s.message();
    EXPECT_NE(s.message().find(" bytes"), std::string::npos) << s.message();
    bool named = false;
    for (const std::string& w : where) named = named || s.message().find(w) != std::string::npos;
    EXPECT_TRUE(named) << "names none of " << ::testing::PrintToString(where) << ": "
                       << s.message();
    // The engine that failed (when it was made) still runs, and so does a new one.
    if (e) {
      const Status again = run_again(*e);
      EXPECT_TRUE(again.ok()) << "the engine after the failure: " << again.message();
    }
    std::unique_ptr<Engine> fresh;
    const Status after = make_and_run(&fresh, 9);
    EXPECT_TRUE(after.ok()) << "a new engine after the failure: " << after.message();
  }
  EXPECT_GE(static_cast<int64_t>(messages.size()), total / 2)
      << "most of the counted allocations were made to fail";
  ::testing::Test::RecordProperty("allocations_failed", std::to_string(messages.size()));
  return messages;
}

// How many of `messages` hold every one of `parts`.
int count_with(const std::vector<std::string>& messages, const std::vector<std::string>& parts) {
  int n = 0;
  for (const std::string& m : messages) {
    bool all = true;
    for (const std::string& p : parts) all = all && m.find(p) != std::string::npos;
    n += all;
  }
  return n;
}

TEST_P(AllocationFaults, EveryAllocationOfAPlanAndRunFailsAsAnErrorAndTheEngineRunsAfterwards) {
  sweep([&](std::unique_ptr<Engine>* e, float seed) { return make_and_run(device_, e, seed); },
        [](Engine& e) { return run_checked(e, 7); }, {"host memory", device_->id()});
}

INSTANTIATE_TEST_SUITE_P(Devices, AllocationFaults,
                         ::testing::Values("cpu:0", "vulkan:0", "vulkan:0+staging"),
                         [](const auto& p) {
                           std::string name = p.param.substr(0, p.param.find(':'));
                           return p.param.ends_with("+staging") ? name + "_staging" : name;
                         });

// ---- the CPU kernels' scratch ----------------------------------------------------------------

// Constant values for the JSON: small, never zero.
std::string json_values(int n, double phase) {
  std::string v;
  for (int i = 0; i < n; ++i)
    v += (i ? ", " : "") + std::to_string(0.25 * std::sin(0.37 * i + phase) + 0.01);
  return v;
}

// Kernels that need scratch sized by their inputs: a matmul of more than 8 rows (packed A and B
// panels), a cast of a transposed view (a dense copy), a softmax of f16 (converted to f32 and its
// output back), attention in its prefill form (packed K and V, tiles) and its decode form, and an
// embedding (the ids), and a matmul with a q8_0 weight (activations quantized, weight tiles
// unpacked; the weight is bound, not read from its file).
std::string kernel_graph_json() {
  return R"({"format": "duet-graph", "version": 1, "name": "kernels",
    "inputs": [{"name": "x", "dtype": "f32", "shape": [16, 32]},
               {"name": "q", "dtype": "f32", "shape": [1, 2, 64, 16]},
               {"name": "qd", "dtype": "f32", "shape": [1, 2, 1, 16]},
               {"name": "k", "dtype": "f32", "shape": [1, 2, 64, 16]},
               {"name": "v", "dtype": "f32", "shape": [1, 2, 64, 16]},
               {"name": "ids", "dtype": "i32", "shape": [6]}],
    "constants": [{"name": "w", "dtype": "f32", "shape": [32, 24], "values": [)" +
         json_values(32 * 24, 0.5) + R"(]},
                  {"name": "table", "dtype": "f32", "shape": [10, 8], "values": [)" +
         json_values(80, 1.5) + R"(]},
                  {"name": "wq", "dtype": "q8_0", "shape": [24, 32], "file": "w.gguf", "key": "wq"}],
    "nodes": [{"name": "m", "op": "matmul", "inputs": ["x", "w"]},
              {"name": "mt", "op": "transpose", "inputs": ["m"], "attrs": {"dim0": 0, "dim1": 1}},
              {"name": "h", "op": "cast", "inputs": ["mt"], "attrs": {"to": "f16"}},
              {"name": "sm", "op": "softmax", "inputs": ["h"]},
              {"name": "ap", "op": "attention", "inputs": ["q", "k", "v"], "attrs": {"causal": true}},
              {"name": "ad", "op": "attention", "inputs": ["qd", "k", "v"]},
              {"name": "e", "op": "embedding", "inputs": ["table", "ids"]},
              {"name": "mq", "op": "matmul", "inputs": ["x", "wq"], "attrs": {"transpose_b": true}}],
    "outputs": ["sm", "ap", "ad", "e", "mq"]})";
}

// The q8_0 weight of the kernel graph, made once.
const HostTensor& kernel_graph_q8_weight() {
  static const HostTensor w = [] {
    HostTensor f = HostTensor::empty(DType::f32, std::vector<int64_t>{24, 32});
    for (int64_t i = 0; i < 24 * 32; ++i)
      f.data<float>()[i] = 0.25f * std::sin(0.37f * float(i) + 2.5f) + 0.01f;
    return *quantize(f, DType::q8_0, "wq");
  }();
  return w;
}

// The kernel graph, its q8_0 weight bound.
Result<Graph> kernel_graph() {
  DUET_ASSIGN_OR_RETURN(Graph g,
                        graph_from_json(kernel_graph_json(), ".", {.load_constants = false}));
  DUET_TRY(g.bind_constant("wq", kernel_graph_q8_weight()));
  return g;
}

// The inputs of a graph, never zero (ids in [0, 10)), made the way that reports a failure.
Result<std::map<std::string, HostTensor>> inputs_for(const Graph& g, float seed) {
  std::map<std::string, HostTensor> in;
  for (int id : g.inputs()) {
    const GraphValue& v = g.value(id);
    const TensorDesc d = TensorDesc::contiguous(v.desc.dtype, v.desc.dims());
    DUET_ASSIGN_OR_RETURN(HostTensor t, HostTensor::with_storage(d, uint64_t(d.nbytes())));
    for (int64_t i = 0; i < d.numel(); ++i) {
      if (d.dtype == DType::i32)
        t.data<int32_t>()[i] = static_cast<int32_t>((i * 7 + static_cast<int64_t>(seed)) % 10);
      else
        t.data<float>()[i] = std::sin(seed + 0.7f * float(i)) + 0.05f;
    }
    in.emplace(v.name, std::move(t));
  }
  return in;
}

// Inputs and the answers to them of an engine planned in f64 (the CPU's float64 reference tier;
// the cast and the embedding, which are exact, in the CPU's own kernels), made before the sweep
// so that its allocations are not among those failed.
struct Case {
  std::map<std::string, HostTensor> in, want;
};

// Runs `e` on `c` and compares every output with the reference: within 2e-3 for f16 outputs,
// 3e-2 for the q8_0 matmul (its activations are quantized to 8 bits), 1e-5 else.
Status run_against(Engine& e, const Case& c) {
  DUET_ASSIGN_OR_RETURN(auto out, e.run(c.in));
  for (const auto& [name, w] : c.want) {
    auto y = out.find(name);
    if (y == out.end()) return Status(Code::internal, "no output '" + name + "'");
    const std::vector<double> a = y->second.to_doubles(), b = w.to_doubles();
    const double tol = w.desc().dtype == DType::f16 ? 2e-3 : name == "mq" ? 3e-2 : 1e-5;
    for (size_t i = 0; i < b.size(); ++i)
      if (!(std::fabs(a[i] - b[i]) <= tol * (1 + std::fabs(b[i]))))
        return Status(Code::internal, "output '" + name + "' element " + std::to_string(i) + ": " +
                                          std::to_string(a[i]) + ", the reference " +
                                          std::to_string(b[i]));
  }
  return {};
}

TEST(AllocationFaults, EveryScratchBufferOfTheCpuKernelsFailsAsAnErrorNamingTheOp) {
  if (!fault::available())
    GTEST_SKIP() << "built without DUET_FAULT_INJECTION (the debug presets have it)";
  Registry registry = open_registry();
  Device* cpu = registry.find("cpu:0");
  ASSERT_NE(cpu, nullptr);
  std::vector<Case> cases(4);
  {
    auto reference = Engine::create(*kernel_graph(), {cpu}, *parse_policy("precision=f64"));
    ASSERT_TRUE(reference.ok()) << reference.status().message();
    for (size_t k = 0; k < cases.size(); ++k) {
      auto in = inputs_for((*reference)->graph(), float(k));
      ASSERT_TRUE(in.ok()) << in.status().message();
      auto want = (*reference)->run(*in);
      ASSERT_TRUE(want.ok()) << want.status().message();
      cases[k] = {std::move(*in), std::move(*want)};
    }
  }
  const auto messages = sweep(
      [&](std::unique_ptr<Engine>* e, float seed) -> Status {
        DUET_ASSIGN_OR_RETURN(Graph g, kernel_graph());
        DUET_ASSIGN_OR_RETURN(*e, Engine::create(std::move(g), {cpu}));
        return run_against(**e, cases[size_t(seed) % cases.size()]);
      },
      [&](Engine& e) { return run_against(e, cases[3]); }, {"host memory", "cpu:0"});
  // Each kernel's scratch was reached and named with its op and device.
  for (const char* op : {"matmul 'm'", "cast 'h'", "softmax 'sm'", "attention 'ap'",
                         "attention 'ad'", "embedding 'e'", "matmul 'mq'"})
    EXPECT_GE(count_with(messages, {op, "cpu:0", "bytes of scratch for"}), 1)
        << "no failed scratch of " << op << " among:\n"
        << ::testing::PrintToString(messages);
}

// ---- copies between two devices ---------------------------------------------------------------

constexpr int kSplitWidth = 32, kSplitLayers = 4;

// x [4, 32] through four matmul + silu layers, each weight 4 KiB: with a budget of 10 KiB per
// device the first two layers run on one device and the last two on the other.
std::string split_graph_json() {
  std::string consts, nodes, x = "x";
  for (int i = 0; i < kSplitLayers; ++i) {
    const std::string w = "w" + std::to_string(i), m = "m" + std::to_string(i),
                      y = "s" + std::to_string(i);
    consts += std::string(i ? ", " : "") + R"({"name": ")" + w +
              R"(", "dtype": "f32", "shape": [32, 32], "values": [)" +
              json_values(kSplitWidth * kSplitWidth, i) + "]}";
    nodes += std::string(i ? ", " : "") + R"({"name": ")" + m +
             R"(", "op": "matmul", "inputs": [")" + x + R"(", ")" + w + R"("]}, {"name": ")" + y +
             R"(", "op": "silu", "inputs": [")" + m + R"("]})";
    x = y;
  }
  return R"({"format": "duet-graph", "version": 1, "name": "split",
    "inputs": [{"name": "x", "dtype": "f32", "shape": [4, 32]}], "constants": [)" +
         consts + R"(], "nodes": [)" + nodes + R"(], "outputs": [")" + x + R"("]})";
}

// The float64 answer of the split graph.
std::vector<double> split_reference(const HostTensor& x) {
  std::vector<double> a = x.to_doubles();
  for (int l = 0; l < kSplitLayers; ++l) {
    std::vector<double> y(a.size());
    for (int r = 0; r < 4; ++r)
      for (int n = 0; n < kSplitWidth; ++n) {
        double acc = 0;
        for (int k = 0; k < kSplitWidth; ++k)
          acc +=
              a[size_t(r * kSplitWidth + k)] *
              std::stod(std::to_string(0.25 * std::sin(0.37 * (k * kSplitWidth + n) + l) + 0.01));
        y[size_t(r * kSplitWidth + n)] = acc / (1 + std::exp(-acc));
      }
    a = std::move(y);
  }
  return a;
}

Status run_split(Engine& e, float seed) {
  DUET_ASSIGN_OR_RETURN(auto in, inputs_for(e.graph(), seed));
  DUET_ASSIGN_OR_RETURN(auto out, e.run(in));
  const std::vector<double> want = split_reference(in.at("x"));
  auto y = out.find("s3");
  if (y == out.end()) return Status(Code::internal, "no output 's3'");
  const std::vector<double> got = y->second.to_doubles();
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-4 * (1 + std::fabs(want[i]))))
      return Status(Code::internal, "wrong answer at " + std::to_string(i) + ": " +
                                        std::to_string(got[i]) + " for " + std::to_string(want[i]));
  return {};
}

TEST(AllocationFaults, EveryStagingOfACopyBetweenTheCpuAndVulkanFailsAsAnError) {
  if (!fault::available())
    GTEST_SKIP() << "built without DUET_FAULT_INJECTION (the debug presets have it)";
  Registry registry = open_registry();
  Device* cpu = registry.find("cpu:0");
  Device* vulkan = registry.find("vulkan:0");
  if (!cpu || !vulkan) GTEST_SKIP() << "needs cpu:0 and vulkan:0";
  const Policy policy = *parse_policy("budget=10KiB");
  {
    auto e = Engine::create(*graph_from_json(split_graph_json()), {cpu, vulkan}, policy);
    ASSERT_TRUE(e.ok()) << e.status().message();
    ASSERT_EQ((*e)->plan().devices_used().size(), 2u) << (*e)->explain();
    ASSERT_GE((*e)->plan().copies().size(), 1u) << (*e)->explain();
  }
  const auto messages = sweep(
      [&](std::unique_ptr<Engine>* e, float seed) -> Status {
        DUET_ASSIGN_OR_RETURN(Graph g, graph_from_json(split_graph_json()));
        DUET_ASSIGN_OR_RETURN(*e, Engine::create(std::move(g), {cpu, vulkan}, policy));
        return run_split(**e, seed);
      },
      [&](Engine& e) { return run_split(e, 7); }, {"host memory", "cpu:0", "vulkan:0"});
  EXPECT_GE(count_with(messages, {"copying '", "to stage the copy of ", " from cpu:0 to vulkan:0"}),
            1)
      << "no failed staging of the copy between the devices among:\n"
      << ::testing::PrintToString(messages);
}

}  // namespace
}  // namespace duet
