// The CUDA rules on capability records alone: image check, the kernels' choices, cuBLASLt.
#include <gtest/gtest.h>

#include <optional>

#include "cuda_backend.h"
#include "duet/backends.h"
#include "duet/kernels/select.h"
#include "duet/planner.h"
#include "fake_driver.h"
#include "qgemm.h"
#include "rules.h"

namespace duet::cuda {
namespace {

using namespace duet::cuda::testing;

DeviceCaps record(const DeviceProps& p, bool cublas = true) {
  DeviceCaps c = caps_from_props(p);
  if (cublas) {
    c.gemm_library = "cuBLASLt 13.0.0 (test)";
    c.gemm_library_loaded = true;
  }
  return c;
}

OpDesc matmul(DType t, std::vector<int64_t> a, std::vector<int64_t> b, bool tb = false) {
  OpAttrs attrs;
  attrs.transpose_b = tb;
  auto op =
      make_op(OpKind::matmul, attrs, {TensorDesc::contiguous(t, a), TensorDesc::contiguous(t, b)},
              {"a", "b"}, "proj");
  EXPECT_TRUE(op.ok()) << op.status().message();
  return *op;
}

OpDesc attention(DType t) {
  auto q = TensorDesc::contiguous(t, {1, 8, 16, 64});
  auto kv = TensorDesc::contiguous(t, {1, 8, 32, 64});
  auto op = make_op(OpKind::attention, {}, {q, kv, kv}, {"q", "k", "v"}, "attn");
  EXPECT_TRUE(op.ok()) << op.status().message();
  return *op;
}

OpDesc add(DType t) {
  auto x = TensorDesc::contiguous(t, {4, 33});
  auto op = make_op(OpKind::add, {}, {x, x}, {"x", "y"}, "residual");
  EXPECT_TRUE(op.ok()) << op.status().message();
  return *op;
}

// A copy of the choice (the vectors searched are often temporaries).
std::optional<KernelChoice> find(const std::vector<KernelChoice>& v, Tier tier, Precision p) {
  for (const KernelChoice& c : v)
    if (c.tier == tier && c.precision == p) return c;
  return std::nullopt;
}

TEST(CudaRules, DeviceWithoutKernelImageRefusesEveryOpWithTheReason) {
  // A build for sm_75 only, on an RTX 3090 (sm_86): the case of the mixed-generation box.
  auto rules = make_rules(parse_build_archs("75", ""));
  const DeviceCaps rtx = record(rtx3090());
  for (const OpDesc& op :
       {matmul(DType::f16, {64, 128}, {128, 32}), attention(DType::f16), add(DType::f32)}) {
    std::vector<KernelChoice> v = rules->choices(rtx, op);
    ASSERT_FALSE(v.empty()) << describe(op);
    for (const KernelChoice& c : v) {
      EXPECT_FALSE(c.ok) << c.tier;
      EXPECT_NE(c.reason.find("no kernel image for sm_86"), std::string::npos) << c.reason;
    }
  }
}

TEST(CudaRules, EachDeviceOfAMixedBoxGetsItsOwnImage) {
  auto rules = make_rules(parse_build_archs("75;86", ""));
  const OpDesc op = matmul(DType::f16, {64, 128}, {128, 32});
  for (const DeviceProps& p : {rtx2080ti(), rtx3090()}) {
    std::optional<KernelChoice> c =
        find(rules->choices(record(p), op), Tier::cublas, Precision::f16);
    ASSERT_TRUE(c.has_value());
    EXPECT_TRUE(c->ok) << p.name << ": " << c->reason;
  }
}

TEST(CudaRules, WhatIfThisBuildLackedSm86) {
  const OpDesc op = matmul(DType::f16, {64, 128}, {128, 32});
  const DeviceCaps rtx = record(rtx3090());
  // sm_80 cubins still run on sm_86; PTX for sm_75 is JIT-compiled; with neither, nothing runs.
  for (auto [cubins, ptx, ok] :
       {std::tuple{"75;80", "", true}, std::tuple{"75", "75", true}, std::tuple{"75", "", false}}) {
    std::optional<KernelChoice> c = find(
        make_rules(parse_build_archs(cubins, ptx))->choices(rtx, op), Tier::cublas, Precision::f16);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->ok, ok) << cubins << " / " << ptx << ": " << c->reason;
  }
}

TEST(CudaRules, KernelTiersFollowTheRulesArchitectureList) {
  // An A100 runs a build of sm_75 cubins + compute_75 PTX through the PTX, but that build has no
  // flash kernel (flash is built for sm_80 and newer only): the rules' list decides, not this
  // build's.
  auto rules = make_rules(parse_build_archs("75", "75"));
  for (const KernelChoice& c : rules->choices(record(a100()), attention(DType::f16)))
    if (c.tier == Tier::flash) {
      EXPECT_FALSE(c.ok) << c.reason;
    }
}

TEST(CudaRules, KernelChoicesComeFromTheKernelsSelectionInOrder) {
  auto rules = make_rules(parse_build_archs("75;80", "80"));
  for (const DeviceProps& p : {t4(), a100(), gtx1660()}) {
    const DeviceCaps c = record(p);
    for (const OpDesc& op :
         {attention(DType::f16), add(DType::f32), matmul(DType::f32, {8, 8}, {8, 8})}) {
      std::vector<KernelChoice> want = kernels::choices(c, op);
      std::vector<KernelChoice> got = rules->choices(c, op);
      std::erase_if(got, [](const KernelChoice& k) { return k.tier == Tier::cublas; });
      ASSERT_EQ(got.size(), want.size()) << p.name << " " << describe(op);
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].tier, want[i].tier);
        EXPECT_EQ(got[i].precision, want[i].precision);
        EXPECT_EQ(got[i].launch, want[i].launch);
        if (want[i].ok && (want[i].precision != Precision::bf16 || c.bf16_arith)) {
          EXPECT_TRUE(got[i].ok) << got[i].reason;
        }
      }
    }
  }
}

TEST(CudaRules, Bf16OnTuringIsRefusedWithTheReason) {
  auto rules = make_rules(parse_build_archs("75;80", "80"));
  const OpDesc op = matmul(DType::bf16, {64, 128}, {128, 32});
  for (const KernelChoice& c : rules->choices(record(t4()), op)) {
    if (c.precision != Precision::bf16) continue;
    EXPECT_FALSE(c.ok) << c.tier;
    if (c.tier == Tier::cublas) {
      EXPECT_NE(c.reason.find("bf16 arithmetic needs sm_80"), std::string::npos) << c.reason;
    }
  }
  std::optional<KernelChoice> on_a100 =
      find(rules->choices(record(a100()), op), Tier::cublas, Precision::bf16);
  ASSERT_TRUE(on_a100.has_value());
  EXPECT_TRUE(on_a100->ok) << on_a100->reason;
}

TEST(CudaRules, TuringWithoutTensorCoresGetsNoTensorCoreKernel) {
  auto rules = make_rules(parse_build_archs("75;80", "80"));
  for (const DeviceProps& p : {gtx1660(), mx450()})
    for (const OpDesc& op : {attention(DType::f16), matmul(DType::f16, {64, 128}, {128, 32})})
      for (const KernelChoice& c : rules->choices(record(p), op)) {
        if (c.tier == Tier::tiled || c.tier == Tier::flash) {
          EXPECT_FALSE(c.ok) << p.name << " " << describe(op) << ": " << c.tier;
        }
      }
}

TEST(CudaRules, CublasComesFirstForMatmulWhenTheLibraryLoaded) {
  auto rules = make_rules(parse_build_archs("75;80", "80"));
  std::vector<KernelChoice> v =
      rules->choices(record(a100()), matmul(DType::f16, {64, 128}, {32, 128}, true));
  ASSERT_GE(v.size(), 3u);
  EXPECT_EQ(v[0].tier, Tier::cublas);
  std::optional<KernelChoice> f16 = find(v, Tier::cublas, Precision::f16);
  ASSERT_TRUE(f16.has_value());
  EXPECT_TRUE(f16->ok) << f16->reason;
  EXPECT_EQ(f16->input_dtypes, (std::vector<DType>{DType::f16, DType::f16}));
  EXPECT_EQ(f16->output_dtype, DType::f16);
  EXPECT_NE(find(v, Tier::cublas, Precision::f32)->reason.find("no TF32"), std::string::npos);
}

TEST(CudaRules, CublasIsRefusedWhenTheRecordDoesNotSayItLoaded) {
  auto rules = make_rules(parse_build_archs("75;80", "80"));
  const OpDesc op = matmul(DType::f16, {64, 128}, {128, 32});
  std::optional<KernelChoice> c =
      find(rules->choices(record(a100(), false), op), Tier::cublas, Precision::f16);
  ASSERT_TRUE(c.has_value());
  EXPECT_FALSE(c->ok);
  DeviceCaps missing = record(a100(), false);
  missing.gemm_library = "unavailable: libcublasLt.so.13 not found";
  c = find(rules->choices(missing, op), Tier::cublas, Precision::f16);
  EXPECT_FALSE(c->ok);
  EXPECT_NE(c->reason.find("libcublasLt.so.13 not found"), std::string::npos) << c->reason;
}

TEST(CudaRules, CublasIsRefusedForBatchesThatDoNotCollapse) {
  // b is [2, 3, K, N] viewed with its batch dims swapped: no single batch stride.
  TensorDesc b = TensorDesc::contiguous(DType::f32, {3, 2, 16, 8});
  b = *transpose(b, 0, 1);
  auto op = make_op(OpKind::matmul, {}, {TensorDesc::contiguous(DType::f32, {2, 3, 4, 16}), b},
                    {"a", "b"}, "bmm");
  ASSERT_TRUE(op.ok()) << op.status().message();
  std::optional<KernelChoice> c =
      find(make_rules(this_build())->choices(record(a100()), *op), Tier::cublas, Precision::f32);
  ASSERT_TRUE(c.has_value());
  EXPECT_FALSE(c->ok);
  EXPECT_NE(c->reason.find("do not collapse"), std::string::npos) << c->reason;
}

TEST(CudaRules, BuiltinRulesAreThisBuildsRules) {
  const BackendRules& builtin = builtin_rules(BackendKind::cuda);
  EXPECT_EQ(builtin.backend(), BackendKind::cuda);
  EXPECT_EQ(&builtin, &rules());
  auto mine = make_rules(this_build());
  for (const DeviceProps& p : {v100(), t4(), rtx3090(), h100()}) {
    const OpDesc op = matmul(DType::f16, {64, 128}, {128, 32});
    std::vector<KernelChoice> a = builtin.choices(record(p), op);
    std::vector<KernelChoice> b = mine->choices(record(p), op);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].ok, b[i].ok) << p.name;
      EXPECT_EQ(a[i].reason, b[i].reason) << p.name;
    }
  }
}

// A block-quantized weight: the kernels that read the blocks, then cuBLASLt on dequantized f16
// tiles of bounded size, whose reason says the weight stays compressed. The cost model charges
// the tiles' traffic: a 512-row prefill goes to cuBLAS, a 16-row batch stays on the int8 tiles.
TEST(CudaRules, AQuantizedMatmulWeighsInt8TilesAgainstCublasOnDequantizedTiles) {
  auto rules = make_rules(parse_build_archs("75;80;90", "90"));
  const DeviceCaps h100 = record(testing::h100());
  auto qmatmul = [](int64_t m) {
    OpAttrs tb;
    tb.transpose_b = true;
    return *make_op(OpKind::matmul, tb,
                    {TensorDesc::contiguous(DType::f16, {m, 14336}),
                     TensorDesc::contiguous(DType::q4_0, {4096, 14336})},
                    {"x", "w"}, "ffn_down");
  };
  const auto big = rules->choices(h100, qmatmul(512));
  const auto mma = find(big, Tier::int8_mma, Precision::f32);
  const auto blas = find(big, Tier::cublas, Precision::f16);
  ASSERT_TRUE(mma && blas);
  ASSERT_TRUE(mma->ok) << mma->reason;
  ASSERT_TRUE(blas->ok) << blas->reason;
  EXPECT_NE(blas->reason.find("4 chunk(s) of 4096 K"), std::string::npos) << blas->reason;
  EXPECT_NE(blas->reason.find("32 MiB workspace tile"), std::string::npos) << blas->reason;
  EXPECT_NE(blas->reason.find("the weight stays q4_0"), std::string::npos) << blas->reason;
  EXPECT_LT(estimate_kernel_us(qmatmul(512), *blas, h100, nullptr),
            estimate_kernel_us(qmatmul(512), *mma, h100, nullptr));
  const auto small = rules->choices(h100, qmatmul(16));
  EXPECT_GT(
      estimate_kernel_us(qmatmul(16), *find(small, Tier::cublas, Precision::f16), h100, nullptr),
      estimate_kernel_us(qmatmul(16), *find(small, Tier::int8_mma, Precision::f32), h100, nullptr));
  // f32 activations: rounded to f16 for the tiles' GEMM, which keeps the f32 floor as the
  // integer tiers' int8 activations do, rated at the f16 tensor rate: a 512-row prefill still
  // goes to cuBLAS.
  OpAttrs tb;
  tb.transpose_b = true;
  const OpDesc f32_op = *make_op(OpKind::matmul, tb,
                                 {TensorDesc::contiguous(DType::f32, {512, 14336}),
                                  TensorDesc::contiguous(DType::q4_0, {4096, 14336})},
                                 {"x", "w"}, "ffn_down");
  const auto f32 = rules->choices(h100, f32_op);
  const auto blas32 = find(f32, Tier::cublas, Precision::f32);
  ASSERT_TRUE(blas32 && blas32->ok) << (blas32 ? blas32->reason : "no cublas choice");
  EXPECT_EQ(blas32->arithmetic, Precision::f16);
  EXPECT_NE(blas32->reason.find("the activations are rounded to f16"), std::string::npos)
      << blas32->reason;
  EXPECT_LT(estimate_kernel_us(f32_op, *blas32, h100, nullptr),
            estimate_kernel_us(f32_op, *find(f32, Tier::int8_mma, Precision::f32), h100, nullptr));
  // Without the library the choice says so.
  const auto none = rules->choices(record(testing::h100(), false), qmatmul(512));
  EXPECT_FALSE(find(none, Tier::cublas, Precision::f16)->ok);
}

// The chunks of K fit the tile bound in whole blocks; the workspace holds the activations' copy
// where they are not dense f16, the tile, the f32 result for a 16-bit output, cuBLASLt's scratch.
TEST(DequantGemm, ChunksOfKFitTheTileBound) {
  OpAttrs tb;
  tb.transpose_b = true;
  const OpDesc op = *make_op(OpKind::matmul, tb,
                             {TensorDesc::contiguous(DType::f32, {512, 14336}),
                              TensorDesc::contiguous(DType::q6_k, {4096, 14336})});
  const auto d = plan_dequant_gemm(op, 32ull << 20, 4ull << 20);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->kc, 4096);
  EXPECT_EQ(d->chunks, 4);
  EXPECT_EQ(d->compute, DType::f16);
  EXPECT_TRUE(d->cast_a);
  EXPECT_FALSE(d->f32_result);
  EXPECT_EQ(d->tile_bytes(), 32ull << 20);
  EXPECT_EQ(d->gemm(3).k, 14336 - 3 * 4096);
  EXPECT_TRUE(d->gemm(3).accumulate);
  EXPECT_FALSE(d->gemm(0).accumulate);
  EXPECT_EQ(d->total, 512ull * 14336 * 2 + (32ull << 20) + (4ull << 20));
  // A tile bound below one block of every row still takes whole blocks.
  EXPECT_EQ(plan_dequant_gemm(op, 1024, 0)->kc, 256);
  OpAttrs ta = tb;
  ta.transpose_a = true;
  const OpDesc t = *make_op(OpKind::matmul, ta,
                            {TensorDesc::contiguous(DType::f16, {14336, 8}),
                             TensorDesc::contiguous(DType::q4_0, {4096, 14336})});
  EXPECT_FALSE(plan_dequant_gemm(t, 32ull << 20, 0).ok());
}

}  // namespace
}  // namespace duet::cuda
