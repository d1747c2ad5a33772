// Block-quantized weights on Vulkan: matmul and embedding read the compressed blocks (the
// conformance suite runs every quantized case of the check set on every Vulkan device; these
// check what is Vulkan-specific: the register blocks of decode and prefill, weights and tables
// past the texel limit split into views, bad ids reported, and the refusals that remain).
#include <gtest/gtest.h>

#include "vulkan_test_util.h"

namespace duet::vulkan::testing {
namespace {

OpAttrs weight_nk() {
  OpAttrs a;
  a.transpose_b = true;
  return a;
}

class QuantKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = open_vulkan({}, cache_);
    if (!r.ok()) GTEST_SKIP() << r.status().message();
    devices_ = std::move(r->devices);
  }
  Device& dev() { return *devices_[0]; }
  TempDir cache_;
  std::vector<std::unique_ptr<Device>> devices_;
};

// Decode (one row), batched decode and prefill-sized blocks, each with odd N and activations
// that are vector-aligned or strided, for the formats models ship in most.
TEST_F(QuantKernels, MatmulMatchesTheReferenceAtEveryBlockShape) {
  for (DType q : {DType::q8_0, DType::q4_0, DType::q4_k, DType::q6_k, DType::q4_z}) {
    const int64_t K = dtype_block_elems(q) == 32 ? 160 : 512;
    for (auto [m, t] :
         {std::pair<int64_t, DType>{1, DType::f16}, {5, DType::f32}, {40, DType::f16}}) {
      check::Case c =
          make_case(std::string("q/") + std::string(dtype_name(q)) + "." + std::to_string(m),
                    OpKind::matmul, {dense(t, {m, K}), dense(q, {67, K})}, weight_nk(),
                    {check::Fill::unit, check::Fill::blocks});
      KernelChoice k;
      check::Outcome o = run_on(dev(), c, &k);
      EXPECT_TRUE(o.passed) << c.name << ": " << o.message;
      EXPECT_EQ(k.tier, Tier::register_blocked) << c.name;
      EXPECT_NE(k.reason.find("never expanded"), std::string::npos) << k.reason;
    }
  }
}

// A weight and a table past the texel limit (a 14336 x 4096 q8_0 weight is 59.5 MiB; a 128k
// vocabulary in q6_k is more than lavapipe's texel count) run as several views of whole rows,
// and so does a cast out of blocks.
TEST_F(QuantKernels, WeightsAndTablesPastTheTexelLimitAreSplit) {
  if (vk(dev()).max_texels() == 0) GTEST_SKIP() << "no uniform texel buffers";
  vk(dev()).set_max_texels(1024);
  for (DType q : {DType::q8_0, DType::q6_k}) {
    const int64_t K = dtype_block_elems(q) == 32 ? 256 : 512;
    check::Case mm = make_case(std::string("qtexels/matmul.") + std::string(dtype_name(q)),
                               OpKind::matmul, {dense(DType::f32, {3, K}), dense(q, {70, K})},
                               weight_nk(), {check::Fill::unit, check::Fill::blocks});
    check::Case emb = make_case(std::string("qtexels/embedding.") + std::string(dtype_name(q)),
                                OpKind::embedding, {dense(q, {90, K}), dense(DType::i32, {4, 3})},
                                {}, {check::Fill::blocks, check::Fill::ids});
    emb.ids_range = 90;
    OpAttrs to;
    to.to = DType::f16;
    check::Case cast = make_case(std::string("qtexels/cast.") + std::string(dtype_name(q)),
                                 OpKind::cast, {dense(q, {50, K})}, to, {check::Fill::blocks});
    for (const check::Case& c : {mm, emb, cast}) {
      const uint64_t before = vk(dev()).recorder().dispatches;
      check::Outcome o = run_on(dev(), c);
      EXPECT_TRUE(o.passed) << c.name << ": " << o.message;
      EXPECT_GT(vk(dev()).recorder().dispatches - before, 2u) << c.name << " was not split";
    }
  }
  // One row larger than the limit cannot be split: refused with the reason.
  vk(dev()).set_max_texels(64);
  check::Case wide = make_case("qtexels/too_wide", OpKind::matmul,
                               {dense(DType::f32, {1, 512}), dense(DType::q8_0, {4, 512})},
                               weight_nk(), {check::Fill::unit, check::Fill::blocks});
  check::Outcome o = run_on(dev(), wide);
  EXPECT_FALSE(o.passed);
  EXPECT_NE(o.message.find("cannot be split further"), std::string::npos) << o.message;
}

TEST(VulkanQuantRules, ChoicesReadTheBlocksAndFollowTheDevice) {
  DeviceCaps c;
  c.type = DeviceType::cpu;
  c.subgroup_size = 8;
  c.max_threads_per_block = 1024;
  c.fp16_storage = c.int8_storage = true;
  c.compute_units = 2;
  OpAttrs tb = weight_nk();
  auto mm = make_op(OpKind::matmul, tb,
                    {TensorDesc::contiguous(DType::f16, {1, 4096}),
                     TensorDesc::contiguous(DType::q4_0, {4096, 4096})});
  ASSERT_TRUE(mm.ok()) << mm.status().message();
  bool f16_ok = false;
  for (const KernelChoice& k : rules().choices(c, *mm)) {
    EXPECT_EQ(k.input_dtypes[1], DType::q4_0) << k.reason;  // never read in another dtype
    if (k.ok && k.precision == Precision::f16) {
      f16_ok = true;
      EXPECT_EQ(k.launch.variant, "q_1x4");  // decode: each weight byte fetched once
    }
  }
  EXPECT_TRUE(f16_ok);
  auto prefill = make_op(OpKind::matmul, tb,
                         {TensorDesc::contiguous(DType::f32, {512, 4096}),
                          TensorDesc::contiguous(DType::q4_k, {4096, 4096})});
  ASSERT_TRUE(prefill.ok());
  EXPECT_EQ(rules().choices(c, *prefill)[0].launch.variant, "q_32x4");
  OpAttrs to;
  to.to = DType::f16;
  auto cast = make_op(OpKind::cast, to, {TensorDesc::contiguous(DType::q4_k, {4, 256})});
  ASSERT_TRUE(cast.ok()) << cast.status().message();
  EXPECT_TRUE(rules().choices(c, *cast)[0].ok);
  // Without 16-bit storage the f16 choices are refused with the reason, the f32 one stays.
  c.fp16_storage = false;
  EXPECT_FALSE(rules().choices(c, *cast)[0].ok);
  for (const KernelChoice& k : rules().choices(c, *mm))
    if (k.precision == Precision::f32)
      EXPECT_TRUE(k.ok) << k.reason;
    else
      EXPECT_NE(k.reason.find("16-bit storage"), std::string::npos) << k.reason;
}

}  // namespace
}  // namespace duet::vulkan::testing
