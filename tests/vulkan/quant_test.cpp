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
      // Both float-path families: texel buffers (CPU devices) and shared memory (GPUs).
      for (Tier tier : {Tier::register_blocked, Tier::shared_memory}) {
        const KernelChoice k = choice_of(dev(), c, tier);
        ASSERT_TRUE(k.ok) << k.reason;
        check::Outcome o = run_with(dev(), c, k);
        EXPECT_TRUE(o.passed) << c.name << " " << tier << ": " << o.message;
        EXPECT_NE(k.reason.find("never expanded"), std::string::npos) << k.reason;
      }
    }
  }
}

// The int_dot tier (activations quantized to q8 blocks, OpSDot) for every block format: decode
// and a prefill block, f16 and f32 activations, against the float64 reference at the
// tolerance of q8 activations. Its device feature is enabled only where the device has it, and
// the validation layer (on in every test) reports nothing.
TEST_F(QuantKernels, IntegerDotPathMatchesTheReferenceForEveryFormat) {
  if (!dev().caps().int_dot) GTEST_SKIP() << "no VK_KHR_shader_integer_dot_product";
  for (DType q : kQuantizedDTypes) {
    const int64_t K = dtype_block_elems(q) == 32 ? 160 : 512;
    for (auto [m, t] : {std::pair<int64_t, DType>{1, DType::f16}, {37, DType::f32}}) {
      check::Case c =
          make_case(std::string("qdot/") + std::string(dtype_name(q)) + "." + std::to_string(m),
                    OpKind::matmul, {dense(t, {m, K}), dense(q, {67, K})}, weight_nk(),
                    {check::Fill::unit, check::Fill::blocks});
      const KernelChoice k = choice_of(dev(), c, Tier::int_dot);
      ASSERT_TRUE(k.ok) << k.reason;
      EXPECT_NE(k.reason.find(std::string(dtype_name(q)) + " weight"), std::string::npos);
      EXPECT_NE(k.reason.find("8 bits per 32"), std::string::npos) << k.reason;
      // Both forms of the product: OpSDot, and byte pairs in 32-bit words ("_swar", which the
      // rules pick where OpSDot is emulated, as on lavapipe).
      ASSERT_NE(kernel_of(k.launch), nullptr) << k.launch.str();
      Kernel without_swar = *kernel_of(k.launch);
      without_swar.swar = false;
      KernelChoice sdot = k;
      sdot.launch.set_variant(without_swar);
      for (const KernelChoice& kk : {k, sdot}) {
        const uint64_t before = vk(dev()).recorder().dispatches;
        check::Outcome o = run_with(dev(), c, kk);
        EXPECT_TRUE(o.passed) << c.name << " " << kk.launch.variant_name() << ": " << o.message;
        // The activations' quantizer, then the product.
        EXPECT_EQ(vk(dev()).recorder().dispatches - before, 2u) << c.name;
      }
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
    // Both paths of the matmul: the float one and the integer-dot one.
    for (Tier tier : {Tier::register_blocked, Tier::int_dot}) {
      const KernelChoice k = choice_of(dev(), mm, tier);
      if (!k.ok) continue;
      const uint64_t before = vk(dev()).recorder().dispatches;
      check::Outcome o = run_with(dev(), mm, k);
      EXPECT_TRUE(o.passed) << mm.name << " " << tier << ": " << o.message;
      EXPECT_GT(vk(dev()).recorder().dispatches - before, 2u) << mm.name << " was not split";
    }
  }
  // The shared-memory kernel binds the weight as a storage-buffer window: past
  // maxStorageBufferRange it runs in windows of whole rows (so whole blocks) too.
  const uint64_t window = vk(dev()).max_window();
  vk(dev()).set_max_window(4096);
  for (DType q : {DType::q8_0, DType::q4_k}) {
    const int64_t K = dtype_block_elems(q) == 32 ? 256 : 512;
    check::Case mm = make_case(std::string("qwindows/matmul.") + std::string(dtype_name(q)),
                               OpKind::matmul, {dense(DType::f32, {20, K}), dense(q, {70, K})},
                               weight_nk(), {check::Fill::unit, check::Fill::blocks});
    const KernelChoice k = choice_of(dev(), mm, Tier::shared_memory);
    ASSERT_TRUE(k.ok) << k.reason;
    const uint64_t before = vk(dev()).recorder().dispatches;
    check::Outcome o = run_with(dev(), mm, k);
    EXPECT_TRUE(o.passed) << mm.name << ": " << o.message;
    EXPECT_GT(vk(dev()).recorder().dispatches - before, 2u) << mm.name << " was not split";
  }
  vk(dev()).set_max_window(window);
  // One row larger than the limit cannot be split: refused with the reason.
  vk(dev()).set_max_texels(64);
  check::Case wide = make_case("qtexels/too_wide", OpKind::matmul,
                               {dense(DType::f32, {1, 512}), dense(DType::q8_0, {4, 512})},
                               weight_nk(), {check::Fill::unit, check::Fill::blocks});
  check::Outcome o = run_on(dev(), wide);
  EXPECT_FALSE(o.passed);
  EXPECT_NE(o.message.find("cannot be split further"), std::string::npos) << o.message;
}

// A 128k-vocabulary table in q6_k (128256 rows; 256 wide here to keep the test small) past a
// view of 4 MiB: gathered from its windows of whole rows, ids anywhere in the vocabulary.
TEST_F(QuantKernels, LargeVocabularyTableRunsInWindows) {
  if (vk(dev()).max_texels() == 0) GTEST_SKIP() << "no uniform texel buffers";
  vk(dev()).set_max_texels(uint64_t{1} << 20);
  check::Case emb = make_case("qtexels/embedding.q6_k.128k", OpKind::embedding,
                              {dense(DType::q6_k, {128256, 256}), dense(DType::i32, {2, 9})}, {},
                              {check::Fill::blocks, check::Fill::ids});
  emb.ids_range = 128256;
  const uint64_t before = vk(dev()).recorder().dispatches;
  check::Outcome o = run_on(dev(), emb);
  EXPECT_TRUE(o.passed) << emb.name << ": " << o.message;
  EXPECT_GE(vk(dev()).recorder().dispatches - before, 7u) << "not split into windows";
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
    if (k.ok && k.precision == Precision::f16 && k.tier == Tier::register_blocked) {
      f16_ok = true;
      EXPECT_EQ(k.launch.variant_name(), "q_1x4");  // decode: each weight byte fetched once
    }
  }
  EXPECT_TRUE(f16_ok);
  auto prefill = make_op(OpKind::matmul, tb,
                         {TensorDesc::contiguous(DType::f32, {512, 4096}),
                          TensorDesc::contiguous(DType::q4_k, {4096, 4096})});
  ASSERT_TRUE(prefill.ok());
  for (const KernelChoice& k : rules().choices(c, *prefill)) {
    if (k.ok && k.tier == Tier::register_blocked) {
      EXPECT_EQ(k.launch.variant_name(), "q_32x4");
    }
  }
  OpAttrs to;
  to.to = DType::f16;
  auto cast = make_op(OpKind::cast, to, {TensorDesc::contiguous(DType::q4_k, {4, 256})});
  ASSERT_TRUE(cast.ok()) << cast.status().message();
  EXPECT_TRUE(rules().choices(c, *cast)[0].ok);
  // Without 16-bit storage the f16 choices are refused with the reason, the f32 one stays.
  c.fp16_storage = false;
  EXPECT_FALSE(rules().choices(c, *cast)[0].ok);
  for (const KernelChoice& k : rules().choices(c, *mm))
    if (k.tier == Tier::int_dot)
      EXPECT_NE(k.reason.find("integer_dot_product"), std::string::npos) << k.reason;
    else if (k.tier == Tier::coopmat)
      EXPECT_FALSE(k.ok) << k.reason;  // no matrix units on this record
    else if (k.precision == Precision::f32)
      EXPECT_TRUE(k.ok) << k.reason;
    else
      EXPECT_NE(k.reason.find("16-bit storage"), std::string::npos) << k.reason;
}

// The integer-dot path: first where the device accelerates packed 4x8-bit dot products and on
// CPU devices, after the float path on GPUs that emulate them, refused with the reason where the
// extension is missing; it reads the weight in its blocks and keeps the activations' precision.
TEST(VulkanQuantRules, IntegerDotPathFollowsTheCapabilityRecord) {
  DeviceCaps c;
  c.type = DeviceType::discrete_gpu;
  c.subgroup_size = 32;
  c.max_threads_per_block = 1024;
  c.fp16_storage = c.int8_storage = true;
  c.compute_units = 40;
  auto mm = make_op(OpKind::matmul, weight_nk(),
                    {TensorDesc::contiguous(DType::f16, {1, 4096}),
                     TensorDesc::contiguous(DType::q6_k, {4096, 4096})});
  ASSERT_TRUE(mm.ok()) << mm.status().message();
  // The first usable choice besides the GPU family's mat-vec (which comes first for decode on a
  // GPU, checked below).
  auto first = [&](const DeviceCaps& caps) {
    for (const KernelChoice& k : rules().choices(caps, *mm))
      if (k.ok && k.tier != Tier::matvec) return k;
    return KernelChoice{};
  };
  auto find = [&](const DeviceCaps& caps, Tier t, Precision p) {
    for (const KernelChoice& k : rules().choices(caps, *mm))
      if (k.tier == t && k.precision == p) return k;
    return KernelChoice{};
  };
  const KernelChoice none = find(c, Tier::int_dot, Precision::f16);
  EXPECT_FALSE(none.ok);
  EXPECT_NE(none.reason.find("VK_KHR_shader_integer_dot_product"), std::string::npos);
  c.int_dot = true;
  c.int_dot_accelerated = false;
  EXPECT_EQ(first(c).tier, Tier::register_blocked);
  EXPECT_NE(find(c, Tier::int_dot, Precision::f16).reason.find("not accelerated"),
            std::string::npos);
  c.int_dot_accelerated = true;
  EXPECT_EQ(rules().choices(c, *mm)[0].tier, Tier::matvec);
  const KernelChoice k = first(c);
  EXPECT_EQ(k.tier, Tier::int_dot);
  EXPECT_TRUE(k.ok) << k.reason;
  EXPECT_EQ(k.input_dtypes[1], DType::q6_k);
  EXPECT_EQ(k.launch.variant_name().rfind("qdot_1x", 0), 0u) << k.launch.variant_name();
  EXPECT_NE(k.reason.find("q6_k weight"), std::string::npos) << k.reason;
  EXPECT_NE(k.reason.find("(accelerated)"), std::string::npos) << k.reason;
  c.type = DeviceType::cpu;  // lavapipe reports the extension, accelerated or not
  c.int_dot_accelerated = false;
  EXPECT_EQ(first(c).tier, Tier::int_dot);
}

}  // namespace
}  // namespace duet::vulkan::testing
