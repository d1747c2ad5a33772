// The CUDA kernel selection on the capability records of real GPUs: which tier runs where, why the
// others are refused, and launch shapes taken from the device's limits.
#include <gtest/gtest.h>

#include "duet/kernels/launch.h"
#include "duet/kernels/select.h"
#include "duet/profiles.h"

namespace duet::kernels {
namespace {

// The capability record of a GPU model from profiles/<name>.json ("t4", "a100", ...).
DeviceCaps profile(const std::string& name) {
  auto caps = load_profile(name);
  if (!caps.ok()) ADD_FAILURE() << caps.status().message();
  return caps.ok() ? *caps : DeviceCaps{};
}

// Every architecture of the release build (sm_75..sm_90, sm_120 + PTX).
BuildArchs full_build() {
  return BuildArchs{{75, 80, 86, 87, 88, 89, 90, 120}, 120};
}

OpDesc attention(DType t, int64_t Hq, int64_t Hkv, int64_t Lq, int64_t Lk, int64_t D,
                 bool causal = false) {
  OpAttrs a;
  a.causal = causal;
  return *make_op(
      OpKind::attention, a,
      {TensorDesc::contiguous(t, {1, Hq, Lq, D}), TensorDesc::contiguous(t, {1, Hkv, Lk, D}),
       TensorDesc::contiguous(t, {1, Hkv, Lk, D})});
}

OpDesc matmul(DType t, int64_t M, int64_t N, int64_t K) {
  return *make_op(OpKind::matmul, {},
                  {TensorDesc::contiguous(t, {M, K}), TensorDesc::contiguous(t, {K, N})});
}

KernelChoice find(const std::vector<KernelChoice>& cs, Tier tier, Precision p) {
  for (const KernelChoice& k : cs)
    if (k.tier == tier && k.precision == p) return k;
  ADD_FAILURE() << "no " << tier << " " << precision_name(p) << " choice";
  return {};
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

OpDesc qmatmul(DType act, DType w, int64_t M, int64_t N, int64_t K) {
  OpAttrs a;
  a.transpose_b = true;
  return *make_op(OpKind::matmul, a,
                  {TensorDesc::contiguous(act, {M, K}), TensorDesc::contiguous(w, {N, K})});
}

// Block-quantized weights: int8 tensor cores for prefill where the device has them (m16n8k32 on
// sm_80+, m8n8k16 on sm_75), dp4a from sm_61 (GTX 16xx and Pascal included), generic anywhere.
TEST(Selection, QuantizedMatmulTiersFollowTheArchitecture) {
  const BuildArchs with61{{61, 75, 80}, 80};
  const OpDesc prefill = qmatmul(DType::f16, DType::q4_k, 512, 4096, 4096);
  const OpDesc decode = qmatmul(DType::f16, DType::q4_k, 1, 4096, 4096);
  const auto a100 = choices(profile("a100"), prefill, with61);
  ASSERT_EQ(a100.size(), 3u);
  EXPECT_EQ(a100[0].tier, Tier::int8_mma);
  EXPECT_EQ(a100[1].tier, Tier::int_dot);
  EXPECT_EQ(a100[2].tier, Tier::generic);
  for (const KernelChoice& k : a100) EXPECT_TRUE(k.ok) << k.reason;
  EXPECT_EQ(a100[0].launch.variant_name(), "int8_mma_qmatmul_m16n8k32");
  EXPECT_TRUE(contains(a100[0].reason, "q4_k blocks staged raw and decoded once per tile"))
      << a100[0].reason;
  const auto t4 = choices(profile("t4"), prefill, with61);
  EXPECT_EQ(t4[0].launch.variant_name(), "int8_mma_qmatmul_m8n8k16");
  EXPECT_TRUE(t4[0].ok) << t4[0].reason;
  // Decode: one row is a mat-vec, not an mma tile.
  const KernelChoice d =
      find(choices(profile("a100"), decode, with61), Tier::int8_mma, Precision::f32);
  EXPECT_FALSE(d.ok);
  EXPECT_TRUE(contains(d.reason, "decode shape")) << d.reason;
  // GTX 16xx (Turing without tensor cores) and Pascal: dp4a, never tensor cores.
  for (const char* name : {"gtx1660super", "gtx1060"}) {
    const auto cs = choices(profile(name), prefill, with61);
    const KernelChoice mma = find(cs, Tier::int8_mma, Precision::f32);
    EXPECT_FALSE(mma.ok) << name;
    EXPECT_TRUE(
        contains(mma.reason, std::string(name) == "gtx1060" ? "needs sm_75" : "tensor cores"))
        << mma.reason;
    EXPECT_TRUE(find(cs, Tier::int_dot, Precision::f32).ok) << name;
  }
  // Without an sm_61 image (a CUDA 13 build), Pascal is refused for the image, not for lacking
  // Ampere.
  const KernelChoice dp4a =
      find(choices(profile("gtx1060"), decode, full_build()), Tier::int_dot, Precision::f32);
  EXPECT_FALSE(dp4a.ok);
  EXPECT_TRUE(contains(dp4a.reason, "sm_61")) << dp4a.reason;
  EXPECT_FALSE(contains(dp4a.reason, "Ampere")) << dp4a.reason;
}

// The int8 mma tiles and staging come from the device's shared memory: a Turing card (64 KiB a
// block, no cp.async) gets one synchronous stage of 128 x 128 tiles, an A100 two stages in flight;
// a device allowing less gets smaller tiles, never a launch that fails for "out of resource:
// shared memory".
TEST(Selection, Int8MmaStagingFitsTheDevicesSharedMemory) {
  const OpDesc op = qmatmul(DType::f16, DType::q4_0, 256, 4096, 4096);
  auto mma = [&](const DeviceCaps& c) {
    return find(choices(c, op, full_build()), Tier::int8_mma, Precision::f32);
  };
  for (const char* name : {"t4", "rtx2080ti"}) {
    const DeviceCaps c = profile(name);
    const KernelChoice k = mma(c);
    ASSERT_TRUE(k.ok) << name << ": " << k.reason;
    const uint64_t limit = std::max(c.shared_mem_per_block, c.shared_mem_per_block_optin);
    EXPECT_LE(k.launch.shared_bytes, limit) << name;
    EXPECT_EQ(k.launch.stages, 1) << name;
    EXPECT_EQ(k.launch.tile_m, 128) << name << ": " << k.launch.str();
    EXPECT_EQ(k.launch.tile_k, 128) << name << ": " << k.launch.str();
  }
  const KernelChoice a100 = mma(profile("a100"));
  EXPECT_EQ(a100.launch.tile_m, 128) << a100.launch.str();
  EXPECT_EQ(a100.launch.tile_n, 128) << a100.launch.str();
  EXPECT_EQ(a100.launch.stages, 2);
  DeviceCaps small = profile("t4");
  small.shared_mem_per_block = small.shared_mem_per_block_optin = 24 * 1024;
  const KernelChoice s = mma(small);
  ASSERT_TRUE(s.ok) << s.reason;
  EXPECT_LE(s.launch.shared_bytes, 24u * 1024) << s.launch.str();
}

TEST(Selection, ChoicesComeBestFirst) {
  const auto cs =
      choices(profile("a100"), attention(DType::bf16, 8, 8, 128, 128, 128), full_build());
  ASSERT_EQ(cs.size(), 6u);
  EXPECT_EQ(cs[0].tier, Tier::wgmma);  // Hopper's, refused on an A100
  EXPECT_EQ(cs[1].tier, Tier::wgmma);
  EXPECT_EQ(cs[2].tier, Tier::flash);
  EXPECT_EQ(cs[2].precision, Precision::bf16);  // the op's own precision first
  EXPECT_EQ(cs[3].tier, Tier::flash);
  EXPECT_EQ(cs[3].precision, Precision::f16);
  EXPECT_EQ(cs[4].tier, Tier::tiled);
  EXPECT_EQ(cs[5].tier, Tier::generic);
  for (const KernelChoice& k : cs) EXPECT_EQ(k.ok, k.tier != Tier::wgmma) << k.reason;
}

// Decode (a few query rows per KV head) on Hopper: flash first, whose tile fits the rows (measured
// faster than wgmma on an H200, 2026-11-28); a prefill's long query blocks keep wgmma first.
TEST(Selection, HopperDecodeAttentionPrefersFlashAndPrefillWgmma) {
  auto first_ok = [](const std::vector<KernelChoice>& cs) {
    for (const KernelChoice& k : cs)
      if (k.ok) return k.tier;
    return Tier::reference;
  };
  const DeviceCaps h100 = profile("h100");
  BuildArchs hopper = full_build();
  hopper.arch_specific = {90};
  // 8B Llama decode: 32 query heads over 8 KV heads, one new token, 512 cached keys.
  EXPECT_EQ(first_ok(choices(h100, attention(DType::f16, 32, 8, 1, 512, 128), hopper)),
            Tier::flash);
  EXPECT_EQ(first_ok(choices(h100, attention(DType::f16, 32, 32, 8, 4096, 64), hopper)),
            Tier::flash);
  EXPECT_EQ(first_ok(choices(h100, attention(DType::f16, 32, 8, 512, 512, 128), hopper)),
            Tier::wgmma);
  EXPECT_TRUE(find(choices(h100, attention(DType::f16, 32, 8, 1, 512, 128), hopper), Tier::wgmma,
                   Precision::f16)
                  .ok)
      << "still offered (a policy may ask for it)";
}

TEST(Selection, FlashAttentionIsRefusedOnTuringWithTheReason) {
  const auto cs = choices(profile("t4"), attention(DType::f16, 8, 8, 64, 64, 64), full_build());
  const KernelChoice flash = find(cs, Tier::flash, Precision::f16);
  EXPECT_FALSE(flash.ok);
  EXPECT_TRUE(contains(flash.reason, "flash attention: requires sm_80, device is sm_75"))
      << flash.reason;
  EXPECT_TRUE(find(cs, Tier::tiled, Precision::f16).ok);
}

TEST(Selection, Bf16OnTuringFallsBackToTiledFp16) {
  const auto cs = choices(profile("t4"), attention(DType::bf16, 8, 8, 64, 64, 64), full_build());
  EXPECT_FALSE(find(cs, Tier::flash, Precision::bf16).ok);
  const KernelChoice tiled = find(cs, Tier::tiled, Precision::f16);
  ASSERT_TRUE(tiled.ok) << tiled.reason;
  EXPECT_EQ(tiled.input_dtypes, (std::vector<DType>{DType::f16, DType::f16, DType::f16}))
      << "the planner casts the bf16 inputs to f16";
  EXPECT_EQ(tiled.output_dtype, DType::f16);
}

TEST(Selection, TuringWithoutTensorCoresGetsTheGenericTier) {
  for (const OpDesc& op :
       {attention(DType::f16, 8, 8, 64, 64, 64), matmul(DType::f16, 64, 64, 64)}) {
    const auto cs = choices(profile("gtx1660super"), op, full_build());
    for (const KernelChoice& k : cs) {
      if (k.tier == Tier::generic) {
        EXPECT_TRUE(k.ok) << k.reason;
      } else {
        EXPECT_FALSE(k.ok);
        EXPECT_TRUE(contains(k.reason, "requires tensor cores")) << k.reason;
      }
    }
  }
}

TEST(Selection, AHeadDimWithoutAKernelIsRefusedByTheTensorCoreTiers) {
  const auto cs = choices(profile("a100"), attention(DType::f16, 4, 4, 64, 64, 72), full_build());
  for (const KernelChoice& k : cs) {
    if (k.tier == Tier::generic) continue;
    EXPECT_FALSE(k.ok);
    EXPECT_TRUE(contains(k.reason, k.tier == Tier::wgmma
                                       ? "head dim 72 is not one of 64, 128"
                                       : "head dim 72 is not one of 64, 80, 96, 128, 256"))
        << k.reason;
  }
  EXPECT_TRUE(find(cs, Tier::generic, Precision::f32).ok);
}

TEST(Selection, TilesAreSizedFromTheDevicesSharedMemory) {
  const OpDesc op = attention(DType::f16, 16, 16, 512, 512, 256);
  // 227 KiB (H100) and 99 KiB (RTX 4090) fit two K/V stages at head dim 256...
  for (const DeviceCaps& caps : {profile("h100"), profile("rtx4090")}) {
    const KernelChoice k = find(choices(caps, op, full_build()), Tier::flash, Precision::f16);
    ASSERT_TRUE(k.ok) << k.reason;
    EXPECT_EQ(k.launch.stages, 2);
    EXPECT_LE(k.launch.shared_bytes, caps.shared_mem_per_block_optin);
  }
  // ...a device with 48 KiB gets one stage, and one with 32 KiB none at all.
  DeviceCaps small = profile("a100");
  small.shared_mem_per_block_optin = 48 * 1024;
  const KernelChoice one = find(choices(small, op, full_build()), Tier::flash, Precision::f16);
  ASSERT_TRUE(one.ok) << one.reason;
  EXPECT_EQ(one.launch.stages, 1);
  small.shared_mem_per_block = small.shared_mem_per_block_optin = 32 * 1024;
  const KernelChoice none = find(choices(small, op, full_build()), Tier::flash, Precision::f16);
  EXPECT_FALSE(none.ok);
  EXPECT_TRUE(contains(none.reason, "of shared memory per block, the device allows 32 KiB"))
      << none.reason;
  // Turing's 64 KiB: the tiled tier fits every head dim.
  for (int hd : kAttentionHeadDims) {
    const KernelChoice t =
        find(choices(profile("t4"), attention(DType::f16, 8, 8, 512, 512, hd), full_build()),
             Tier::tiled, Precision::f16);
    EXPECT_TRUE(t.ok) << t.reason;
    EXPECT_LE(t.launch.shared_bytes, 64u * 1024) << "head dim " << hd;
  }
}

TEST(Selection, BlocksFollowTheRowsAndTheRegisterFile) {
  // Decode with GQA 4:1 packs the 4 query heads of a kv head into one warp's rows.
  const KernelChoice d =
      find(choices(profile("a100"), attention(DType::f16, 32, 8, 1, 4096, 128), full_build()),
           Tier::flash, Precision::f16);
  EXPECT_EQ(d.launch.block_threads, 32);
  // Prefill fills 8 warps, unless the register file holds fewer 255-register warps.
  const OpDesc prefill = attention(DType::f16, 8, 8, 1024, 1024, 128);
  EXPECT_EQ(find(choices(profile("a100"), prefill, full_build()), Tier::flash, Precision::f16)
                .launch.block_threads,
            256);
  DeviceCaps half = profile("a100");
  half.registers_per_block = 32768;
  EXPECT_EQ(
      find(choices(half, prefill, full_build()), Tier::flash, Precision::f16).launch.block_threads,
      128);
}

TEST(Selection, DecodeSplitsTheKeysAcrossIdleSms) {
  const OpDesc decode = attention(DType::bf16, 32, 8, 1, 8192, 128);  // 8 blocks, 128 key tiles
  const KernelChoice k =
      find(choices(profile("a100"), decode, full_build()), Tier::flash, Precision::bf16);
  ASSERT_TRUE(k.ok) << k.reason;
  EXPECT_GT(k.launch.splits, 1);
  EXPECT_LE(k.launch.splits * 8, 2 * 108 + 8) << "about two blocks per SM";
  EXPECT_GT(workspace_bytes(Tier::flash, decode, k.launch), 0u) << "partials need a workspace";
  // A grid that already fills the SMs is not split.
  const KernelChoice big =
      find(choices(profile("a100"), attention(DType::bf16, 32, 32, 4096, 4096, 128), full_build()),
           Tier::flash, Precision::bf16);
  EXPECT_EQ(big.launch.splits, 1);
}

TEST(Selection, AQueryWithoutADenseLastDimNeedsACopyForTheTensorCoreTiers) {
  const TensorDesc q = *transpose(TensorDesc::contiguous(DType::f16, {1, 4, 64, 40}), -1, -2);
  const TensorDesc kv = TensorDesc::contiguous(DType::f16, {1, 4, 40, 64});
  const OpDesc op = *make_op(OpKind::attention, {}, {q, kv, kv}, {"q", "k", "v"});
  const auto cs = choices(profile("a100"), op, full_build());
  const KernelChoice flash = find(cs, Tier::flash, Precision::f16);
  EXPECT_FALSE(flash.ok);
  EXPECT_TRUE(contains(flash.reason, "'q'")) << flash.reason;
  EXPECT_TRUE(contains(flash.reason, "copy it first")) << flash.reason;
  EXPECT_TRUE(find(cs, Tier::generic, Precision::f32).ok) << "the generic tier reads any strides";
}

TEST(Selection, AnArchitectureMissingFromTheBuildIsRoutedAround) {
  const OpDesc op = attention(DType::f16, 8, 8, 64, 64, 64);
  // Built for sm_75 only: an sm_86 GPU has no image of any tier (an sm_75 cubin does not run on
  // sm_86, and there is no PTX).
  for (const KernelChoice& k : choices(profile("rtx4090"), op, BuildArchs{{75}, 0})) {
    EXPECT_FALSE(k.ok);
    if (k.tier == Tier::wgmma) continue;  // Hopper's tier says "requires sm_90" first
    EXPECT_TRUE(
        contains(k.reason, "no kernel image for sm_89 in this build (cubins sm_75; PTX none)"))
        << k.reason;
  }
  // The default build (sm_75, sm_80 + PTX 80): sm_89 runs the sm_80 cubins, sm_120 JITs the PTX.
  const BuildArchs def{{75, 80}, 80};
  for (const DeviceCaps& caps : {profile("rtx4090"), [] {
                                   DeviceCaps c = profile("rtx4090");
                                   c.cc_major = 12;
                                   c.cc_minor = 0;
                                   return c;
                                 }()}) {
    for (const KernelChoice& k : choices(caps, op, def))
      EXPECT_EQ(k.ok, k.tier != Tier::wgmma) << k.reason;
  }
  // A build without CUDA says so.
  const auto none = choices(profile("a100"), op, BuildArchs{});
  EXPECT_TRUE(contains(none.back().reason, "this build has no CUDA kernels")) << none.back().reason;
}

// ---- Hopper: the wgmma tier needs sm_90 exactly and an sm_90a cubin in the build.
BuildArchs hopper_build() {
  BuildArchs b = full_build();
  b.arch_specific = {90};
  return b;
}

TEST(Selection, HopperGetsTheWgmmaTierFromABuildWithAnSm90aImage) {
  const auto cs = choices(profile("h100"), attention(DType::bf16, 32, 32, 4096, 4096, 128, true),
                          hopper_build());
  ASSERT_FALSE(cs.empty());
  const KernelChoice& k = cs.front();
  EXPECT_EQ(k.tier, Tier::wgmma);
  EXPECT_EQ(k.precision, Precision::bf16);
  ASSERT_TRUE(k.ok) << k.reason;
  EXPECT_TRUE(contains(k.reason, "sm_90 with an sm_90a image: wgmma bf16")) << k.reason;
  EXPECT_EQ(k.launch.block_threads, 384);
  EXPECT_EQ(k.launch.splits, 1);
  EXPECT_LE(k.launch.shared_bytes, profile("h100").shared_mem_per_block_optin);
  EXPECT_EQ(k.launch.variant_name(), "wgmma_attention_bf16_hd128");
  EXPECT_TRUE(find(cs, Tier::flash, Precision::bf16).ok) << "flash stays as the fallback";
}

TEST(Selection, WgmmaDecodeSplitsTheKeysToFillTheSms) {
  const KernelChoice k =
      find(choices(profile("h100"), attention(DType::f16, 32, 8, 1, 32768, 128), hopper_build()),
           Tier::wgmma, Precision::f16);
  ASSERT_TRUE(k.ok) << k.reason;
  EXPECT_EQ(k.launch.splits, 16) << "8 blocks (one per kv head) x 16 splits = 128 of 132 SMs";
}

TEST(Selection, WgmmaIsRefusedByNameWithoutAnSm90aImageOrOnOtherArchitectures) {
  const OpDesc op = attention(DType::f16, 8, 8, 256, 256, 64);
  const KernelChoice no_image =
      find(choices(profile("h100"), op, full_build()), Tier::wgmma, Precision::f16);
  EXPECT_FALSE(no_image.ok);
  EXPECT_TRUE(contains(no_image.reason, "this build has no sm_90a image")) << no_image.reason;
  EXPECT_TRUE(contains(no_image.reason, "add 90a to DUET_CUDA_ARCHS")) << no_image.reason;
  for (const char* other : {"a100", "rtx4090", "rtx5090"}) {
    const KernelChoice k =
        find(choices(profile(other), op, hopper_build()), Tier::wgmma, Precision::f16);
    EXPECT_FALSE(k.ok);
    EXPECT_TRUE(contains(k.reason, "wgmma attention: requires sm_90 (Hopper")) << k.reason;
  }
  const KernelChoice hd96 =
      find(choices(profile("h100"), attention(DType::f16, 8, 8, 256, 256, 96), hopper_build()),
           Tier::wgmma, Precision::f16);
  EXPECT_FALSE(hd96.ok);
  EXPECT_TRUE(contains(hd96.reason, "head dim 96 is not one of 64, 128")) << hd96.reason;
}

TEST(Selection, APascalCardIsRefusedByEveryTierOfACuda13Build) {
  // CUDA 13 builds start at sm_75; a GTX 1060 (sm_61) gets the reason, not a crash.
  for (const KernelChoice& k :
       choices(profile("gtx1060"), attention(DType::f16, 8, 8, 64, 64, 64), full_build())) {
    EXPECT_FALSE(k.ok);
    if (k.tier == Tier::generic) {
      EXPECT_TRUE(contains(k.reason, "no kernel image for sm_61")) << k.reason;
    }
  }
}

TEST(Selection, EveryOpOfV1HasAGenericKernelWithItsLaunchShape) {
  for (int i = 0; i < kNumOpKinds; ++i) {
    const OpKind kind = static_cast<OpKind>(i);
    if (is_view(kind)) continue;
    std::vector<TensorDesc> in = {TensorDesc::contiguous(DType::bf16, {3, 17})};
    OpAttrs a;
    if (is_binary_elementwise(kind) || kind == OpKind::concat) in.push_back(in[0]);
    if (kind == OpKind::matmul) in = {in[0], TensorDesc::contiguous(DType::bf16, {17, 5})};
    if (kind == OpKind::rope || kind == OpKind::attention)
      in = {TensorDesc::contiguous(DType::bf16, {1, 2, 3, 16})};
    if (kind == OpKind::attention) in = {in[0], in[0], in[0]};
    if (kind == OpKind::embedding) in.push_back(TensorDesc::contiguous(DType::i32, {4}));
    if (kind == OpKind::cast) a.to = DType::i8;
    if (is_reduction(kind)) a.axes = {0};
    if (kind == OpKind::write_slice)
      in = {TensorDesc::contiguous(DType::bf16, {3, 17}),
            TensorDesc::contiguous(DType::bf16, {1, 17}), TensorDesc::contiguous(DType::i32, {1})};
    auto op = make_op(kind, a, in);
    ASSERT_TRUE(op.ok()) << op_name(kind) << ": " << op.status().message();
    const auto cs = choices(profile("t4"), *op, full_build());
    const KernelChoice g = cs.back();
    EXPECT_EQ(g.tier, Tier::generic) << op_name(kind);
    EXPECT_TRUE(g.ok) << op_name(kind) << ": " << g.reason;
    EXPECT_EQ(g.precision, Precision::f32);
    EXPECT_EQ(g.input_dtypes[0], DType::bf16)
        << "the generic tier reads bf16 directly, even on sm_75";
    EXPECT_GT(g.launch.block_threads, 0) << op_name(kind);
  }
}

}  // namespace
}  // namespace duet::kernels
