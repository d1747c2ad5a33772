// The policy syntax (DUET_POLICY, --policy, the API): what parses, what each term means, and the
// errors for what does not parse. Overrides winning in plans is tested here too.
#include <cstdlib>

#include "fixtures.h"

namespace duet::testing_planner {
namespace {

std::string parse_error(const std::string& text) {
  auto p = parse_policy(text, {}, "DUET_POLICY");
  EXPECT_FALSE(p.ok()) << text;
  return p.ok() ? std::string() : p.status().message();
}

TEST(Policy, TheDocumentedExampleParses) {
  Policy p = policy("deny=cuda.flash;precision=f32;device=vulkan:0");
  ASSERT_EQ(p.deny.size(), 1u);
  EXPECT_EQ(p.deny[0].backend, BackendKind::cuda);
  EXPECT_EQ(p.deny[0].tier, Tier::flash);
  EXPECT_EQ(p.precision, Precision::f32);
  ASSERT_EQ(p.allow.size(), 1u);
  EXPECT_EQ(p.allow[0].device, "vulkan:0");
  EXPECT_EQ(p.tier_denied(BackendKind::cuda, "cuda:1", Tier::flash), "deny=cuda.flash");
  EXPECT_EQ(p.tier_denied(BackendKind::cuda, "cuda:1", Tier::tiled), "");
  EXPECT_EQ(p.device_denied(BackendKind::cuda, "cuda:0"), "allow=vulkan:0");
  EXPECT_EQ(p.device_denied(BackendKind::vulkan, "vulkan:0"), "");
}

TEST(Policy, EveryKeyParsesAndPrintsBack) {
  const std::string text =
      "allow=cuda,cpu:0,vulkan.generic;deny=flash,cuda:1.tiled;precision=bf16;"
      "precision.attention=f32;fallback=f32;budget=4GiB;budget.cuda:0=512MiB;budget.vulkan=1000;"
      "split=off";
  Policy p = policy(text);
  EXPECT_EQ(p.allow.size(), 3u);
  EXPECT_EQ(p.deny.size(), 2u);
  EXPECT_FALSE(p.deny[0].backend.has_value()) << "a bare tier applies to every backend";
  EXPECT_EQ(p.op_precision.at(OpKind::attention), Precision::f32);
  EXPECT_EQ(p.forced_precision(OpKind::attention), Precision::f32);
  EXPECT_EQ(p.forced_precision(OpKind::matmul), Precision::bf16);
  EXPECT_EQ(p.bf16_fallback, Precision::f32);
  EXPECT_EQ(p.budget, 4ull << 30);
  EXPECT_EQ(p.budget_for(BackendKind::cuda, "cuda:0"), 512ull << 20);
  EXPECT_EQ(p.budget_for(BackendKind::vulkan, "vulkan:3"), 1000u);
  EXPECT_EQ(p.budget_for(BackendKind::cpu, "cpu:0"), 4ull << 30);
  EXPECT_FALSE(p.split);
  auto again = parse_policy(p.str());
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(*again, p) << p.str();
}

// Vulkan's shared-memory GEMM was 'tiled' before it was 'shared_memory': a policy written then
// still means it on Vulkan, and means CUDA's tiled tier on CUDA.
TEST(Policy, TiledStillNamesVulkansSharedMemoryKernels) {
  Policy p = policy("deny=vulkan.tiled");
  EXPECT_EQ(p.tier_denied(BackendKind::vulkan, "vulkan:0", Tier::shared_memory),
            "deny=vulkan.tiled");
  EXPECT_EQ(p.tier_denied(BackendKind::cuda, "cuda:0", Tier::tiled), "");
  Policy bare = policy("deny=tiled");
  EXPECT_EQ(bare.tier_denied(BackendKind::vulkan, "vulkan:0", Tier::shared_memory), "deny=tiled");
  EXPECT_EQ(bare.tier_denied(BackendKind::cuda, "cuda:0", Tier::tiled), "deny=tiled");
  EXPECT_EQ(bare.tier_denied(BackendKind::cuda, "cuda:0", Tier::shared_memory), "");
  Policy allow = policy("allow=vulkan.tiled");
  EXPECT_EQ(allow.tier_denied(BackendKind::vulkan, "vulkan:0", Tier::shared_memory), "");
  EXPECT_EQ(allow.tier_denied(BackendKind::vulkan, "vulkan:0", Tier::register_blocked),
            "allow=vulkan.tiled");
  EXPECT_EQ(policy("deny=vulkan.shared_memory")
                .tier_denied(BackendKind::vulkan, "vulkan:0", Tier::shared_memory),
            "deny=vulkan.shared_memory");
}

TEST(Policy, TierAllowsRestrictOnlyTheBackendTheyName) {
  Policy p = policy("allow=cuda.tiled");
  EXPECT_EQ(p.tier_denied(BackendKind::cuda, "cuda:0", Tier::flash), "allow=cuda.tiled");
  EXPECT_EQ(p.tier_denied(BackendKind::cuda, "cuda:0", Tier::tiled), "");
  EXPECT_EQ(p.tier_denied(BackendKind::vulkan, "vulkan:0", Tier::flash), "");
  EXPECT_EQ(p.device_denied(BackendKind::vulkan, "vulkan:0"), "") << "tier allows place nothing";
}

TEST(Policy, LayersApplyInOrder) {
  Policy env = policy("deny=cuda.flash;precision=f16");
  auto cli = parse_policy("precision=auto;budget=1GiB", env, "--policy");
  ASSERT_TRUE(cli.ok());
  EXPECT_EQ(cli->deny.size(), 1u);
  EXPECT_FALSE(cli->precision.has_value());
  EXPECT_EQ(cli->budget, 1ull << 30);
}

TEST(Policy, SpacesAreFineAndEmptyTermsAreErrors) {
  Policy p = policy(" deny = cuda.flash ;  split = on ");
  EXPECT_EQ(p.deny.size(), 1u);
  EXPECT_TRUE(p.split);
  EXPECT_TRUE(policy("").empty());
  EXPECT_TRUE(policy("  ").empty());
  // A doubled or stray ';' is a mistake (a term lost in editing), not nothing.
  EXPECT_HAS(parse_error("deny=cuda.flash;;split=on"), "term 2 '': an empty term");
  EXPECT_HAS(parse_error(";deny=cuda.flash"), "term 1 '': an empty term");
  EXPECT_HAS(parse_error("deny=cuda.flash;"), "term 2 '': an empty term");
}

TEST(Policy, MistakesAreErrorsNamingTheTerm) {
  EXPECT_HAS(parse_error("deny=cdua.flash"), "DUET_POLICY: term 1 'deny=cdua.flash'");
  EXPECT_HAS(parse_error("deny=cdua.flash"), "'cdua'");
  EXPECT_HAS(parse_error("split=on;deny=cuda.flsh"), "term 2");
  EXPECT_HAS(parse_error("deny=cuda.flsh"), "not a kernel tier");
  EXPECT_HAS(parse_error("deny=flsh"), "not a backend");
  EXPECT_HAS(parse_error("deny=cuda:x"), "device id");
  EXPECT_HAS(parse_error("precision=f8"), "expected a precision");
  EXPECT_HAS(parse_error("precision.conv=f16"), "'conv'");
  EXPECT_HAS(parse_error("precision.reshape=f16"), "op kind with a kernel");
  EXPECT_HAS(parse_error("fallback=bf16"), "expected f16 or f32");
  EXPECT_HAS(parse_error("budget=lots"), "4GiB");
  EXPECT_HAS(parse_error("budget=4XB"), "4GiB");
  EXPECT_HAS(parse_error("budget.gpu=4GiB"), "'gpu'");
  EXPECT_HAS(parse_error("split=maybe"), "on or off");
  EXPECT_HAS(parse_error("no_flash_attention=true"), "unknown key 'no_flash_attention'");
  EXPECT_HAS(parse_error("deny"), "KEY=VALUE");
  EXPECT_HAS(parse_error("deny="), "a value");
  EXPECT_HAS(parse_error("device=cuda.flash"), "use allow= for tiers");
}

TEST(Policy, EveryTierIsNamedAndAnOldNameSaysTheNewOne) {
  for (Tier t : all_tiers()) {
    EXPECT_EQ(parse_tier(tier_name(t)), t);
    Policy p = policy("deny=" + std::string(tier_name(t)));
    ASSERT_EQ(p.deny.size(), 1u);
    EXPECT_EQ(p.deny[0].tier, t);
  }
  // The Vulkan kernels without shared memory were called "subgroup", though they use no
  // subgroup operations.
  for (const char* text : {"deny=subgroup", "deny=vulkan.subgroup", "allow=vulkan:0.subgroup"}) {
    EXPECT_HAS(parse_error(text), "no longer a tier name");
    EXPECT_HAS(parse_error(text), "'register_blocked'");
  }
  EXPECT_EQ(policy("deny=vulkan.register_blocked").deny[0].tier, Tier::register_blocked);
  EXPECT_EQ(policy("deny=cuda.pipelined").deny[0].tier, Tier::pipelined);
}

TEST(Policy, SizesParse) {
  EXPECT_EQ(*parse_size("4GiB"), 4ull << 30);
  EXPECT_EQ(*parse_size("1.5 GiB"), 3ull << 29);
  EXPECT_EQ(*parse_size("2GB"), 2000000000u);
  EXPECT_EQ(*parse_size("512k"), 512u * 1024);
  EXPECT_EQ(*parse_size("123"), 123u);
  EXPECT_FALSE(parse_size("").ok());
  EXPECT_FALSE(parse_size("-1GiB").ok());
  EXPECT_FALSE(parse_size("1..5GiB").ok());
  EXPECT_EQ(format_bytes(3ull << 29), "1.50 GiB");
  EXPECT_EQ(format_bytes(100), "100 B");
}

TEST(Policy, ComesFromTheEnvironment) {
  ::setenv("DUET_POLICY", "deny=cuda.flash", 1);
  auto p = policy_from_env();
  ::unsetenv("DUET_POLICY");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->str(), "deny=cuda.flash");
  ::setenv("DUET_POLICY", "deny=nothing", 1);
  auto bad = policy_from_env();
  ::unsetenv("DUET_POLICY");
  ASSERT_FALSE(bad.ok());
  EXPECT_HAS(bad.status().message(), "DUET_POLICY");
  EXPECT_TRUE(policy_from_env()->empty());
}

// Overrides in plans (test rules; the real rules are in failures_test.cpp).

TEST(PolicyInPlans, DeniedFlashIsNotUsedAndExplainSaysThePolicyDecided) {
  Plan p = plan_ok(attention_graph(DType::bf16), test_devices({"a100"}), policy("deny=cuda.flash"));
  const PlanStep* a = p.step("attn");
  ASSERT_NE(a, nullptr);
  EXPECT_NE(a->op.choice.tier, Tier::flash);
  EXPECT_EQ(a->op.choice.precision, Precision::bf16) << "the policy denies a tier, not bf16";
  const std::string text = explain(p);
  EXPECT_HAS(text, "policy: deny=cuda.flash");
  EXPECT_HAS(text, "flash skipped: denied by policy (deny=cuda.flash)");
  EXPECT_HAS(text, "[policy]");
  EXPECT_HAS(text, "policy     deny=cuda.flash removed cuda:0 flash bf16, cuda:0 flash f16");
}

TEST(PolicyInPlans, ForcedPrecisionWinsAndShows) {
  Plan p = plan_ok(attention_graph(DType::f16), test_devices({"a100"}),
                   policy("precision.attention=f32"));
  const PlanStep* a = p.step("attn");
  EXPECT_EQ(a->op.choice.precision, Precision::f32);
  EXPECT_HAS(a->precision_reason, "forced by policy (precision.attention=f32)");
  EXPECT_EQ(p.step("out")->op.choice.precision, Precision::f16) << "other ops are unaffected";
}

TEST(PolicyInPlans, ForcingBf16WhereNothingHasItNamesTheOp) {
  auto p = make_plan(attention_graph(DType::f16), test_devices({"rtx2080ti", "t4"}),
                     policy("precision=bf16"));
  ASSERT_FALSE(p.ok());
  EXPECT_HAS(p.status().message(), "attention 'attn'");
  EXPECT_HAS(p.status().message(), "cannot be placed");
  EXPECT_HAS(p.status().message(), "precision=bf16");
  EXPECT_HAS(p.status().message(), "cuda:1 (t4)");
}

TEST(PolicyInPlans, DenyingEveryDeviceThatCanRunAnOpNamesTheOp) {
  auto p = make_plan(attention_graph(DType::f16), test_devices({"rtx2080ti"}),
                     policy("deny=cuda.tiled,cuda.generic"));
  ASSERT_FALSE(p.ok());
  EXPECT_HAS(p.status().message(), "attention 'attn'");
  EXPECT_HAS(p.status().message(), "denied by policy (deny=cuda.tiled)");
}

TEST(PolicyInPlans, DenyingEveryDeviceIsAnError) {
  auto p = make_plan(attention_graph(DType::f16), test_devices({"rtx2080ti"}), policy("deny=cuda"));
  ASSERT_FALSE(p.ok());
  EXPECT_HAS(p.status().message(), "leaves no device");
  EXPECT_HAS(p.status().message(), "cuda:0 (deny=cuda)");
}

TEST(PolicyInPlans, DeviceChoiceWins) {
  Plan p = plan_ok(attention_graph(DType::f16), test_devices({"rtx3090", "rtx2080ti"}),
                   policy("device=cuda:1"));
  for (const PlanStep& s : p.steps)
    if (s.kind == StepKind::kernel) {
      EXPECT_EQ(s.device, 1) << s.name;
    }
  EXPECT_HAS(explain(p), "policy     allow=cuda:1 removed cuda:0 (the device)");
}

TEST(PolicyInPlans, APolicyTermMatchingNothingIsReported) {
  Plan p =
      plan_ok(attention_graph(DType::f16), test_devices({"rtx3090"}), policy("deny=vulkan.flash"));
  EXPECT_HAS(explain(p), "deny=vulkan.flash matches no device");
}

TEST(PolicyInPlans, BudgetFromPolicyIsReported) {
  Plan p =
      plan_ok(attention_graph(DType::f16), test_devices({"rtx3090"}), policy("budget.cuda:0=1GiB"));
  EXPECT_EQ(p.memory[0].budget_bytes, 1ull << 30);
  EXPECT_HAS(explain(p), "budget 1.00 GiB (policy budget.cuda:0=1GiB)");
}

}  // namespace
}  // namespace duet::testing_planner
