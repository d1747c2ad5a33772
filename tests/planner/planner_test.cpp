// The planner's decisions on capability profiles, with test rules that have a GPU backend's tier
// structure: precision fallback and casts, tiers, copies, memory plans, policy overrides and
// explain. (The same scenarios on the real backends' rules are in failures_test.cpp.)
#include <nlohmann/json.hpp>

#include "fixtures.h"

namespace duet::testing_planner {
namespace {

int count_casts(const Plan& p) {
  int n = 0;
  for (const PlanStep& s : p.steps) n += s.kind == StepKind::kernel && s.node < 0 ? 1 : 0;
  return n;
}

TEST(Planner, Bf16OnTuringFallsBackToFp16WithCastsAroundIt) {
  Plan p = plan_ok(attention_graph(DType::bf16), test_devices({"rtx2080ti"}));
  const PlanStep* a = p.step("attn");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->op.choice.precision, Precision::f16);
  EXPECT_EQ(a->op.choice.tier, Tier::tiled);
  EXPECT_EQ(a->requested, Precision::bf16);
  EXPECT_HAS(a->precision_reason, "bf16 asked");
  EXPECT_HAS(a->precision_reason, "fallback=f16");
  ASSERT_FALSE(a->skipped.empty());
  EXPECT_HAS(a->skipped[0], "flash skipped: requires sm_80, device is sm_75");
  // The kernel reads f16: q, k, v are cast; the graph's bf16 output is cast back once.
  for (const TensorDesc& t : a->op.op.inputs) EXPECT_EQ(t.dtype, DType::f16);
  EXPECT_EQ(count_casts(p), 4);
  EXPECT_EQ(p.values[static_cast<size_t>(p.outputs.at("out"))].desc.dtype, DType::bf16);
  const std::string text = explain(p);
  EXPECT_HAS(text, "precision  f16 (f32 accumulation): bf16 asked");
  EXPECT_HAS(text, "flash skipped: requires sm_80, device is sm_75");
  EXPECT_HAS(text, "cuda:0 flash bf16: requires sm_80, device is sm_75");
}

TEST(Planner, Bf16OnAmpereKeepsBf16AndFlash) {
  Plan p = plan_ok(attention_graph(DType::bf16), test_devices({"a100"}));
  const PlanStep* a = p.step("attn");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->op.choice.precision, Precision::bf16);
  EXPECT_EQ(a->op.choice.tier, Tier::flash);
  EXPECT_EQ(count_casts(p), 0);
  EXPECT_HAS(a->precision_reason, "bf16 as the graph asks");
}

TEST(Planner, SafetyFallbackComputesBf16InF32) {
  Plan p =
      plan_ok(attention_graph(DType::bf16), test_devices({"rtx2080ti"}), policy("fallback=f32"));
  const PlanStep* a = p.step("attn");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->op.choice.precision, Precision::f32);
  EXPECT_EQ(a->op.choice.tier, Tier::generic);
  EXPECT_EQ(count_casts(p), 0) << "the f32 kernel reads bf16 directly";
}

TEST(Planner, F32IsNeverSilentlyLowered) {
  Plan p = plan_ok(attention_graph(DType::f32), test_devices({"a100"}));
  for (const PlanStep& s : p.steps)
    if (s.kind == StepKind::kernel) {
      EXPECT_EQ(s.op.choice.precision, Precision::f32) << s.name;
    }
}

TEST(Planner, LaunchShapeComesFromTheChosenKernel) {
  Plan p = plan_ok(attention_graph(DType::f16), test_devices({"a100"}));
  const PlanStep* a = p.step("attn");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->op.choice.launch.tile_m, 64);
  EXPECT_HAS(explain(p), "launch     block 128, tile 64x64, 48 KiB shared");
}

TEST(Planner, ACpuAndAGpuWithOneInputUploadAndOneDownload) {
  // Long enough that the GPU wins the attention even with its uploads.
  Plan p = plan_ok(attention_graph(DType::f16, 8, 1024), test_devices({"rtx3090", "ryzen7-5800x"}));
  EXPECT_EQ(p.step("attn")->device, 0) << explain(p);
  EXPECT_EQ(p.step("out")->device, 0);
  EXPECT_TRUE(p.copies().empty()) << "no value crosses devices";
  int uploads = 0, downloads = 0;
  for (const PlanStep& s : p.steps) {
    if (s.kind != StepKind::transfer) continue;
    uploads += s.src_device == kHost ? 1 : 0;
    downloads += s.device == kHost ? 1 : 0;
  }
  EXPECT_EQ(uploads, 3);
  EXPECT_EQ(downloads, 1);
}

TEST(Planner, MemoryPlanReusesBuffersAlongAChain) {
  GraphBuilder b("chain");
  ValueId x = b.input("x", DType::f32, {1024, 256});
  for (int i = 0; i < 12; ++i) x = b.relu(x, "r" + std::to_string(i));
  b.output(x);
  Plan p = plan_ok(*b.build(), test_devices({"t4"}));
  const DeviceMemoryPlan& m = p.memory[0];
  const uint64_t one = 1024 * 256 * 4;
  EXPECT_LE(m.slots.size(), 3u) << "12 values of one size need at most 3 buffers in a chain";
  EXPECT_EQ(m.peak_bytes, m.slots.size() * one);
  EXPECT_GE(m.peak_bytes, m.max_live_bytes);
  EXPECT_EQ(m.max_live_bytes, 2 * one);
  EXPECT_HAS(explain(p), "(device memory 14.8 GiB less a reserve of ");
}

TEST(Planner, ConstantsAreResidentAndCountedOnce) {
  Graph g = mlp_stack(DType::f16, 3, 512);
  Plan p = plan_ok(g, test_devices({"t4"}));
  EXPECT_EQ(p.memory[0].constant_bytes, 3u * 512 * 512 * 2);
  int once = 0;
  for (const PlanStep& s : p.steps) once += s.once ? 1 : 0;
  EXPECT_EQ(once, 3) << "the three weights are uploaded when the plan is loaded";
}

TEST(Planner, AGraphTooBigForItsOnlyDeviceIsAClearError) {
  Graph g = mlp_stack(DType::f16, 8, 4096);  // 8 x 32 MiB of weights
  auto p = make_plan(g, test_devices({"t4"}), policy("budget=100MiB"));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::out_of_memory);
  EXPECT_HAS(p.status().message(), "cuda:0 (t4)");
  EXPECT_HAS(p.status().message(), "budget of 100 MiB");
}

TEST(Planner, WorkMovesToAnotherDeviceWhenTheFirstIsFull) {
  Graph g = mlp_stack(DType::f16, 8, 4096);
  Plan p = plan_ok(g, test_devices({"t4", "t4"}), policy("budget=160MiB"));
  EXPECT_EQ(p.devices_used().size(), 2u) << explain(p);
  for (const DeviceMemoryPlan& m : p.memory) EXPECT_LE(m.peak_bytes, 160ull << 20);
  // Only the residual stream crosses, once.
  ASSERT_EQ(p.copies().size(), 1u) << explain(p);
  EXPECT_EQ(p.copy_bytes(), 16u * 4096 * 2);
  EXPECT_HAS(explain(p), "moved from cuda:0 to cuda:1");
}

TEST(Planner, SplitOffKeepsEverythingOnOneDeviceOrSaysWhy) {
  Graph g = mlp_stack(DType::f16, 8, 4096);
  auto p = make_plan(g, test_devices({"t4", "t4"}), policy("budget=160MiB;split=off"));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::out_of_memory);
  EXPECT_HAS(p.status().message(), "split=off");
  EXPECT_HAS(p.status().message(), "cuda:0");
  Plan fits =
      plan_ok(mlp_stack(DType::f16, 2, 1024), test_devices({"t4", "t4"}), policy("split=off"));
  EXPECT_EQ(fits.devices_used().size(), 1u);
}

TEST(Planner, ViewsAreResolvedWhereTheyAreReadWithoutKernels) {
  GraphBuilder b("views");
  ValueId x = b.input("x", DType::f32, {4, 8, 16});
  ValueId t = b.transpose(x, 1, 2, "t");
  ValueId s = b.slice(t, 1, 2, 10, 1, "s");
  b.output(b.relu(s, "y"));
  Plan p = plan_ok(*b.build(), test_devices({"a100"}));
  int views = 0;
  for (const PlanStep& st : p.steps) views += st.kind == StepKind::view ? 1 : 0;
  EXPECT_EQ(views, 2);
  const PlanStep* y = p.step("y");
  ASSERT_NE(y, nullptr);
  EXPECT_FALSE(y->op.op.inputs[0].is_contiguous());
  const PlanValue& in = p.values[static_cast<size_t>(y->inputs[0])];
  EXPECT_NE(in.root, y->inputs[0]) << "the view aliases the uploaded input";
  EXPECT_EQ(p.memory[0].slots.size(), 2u);
}

TEST(Planner, ExplainNamesEveryDeviceAndTheEstimate) {
  Plan p = plan_ok(attention_graph(DType::f16), test_devices({"rtx2080ti", "rtx3090"}));
  const std::string text = explain(p);
  EXPECT_HAS(text, "cuda:0 (rtx2080ti): NVIDIA GeForce RTX 2080 Ti, sm_75");
  EXPECT_HAS(text, "cuda:1 (rtx3090): NVIDIA GeForce RTX 3090, sm_86");
  EXPECT_HAS(text, "estimate");
  EXPECT_HAS(text, "memory:");
  // The faster card runs it; the other's kernel is listed with its own tier.
  EXPECT_EQ(p.step("attn")->device, 1);
  bool other = false;
  for (const Alternative& a : p.step("attn")->rejected)
    other = other || (a.device == "cuda:0" && a.tier == Tier::tiled && a.usable);
  EXPECT_TRUE(other) << text;
}

}  // namespace
}  // namespace duet::testing_planner

namespace duet::testing_planner {
namespace {

TEST(Planner, Bf16WeightsOnTuringAreCastOnceAtLoadKeepingOnlyTheF16Copy) {
  // Weights large enough that the f16 kernels beat the f32 ones that read bf16 directly.
  Plan p = plan_ok(mlp_stack(DType::bf16, 2, 4096), test_devices({"rtx2080ti"}));
  int once_casts = 0, run_casts = 0;
  for (const PlanStep& s : p.steps) {
    if (s.kind != StepKind::kernel || s.node >= 0) continue;
    (s.once ? once_casts : run_casts) += 1;
  }
  EXPECT_EQ(once_casts, 2) << explain(p);
  EXPECT_EQ(run_casts, 2) << "the input, and the output back to bf16";
  EXPECT_EQ(p.memory[0].constant_bytes, 2u * 4096 * 4096 * 2) << "f16 weights only, not bf16 too";
  for (const PlanValue& v : p.values)
    if (v.constant && v.device == 0 && v.desc.dtype == DType::bf16) {
      EXPECT_FALSE(v.resident) << v.name;
    }
}

TEST(Planner, ACastADeviceCannotDoRunsWhereTheValueCanBeCast) {
  // A Vulkan GPU without bf16 storage (lavapipe's record as a fast discrete GPU): it computes a
  // bf16 graph in f16, and the CPU casts for it.
  DeviceCaps gpu = profile("lavapipe");
  gpu.type = DeviceType::discrete_gpu;
  gpu.peak_gflops_f32 = gpu.peak_gflops_f16 = 20000;
  gpu.memory_gbps = 500;
  gpu.host_link_gbps = 25;
  gpu.bf16_storage = false;
  const std::vector<DeviceCaps> caps = {gpu, profile("ryzen7-5800x")};
  Plan p = plan_ok(attention_graph(DType::bf16, 8, 1024), profile_devices(caps));
  const PlanStep* a = p.step("attn");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->device, 0) << explain(p);
  EXPECT_EQ(a->op.choice.precision, Precision::f16);
  int cpu_casts = 0;
  for (const PlanStep& s : p.steps)
    cpu_casts += s.kind == StepKind::kernel && s.node < 0 && s.device == 1 ? 1 : 0;
  EXPECT_GE(cpu_casts, 3) << explain(p);
  EXPECT_GE(p.copies().size(), 3u);
}

}  // namespace
}  // namespace duet::testing_planner

namespace duet::testing_planner {
namespace {

TEST(Planner, PlanJsonCarriesTheDecisions) {
  Plan p = plan_ok(attention_graph(DType::bf16), test_devices({"rtx2080ti"}));
  const nlohmann::json j = nlohmann::json::parse(plan_json(p));
  EXPECT_EQ(j["graph"], "attn");
  bool found = false;
  for (const auto& s : j["steps"])
    if (s["name"] == "attn") {
      found = true;
      EXPECT_EQ(s["tier"], "tiled");
      EXPECT_EQ(s["precision"], "f16");
      EXPECT_EQ(s["requested"], "bf16");
      EXPECT_FALSE(s["rejected"].empty());
    }
  EXPECT_TRUE(found);
  EXPECT_EQ(j["memory"][0]["device"], "cuda:0");
}

// The CPU backend's rules: bf16 dot products where the CPU has AVX512-BF16 (a Zen 4 profile),
// f32 on an AVX2-only CPU, and for f16 graphs only when a policy forces bf16, saying what it
// costs.
TEST(Planner, Bf16MatmulOnACpuWithAvx512Bf16UsesBf16DotProducts) {
  Plan p = plan_ok(mlp_stack(DType::bf16, 1, 256), real_devices({"ryzen9-7950x"}));
  const PlanStep* mm = p.step("mm0");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->op.choice.tier, Tier::simd);
  EXPECT_EQ(mm->op.choice.precision, Precision::bf16) << explain(p);
  EXPECT_HAS(mm->precision_reason, "bf16 as the graph asks");
  EXPECT_HAS(mm->tier_reason, "vdpbf16ps");
  EXPECT_EQ(p.step("act0")->op.choice.precision, Precision::f32) << "only matmul has bf16 dots";
}

TEST(Planner, Bf16MatmulOnAnAvx2CpuComputesInF32AndSaysWhy) {
  Plan p = plan_ok(mlp_stack(DType::bf16, 1, 256), real_devices({"ryzen7-5800x"}));
  const PlanStep* mm = p.step("mm0");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->op.choice.precision, Precision::f32);
  EXPECT_HAS(mm->precision_reason, "bf16 dot products need AVX512-BF16");
}

TEST(Planner, F16MatmulTakesBf16DotProductsOnlyWhenAPolicyForcesThem) {
  Plan plain = plan_ok(mlp_stack(DType::f16, 1, 256), real_devices({"ryzen9-7950x"}));
  EXPECT_EQ(plain.step("mm0")->op.choice.precision, Precision::f32) << explain(plain);
  EXPECT_HAS(explain(plain), "simd bf16: bf16 is less precise than the f16 the graph asks for");

  Plan forced = plan_ok(mlp_stack(DType::f16, 1, 256), real_devices({"ryzen9-7950x"}),
                        policy("precision.matmul=bf16"));
  const PlanStep* mm = forced.step("mm0");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->op.choice.precision, Precision::bf16);
  EXPECT_HAS(mm->precision_reason, "forced by policy (precision.matmul=bf16)");
  EXPECT_HAS(mm->precision_reason, "below the f16 the graph asks for (8 significant bits of 11)");
  // The kernel reads the f16 tensors as they are (rounding while it packs): no cast steps.
  EXPECT_EQ(mm->op.op.inputs[1].dtype, DType::f16);
  for (const PlanStep& s : forced.steps)
    EXPECT_FALSE(s.kind == StepKind::kernel && s.node < 0) << s.name << "\n" << explain(forced);
}

// A long chain plans in time linear in its length (issue 32: 16k nodes took 7.8 s and 200k ran
// past a minute when every node's memory check scanned every value); over two devices so the
// per-device running sums of live memory decide a split under a budget. The plan itself is
// checked: one step per node, and the chain needs two buffers whatever its length. Its time is
// measured by duet_bench_plan, not here.
TEST(Planner, ALongChainPlansWithTwoBuffersPerDevice) {
  constexpr int kNodes = 20000;
  GraphBuilder b("chain");
  ValueId x = b.input("x", DType::f32, {1024});
  for (int i = 0; i < kNodes; ++i) x = b.relu(x, "r" + std::to_string(i));
  b.output(x);
  auto g = b.build();
  ASSERT_TRUE(g.ok()) << g.status().message();
  Plan p = plan_ok(*g, test_devices({"t4", "t4"}), policy("budget=1MiB"));
  size_t kernels = 0;
  for (const PlanStep& st : p.steps) kernels += st.kind == StepKind::kernel ? 1 : 0;
  EXPECT_EQ(kernels, static_cast<size_t>(kNodes));
  for (const DeviceMemoryPlan& m : p.memory) EXPECT_LE(m.slots.size(), 2u);
}

}  // namespace
}  // namespace duet::testing_planner
