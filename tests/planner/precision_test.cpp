// Precision as a floor: a kernel at the precision asked or better qualifies and time decides
// among those; below it only where the policy says (fallback=f16 for bf16 on a device without
// bf16, lower=), and explain says so.
#include "fixtures.h"

#include "duet/graph_file.h"

namespace duet::testing_planner {
namespace {

Graph issue_matmul() {
  // The issue's case: f16 activations through a weight stored [N, K].
  GraphBuilder b("mm");
  ValueId x = b.input("x", DType::f16, {512, 14336});
  ValueId w = b.input("w", DType::f16, {4096, 14336});
  b.output(b.matmul(x, w, true, "mm"));
  return *b.build();
}

Graph block_example() {
  auto g = load_graph(DUET_SOURCE_DIR "/examples/block.json");
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? std::move(*g) : Graph{};
}

TEST(Precision, AWiderPrecisionCoversANarrowerOneAndF16AndBf16DoNotCoverEachOther) {
  EXPECT_TRUE(covers(Precision::f32, Precision::f16));
  EXPECT_TRUE(covers(Precision::f32, Precision::bf16));
  EXPECT_TRUE(covers(Precision::f64, Precision::f32));
  EXPECT_TRUE(covers(Precision::f16, Precision::f16));
  EXPECT_FALSE(covers(Precision::f16, Precision::bf16));  // range
  EXPECT_FALSE(covers(Precision::bf16, Precision::f16));  // significand
  EXPECT_FALSE(covers(Precision::f16, Precision::f32));
  EXPECT_TRUE(holds(DType::f32, DType::bf16));
  EXPECT_FALSE(holds(DType::f16, DType::bf16));
  EXPECT_FALSE(holds(DType::i8, DType::i32));
}

TEST(Precision, F16OnACpuAndLavapipeRunsOnTheCpuInF32BecauseItIsFaster) {
  Plan p = plan_ok(issue_matmul(), real_devices({"lavapipe", "ryzen7-5800x"}));
  const PlanStep* s = p.step("mm");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(p.devices[static_cast<size_t>(s->device)].caps.backend, BackendKind::cpu) << explain(p);
  EXPECT_EQ(s->op.choice.precision, Precision::f32);
  EXPECT_EQ(s->requested, Precision::f16);
  EXPECT_HAS(s->precision_reason, "at least as precise");
  const std::string text = explain(p);
  EXPECT_HAS(text,
             "vulkan:0 register_blocked f16: estimated");  // lavapipe lost on time, not precision
  EXPECT_LACKS(text, "f32 only");
}

TEST(Precision, TheBlockExampleRunsEntirelyOnTheCpuBesideLavapipe) {
  Plan p = plan_ok(block_example(), real_devices({"lavapipe", "ryzen7-5800x"}));
  for (const PlanStep& s : p.steps)
    if (s.kind == StepKind::kernel) {
      EXPECT_EQ(s.device, 1) << s.name << "\n" << explain(p);
    }
  EXPECT_TRUE(p.copies().empty());
}

TEST(Precision, LowerPrecisionIsUsedOnlyWhenThePolicyAllowsItAndExplainSaysSo) {
  // f32 attention on an A100: f32 only by default; with lower=f16 the f16 flash kernel, faster.
  Plan strict = plan_ok(attention_graph(DType::f32, 8, 1024), test_devices({"a100"}));
  EXPECT_EQ(strict.step("attn")->op.choice.precision, Precision::f32);
  EXPECT_HAS(explain(strict), "f16 is less precise than the f32 the graph asks for");
  EXPECT_HAS(explain(strict), "lower=f16 allows it");

  Plan lowered =
      plan_ok(attention_graph(DType::f32, 8, 1024), test_devices({"a100"}), policy("lower=f16"));
  const PlanStep* a = lowered.step("attn");
  EXPECT_EQ(a->op.choice.precision, Precision::f16) << explain(lowered);
  EXPECT_EQ(a->op.choice.tier, Tier::flash);
  EXPECT_HAS(a->precision_reason, "allowed by policy (lower=f16)");
  bool said = false;
  for (const std::string& s : a->policy) said = said || s.find("lower=f16") != std::string::npos;
  EXPECT_TRUE(said) << explain(lowered);

  // Per op kind: only attention may go lower; the scale after it keeps f32.
  Plan per_op = plan_ok(attention_graph(DType::f32, 8, 1024), test_devices({"a100"}),
                        policy("lower.attention=f16"));
  EXPECT_EQ(per_op.step("attn")->op.choice.precision, Precision::f16);
  EXPECT_EQ(per_op.step("out")->op.choice.precision, Precision::f32);
  Plan none = plan_ok(attention_graph(DType::f32, 8, 1024), test_devices({"a100"}),
                      policy("lower=f16;lower.attention=none"));
  EXPECT_EQ(none.step("attn")->op.choice.precision, Precision::f32);
}

TEST(Precision, Bf16FallsBackToF16OnlyOnADeviceWithoutBf16) {
  Plan ampere = plan_ok(attention_graph(DType::bf16, 8, 1024), test_devices({"a100"}));
  EXPECT_EQ(ampere.step("attn")->op.choice.precision, Precision::bf16);
  Plan turing = plan_ok(attention_graph(DType::bf16, 8, 1024), test_devices({"rtx2080ti"}));
  EXPECT_EQ(turing.step("attn")->op.choice.precision, Precision::f16);
  EXPECT_HAS(turing.step("attn")->precision_reason, "fallback=f16");
  // fallback=f32 keeps the floor: an f32 kernel that reads bf16.
  Plan safe = plan_ok(attention_graph(DType::bf16, 8, 1024), test_devices({"rtx2080ti"}),
                      policy("fallback=f32"));
  EXPECT_EQ(safe.step("attn")->op.choice.precision, Precision::f32);
}

TEST(Precision, AForcedPrecisionStillWinsOverTime) {
  Plan p =
      plan_ok(issue_matmul(), real_devices({"lavapipe", "ryzen7-5800x"}), policy("precision=f16"));
  const PlanStep* s = p.step("mm");
  EXPECT_EQ(s->op.choice.precision, Precision::f16) << explain(p);
  EXPECT_EQ(p.devices[static_cast<size_t>(s->device)].caps.backend, BackendKind::vulkan)
      << "only lavapipe has an f16 kernel";
}

TEST(Precision, LowerTermsParseAndPrintBack) {
  Policy p = policy("lower=bf16,f16;lower.matmul=none");
  EXPECT_EQ(p.lower, (std::vector<Precision>{Precision::bf16, Precision::f16}));
  EXPECT_TRUE(p.op_lower.at(OpKind::matmul).empty());
  EXPECT_EQ(p.lower_allowed(OpKind::softmax, Precision::bf16), "lower=bf16,f16");
  EXPECT_EQ(p.lower_allowed(OpKind::matmul, Precision::bf16), "");
  EXPECT_EQ(*parse_policy(p.str()), p);
  for (const char* bad : {"lower=f17", "lower.bogus=f16", "lower=auto", "lower.reshape=f16"}) {
    auto r = parse_policy(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
}

}  // namespace
}  // namespace duet::testing_planner
