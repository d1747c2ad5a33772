// The executor on real devices: plans run in dependency order on one or several devices, views by
// aliasing, copies where values cross, and the results match the float64 CPU reference.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "cpu_backend.h"
#include "duet/backends.h"
#include "duet/builtin_engine.h"
#include "duet/engine.h"
#include "duet/planner.h"
#include "graph_reference.h"

namespace duet::testing_graph {
namespace {

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

// Test rules over a backend's: refuse some op kinds, or (over the CPU's) offer only f16 kernels
// for floating-point math, like a device without bf16 whose only fast kernels are f16.
class TestRules final : public BackendRules {
 public:
  TestRules(const BackendRules& base, std::set<OpKind> refuse, bool f16_only)
      : base_(base), refuse_(std::move(refuse)), f16_(f16_only) {}
  BackendKind backend() const override { return base_.backend(); }
  std::vector<KernelChoice> choices(const DeviceCaps& caps, const OpDesc& op) const override {
    std::vector<KernelChoice> out = base_.choices(caps, op);
    const bool data = op.kind == OpKind::cast || op.kind == OpKind::copy ||
                      op.kind == OpKind::concat || op.kind == OpKind::embedding;
    if (f16_ && !data) {
      KernelChoice h = out[0];
      h.precision = Precision::f16;
      h.reason = "f16 kernel (test device without bf16)";
      for (size_t i = 0; i < op.inputs.size(); ++i) {
        const bool mask =
            (op.kind == OpKind::attention && i == 3) || (op.kind == OpKind::softmax && i == 1);
        if (is_float(op.inputs[i].dtype) && !(mask && op.inputs[i].dtype == DType::f32))
          h.input_dtypes[i] = DType::f16;
      }
      if (is_float(op.output.dtype)) h.output_dtype = DType::f16;
      out[0] = h;  // instead of the f32 kernel, which would read bf16 as it is
    }
    for (KernelChoice& c : out)
      if (refuse_.count(op.kind)) {
        c.ok = false;
        c.reason = "test device: no " + std::string(op_name(op.kind)) + " kernel";
      }
    return out;
  }

 private:
  const BackendRules& base_;
  std::set<OpKind> refuse_;
  bool f16_;
};

// A CPU device of its own under another id with test rules; or another device (not owned)
// seen through test rules.
class TestDevice final : public Device {
 public:
  TestDevice(std::string id, std::set<OpKind> refuse = {}, bool f16_only = false)
      : id_(std::move(id)), rules_(cpu::rules(), std::move(refuse), f16_only) {
    BackendOptions o;
    o.values["cpu.threads"] = "2";
    auto r = cpu::factory().open(o);
    owned_ = std::move(r->devices[0]);
    inner_ = owned_.get();
    caps_ = inner_->caps();
    caps_.name = "test device " + id_;
  }
  TestDevice(Device& inner, std::set<OpKind> refuse)
      : id_(inner.id()),
        rules_(inner.rules(), std::move(refuse), false),
        inner_(&inner),
        caps_(inner.caps()) {}
  const std::string& id() const override { return id_; }
  const DeviceCaps& caps() const override { return caps_; }
  const BackendRules& rules() const override { return rules_; }
  Result<std::shared_ptr<Buffer>> allocate(uint64_t bytes) override {
    return inner_->allocate(bytes);
  }
  bool owns(const Buffer& b) const override { return inner_->owns(b); }
  Status synchronize() override { return inner_->synchronize(); }
  std::atomic<int> executed{0};
  // Reads fail as a device's copy does, naming the device ("on cpu:1: staging copy failed").
  std::atomic<bool> fail_reads{false};

 protected:
  Status write_checked(Buffer& b, uint64_t off, const void* src, uint64_t n) override {
    return inner_->write(b, off, src, n);
  }
  Status read_checked(Buffer& b, uint64_t off, void* dst, uint64_t n) override {
    if (fail_reads)
      return Err(Code::device_lost).device(id_).note("staging copy failed: VK_ERROR_DEVICE_LOST");
    return inner_->read(b, off, dst, n);
  }
  Status execute_checked(const PlannedOp& op, std::span<const TensorRef> in,
                         const TensorRef& out) override {
    ++executed;
    return inner_->execute(op, in, out);
  }

 private:
  std::string id_;
  TestRules rules_;
  std::unique_ptr<Device> owned_;
  Device* inner_ = nullptr;
  DeviceCaps caps_;
};

Device& host_cpu() {
  return *shared_registry()->find("cpu:0");
}

// An attention block: rope, causal attention, heads merged through views, a projection, norm.
Graph block_graph(DType t, int64_t len = 16) {
  GraphBuilder b("block");
  ValueId x = b.input("x", t, {2, 4, len, 32});
  ValueId w = b.constant("w", random_tensor(t, {128, 64}, 7));
  ValueId gamma = b.constant("gamma", random_tensor(t, {64}, 8));
  ValueId q = b.rope(x, 0, "q");
  ValueId a = b.attention(q, x, x, true, "attn");
  ValueId dense = b.copy(b.transpose(a, 1, 2, "heads_last"), "dense");
  ValueId p = b.matmul(b.reshape(dense, {2, -1, 128}, "merged"), w, false, "proj");
  ValueId n = b.rmsnorm(p, gamma, 1e-5f, "norm");
  b.output(b.silu(n, "y"));
  b.output(b.slice(a, 2, 1, 15, 2, "odd_rows"));  // a view as an output
  auto g = b.build();
  EXPECT_TRUE(g.ok()) << g.status().message();
  return std::move(*g);
}

void expect_matches(const Graph& g, const std::map<std::string, HostTensor>& inputs,
                    const std::map<std::string, HostTensor>& got, DType t) {
  auto want = reference_run(g, inputs);
  ASSERT_TRUE(want.ok()) << want.status().message();
  ASSERT_EQ(got.size(), want->size());
  for (const auto& [name, w] : *want) {
    ASSERT_TRUE(got.count(name)) << name;
    const HostTensor& h = got.at(name);
    EXPECT_EQ(h.desc(), TensorDesc::contiguous(g.value(*g.find(name)).desc.dtype,
                                               g.value(*g.find(name)).desc.dims()));
    const check::Metrics m = check::compare(h.to_doubles(), w, false);
    EXPECT_TRUE(check::passes(m, graph_tolerance(t)))
        << name << ": nmse " << m.nmse << " max_rel " << m.max_rel << " nan " << m.nan;
  }
}

std::map<std::string, HostTensor> inputs_for(const Graph& g, uint32_t seed) {
  std::map<std::string, HostTensor> in;
  for (int id : g.inputs()) {
    const GraphValue& v = g.value(id);
    in[v.name] = random_tensor(v.desc.dtype, {v.desc.dims().begin(), v.desc.dims().end()},
                               seed + static_cast<uint32_t>(id));
  }
  return in;
}

TEST(Executor, AnAttentionBlockOnTheCpuMatchesTheReference) {
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    Graph g = block_graph(t);
    auto e = Engine::create(g, {&host_cpu()});
    ASSERT_TRUE(e.ok()) << e.status().message();
    auto in = inputs_for(g, 1);
    auto out = (*e)->run(in);
    ASSERT_TRUE(out.ok()) << out.status().message();
    expect_matches(g, in, *out, t);
  }
}

TEST(Executor, ASplitAcrossTwoDevicesMatchesTheReference) {
  GraphBuilder b("stack");
  ValueId x = b.input("x", DType::f32, {8, 256});
  for (int i = 0; i < 6; ++i) {
    ValueId w = b.constant("w" + std::to_string(i), random_tensor(DType::f32, {256, 256}, 20 + i));
    x = b.add(x, b.scale(b.silu(b.matmul(x, w)), 0.25f));
  }
  b.output(x);
  Graph g = *b.build();
  TestDevice d0("cpu:1"), d1("cpu:2");
  auto policy = parse_policy("budget=800KiB");  // 3 of the 6 weights (256 KiB each) per device
  auto e = Engine::create(g, {&d0, &d1}, *policy);
  ASSERT_TRUE(e.ok()) << e.status().message();
  const Plan& p = (*e)->plan();
  EXPECT_EQ(p.devices_used().size(), 2u) << explain(p);
  EXPECT_EQ(p.copies().size(), 1u) << explain(p);
  auto in = inputs_for(g, 3);
  auto out = (*e)->run(in);
  ASSERT_TRUE(out.ok()) << out.status().message();
  expect_matches(g, in, *out, DType::f32);
  EXPECT_GT(d0.executed.load(), 0);
  EXPECT_GT(d1.executed.load(), 0);
}

TEST(Executor, ValuesPingPongBetweenDevicesThatEachLackAnOp) {
  GraphBuilder b("pingpong");
  ValueId x = b.input("x", DType::f32, {4, 3, 64});
  ValueId w = b.constant("w", random_tensor(DType::f32, {64, 64}, 5));
  for (int i = 0; i < 3; ++i) x = b.softmax(b.matmul(x, w, i % 2 == 1));
  b.output(x);
  Graph g = *b.build();
  TestDevice no_softmax("cpu:1", {OpKind::softmax}), no_matmul("cpu:2", {OpKind::matmul});
  auto e = Engine::create(g, {&no_softmax, &no_matmul});
  ASSERT_TRUE(e.ok()) << e.status().message();
  const Plan& p = (*e)->plan();
  EXPECT_EQ(p.copies().size(), 5u) << explain(p);
  for (const PlanStep& s : p.steps)
    if (s.kind == StepKind::kernel && s.node >= 0) {
      EXPECT_EQ(s.device, s.op.op.kind == OpKind::matmul ? 0 : 1) << s.name;
    }
  EXPECT_HAS(explain(p), "test device: no softmax kernel");
  auto in = inputs_for(g, 9);
  auto out = (*e)->run(in);
  ASSERT_TRUE(out.ok()) << out.status().message();
  expect_matches(g, in, *out, DType::f32);
}

// A copy that fails names its step and the device whose half failed, each once (the device's own
// error already says "on cpu:1").
TEST(Executor, AFailedCopyNamesTheStepAndTheDeviceOnce) {
  GraphBuilder b("pingpong");
  ValueId x = b.input("x", DType::f32, {4, 3, 64});
  ValueId w = b.constant("w", random_tensor(DType::f32, {64, 64}, 5));
  b.output(b.softmax(b.matmul(x, w), "y"));
  Graph g = *b.build();
  TestDevice no_softmax("cpu:1", {OpKind::softmax}), no_matmul("cpu:2", {OpKind::matmul});
  auto e = Engine::create(g, {&no_softmax, &no_matmul});
  ASSERT_TRUE(e.ok()) << e.status().message();
  no_softmax.fail_reads = true;  // the matmul's result cannot leave cpu:1
  auto out = (*e)->run(inputs_for(g, 1));
  ASSERT_FALSE(out.ok());
  const std::string m = out.status().message();
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = m.find(what); at != std::string::npos; at = m.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("cpu:1"), 1u) << m;
  EXPECT_EQ(count("cpu:2"), 1u) << m;
  // The half that failed ran on cpu:1 (the planner names the copy after its destination).
  EXPECT_HAS(m, "copying 'matmul0' to cpu:2: on cpu:1: staging copy failed");
}

TEST(Executor, IndependentBranchesRunOnBothDevicesAtOnce) {
  GraphBuilder b("branches");
  ValueId x = b.input("x", DType::f32, {64, 128});
  ValueId wa = b.constant("wa", random_tensor(DType::f32, {128, 128}, 1));
  ValueId wb = b.constant("wb", random_tensor(DType::f32, {128, 128}, 2));
  ValueId ya = x, yb = x;
  for (int i = 0; i < 4; ++i) {
    ya = b.softmax(b.matmul(ya, wa));
    yb = b.gelu(b.matmul(yb, wb));
  }
  b.output(b.concat({ya, yb}, 1, "both"));
  Graph g = *b.build();
  TestDevice d0("cpu:1", {OpKind::gelu}), d1("cpu:2", {OpKind::softmax});
  auto e = Engine::create(g, {&d0, &d1});
  ASSERT_TRUE(e.ok()) << e.status().message();
  auto in = inputs_for(g, 4);
  auto out = (*e)->run(in);
  ASSERT_TRUE(out.ok()) << out.status().message();
  expect_matches(g, in, *out, DType::f32);
  EXPECT_GE(d0.executed.load(), 8);
  EXPECT_GE(d1.executed.load(), 4);
}

TEST(Executor, Bf16OnADeviceWithoutBf16RunsInF16AndMatches) {
  Graph g = block_graph(DType::bf16);
  TestDevice turing_like("cpu:1", {}, /*f16_only=*/true);
  auto e = Engine::create(g, {&turing_like});
  ASSERT_TRUE(e.ok()) << e.status().message();
  const Plan& p = (*e)->plan();
  EXPECT_EQ(p.step("attn")->op.choice.precision, Precision::f16);
  int casts = 0;
  for (const PlanStep& s : p.steps) casts += s.kind == StepKind::kernel && s.node < 0 ? 1 : 0;
  EXPECT_GE(casts, 3) << explain(p);
  auto in = inputs_for(g, 2);
  auto out = (*e)->run(in);
  ASSERT_TRUE(out.ok()) << out.status().message();
  expect_matches(g, in, *out, DType::bf16);
  EXPECT_EQ(out->at("y").dtype(), DType::bf16);
}

TEST(Executor, RunsRepeatWithNewInputsWithoutReplanning) {
  Graph g = block_graph(DType::f32);
  auto e = Engine::create(g, {&host_cpu()});
  ASSERT_TRUE(e.ok()) << e.status().message();
  std::vector<double> first;
  for (uint32_t seed = 10; seed < 13; ++seed) {
    auto in = inputs_for(g, seed);
    auto out = (*e)->run(in);
    ASSERT_TRUE(out.ok()) << out.status().message();
    expect_matches(g, in, *out, DType::f32);
    if (first.empty())
      first = out->at("y").to_doubles();
    else
      EXPECT_NE(first, out->at("y").to_doubles());
  }
  EXPECT_EQ((*e)->plans_made(), 1);
  // New shapes re-plan, once per change.
  Graph longer = block_graph(DType::f32, 24);
  auto in = inputs_for(longer, 20);
  auto out = (*e)->run(in);
  ASSERT_TRUE(out.ok()) << out.status().message();
  expect_matches(longer, in, *out, DType::f32);
  EXPECT_EQ((*e)->plans_made(), 2);
  ASSERT_TRUE((*e)->run(inputs_for(longer, 21)).ok());
  EXPECT_EQ((*e)->plans_made(), 2);
}

TEST(Executor, ManyThreadsCanRunOneEngine) {
  Graph g = block_graph(DType::f32);
  TestDevice d0("cpu:1", {OpKind::rmsnorm}), d1("cpu:2");
  auto e = Engine::create(g, {&d0, &d1});
  ASSERT_TRUE(e.ok()) << e.status().message();
  Engine& engine = **e;
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 4; ++r) {
        auto in = inputs_for(g, static_cast<uint32_t>(100 + 10 * t + r));
        auto out = engine.run(in);
        auto want = reference_run(g, in);
        if (!out.ok() || !want.ok()) continue;
        const check::Metrics m = check::compare(out->at("y").to_doubles(), want->at("y"), false);
        if (check::passes(m, graph_tolerance(DType::f32))) ++good;
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(good.load(), 16);
}

TEST(Executor, BadInputsAreErrorsAndNoOutputs) {
  Graph g = block_graph(DType::f32);
  auto e = Engine::create(g, {&host_cpu()});
  ASSERT_TRUE(e.ok());
  auto missing = (*e)->run({});
  ASSERT_FALSE(missing.ok());
  EXPECT_HAS(missing.status().message(), "tensor 'x'");
  auto in = inputs_for(g, 1);
  in["extra"] = in["x"];
  EXPECT_HAS((*e)->run(in).status().message(), "tensor 'extra'");
  auto wrong = inputs_for(g, 1);
  wrong["x"] = random_tensor(DType::f16, {2, 4, 16, 32}, 1);
  auto r = (*e)->run(wrong);
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.status().message(), "expected f32[2,4,16,32]");
}

TEST(Executor, UnboundConstantsAreAnErrorWhenTheEngineIsMade) {
  GraphBuilder b("unbound");
  ValueId x = b.input("x", DType::f32, {4, 8});
  b.output(b.matmul(x, b.constant("w", DType::f32, {8, 8})));
  auto e = Engine::create(*b.build(), {&host_cpu()});
  ASSERT_FALSE(e.ok());
  EXPECT_HAS(e.status().message(), "tensor 'w'");
  EXPECT_HAS(e.status().message(), "bind_constant");
}

// The first Vulkan device of the shared registry (lavapipe in CI), or null.
Device* first_vulkan_device() {
  for (Device* d : shared_registry()->devices())
    if (d->caps().backend == BackendKind::vulkan) return d;
  return nullptr;
}

TEST(Executor, ACpuAndVulkanGraphMatchesTheReference) {
  Device* vk = first_vulkan_device();
  if (!vk) GTEST_SKIP() << "no Vulkan device opened on this machine (duet devices says why)";
  Graph g = block_graph(DType::f32);
  // Work on both: the CPU may not run attention, Vulkan may not run the norm.
  TestDevice vk_part(*vk, {OpKind::rmsnorm});
  TestDevice cpu_part("cpu:1", {OpKind::attention});
  auto e = Engine::create(g, {&vk_part, &cpu_part});
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ((*e)->plan().devices_used().size(), 2u) << (*e)->explain();
  auto in = inputs_for(g, 6);
  auto out = (*e)->run(in);
  ASSERT_TRUE(out.ok()) << out.status().message();
  expect_matches(g, in, *out, DType::f32);
}

}  // namespace
}  // namespace duet::testing_graph

namespace duet::testing_graph {
namespace {

// On a Vulkan device with bf16 storage the graph runs as asked; without it, in f16 with the
// casts on the CPU (which can read bf16).
TEST(Executor, Bf16OnCpuAndVulkanMatches) {
  Device* vk = first_vulkan_device();
  if (!vk) GTEST_SKIP() << "no Vulkan device opened on this machine (duet devices says why)";
  Graph g = block_graph(DType::bf16);
  TestDevice cpu_part("cpu:1", {OpKind::attention});  // attention on Vulkan, whatever is faster
  auto e = Engine::create(g, {vk, &cpu_part});
  ASSERT_TRUE(e.ok()) << e.status().message();
  const Plan& p = (*e)->plan();
  const PlanStep* a = p.step("attn");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->device, 0) << (*e)->explain();
  EXPECT_EQ(a->op.choice.precision, vk->caps().bf16_storage ? Precision::bf16 : Precision::f16);
  auto in = inputs_for(g, 8);
  auto out = (*e)->run(in);
  ASSERT_TRUE(out.ok()) << out.status().message();
  expect_matches(g, in, *out, DType::bf16);
}

}  // namespace
}  // namespace duet::testing_graph

namespace duet::testing_graph {
namespace {

TEST(Executor, AnOutputThatIsAViewOfAnInputComesBackDense) {
  GraphBuilder b("view_out");
  ValueId x = b.input("x", DType::f32, {3, 5});
  b.output(b.transpose(x, 0, 1, "xt"));
  b.output(b.relu(x, "r"));
  Graph g = *b.build();
  auto e = Engine::create(g, {&host_cpu()});
  ASSERT_TRUE(e.ok()) << e.status().message();
  auto in = inputs_for(g, 5);
  auto out = (*e)->run(in);
  ASSERT_TRUE(out.ok()) << out.status().message();
  expect_matches(g, in, *out, DType::f32);
}

}  // namespace
}  // namespace duet::testing_graph
