// Placement over the whole graph (an op is charged for moving its output to where the ops
// reading it run), headroom in memory plans, explain saying a device-wide refusal once, and one
// GPU seen through two APIs (one UUID) planned as one GPU.
#include "fixtures.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "duet/graph_file.h"

namespace duet::testing_planner {
namespace {

int count(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// The device of each named node's kernel.
std::map<std::string, std::string> placement(const Plan& p) {
  std::map<std::string, std::string> m;
  for (const PlanStep& s : p.steps)
    if (s.kind == StepKind::kernel && s.node >= 0)
      m[s.name] = p.devices[static_cast<size_t>(s.device)].id;
  return m;
}

// One decoder layer of a Llama-style model (f16, T tokens, width 4096, 32 heads, MLP 11008).
Graph transformer_layer(int64_t tokens) {
  const int64_t d = 4096, heads = 32, hd = d / heads, ff = 11008;
  GraphBuilder b("layer");
  ValueId x = b.input("x", DType::f16, {tokens, d});
  auto w = [&](const std::string& n, std::vector<int64_t> shape) {
    return b.constant(n, DType::f16, std::move(shape));
  };
  auto heads_of = [&](ValueId t, const std::string& n) {
    return b.permute(b.reshape(t, {1, tokens, heads, hd}, n + "_r"), {0, 2, 1, 3}, n + "_h");
  };
  ValueId h = b.rmsnorm(x, w("attn_norm", {d}), 1e-5f, "attn_norm_x");
  ValueId q = heads_of(b.matmul(h, w("wq", {d, d}), true, "q"), "q");
  ValueId k = heads_of(b.matmul(h, w("wk", {d, d}), true, "k"), "k");
  ValueId v = heads_of(b.matmul(h, w("wv", {d, d}), true, "v"), "v");
  ValueId a = b.attention(b.rope(q, 0, "q_rope"), b.rope(k, 0, "k_rope"), v, true, "attn");
  ValueId merged =
      b.reshape(b.copy(b.permute(a, {0, 2, 1, 3}, "attn_t"), "attn_c"), {tokens, d}, "attn_m");
  ValueId x1 = b.add(x, b.matmul(merged, w("wo", {d, d}), true, "o"), "resid1");
  ValueId h2 = b.rmsnorm(x1, w("ffn_norm", {d}), 1e-5f, "ffn_norm_x");
  ValueId gate = b.silu(b.matmul(h2, w("w_gate", {ff, d}), true, "gate"), "act");
  ValueId up = b.matmul(h2, w("w_up", {ff, d}), true, "up");
  ValueId down = b.matmul(b.mul(gate, up, "gated"), w("w_down", {d, ff}), true, "down");
  b.output(b.add(x1, down, "resid2"));
  auto g = b.build();
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? std::move(*g) : Graph{};
}

const std::vector<std::string> kBox = {"rtx3090", "rtx2080ti", "ryzen7-5800x"};

// A decode step (one token): placed op by op, the norms and residual adds go to the CPU (the
// input is there, and each one alone is faster there than moving to the GPU), costing four
// copies between the CPU and the 3090; the whole layer on the 3090 is estimated faster, and is
// what the plan does.
TEST(Placement, ADecodeLayerStaysOnTheFastestGpuInsteadOfPingPongingWithTheCpu) {
  Plan p = plan_ok(transformer_layer(1), real_devices(kBox));
  const std::string text = explain(p);
  for (const auto& [name, device] : placement(p))
    EXPECT_EQ(device, "cuda:0") << name << "\n" << text;
  EXPECT_TRUE(p.copies().empty()) << text;
  EXPECT_HAS(text, "the whole graph on cuda:0 is estimated");
  EXPECT_HAS(text, "the whole graph runs on cuda:0: estimated faster than placing op by op");
  // The reason is the estimate, not a policy: nothing is marked [policy].
  EXPECT_LACKS(text, "[policy]");
}

// Prefill (128 tokens): every op is faster on the 3090 (Ampere: pipelined GEMM and flash
// attention) than on the 2080 Ti or the CPU, and the weights are uploaded once when the plan
// is loaded.
TEST(Placement, APrefillLayerRunsOnThe3090WithItsAmpereKernels) {
  Plan p = plan_ok(transformer_layer(128), real_devices(kBox));
  const std::string text = explain(p);
  for (const auto& [name, device] : placement(p))
    EXPECT_EQ(device, "cuda:0") << name << "\n" << text;
  const PlanStep* attn = p.step("attn");
  ASSERT_NE(attn, nullptr);
  EXPECT_EQ(attn->op.choice.tier, Tier::flash) << text;
  const PlanStep* q = p.step("q");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->op.choice.precision, Precision::f16) << text;
  int per_run_uploads = 0;
  for (const PlanStep& s : p.steps)
    per_run_uploads += s.kind == StepKind::transfer && s.src_device == kHost && !s.once ? 1 : 0;
  EXPECT_EQ(per_run_uploads, 1) << "only x is uploaded per run\n" << text;
}

// examples/block.json is small (32 x 256, its weights given per run): moving 16 KiB to a GPU
// and back costs more than the whole block on the CPU, so it runs there, and explain compares.
TEST(Placement, TheBlockExampleRunsOnTheCpuBesideTwoGpus) {
  auto g = load_graph(DUET_SOURCE_DIR "/examples/block.json");
  ASSERT_TRUE(g.ok()) << g.status().message();
  Plan p = plan_ok(*g, real_devices(kBox));
  const std::string text = explain(p);
  for (const auto& [name, device] : placement(p))
    EXPECT_EQ(device, "cpu:0") << name << "\n" << text;
  EXPECT_HAS(text, "cuda:0 generic f32: estimated");  // the GPUs lost on time, and it says so
}

// Headroom: a device's budget is its memory less a reserve for the driver's context and
// workspaces, and explain says so. 23.5 GiB of weights do not fit a 3090 (23.7 GiB).
TEST(Placement, MemoryPlansKeepAReserveForTheDriver) {
  Plan small = plan_ok(attention_graph(DType::f16), real_devices({"rtx3090"}));
  const DeviceCaps c = profile("rtx3090");
  const uint64_t reserve = std::max<uint64_t>(c.memory_bytes / 20, uint64_t{512} << 20);
  EXPECT_EQ(small.memory[0].budget_bytes, c.memory_bytes - reserve);
  EXPECT_HAS(explain(small), "less a reserve of ");
  EXPECT_HAS(explain(small), "for the driver context and workspaces");

  GraphBuilder b("big");
  const int64_t rows = (int64_t{235} << 30) / 10 / (4096 * 2);  // 23.5 GiB of f16
  ValueId x = b.input("x", DType::f16, {1, 4096});
  b.output(b.matmul(x, b.constant("w", DType::f16, {rows, 4096}), true, "mm"));
  Graph big = *b.build();
  auto p = make_plan(big, real_devices({"rtx3090"}));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::out_of_memory);
  EXPECT_HAS(p.status().message(), "cuda:0");
  // A budget the user states wins over the reserve.
  EXPECT_TRUE(make_plan(big, real_devices({"rtx3090"}), policy("budget.cuda:0=23.65GiB")).ok());
}

// A reason that rejects every choice of a device (no kernel image for its architecture in this
// build) is said once per device and op, not once per tier and precision.
TEST(Placement, ExplainSaysADeviceWideRefusalOnce) {
  Plan p = plan_ok(attention_graph(DType::f16), real_devices({"gtx1060", "ryzen7-5800x"}));
  const std::string text = explain(p);
  int kernels = 0;
  for (const PlanStep& s : p.steps) kernels += s.kind == StepKind::kernel && s.node >= 0 ? 1 : 0;
  // Once on the device's line at the top, then once per op.
  EXPECT_EQ(count(text, "no kernel image for sm_61"), 1 + kernels) << text;
  EXPECT_HAS(text, "cuda:0 (all ");
}

}  // namespace
}  // namespace duet::testing_planner

namespace duet::testing_planner {
namespace {

// A 3090 seen through CUDA (cuda:0) and through Vulkan (vulkan:0): two devices whose capability
// records carry one UUID, as `duet devices` groups them. `same` false: two 3090s.
std::vector<PlanDevice> two_routes(bool same) {
  DeviceCaps c = profile("rtx3090");
  c.uuid = std::array<uint8_t, 16>{0x3d, 0x90, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  DeviceCaps v = c;
  v.backend = BackendKind::vulkan;
  if (!same) (*v.uuid)[15] ^= 1;
  const std::vector<DeviceCaps> caps = {c, v};
  const std::vector<std::string> labels = {"rtx3090", "rtx3090 (Vulkan)"};
  return profile_devices(caps, labels);
}

TEST(Placement, OneGpuSeenThroughTwoApisRunsAGraphOnOneOfThem) {
  Plan p = plan_ok(transformer_layer(16), two_routes(true));
  const std::string text = explain(p);
  std::set<std::string> used;
  for (const auto& [name, device] : placement(p)) used.insert(device);
  EXPECT_EQ(used.size(), 1u) << text;
  EXPECT_HAS(text, "cuda:0, vulkan:0 are one GPU (the same UUID)");
  EXPECT_TRUE(p.copies().empty()) << text;
  // Named both in the policy, both may be used; the memory is still one budget.
  Plan both = plan_ok(transformer_layer(16), two_routes(true), policy("device=cuda:0,vulkan:0"));
  EXPECT_LACKS(explain(both), "are one GPU");
  for (const DeviceMemoryPlan& m : both.memory) EXPECT_HAS(m.budget_source, "(the same GPU)");
}

TEST(Placement, TwoRoutesToOneGpuShareItsMemory) {
  // Two weights of 640 MiB each under a budget of 1 GiB: two GPUs hold one each; one GPU seen
  // twice cannot hold both.
  GraphBuilder b("two_weights");
  ValueId x = b.input("x", DType::f16, {1, 4096});
  ValueId h = b.matmul(x, b.constant("w1", DType::f16, {81920, 4096}), true, "mm1");
  ValueId s = b.slice(h, 1, 0, 4096, 1, "s");
  b.output(b.matmul(s, b.constant("w2", DType::f16, {81920, 4096}), true, "mm2"));
  Graph g = *b.build();
  const Policy both = policy("device=cuda:0,vulkan:0;budget=1GiB");
  Plan apart = plan_ok(g, two_routes(false), both);
  std::set<std::string> used;
  for (const auto& [name, device] : placement(apart)) used.insert(device);
  EXPECT_EQ(used.size(), 2u) << explain(apart);
  auto shared = make_plan(g, two_routes(true), both);
  ASSERT_FALSE(shared.ok()) << explain(*shared);
  EXPECT_HAS(shared.status().message(), "the same GPU");
}

}  // namespace
}  // namespace duet::testing_planner
