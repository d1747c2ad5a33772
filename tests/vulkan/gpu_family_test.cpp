// The GPU family's kernels: the mat-vec (tier "matvec") and the decode attention (tier "flash")
// run on this machine's device (lavapipe in CI, where they are offered after the CPU family) in
// the read modes, reductions, key splits and windows the conformance cases (which run them for
// every dtype and block format) do not reach; and the rules that choose them and the
// cooperative-matrix GEMM for GPUs from capability records (the coopmat shaders
// cannot run on lavapipe; their SPIR-V is checked at build time, shaders/spirv_coopmat.cpp).
#include "vulkan_test_util.h"

namespace duet::vulkan::testing {
namespace {

class GpuFamily : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = open_vulkan({}, cache_);
    if (!r.ok()) GTEST_SKIP() << "no Vulkan device: " << r.status().message();
    devices_ = std::move(r->devices);
  }
  Device& dev() { return *devices_[0]; }

  // Runs `c` on the choice of `tier`; returns the shader and specialization constants of its
  // last dispatch whose shader starts with `prefix`.
  std::pair<std::string, std::vector<uint32_t>> run(const check::Case& c, Tier tier = Tier::matvec,
                                                    const std::string& prefix = "matvec_") {
    const KernelChoice k = choice_of(dev(), c, tier);
    EXPECT_TRUE(k.ok) << c.name << ": " << k.reason;
    if (!k.ok) return {};
    check::Outcome o = run_with(dev(), c, k);
    EXPECT_TRUE(o.passed) << c.name << ": " << o.message << " (nmse " << o.metrics.nmse << ")";
    std::pair<std::string, std::vector<uint32_t>> last;
    for (const auto& [name, s] : vk(dev()).recorder().recent)
      if (name.rfind(prefix, 0) == 0) last = {name, s};
    return last;
  }
  // Whether the last run recorded a dispatch of `shader`.
  bool recorded(const std::string& shader) {
    for (const auto& [name, s] : vk(dev()).recorder().recent)
      if (name == shader) return true;
    return false;
  }

  TempDir cache_;
  std::vector<std::unique_ptr<Device>> devices_;
};

constexpr size_t kAvec = 2, kWvec = 3;  // matvec.comp's constant ids

TEST_F(GpuFamily, MatvecReadsSixteenBytesAtATimeAlongK) {
  OpAttrs tb;
  tb.transpose_b = true;
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    const std::string n = "gpu/matvec." + std::string(dtype_name(t));
    // Three rows and 37 weight rows: a partial workgroup of rows at the end.
    auto [shader, spec] =
        run(make_case(n, OpKind::matmul, {dense(t, {3, 64}), dense(t, {37, 64})}, tb));
    EXPECT_EQ(shader, "matvec_" + std::string(dtype_name(t)) + "_" + std::string(dtype_name(t)));
    ASSERT_GT(spec.size(), kWvec) << n;
    EXPECT_EQ(spec[kAvec], 1u) << n;
    EXPECT_EQ(spec[kWvec], 1u) << n;
  }
}

TEST_F(GpuFamily, MatvecOfMisalignedOperandsReadsElements) {
  OpAttrs tb;
  tb.transpose_b = true;
  // K = 45: no row of either operand is a whole number of 16-byte vectors; a batch of 2 x 5 rows.
  auto [shader, spec] =
      run(make_case("gpu/matvec.k45", OpKind::matmul,
                    {dense(DType::f16, {2, 5, 45}), dense(DType::f16, {19, 45})}, tb));
  ASSERT_GT(spec.size(), kWvec);
  EXPECT_EQ(spec[kAvec], 0u);
  EXPECT_EQ(spec[kWvec], 0u);
}

TEST_F(GpuFamily, MatvecWithoutSubgroupArithmeticSumsInSharedMemory) {
  const DeviceCaps real = dev().caps();
  DeviceCaps c = real;
  c.subgroup_arithmetic = false;
  vk(dev()).override_caps(c);
  OpAttrs tb;
  tb.transpose_b = true;
  auto [shader, spec] =
      run(make_case("gpu/matvec.smem", OpKind::matmul,
                    {dense(DType::f32, {4, 40}), dense(DType::f32, {9, 40})}, tb));
  EXPECT_EQ(shader, "matvec_smem_f32_f32");
  auto [qshader, qspec] = run(make_case("gpu/matvec.smem.q8_0", OpKind::matmul,
                                        {dense(DType::f16, {1, 64}), dense(DType::q8_0, {5, 64})},
                                        tb, {check::Fill::unit, check::Fill::blocks}));
  EXPECT_EQ(qshader, "matvec_smem_f16_q8_0");
  vk(dev()).override_caps(real);
}

// On a GPU a workgroup of up to 128 invocations splits K over two weight rows (four of a block
// format) and up to eight activation rows: run here with this device posing as a GPU, for every
// float dtype and block format, with weight rows ending in a partial workgroup, activation rows
// filling part of MR (3 of 4, 5 of 8), rows longer than one step of the workgroup and operands
// not aligned to 16 bytes.
TEST_F(GpuFamily, MatvecOnAGpuSplitsKAcrossTheWorkgroupInEveryFormat) {
  constexpr size_t kRw = 1, kMr = 4, kNsg = 5;  // matvec.comp's constant ids
  const DeviceCaps real = dev().caps();
  if (!real.subgroup_arithmetic) GTEST_SKIP() << "no subgroup arithmetic";
  DeviceCaps c = real;
  c.type = DeviceType::discrete_gpu;
  vk(dev()).override_caps(c);
  OpAttrs tb;
  tb.transpose_b = true;
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    const std::string n = "gpu/matvec.wg." + std::string(dtype_name(t));
    // K 1088: more than one step of 128 invocations x 16 bytes for f32.
    auto [shader, spec] =
        run(make_case(n, OpKind::matmul, {dense(t, {3, 1088}), dense(t, {37, 1088})}, tb));
    ASSERT_GT(spec.size(), kNsg) << n;
    EXPECT_EQ(spec[kRw], 2u) << n;
    EXPECT_EQ(spec[kMr], 4u) << n;
    EXPECT_EQ(spec[kNsg], (spec[0] + static_cast<uint32_t>(real.subgroup_min) - 1) /
                              static_cast<uint32_t>(real.subgroup_min))
        << n;
  }
  auto [mshader, mspec] =
      run(make_case("gpu/matvec.wg.k45", OpKind::matmul,
                    {dense(DType::f16, {2, 45}), dense(DType::f16, {11, 45})}, tb));
  ASSERT_GT(mspec.size(), kNsg);
  EXPECT_EQ(mspec[kWvec], 0u);
  for (DType q : kQuantizedDTypes) {
    const std::string n = "gpu/matvec.wg." + std::string(dtype_name(q));
    const int64_t m = q == DType::q4_k ? 3 : q == DType::q6_k ? 5 : 1;
    auto [shader, spec] =
        run(make_case(n, OpKind::matmul, {dense(DType::f32, {m, 256}), dense(q, {13, 256})}, tb,
                      {check::Fill::unit, check::Fill::blocks}));
    ASSERT_GT(spec.size(), kNsg) << n;
    EXPECT_EQ(spec[kRw], 4u) << n;
  }
  // Rows of 1280 (more than one step of 128 invocations x 8 elements), f16 activations.
  run(make_case("gpu/matvec.wg.q4_0.k1280", OpKind::matmul,
                {dense(DType::f16, {2, 1280}), dense(DType::q4_0, {6, 1280})}, tb,
                {check::Fill::unit, check::Fill::blocks}));
  vk(dev()).override_caps(real);
}

TEST_F(GpuFamily, MatvecSplitsAWeightLargerThanAWindow) {
  const uint64_t saved = vk(dev()).max_window();
  vk(dev()).set_max_window(4096);
  OpAttrs tb;
  tb.transpose_b = true;
  // 16 KiB weights in windows of whole rows, a float one and a q8_0 one.
  run(make_case("gpu/matvec.windows", OpKind::matmul,
                {dense(DType::f32, {2, 512}), dense(DType::f32, {8, 512})}, tb));
  run(make_case("gpu/matvec.windows.q8_0", OpKind::matmul,
                {dense(DType::f32, {1, 512}), dense(DType::q8_0, {30, 512})}, tb,
                {check::Fill::unit, check::Fill::blocks}));
  vk(dev()).set_max_window(saved);
}

constexpr size_t kKvec = 3, kVvec = 4;  // attention_decode.comp's constant ids

TEST_F(GpuFamily, DecodeAttentionSplitsTheKeysAndMergesThem) {
  if (!dev().caps().subgroup_arithmetic) GTEST_SKIP() << "no subgroup arithmetic";
  // f32, GQA (two query heads per KV head), causal, K and V read 16 bytes at a time; 1100 keys
  // in splits of whole 128-key tiles, the last split past the keys.
  auto [shader, spec] =
      run(make_case("gpu/decode.f32", OpKind::attention,
                    {dense(DType::f32, {1, 2, 1, 64}), dense(DType::f32, {1, 1, 1100, 64}),
                     dense(DType::f32, {1, 1, 1100, 64})},
                    [] {
                      OpAttrs a;
                      a.causal = true;
                      return a;
                    }()),
          Tier::flash, "attention_decode_");
  EXPECT_EQ(shader, "attention_decode_f32");
  ASSERT_GT(spec.size(), kVvec);
  EXPECT_EQ(spec[kKvec], 1u);
  EXPECT_EQ(spec[kVvec], 1u);
  EXPECT_TRUE(recorded("attention_combine_f32"));
}

TEST_F(GpuFamily, DecodeAttentionOfMisalignedRowsReadsElements) {
  if (!dev().caps().subgroup_arithmetic) GTEST_SKIP() << "no subgroup arithmetic";
  // f16, head dim 36 (no row of K or V is whole 16-byte vectors), three query heads per KV head
  // (a row block of four with one row past the end), two batch entries.
  auto [shader, spec] =
      run(make_case("gpu/decode.hd36", OpKind::attention,
                    {dense(DType::f16, {2, 3, 1, 36}), dense(DType::f16, {2, 1, 300, 36}),
                     dense(DType::f16, {2, 1, 300, 36})}),
          Tier::flash, "attention_decode_");
  EXPECT_EQ(shader, "attention_decode_f16");
  ASSERT_GT(spec.size(), kVvec);
  EXPECT_EQ(spec[kKvec], 0u);
  EXPECT_EQ(spec[kVvec], 0u);
}

// ---- the rules, from capability records ----------------------------------------------------

DeviceCaps gpu_caps() {
  DeviceCaps c;
  c.backend = BackendKind::vulkan;
  c.type = DeviceType::discrete_gpu;
  c.subgroup_size = 32;
  c.subgroup_arithmetic = true;
  c.shared_mem_per_block = 49152;
  c.max_threads_per_block = 1024;
  c.fp16_storage = c.bf16_storage = true;
  c.fp16_arith = true;
  c.compute_units = 132;
  return c;
}

// The choice of tier t at precision p (tier "none" when there is none).
KernelChoice find(const std::vector<KernelChoice>& ch, Tier t, Precision p) {
  for (const KernelChoice& k : ch)
    if (k.tier == t && k.precision == p) return k;
  KernelChoice none;
  none.tier = Tier::reference;
  none.reason = "none";
  return none;
}

TEST(VulkanRules, DecodeOnAGpuTakesTheSubgroupMatvecFirst) {
  OpAttrs tb;
  tb.transpose_b = true;
  auto op =
      *make_op(OpKind::matmul, tb, {dense(DType::f16, {1, 4096}), dense(DType::f16, {1024, 4096})});
  auto ch = rules().choices(gpu_caps(), op);
  ASSERT_FALSE(ch.empty());
  EXPECT_EQ(ch[0].tier, Tier::matvec);
  EXPECT_TRUE(ch[0].ok) << ch[0].reason;
  EXPECT_EQ(ch[0].launch.block_threads, 128);
  EXPECT_NE(ch[0].reason.find("subgroupAdd"), std::string::npos) << ch[0].reason;
  // A device without subgroup arithmetic sums in shared memory.
  DeviceCaps no_arith = gpu_caps();
  no_arith.subgroup_arithmetic = false;
  ch = rules().choices(no_arith, op);
  EXPECT_TRUE(ch[0].ok);
  EXPECT_NE(ch[0].reason.find("shared memory"), std::string::npos) << ch[0].reason;
  // Prefill, or a weight not contiguous along K, is not a mat-vec.
  auto prefill = *make_op(OpKind::matmul, tb,
                          {dense(DType::f16, {64, 4096}), dense(DType::f16, {1024, 4096})});
  KernelChoice mv = find(rules().choices(gpu_caps(), prefill), Tier::matvec, Precision::f16);
  EXPECT_FALSE(mv.ok);
  EXPECT_NE(mv.reason.find("at most 8 activation rows"), std::string::npos) << mv.reason;
  auto kn =
      *make_op(OpKind::matmul, {}, {dense(DType::f16, {1, 4096}), dense(DType::f16, {4096, 1024})});
  mv = find(rules().choices(gpu_caps(), kn), Tier::matvec, Precision::f16);
  EXPECT_FALSE(mv.ok);
  EXPECT_NE(mv.reason.find("not contiguous along K"), std::string::npos) << mv.reason;
}

TEST(VulkanRules, DecodeAttentionOnAGpuSplitsALongCacheAcrossWorkgroups) {
  // Llama-3-8B's decode: 32 query heads over 8 KV heads, 32768 keys.
  auto op = *make_op(OpKind::attention, {},
                     {dense(DType::f16, {1, 32, 1, 128}), dense(DType::f16, {1, 8, 32768, 128}),
                      dense(DType::f16, {1, 8, 32768, 128})});
  auto ch = rules().choices(gpu_caps(), op);
  ASSERT_FALSE(ch.empty());
  EXPECT_EQ(ch[0].tier, Tier::flash);
  ASSERT_NE(kernel_of(ch[0].launch), nullptr);
  EXPECT_EQ(kernel_of(ch[0].launch)->name(), "decode_4_splitk") << ch[0].reason;
  // 8 workgroups without a split; 132 compute units want about 8 each.
  EXPECT_EQ(ch[0].launch.splits, 128);
  // Without subgroup arithmetic, or with many query rows per KV head: the shared-memory tiles.
  DeviceCaps no_arith = gpu_caps();
  no_arith.subgroup_arithmetic = false;
  KernelChoice k = find(rules().choices(no_arith, op), Tier::flash, Precision::f16);
  ASSERT_NE(kernel_of(k.launch), nullptr);
  EXPECT_EQ(kernel_of(k.launch)->family, Family::attention_flash);
  EXPECT_NE(k.reason.find("subgroup arithmetic"), std::string::npos) << k.reason;
  auto prefill = *make_op(OpKind::attention, {},
                          {dense(DType::f16, {1, 32, 16, 128}), dense(DType::f16, {1, 8, 64, 128}),
                           dense(DType::f16, {1, 8, 64, 128})});
  k = find(rules().choices(gpu_caps(), prefill), Tier::flash, Precision::f16);
  ASSERT_NE(kernel_of(k.launch), nullptr);
  EXPECT_EQ(kernel_of(k.launch)->family, Family::attention_flash);
  EXPECT_NE(k.reason.find("64 query rows per KV head"), std::string::npos) << k.reason;
}

TEST(VulkanRules, OnACpuDeviceTheMatvecComesLast) {
  DeviceCaps c = gpu_caps();
  c.type = DeviceType::cpu;
  c.subgroup_size = 8;
  OpAttrs tb;
  tb.transpose_b = true;
  auto op =
      *make_op(OpKind::matmul, tb, {dense(DType::f32, {1, 256}), dense(DType::q4_0, {64, 256})});
  auto ch = rules().choices(c, op);
  ASSERT_FALSE(ch.empty());
  EXPECT_NE(ch[0].tier, Tier::matvec);
  const KernelChoice mv = find(ch, Tier::matvec, Precision::f32);
  EXPECT_TRUE(mv.ok) << mv.reason;
}

TEST(VulkanRules, CooperativeMatrixGemmNeedsSixteenBySixteenHalfMatrices) {
  DeviceCaps c = gpu_caps();
  auto op = *make_op(OpKind::matmul, {},
                     {dense(DType::f16, {4096, 4096}), dense(DType::f16, {4096, 4096})});
  // No matrix units: refused, naming the extension.
  KernelChoice k = find(rules().choices(c, op), Tier::coopmat, Precision::f16);
  EXPECT_FALSE(k.ok);
  EXPECT_NE(k.reason.find("VK_KHR_cooperative_matrix"), std::string::npos) << k.reason;
  // Other shapes only: refused, listing them.
  c.matrix_units = {{"coopmat", 8, 16, 16, DType::f16, DType::f32}};
  k = find(rules().choices(c, op), Tier::coopmat, Precision::f16);
  EXPECT_FALSE(k.ok);
  EXPECT_NE(k.reason.find("8x16x16 f16+f32"), std::string::npos) << k.reason;
  c.matrix_units.push_back({"coopmat", 16, 16, 16, DType::f16, DType::f32});
  const auto ch = rules().choices(c, op);
  k = find(ch, Tier::coopmat, Precision::f16);
  EXPECT_TRUE(k.ok) << k.reason;
  EXPECT_EQ(ch[0].tier, Tier::coopmat);
  EXPECT_EQ(k.launch.block_threads, 128);
  ASSERT_NE(kernel_of(k.launch), nullptr);
  EXPECT_EQ(kernel_of(k.launch)->name(), "coopmat_128");
  // A small problem takes the smaller tile, so that every compute unit has work.
  auto small =
      *make_op(OpKind::matmul, {}, {dense(DType::f16, {100, 256}), dense(DType::f16, {256, 300})});
  const KernelChoice ks = find(rules().choices(c, small), Tier::coopmat, Precision::f16);
  ASSERT_NE(kernel_of(ks.launch), nullptr);
  EXPECT_EQ(kernel_of(ks.launch)->bm, 64);
  // f32 and bf16 operands are not multiplied as f16.
  EXPECT_FALSE(find(ch, Tier::coopmat, Precision::f32).ok);
  EXPECT_NE(find(ch, Tier::coopmat, Precision::bf16).reason.find("VK_KHR_shader_bfloat16"),
            std::string::npos);
  // Without f16 arithmetic in shaders: refused, naming the feature.
  c.fp16_arith = false;
  k = find(rules().choices(c, op), Tier::coopmat, Precision::f16);
  EXPECT_FALSE(k.ok);
  EXPECT_NE(k.reason.find("shaderFloat16"), std::string::npos) << k.reason;
}

TEST(VulkanRules, QuantizedPrefillOnCooperativeMatricesDecodesIntoTheSlices) {
  DeviceCaps c = gpu_caps();
  c.matrix_units = {{"coopmat", 16, 16, 16, DType::f16, DType::f32}};
  OpAttrs tb;
  tb.transpose_b = true;
  auto op = *make_op(OpKind::matmul, tb,
                     {dense(DType::f32, {512, 4096}), dense(DType::q4_k, {1024, 4096})});
  const KernelChoice k = find(rules().choices(c, op), Tier::coopmat, Precision::f32);
  EXPECT_TRUE(k.ok) << k.reason;
  ASSERT_EQ(k.input_dtypes.size(), 2u);
  EXPECT_EQ(k.input_dtypes[1], DType::q4_k);
  ASSERT_NE(kernel_of(k.launch), nullptr);
  EXPECT_EQ(kernel_of(k.launch)->name(), "coopmat_64");
  EXPECT_NE(k.reason.find("rounded to f16"), std::string::npos) << k.reason;
}

}  // namespace
}  // namespace duet::vulkan::testing
