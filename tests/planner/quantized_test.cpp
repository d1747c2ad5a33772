// Quantized weights in plans: memory counts compressed bytes, a 7B-class Q4_K model fits one
// RTX 2080 Ti where its f16 twin needs two, larger models split across 2080 Tis and T4s with
// compressed weights only (the third of the five failures, MISSION.md), and no plan ever holds a
// dequantized copy of a quantized constant.
#include "fixtures.h"

namespace duet::testing_planner {
namespace {

// A Llama-shaped stack for decode: per layer the attention projections q, k, v, o [d, d] and the
// MLP gate, up [f, d] and down [d, f], every weight in `w` (declared, no data), the activations
// in `act`. Embedding and norms are left out: the weights are the memory.
Graph llama_stack(DType w, DType act, int layers, int64_t d, int64_t f) {
  GraphBuilder b("llama");
  ValueId x = b.input("x", act, {1, d});
  for (int i = 0; i < layers; ++i) {
    const std::string l = "blk." + std::to_string(i) + ".";
    auto lin = [&](ValueId in, const std::string& name, int64_t n, int64_t k) {
      return b.matmul(in, b.constant(l + name + ".weight", w, {n, k}), true, l + name);
    };
    ValueId q = lin(x, "attn_q", d, d);
    ValueId kk = lin(x, "attn_k", d, d);
    ValueId v = lin(x, "attn_v", d, d);
    ValueId o = lin(b.add(b.add(q, kk, l + "qk"), v, l + "qkv"), "attn_output", d, d);
    ValueId h = b.add(x, o, l + "res1");
    ValueId g = b.silu(lin(h, "ffn_gate", f, d), l + "act");
    ValueId m = lin(b.mul(g, lin(h, "ffn_up", f, d), l + "glu"), "ffn_down", d, f);
    x = b.add(h, m, l + "res2");
  }
  b.output(x);
  auto g = b.build();
  EXPECT_TRUE(g.ok()) << g.status().message();
  return std::move(*g);
}

Graph llama_7b(DType w, DType act) {
  return llama_stack(w, act, 32, 4096, 11008);
}

// No value of a quantized constant in another dtype, and no step reading one that is not a kernel
// reading its blocks or a copy of its bytes.
void expect_compressed_only(const Graph& g, const Plan& p) {
  for (const PlanValue& v : p.values) {
    if (v.graph_value < 0) continue;
    const GraphValue& gv = g.value(v.graph_value);
    if (gv.kind == ValueKind::constant && is_quantized(gv.desc.dtype)) {
      EXPECT_EQ(v.desc.dtype, gv.desc.dtype) << v.name << " is a dequantized copy";
    }
  }
  for (const PlanStep& s : p.steps)
    if (s.kind == StepKind::kernel && s.node < 0) {
      EXPECT_NE(s.op.op.kind, OpKind::cast) << s.name << ": a cast the planner inserted";
    }
}

uint64_t quantized_constant_bytes(const Graph& g) {
  uint64_t n = 0;
  for (int id : g.constants()) n += static_cast<uint64_t>(g.value(id).desc.nbytes());
  return n;
}

TEST(QuantizedPlans, A7bQ4kModelFitsOneRtx2080TiWhereItsF16TwinNeedsTwo) {
  const Graph q = llama_7b(DType::q4_k, DType::f16);
  const Graph f = llama_7b(DType::f16, DType::f16);
  EXPECT_LT(quantized_constant_bytes(q), uint64_t{4} << 30);
  EXPECT_GT(quantized_constant_bytes(f), uint64_t{12} << 30);

  Plan one = plan_ok(q, test_devices({"rtx2080ti"}));
  ASSERT_EQ(one.devices_used().size(), 1u) << explain(one);
  // The memory plan counts the blocks, not dequantized weights.
  EXPECT_EQ(one.memory[0].constant_bytes, quantized_constant_bytes(q));
  EXPECT_LE(one.memory[0].peak_bytes, one.memory[0].budget_bytes);
  expect_compressed_only(q, one);
  // Explain names the format the kernel reads and the kernel.
  const PlanStep* up = one.step("blk.0.ffn_up");
  ASSERT_NE(up, nullptr);
  EXPECT_HAS(explain(one), "q4_k[11008,4096]");
  EXPECT_HAS(up->tier_reason, "q4_k");

  auto f16_one = make_plan(f, test_devices({"rtx2080ti"}));
  ASSERT_FALSE(f16_one.ok());
  EXPECT_EQ(f16_one.status().code(), Code::out_of_memory);
  Plan f16_two = plan_ok(f, test_devices({"rtx2080ti", "rtx2080ti"}));
  EXPECT_EQ(f16_two.devices_used().size(), 2u) << explain(f16_two);
}

TEST(QuantizedPlans, LargerQ4kModelsSplitAcross2080TisAndT4sWithCompressedWeightsOnly) {
  // 34B-class shapes (40 layers, 8192, 22016): about 18 GB in q4_k, over one 2080 Ti, within two.
  const Graph mid = llama_stack(DType::q4_k, DType::f16, 40, 8192, 22016);
  Plan two = plan_ok(mid, test_devices({"rtx2080ti", "rtx2080ti"}));
  EXPECT_EQ(two.devices_used().size(), 2u) << explain(two);
  for (const DeviceMemoryPlan& m : two.memory) EXPECT_LE(m.peak_bytes, m.budget_bytes);
  expect_compressed_only(mid, two);
  EXPECT_EQ(two.memory[0].constant_bytes + two.memory[1].constant_bytes,
            quantized_constant_bytes(mid));

  // 70B-class (80 layers, 8192, 28672): about 44 GB in q4_k, across four T4s.
  const Graph big = llama_stack(DType::q4_k, DType::f16, 80, 8192, 28672);
  Plan four = plan_ok(big, test_devices({"t4", "t4", "t4", "t4"}));
  EXPECT_GE(four.devices_used().size(), 3u) << explain(four);
  for (const DeviceMemoryPlan& m : four.memory) EXPECT_LE(m.peak_bytes, m.budget_bytes);
  expect_compressed_only(big, four);
  // Only the residual stream crosses between devices, never a weight.
  for (const PlanStep* c : four.copies()) EXPECT_LT(c->bytes, uint64_t{1} << 20) << c->name;

  // Two 2080 Tis cannot hold it: a clear error, not a dequantizing fallback.
  auto no = make_plan(big, test_devices({"rtx2080ti", "rtx2080ti"}));
  ASSERT_FALSE(no.ok());
  EXPECT_EQ(no.status().code(), Code::out_of_memory);
}

// Rules whose only matmul kernel would read the weight in f16: planning must refuse it rather
// than insert a dequantizing cast.
class DequantizingRules final : public BackendRules {
 public:
  BackendKind backend() const override { return BackendKind::cuda; }
  std::vector<KernelChoice> choices(const DeviceCaps&, const OpDesc& op) const override {
    KernelChoice k;
    k.tier = Tier::tiled;
    k.precision = Precision::f16;
    k.ok = true;
    k.reason = "f16 GEMM";
    for (const TensorDesc& t : op.inputs)
      k.input_dtypes.push_back(is_quantized(t.dtype) || is_float(t.dtype) ? DType::f16 : t.dtype);
    k.output_dtype = DType::f16;
    return {k};
  }
};

TEST(QuantizedPlans, NoPlanEverHoldsADequantizedCopyOfAQuantizedConstant) {
  static const DequantizingRules rules;
  std::vector<PlanDevice> d = real_devices({"t4"});
  d[0].rules = &rules;
  const Graph g = llama_stack(DType::q4_0, DType::f16, 2, 256, 512);
  auto p = make_plan(g, d);
  ASSERT_FALSE(p.ok());
  EXPECT_HAS(p.status().message(), "never dequantized into memory");
  // With a CPU beside it that reads the blocks, the matmuls go there and still read q4_0.
  std::vector<PlanDevice> both = real_devices({"t4", "ryzen7-5800x"});
  both[0].rules = &rules;
  Plan ok = plan_ok(g, both);
  expect_compressed_only(g, ok);
  for (const PlanStep& s : ok.steps)
    if (s.kind == StepKind::kernel && s.op.op.kind == OpKind::matmul) {
      EXPECT_EQ(s.device, 1) << s.name;
      EXPECT_EQ(s.op.op.inputs[1].dtype, DType::q4_0);
      bool said = false;
      for (const Alternative& a : s.rejected)
        said = said || a.reason.find("never dequantized into memory") != std::string::npos;
      EXPECT_TRUE(said) << s.name;
    }
  // An explicit cast in the graph is the user's choice, and it runs.
  GraphBuilder b("cast");
  ValueId w = b.constant("w", DType::q4_0, {8, 64});
  b.output(b.cast(w, DType::f32, "deq"));
  auto cg = b.build();
  ASSERT_TRUE(cg.ok());
  Plan c = plan_ok(*cg, real_devices({"ryzen7-5800x"}));
  ASSERT_NE(c.step("deq"), nullptr);
}

// With the real rules a quantized matmul runs from its blocks on the GPU: on a 2080 Ti decode
// takes the dp4a mat-vec and prefill the int8 tensor cores, and explain names the format, the
// tier and why the better tiers were skipped.
TEST(QuantizedPlans, WithTheRealRulesAQuantizedMatmulRunsFromItsBlocksOnTheGpu) {
  const Graph g = llama_stack(DType::q4_k, DType::f32, 1, 256, 512);
  Plan p = plan_ok(g, real_devices({"rtx2080ti"}));
  expect_compressed_only(g, p);
  const PlanStep* up = p.step("blk.0.ffn_up");
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->op.choice.tier, Tier::int_dot) << explain(p);
  EXPECT_EQ(up->op.op.inputs[1].dtype, DType::q4_k);
  EXPECT_HAS(up->tier_reason, "q4_k blocks read straight from memory");
  EXPECT_HAS(up->tier_reason, "decoded to int8 in registers");
  EXPECT_HAS(up->tier_reason, "dp4a");
  bool said = false;
  for (const std::string& k : up->skipped) said = said || k.find("int8_mma skipped: ") == 0;
  EXPECT_TRUE(said) << explain(p);
  EXPECT_HAS(explain(p), "decode shape");

  GraphBuilder b("prefill");
  ValueId x = b.input("x", DType::f16, {128, 512});
  b.output(b.matmul(x, b.constant("w", DType::q4_0, {256, 512}), true, "proj"));
  auto pg = b.build();
  ASSERT_TRUE(pg.ok());
  Plan pp = plan_ok(*pg, real_devices({"rtx2080ti"}));
  const PlanStep* proj = pp.step("proj");
  ASSERT_NE(proj, nullptr);
  EXPECT_EQ(proj->op.choice.tier, Tier::int8_mma) << explain(pp);
  EXPECT_HAS(proj->tier_reason, "mma.sync m8n8k16 s8");
}

// On a Vulkan GPU decode runs the GPU family's mat-vec (the weight read once, in blocks). Prefill
// with the cooperative-matrix GEMM denied takes the integer-dot path where the capability record
// says packed 4x8-bit dot products are accelerated (RADV on RDNA3), and explain names the format
// and the tier; a device without the extension runs the float path and says why int_dot was
// skipped.
TEST(QuantizedPlans, OnVulkanTheIntegerDotPathRunsWhereTheDeviceAcceleratesIt) {
  const Graph g = llama_stack(DType::q4_k, DType::f16, 1, 256, 512);
  std::vector<PlanDevice> devs = real_devices({"rx7900xtx"});
  ASSERT_EQ(devs.size(), 1u);
  Plan mv = plan_ok(g, devs);
  expect_compressed_only(g, mv);
  ASSERT_NE(mv.step("blk.0.ffn_up"), nullptr);
  EXPECT_EQ(mv.step("blk.0.ffn_up")->op.choice.tier, Tier::matvec) << explain(mv);
  EXPECT_HAS(mv.step("blk.0.ffn_up")->tier_reason, "q4_k weight decoded in registers");
  GraphBuilder b("prefill");
  ValueId x = b.input("x", DType::f16, {512, 4096});
  b.output(b.matmul(x, b.constant("w", DType::q4_k, {4096, 4096}), true, "blk.0.ffn_up"));
  auto pg = b.build();
  ASSERT_TRUE(pg.ok()) << pg.status().message();
  Plan p = plan_ok(*pg, devs, policy("deny=vulkan.coopmat"));
  expect_compressed_only(*pg, p);
  const PlanStep* up = p.step("blk.0.ffn_up");
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->op.choice.tier, Tier::int_dot) << explain(p);
  EXPECT_HAS(up->tier_reason, "q4_k weight");
  EXPECT_HAS(up->tier_reason, "integer dot products (accelerated)");
  devs[0].caps.int_dot = false;
  Plan f = plan_ok(*pg, devs, policy("deny=vulkan.coopmat"));
  const PlanStep* up2 = f.step("blk.0.ffn_up");
  ASSERT_NE(up2, nullptr);
  EXPECT_NE(up2->op.choice.tier, Tier::int_dot);
  bool said = false;
  for (const std::string& s : up2->skipped)
    said = said ||
           s.find("int_dot skipped: device lacks packed integer dot products") != std::string::npos;
  EXPECT_TRUE(said) << explain(f);
}

// A Vulkan record as NVIDIA's driver gives it for an H100/H200 (the fourth H200 run): the h100
// profile's limits, 132 SMs (VK_NV_shader_sm_builtins), accelerated packed dot products,
// subgroup arithmetic, and no peaks or bandwidth (Vulkan drivers do not say them).
PlanDevice nvidia_vulkan() {
  DeviceCaps c = profile("h100");
  c.backend = BackendKind::vulkan;
  c.name = "NVIDIA H100 80GB HBM3 (Vulkan)";
  c.arch = c.driver_name = "NVIDIA";
  c.cc_major = c.cc_minor = 0;
  c.peak_gflops_f32 = c.peak_gflops_f16 = c.peak_gflops_bf16 = 0;
  c.memory_gbps = 0;
  c.int_dot_accelerated = true;
  c.subgroup_arithmetic = true;
  c.matrix_units.clear();
  return PlanDevice{"vulkan:0", c, &builtin_rules(BackendKind::vulkan), "h100 via Vulkan", {}};
}

// Decode on a Vulkan GPU runs the GPU family's mat-vec, whose weight rows stream with a subgroup
// each, not the integer-dot or texel kernels, whose N / TN invocations each stream whole rows
// with a few hundred KB of loads in flight where the GPU needs megabytes (and int_dot quantizes
// its activations in a dispatch before). The H200 measured int_dot 2.6x slower on q4_0 decode.
// It holds with the record's peaks (rx7900xtx), without them (NVIDIA's driver: the flop rate
// falls to the default, which made decode look compute-bound and int_dot's efficiency class win)
// and with a calibration that measured the device's GEMM.
TEST(QuantizedPlans, VulkanGpuDecodeRunsTheMatvecNotTheIntegerDotKernel) {
  PlanDevice rx = real_devices({"rx7900xtx"}).at(0);
  PlanDevice nv = nvidia_vulkan();
  PlanDevice calibrated = nvidia_vulkan();
  calibrated.measured.launch_us = 6;
  calibrated.measured.rates = {
      {CostFamily::memory, Tier::generic, Precision::f32, 0, 3300, "add", 0.15},
      {CostFamily::matmul, Tier::shared_memory, Precision::f32, 4000, 0, "gemm", 0.4}};
  for (const PlanDevice& d : {rx, nv, calibrated})
    for (DType w : {DType::q4_0, DType::q8_0, DType::f16}) {
      const Graph g = llama_stack(w, w == DType::f16 ? DType::f16 : DType::f32, 1, 4096, 14336);
      Plan p = plan_ok(g, {d});
      const PlanStep* up = p.step("blk.0.ffn_up");
      ASSERT_NE(up, nullptr);
      EXPECT_EQ(up->op.choice.tier, Tier::matvec) << d.label << " " << dtype_name(w) << "\n"
                                                  << explain(p);
    }
  // Prefill keeps the GEMM kernels: 512 rows put enough loads in flight.
  GraphBuilder b("prefill");
  ValueId x = b.input("x", DType::f32, {512, 4096});
  b.output(b.matmul(x, b.constant("w", DType::q4_0, {14336, 4096}), true, "up"));
  auto prefill = b.build();
  ASSERT_TRUE(prefill.ok()) << prefill.status().message();
  Plan p = plan_ok(*prefill, {nv});
  ASSERT_NE(p.step("up"), nullptr);
  EXPECT_NE(p.step("up")->op.choice.tier, Tier::matvec) << explain(p);
}

// The VILA failure (MISSION.md, 4): an AWQ model on a GTX 1060 runs on the dp4a tier when the
// build has an image for sm_61 (a CUDA 12 toolkit's; CUDA 13 cannot build sm_61), never on
// tensor cores it lacks; without such an image it is refused with the missing image as the
// reason, never "lacks Ampere", never with a dequantized copy.
TEST(QuantizedPlans, AnAwqGraphOnAGtx1060RunsTheDp4aTier) {
  const Graph g = llama_stack(DType::q4_z, DType::f16, 1, 256, 512);
  const cuda::BuildArchs archs{{61, 70, 75, 80}, 80, {}, false};
  auto rules = cuda::make_rules(archs);
  Plan p = plan_ok(g, with_build({"gtx1060"}, archs, *rules));
  expect_compressed_only(g, p);
  int matmuls = 0;
  for (const PlanStep& s : p.steps)
    if (s.kind == StepKind::kernel && s.op.op.kind == OpKind::matmul) {
      ++matmuls;
      EXPECT_EQ(s.op.choice.tier, Tier::int_dot) << s.name << "\n" << explain(p);
      EXPECT_EQ(s.op.op.inputs[1].dtype, DType::q4_z) << s.name;
      bool why = false;
      for (const std::string& k : s.skipped)
        why = why || (k.find("int8_mma skipped: ") == 0 && k.find("sm_75") != std::string::npos);
      EXPECT_TRUE(why) << s.name << "\n" << explain(p);
    }
  EXPECT_EQ(matmuls, 7);
  const std::string text = explain(p);
  EXPECT_HAS(text, "q4_z");
  EXPECT_HAS(text, "dp4a (sm_61 >= sm_61)");
  EXPECT_LACKS(text, "Ampere");

  // With dp4a denied by policy the generic tier still runs it from its blocks.
  Plan generic = plan_ok(g, with_build({"gtx1060"}, archs, *rules), policy("deny=cuda.int_dot"));
  for (const PlanStep& s : generic.steps) {
    if (s.kind == StepKind::kernel && s.op.op.kind == OpKind::matmul) {
      EXPECT_EQ(s.op.choice.tier, Tier::generic) << s.name;
    }
  }

  const cuda::BuildArchs no61{{75, 80}, 80, {}, false};
  auto rules75 = cuda::make_rules(no61);
  auto refused = make_plan(g, with_build({"gtx1060"}, no61, *rules75));
  ASSERT_FALSE(refused.ok());
  EXPECT_HAS(refused.status().message(), "sm_61");
  EXPECT_LACKS(refused.status().message(), "Ampere");
}

// A GTX 16xx (Turing without tensor cores) gets dp4a for prefill too, never int8 mma.
TEST(QuantizedPlans, AGtx1660RunsQuantizedPrefillOnDp4aNotTensorCores) {
  GraphBuilder b("prefill");
  ValueId x = b.input("x", DType::f16, {128, 512});
  b.output(b.matmul(x, b.constant("w", DType::q6_k, {256, 512}), true, "proj"));
  auto g = b.build();
  ASSERT_TRUE(g.ok());
  Plan p = plan_ok(*g, real_devices({"gtx1660super"}));
  const PlanStep* proj = p.step("proj");
  ASSERT_NE(proj, nullptr);
  EXPECT_EQ(proj->op.choice.tier, Tier::int_dot) << explain(p);
  bool why = false;
  for (const std::string& k : proj->skipped)
    why = why || (k.find("int8_mma skipped: ") == 0 &&
                  k.find("requires tensor cores") != std::string::npos);
  EXPECT_TRUE(why) << explain(p);
}

}  // namespace
}  // namespace duet::testing_planner
