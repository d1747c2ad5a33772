// Tensors larger than one binding (maxStorageBufferRange: 128 MiB on lavapipe) still run: the op
// is split so that every binding is a window of its buffer that fits.
#include "vulkan_test_util.h"

namespace duet::vulkan::testing {
namespace {

// Runs `c` with `tier` and expects a correct result from more than one dispatch.
void expect_split_and_correct(Device& d, const check::Case& c, Tier tier) {
  const KernelChoice k = choice_of(d, c, tier);
  ASSERT_TRUE(k.ok) << k.reason;
  const uint64_t before = vk(d).recorder().dispatches;
  check::Outcome o = run_with(d, c, k);
  EXPECT_TRUE(o.passed) << c.name << ": " << o.message;
  EXPECT_GT(vk(d).recorder().dispatches - before, 1u) << c.name << " ran in one dispatch";
}

TEST(VulkanWindows, MatmulWithAWeightLargerThanOneBindingRuns) {
  TempDir cache;
  auto r = open_vulkan({}, cache);
  if (!r.ok()) GTEST_SKIP() << r.status().message();
  Device& d = *r->devices[0];
  // An f32 weight of K rows just past the device's binding range (lavapipe: 128 MiB, so
  // 4096 x 8704, 136 MiB), stored both ways round: two windows. No larger, as drawing the inputs
  // and the float64 reference take most of the test's time.
  const int64_t K = 4096;
  const uint64_t range = d.caps().max_buffer_range;
  if (range > (1ull << 30)) GTEST_SKIP() << "a binding range of " << range << " bytes: too large";
  const int64_t N = static_cast<int64_t>(range / (4 * K)) + 512;
  OpAttrs tb;
  tb.transpose_b = true;
  for (const check::Case& c :
       {make_case("window/matmul.kn", OpKind::matmul,
                  {dense(DType::f32, {2, K}), dense(DType::f32, {K, N})}),
        make_case("window/matmul.nk", OpKind::matmul,
                  {dense(DType::f32, {2, K}), dense(DType::f32, {N, K})}, tb)}) {
    // The shared-memory kernel binds storage-buffer windows: split.
    expect_split_and_correct(d, c, Tier::shared_memory);
  }
}

// The "register_blocked" kernels read their operands through texel buffer views, whose limit is a
// count of texels (maxTexelBufferElements): past it the op is split the same way.
TEST(VulkanWindows, OperandsPastTheTexelLimitAreSplit) {
  TempDir cache;
  auto r = open_vulkan({}, cache);
  if (!r.ok()) GTEST_SKIP() << r.status().message();
  Device& d = *r->devices[0];
  if (vk(d).max_texels() == 0) GTEST_SKIP() << "no uniform texel buffers";
  vk(d).set_max_texels(4096);
  OpAttrs tb, causal;
  tb.transpose_b = true;
  causal.causal = true;
  for (const check::Case& c :
       {make_case("texels/matmul.kn", OpKind::matmul,
                  {dense(DType::f32, {9, 96}), dense(DType::f32, {96, 72})}),
        make_case("texels/matmul.nk.f16", OpKind::matmul,
                  {dense(DType::f16, {9, 96}), dense(DType::f16, {72, 96})}, tb),
        make_case("texels/attention", OpKind::attention,
                  {dense(DType::f16, {2, 4, 9, 64}), dense(DType::f16, {2, 2, 40, 64}),
                   dense(DType::f16, {2, 2, 40, 64})},
                  causal)}) {
    expect_split_and_correct(d, c, Tier::register_blocked);
  }
}

TEST(VulkanWindows, EmbeddingTableLargerThanOneBindingRuns) {
  TempDir cache;
  auto r = open_vulkan({}, cache);
  if (!r.ok()) GTEST_SKIP() << r.status().message();
  Device& d = *r->devices[0];
  // Shrink the window instead of allocating a table past 128 MiB: same code path.
  vk(d).set_max_window(4096);
  check::Case c = make_case("window/embedding", OpKind::embedding,
                            {dense(DType::f32, {300, 33}), dense(DType::i32, {7, 5})}, {},
                            {check::Fill::unit, check::Fill::ids});
  c.ids_range = 300;
  const uint64_t before = vk(d).recorder().dispatches;
  check::Outcome o = run_on(d, c);
  EXPECT_TRUE(o.passed) << o.message;
  EXPECT_GE(vk(d).recorder().dispatches - before, 10u);
}

// With a 1.5 KiB window every op of the case set is split into many dispatches; each case either
// gives the reference's answer or is refused with a reason (a single row that cannot fit). Once
// eight cases of an op kind have run split and passed, its other cases are left to the conformance
// suite (they run unsplit there): the window arithmetic is per op kind, and this keeps the test
// short.
TEST(VulkanWindows, EveryOpGivesTheSameAnswerInSmallWindows) {
  TempDir cache;
  auto r = open_vulkan({}, cache);
  if (!r.ok()) GTEST_SKIP() << r.status().message();
  Device& d = *r->devices[0];
  vk(d).set_max_window(1536);
  std::map<OpKind, int> split_and_passed;
  // The two cases of this test first, then the case set.
  std::vector<check::Case> cases = {
      make_case("window/add", OpKind::add, {dense(DType::f32, {40, 50}), dense(DType::f32, {50})}),
      make_case("window/softmax", OpKind::softmax, {dense(DType::f16, {6, 300})})};
  for (check::Case& c : check::cases(false)) cases.push_back(std::move(c));
  for (const check::Case& c : cases) {
    if (c.inputs[0].dtype == DType::bf16) continue;  // f32 and f16 keep the run short
    if (split_and_passed[c.kind] >= 8) continue;
    const uint64_t before = vk(d).recorder().dispatches;
    check::Outcome o = run_on(d, c);
    const uint64_t n = vk(d).recorder().dispatches - before;
    if (o.passed) {
      if (n > 1) ++split_and_passed[c.kind];
      continue;
    }
    // Inputs the device does not read as given reach it through the planner's casts.
    if (o.message.rfind("no usable kernel choice", 0) == 0) continue;
    EXPECT_NE(o.message.find("cannot be split further"), std::string::npos)
        << c.name << ": " << o.message;
  }
  for (OpKind k : {OpKind::matmul, OpKind::add, OpKind::exp, OpKind::softmax, OpKind::rmsnorm,
                   OpKind::rope, OpKind::attention, OpKind::cast, OpKind::copy, OpKind::concat,
                   OpKind::embedding, OpKind::write_slice})
    EXPECT_GT(split_and_passed[k], 0) << op_name(k) << " never ran split into windows";
}

}  // namespace
}  // namespace duet::vulkan::testing
