// The "register_blocked" kernels (no shared memory, operands through texel buffers): which device
// gets them first, and the read modes the conformance cases do not reach (vector texels along K or
// N, one element per fetch for misaligned views, several row blocks, split keys).
#include "vulkan_test_util.h"

namespace duet::vulkan::testing {
namespace {

class RegisterBlockedKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = open_vulkan({}, cache_);
    if (!r.ok()) GTEST_SKIP() << "no Vulkan device: " << r.status().message();
    devices_ = std::move(r->devices);
    if (vk(dev()).max_texels() == 0) GTEST_SKIP() << "no uniform texel buffers";
  }
  Device& dev() { return *devices_[0]; }

  // Runs `c` on the register_blocked choice; returns the specialization constants of the last
  // dispatch of `shader` (empty when none ran).
  std::vector<uint32_t> run(const check::Case& c, const std::string& shader) {
    const KernelChoice k = choice_of(dev(), c, Tier::register_blocked);
    EXPECT_TRUE(k.ok) << c.name << ": " << k.reason;
    if (!k.ok) return {};
    check::Outcome o = run_with(dev(), c, k);
    EXPECT_TRUE(o.passed) << c.name << ": " << o.message << " (nmse " << o.metrics.nmse << ")";
    std::vector<uint32_t> spec;
    for (const auto& [name, s] : vk(dev()).recorder().recent)
      if (name.rfind(shader, 0) == 0) spec = s;
    return spec;
  }

  TempDir cache_;
  std::vector<std::unique_ptr<Device>> devices_;
};

// A strided view of a dense [rows, cols] tensor starting `skip` elements in.
TensorDesc offset_view(DType t, int64_t rows, int64_t cols, int64_t skip) {
  TensorDesc d = TensorDesc::contiguous(t, {rows, cols});
  d.offset = skip;
  return d;
}

constexpr uint32_t kModeSpec = 3;  // matmul_blocked.comp: constant_id 3 is the read mode

TEST_F(RegisterBlockedKernels, MatmulReadsVectorTexelsAlongKWhenBIsStoredNByK) {
  OpAttrs tb;
  tb.transpose_b = true;
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    const std::string n = "sg/matmul.nk." + std::string(dtype_name(t));
    auto spec = run(make_case(n, OpKind::matmul, {dense(t, {37, 64}), dense(t, {72, 64})}, tb),
                    "matmul_blocked_");
    ASSERT_GT(spec.size(), kModeSpec) << n;
    EXPECT_EQ(spec[kModeSpec], 1u) << n;
  }
}

TEST_F(RegisterBlockedKernels, MatmulReadsVectorTexelsAlongNWhenBIsStoredKByN) {
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    const std::string n = "sg/matmul.kn." + std::string(dtype_name(t));
    auto spec = run(make_case(n, OpKind::matmul, {dense(t, {2, 19, 40}), dense(t, {40, 136})}),
                    "matmul_blocked_");
    ASSERT_GT(spec.size(), kModeSpec) << n;
    EXPECT_EQ(spec[kModeSpec], 2u) << n;
  }
}

TEST_F(RegisterBlockedKernels, MatmulOfOneRowRuns) {
  OpAttrs tb;
  tb.transpose_b = true;
  auto spec = run(make_case("sg/gemv", OpKind::matmul,
                            {dense(DType::f16, {1, 256}), dense(DType::f16, {200, 256})}, tb),
                  "matmul_blocked_");
  ASSERT_GT(spec.size(), kModeSpec);
  EXPECT_EQ(spec[kModeSpec], 1u);
}

TEST_F(RegisterBlockedKernels, MatmulOfAMisalignedViewReadsOneElementPerFetch) {
  // A starts one element into its buffer: no vector texel holds whole rows of it.
  auto spec = run(make_case("sg/matmul.offset", OpKind::matmul,
                            {offset_view(DType::f16, 9, 64, 1), dense(DType::f16, {64, 16})}),
                  "matmul_blocked_");
  ASSERT_GT(spec.size(), kModeSpec);
  EXPECT_EQ(spec[kModeSpec], 0u);
}

TEST_F(RegisterBlockedKernels, PrefillAttentionCoversSeveralRowBlocks) {
  OpAttrs causal;
  causal.causal = true;
  for (DType t : {DType::f32, DType::f16}) {
    const std::string n = "sg/attention.prefill." + std::string(dtype_name(t));
    run(make_case(n, OpKind::attention,
                  {dense(t, {1, 2, 150, 64}), dense(t, {1, 2, 150, 64}), dense(t, {1, 2, 150, 64})},
                  causal),
        "attention_blocked_");
  }
}

TEST_F(RegisterBlockedKernels, DecodeAttentionSplitsTheKeysAndMergesThePartials) {
  const check::Case c =
      make_case("sg/attention.decode", OpKind::attention,
                {dense(DType::f16, {1, 8, 1, 128}), dense(DType::f16, {1, 2, 3000, 128}),
                 dense(DType::f16, {1, 2, 3000, 128})});
  const KernelChoice k = choice_of(dev(), c, Tier::register_blocked);
  ASSERT_TRUE(k.ok) << k.reason;
  EXPECT_GT(k.launch.splits, 1) << k.launch.str();
  run(c, "attention_blocked_");
  ASSERT_FALSE(vk(dev()).recorder().recent.empty());
  EXPECT_EQ(vk(dev()).recorder().recent.back().first, "attention_combine_f16");
}

TEST_F(RegisterBlockedKernels, AttentionWithMisalignedKeysReadsOneElementPerFetch) {
  TensorDesc k = TensorDesc::contiguous(DType::f16, {1, 1, 33, 64});
  k.offset = 3;
  auto spec =
      run(make_case("sg/attention.offset", OpKind::attention,
                    {dense(DType::f16, {1, 2, 5, 64}), k, dense(DType::f16, {1, 1, 33, 64})}),
          "attention_blocked_");
  ASSERT_EQ(spec.size(), 9u);
  EXPECT_EQ(spec[5], 0u);  // K one element per fetch
  EXPECT_EQ(spec[6], 1u);  // V vector texels
}

DeviceCaps caps_of(DeviceType type) {
  DeviceCaps c;
  c.backend = BackendKind::vulkan;
  c.type = type;
  c.shared_mem_per_block = 32768;
  c.max_threads_per_block = 1024;
  c.subgroup_size = type == DeviceType::cpu ? 8 : 32;
  c.compute_units = 2;
  c.fp16_storage = c.bf16_storage = true;
  return c;
}

std::vector<Tier> tiers(const DeviceCaps& c, const OpDesc& op, Precision p) {
  std::vector<Tier> out;
  for (const KernelChoice& k : rules().choices(c, op))
    if (k.precision == p && k.ok) out.push_back(k.tier);
  return out;
}

TEST(VulkanRules, ACpuDeviceGetsTheRegisterBlockedKernelsFirstAndAGpuTheSharedMemoryOnes) {
  auto mm =
      *make_op(OpKind::matmul, {}, {dense(DType::f16, {64, 64}), dense(DType::f16, {64, 64})});
  auto at = *make_op(OpKind::attention, {},
                     {dense(DType::f16, {1, 8, 16, 64}), dense(DType::f16, {1, 8, 16, 64}),
                      dense(DType::f16, {1, 8, 16, 64})});
  using V = std::vector<Tier>;
  const Tier blocked = Tier::register_blocked;
  EXPECT_EQ(tiers(caps_of(DeviceType::cpu), mm, Precision::f16), (V{blocked, Tier::shared_memory}));
  EXPECT_EQ(tiers(caps_of(DeviceType::discrete_gpu), mm, Precision::f16),
            (V{Tier::shared_memory, blocked}));
  EXPECT_EQ(tiers(caps_of(DeviceType::cpu), at, Precision::f16), (V{blocked, Tier::flash}));
  EXPECT_EQ(tiers(caps_of(DeviceType::discrete_gpu), at, Precision::f16),
            (V{Tier::flash, blocked}));
}

TEST(VulkanRules, RegisterBlocksFollowTheShapeAndTheDevice) {
  auto choice = [](const DeviceCaps& c, const OpDesc& op) {
    for (const KernelChoice& k : rules().choices(c, op))
      if (k.tier == Tier::register_blocked && k.precision == Precision::f32) return k;
    return KernelChoice{};
  };
  OpAttrs tb;
  tb.transpose_b = true;
  auto big = *make_op(OpKind::matmul, tb,
                      {dense(DType::f32, {512, 1024}), dense(DType::f32, {4096, 1024})});
  auto gemv =
      *make_op(OpKind::matmul, tb, {dense(DType::f32, {1, 1024}), dense(DType::f32, {4096, 1024})});
  EXPECT_EQ(choice(caps_of(DeviceType::cpu), big).launch.variant_name(), "blocked_16x8");
  EXPECT_EQ(choice(caps_of(DeviceType::cpu), gemv).launch.variant_name(), "blocked_1x16");
  KernelChoice gpu = choice(caps_of(DeviceType::discrete_gpu), big);
  EXPECT_EQ(gpu.launch.variant_name(), "blocked_4x4");
  EXPECT_EQ(gpu.launch.block_threads % 32, 0);
  // Attention: fewer rows per invocation for a larger head dim; decoding splits the keys.
  auto attn = [](int64_t lq, int64_t d) {
    return *make_op(OpKind::attention, {},
                    {dense(DType::f32, {1, 64, lq, d}), dense(DType::f32, {1, 8, 4096, d}),
                     dense(DType::f32, {1, 8, 4096, d})});
  };
  EXPECT_EQ(choice(caps_of(DeviceType::cpu), attn(1, 64)).launch.variant_name(), "blocked_4x2");
  EXPECT_EQ(choice(caps_of(DeviceType::cpu), attn(1, 128)).launch.variant_name(), "blocked_2x4");
  EXPECT_GT(choice(caps_of(DeviceType::cpu), attn(1, 64)).launch.splits, 0);
  EXPECT_EQ(choice(caps_of(DeviceType::cpu), attn(512, 64)).launch.variant_name(), "blocked_4x8");
}

TEST(VulkanRules, WithoutTexelBuffersTheRegisterBlockedKernelsAreRefusedWithAReason) {
  DeviceCaps c = caps_of(DeviceType::cpu);
  c.max_texel_elements = 0;
  auto mm = *make_op(OpKind::matmul, {}, {dense(DType::f32, {8, 8}), dense(DType::f32, {8, 8})});
  for (const KernelChoice& k : rules().choices(c, mm)) {
    if (k.tier != Tier::register_blocked) continue;
    EXPECT_FALSE(k.ok);
    EXPECT_NE(k.reason.find("texel buffers"), std::string::npos) << k.reason;
  }
  EXPECT_EQ(tiers(c, mm, Precision::f32), (std::vector<Tier>{Tier::shared_memory}));
}

}  // namespace
}  // namespace duet::vulkan::testing
