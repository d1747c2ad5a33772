// The five failures the project was born from (docs: /work/shared/MISSION.md), planned on
// capability profiles with the real backends' rules: no hardware needed.
#include "fixtures.h"

#include "cuda/rules.h"

namespace duet::testing_planner {
namespace {

bool uses_tier(const Plan& p, Tier tier) {
  for (const PlanStep& s : p.steps)
    if (s.kind == StepKind::kernel && s.op.choice.tier == tier) return true;
  return false;
}

// 1. A bf16 model on a Turing card: fp16 with fp32 accumulation and tiled SDPA, chosen by the
//    engine, with the reasons; on Ampere: bf16 and flash.

TEST(Failure1, Bf16AttentionOnRtx2080TiRunsFp16TiledSdpaAndSaysWhy) {
  Plan p = plan_ok(attention_graph(DType::bf16), real_devices({"rtx2080ti"}));
  const PlanStep* a = p.step("attn");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->op.choice.precision, Precision::f16) << explain(p);
  EXPECT_EQ(a->op.choice.tier, Tier::tiled) << explain(p);
  EXPECT_FALSE(uses_tier(p, Tier::flash));
  EXPECT_HAS(a->precision_reason, "bf16 asked");
  bool flash_explained = false;
  for (const std::string& s : a->skipped)
    flash_explained = flash_explained || (s.find("flash skipped") != std::string::npos &&
                                          s.find("sm_80") != std::string::npos);
  EXPECT_TRUE(flash_explained) << explain(p);
}

TEST(Failure1, Bf16AttentionOnA100RunsBf16Flash) {
  Plan p = plan_ok(attention_graph(DType::bf16), real_devices({"a100"}));
  const PlanStep* a = p.step("attn");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->op.choice.precision, Precision::bf16) << explain(p);
  EXPECT_EQ(a->op.choice.tier, Tier::flash) << explain(p);
}

// 2. A 2080 Ti (sm_75) and a 3090 (sm_86) in one box: each gets its own architecture's kernels;
//    a build lacking sm_86 says what the 3090 gets (PTX JIT or nothing) and plans around it.

// Two independent attention branches; a 3.5 MiB budget holds one branch (and an output).
Graph two_branches(DType t) {
  GraphBuilder b("two_branches");
  for (const char* n : {"a", "b"}) {
    const std::string s(n);
    ValueId q = b.input("q_" + s, t, {1, 16, 512, 64});
    ValueId w = b.constant("w_" + s, t, {64, 64});
    ValueId att = b.attention(b.matmul(q, w, false, "proj_" + s), q, q, true, "attn_" + s);
    b.output(b.scale(att, 0.5f, "out_" + s));
  }
  auto g = b.build();
  EXPECT_TRUE(g.ok()) << g.status().message();
  return std::move(*g);
}

TEST(Failure2, TuringAndAmpereEachGetTheirOwnKernels) {
  Plan p = plan_ok(two_branches(DType::f16), real_devices({"rtx2080ti", "rtx3090"}),
                   policy("budget=3.5MiB"));
  ASSERT_EQ(p.devices_used().size(), 2u) << explain(p);
  for (const PlanStep& s : p.steps) {
    if (s.kind != StepKind::kernel || s.op.op.kind != OpKind::attention) continue;
    EXPECT_EQ(s.op.choice.tier, s.device == 0 ? Tier::tiled : Tier::flash) << s.name << "\n"
                                                                           << explain(p);
  }
}

TEST(Failure2, ABuildWithoutSm86RunsThe3090ThroughPtxJitAndSaysSo) {
  const cuda::BuildArchs archs{{75}, 75, {}, false};
  auto rules = cuda::make_rules(archs);
  Plan p =
      plan_ok(attention_graph(DType::f16), with_build({"rtx2080ti", "rtx3090"}, archs, *rules));
  const std::string text = explain(p);
  EXPECT_HAS(text, "PTX compute_75 JIT-compiled for sm_86");
  EXPECT_EQ(p.step("attn")->device, 1) << text;
}

TEST(Failure2, ABuildWithNoImageForThe3090PlansEverythingOnThe2080Ti) {
  const cuda::BuildArchs archs{{75}, 0, {}, false};
  auto rules = cuda::make_rules(archs);
  Plan p =
      plan_ok(attention_graph(DType::f16), with_build({"rtx2080ti", "rtx3090"}, archs, *rules));
  const std::string text = explain(p);
  for (const PlanStep& s : p.steps)
    if (s.kind == StepKind::kernel) {
      EXPECT_EQ(s.device, 0) << s.name << "\n" << text;
    }
  EXPECT_HAS(text, "no kernel image for sm_86");
  EXPECT_HAS(text, "cuda:1 (all ");  // the 3090 refused every choice for one reason, said once
}

// 3. A graph too large for one T4 splits across two (or says clearly why it cannot).

Graph too_big_for_a_t4() {
  return mlp_stack(DType::f16, 128, 8192, 8);  // 128 weights of 128 MiB: 16 GiB
}

TEST(Failure3, AGraphTooLargeForOneT4SplitsAcrossTwo) {
  Plan p = plan_ok(too_big_for_a_t4(), real_devices({"t4", "t4"}));
  ASSERT_EQ(p.devices_used().size(), 2u) << explain(p);
  for (const DeviceMemoryPlan& m : p.memory) EXPECT_LE(m.peak_bytes, m.budget_bytes);
  EXPECT_EQ(p.copies().size(), 1u) << "the residual stream crosses once";
  EXPECT_HAS(explain(p), "moved from cuda:0 to cuda:1");
}

TEST(Failure3, WithSplittingForbiddenItIsAClearError) {
  auto p = make_plan(too_big_for_a_t4(), real_devices({"t4", "t4"}), policy("split=off"));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::out_of_memory);
  EXPECT_HAS(p.status().message(), "cuda:0 (t4)");
  EXPECT_HAS(p.status().message(), "budget of 14.0 GiB");  // 14.8 GiB less the reserve
  EXPECT_HAS(p.status().message(), "split=off");
}

TEST(Failure3, OneT4AloneSaysItDoesNotFit) {
  auto p = make_plan(too_big_for_a_t4(), real_devices({"t4"}));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::out_of_memory);
  EXPECT_HAS(p.status().message(), "cuda:0 (t4)");
}

// 4. A GTX 1060 (sm_61, no tensor cores): everything still plans, on the generic tier or on
//    another device, with the reason.

TEST(Failure4, AGtx1060WithACpuPlansEverything) {
  Graph g = attention_graph(DType::f16);
  Plan p = plan_ok(g, real_devices({"gtx1060", "ryzen7-5800x"}));
  const std::string text = explain(p);
  for (const PlanStep& s : p.steps) {
    if (s.kind != StepKind::kernel || s.node < 0) continue;
    if (s.device == 0) {
      EXPECT_NE(s.op.choice.tier, Tier::flash) << s.name;
      EXPECT_NE(s.op.choice.tier, Tier::tiled) << s.name;
    } else {
      bool said = false;
      for (const Alternative& a : s.rejected)
        said = said || (a.device == "cuda:0" && !a.reason.empty());
      EXPECT_TRUE(said) << s.name << " left the 1060 without saying why\n" << text;
    }
  }
}

TEST(Failure4, AGtx1060AloneEitherPlansOrSaysWhichOpAndWhy) {
  auto p = make_plan(attention_graph(DType::f16), real_devices({"gtx1060"}));
  if (p.ok()) {
    EXPECT_FALSE(uses_tier(*p, Tier::flash));
    EXPECT_FALSE(uses_tier(*p, Tier::tiled));
  } else {
    EXPECT_HAS(p.status().message(), "cannot be placed");
    EXPECT_HAS(p.status().message(), "cuda:0 (gtx1060)");
  }
}

TEST(Failure4, ACuda12BuildWithSm61RunsTheGenericTierOnThe1060) {
  const cuda::BuildArchs archs{{61, 70, 75, 80}, 80, {}, false};
  auto rules = cuda::make_rules(archs);
  Plan p = plan_ok(attention_graph(DType::f16), with_build({"gtx1060"}, archs, *rules));
  for (const PlanStep& s : p.steps)
    if (s.kind == StepKind::kernel && s.node >= 0) {
      EXPECT_EQ(s.op.choice.tier, Tier::generic) << s.name;
    }
  const PlanStep* a = p.step("attn");
  ASSERT_NE(a, nullptr) << "the 1060 must run attention on the generic tier";
  bool said = false;
  for (const std::string& s : a->skipped)
    said = said || s.find("flash skipped") != std::string::npos;
  EXPECT_TRUE(said) << explain(p);
}

// 5. A setting that must win: deny flash on an A100, and explain shows the policy decided.

TEST(Failure5, DenyFlashOnA100IsHonouredAndExplainSaysThePolicyDecided) {
  Plan p = plan_ok(attention_graph(DType::bf16), real_devices({"a100"}), policy("deny=cuda.flash"));
  EXPECT_FALSE(uses_tier(p, Tier::flash)) << explain(p);
  const PlanStep* a = p.step("attn");
  ASSERT_NE(a, nullptr);
  EXPECT_FALSE(a->policy.empty());
  const std::string text = explain(p);
  EXPECT_HAS(text, "policy: deny=cuda.flash");
  EXPECT_HAS(text, "flash skipped: denied by policy (deny=cuda.flash)");
  // The same from the environment variable's syntax, as a user would set it.
  Plan q = plan_ok(attention_graph(DType::bf16), real_devices({"a100"}), policy("deny=flash"));
  EXPECT_FALSE(uses_tier(q, Tier::flash));
}

TEST(Failure5, ForbiddingEveryAttentionKernelIsAnErrorNotAFallback) {
  auto p = make_plan(attention_graph(DType::bf16), real_devices({"a100"}),
                     policy("deny=cuda.flash,cuda.tiled,cuda.generic"));
  ASSERT_FALSE(p.ok());
  EXPECT_HAS(p.status().message(), "attention 'attn'");
  EXPECT_HAS(p.status().message(), "denied by policy");
}

}  // namespace
}  // namespace duet::testing_planner
