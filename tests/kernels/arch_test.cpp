// The one record of CUDA architecture facts (duet/kernels/arch.h), against the PTX ISA's first
// architecture of each instruction, and the tiers' architectures derived from it.
#include <gtest/gtest.h>

#include "duet/kernels/arch.h"

namespace duet::kernels {
namespace {

TEST(ArchFeatures, PascalHasDp4aButNoTensorCores) {
  const ArchFeatures p = arch_features(6, 1);
  EXPECT_EQ(p.name(), "sm_61");
  EXPECT_TRUE(p.fp16_arith);
  EXPECT_TRUE(p.dp4a);
  EXPECT_FALSE(p.tensor_cores);
  EXPECT_FALSE(p.ldmatrix);
  EXPECT_TRUE(p.matrix_units().empty());
  EXPECT_EQ(p.fp16_simt_rate, 1.0 / 64) << "GP10x consumer parts run f16 at 1/64 rate";
  EXPECT_EQ(arch_features(6, 0).fp16_simt_rate, 2.0);
}

TEST(ArchFeatures, VoltaHasOnlyTheFirstTensorCoreShape) {
  const ArchFeatures v = arch_features(7, 0);
  EXPECT_TRUE(v.tensor_cores);
  EXPECT_FALSE(v.mma_f16_m16n8k8);
  EXPECT_FALSE(v.mma_s8_m8n8k16);
  EXPECT_FALSE(v.ldmatrix);
  EXPECT_EQ(v.matrix_units().size(), 4u);
}

TEST(ArchFeatures, TuringAddsM16n8k8Int8MmaAndLdmatrixButNoBf16OrCpAsync) {
  const ArchFeatures t = arch_features(7, 5);
  EXPECT_TRUE(t.mma_f16_m16n8k8);
  EXPECT_TRUE(t.mma_s8_m8n8k16);
  EXPECT_TRUE(t.ldmatrix);
  EXPECT_FALSE(t.mma_f16_m16n8k16);
  EXPECT_FALSE(t.mma_s8_m16n8k32);
  EXPECT_FALSE(t.bf16_arith);
  EXPECT_FALSE(t.mma_bf16);
  EXPECT_FALSE(t.cp_async);
  EXPECT_EQ(t.tensor_core_summary(), "fp16 mma (sm_70+), m16n8k8 and int8 mma (sm_75+)");
}

TEST(ArchFeatures, AmpereAddsBf16CpAsyncAndTheLargerShapes) {
  for (int minor : {0, 6, 7, 9}) {
    const ArchFeatures a = arch_features(8, minor);
    EXPECT_TRUE(a.bf16_arith && a.mma_bf16 && a.mma_tf32) << a.name();
    EXPECT_TRUE(a.mma_f16_m16n8k16 && a.mma_s8_m16n8k32) << a.name();
    EXPECT_TRUE(a.cp_async && a.mbarrier) << a.name();
    EXPECT_FALSE(a.tma || a.clusters || a.wgmma) << a.name();
    EXPECT_EQ(a.mma_fp8, minor == 9) << a.name() << ": fp8 mma.sync is Ada's (sm_89)";
  }
  EXPECT_EQ(arch_features(8, 6).fp32_lanes_per_sm, 128);
  EXPECT_EQ(arch_features(8, 0).fp32_lanes_per_sm, 64);
  EXPECT_EQ(arch_features(8, 0).tensor_flops_per_sm_clock, 2048);
}

TEST(ArchFeatures, HopperHasTmaClustersAndWgmmaOnlyInItsSpecificImage) {
  const ArchFeatures h = arch_features(9, 0);
  EXPECT_TRUE(h.tma && h.mbarrier_tx && h.clusters && h.stmatrix);
  EXPECT_TRUE(h.wgmma);
  EXPECT_EQ(h.specific_target(), "sm_90a");
  EXPECT_EQ(h.tensor_flops_per_sm_clock, 4096);
  // wgmma is sm_90a's alone: Blackwell has tcgen05 instead, the consumer sm_120 neither.
  EXPECT_FALSE(arch_features(10, 0).wgmma);
  EXPECT_TRUE(arch_features(10, 0).tcgen05);
  EXPECT_EQ(arch_features(10, 0).specific_target(), "sm_100a");
  const ArchFeatures rtx50 = arch_features(12, 0);
  EXPECT_FALSE(rtx50.wgmma || rtx50.tcgen05);
  EXPECT_TRUE(rtx50.specific_target().empty());
  EXPECT_TRUE(rtx50.tma && rtx50.mma_fp8 && rtx50.cp_async);
}

TEST(ArchFeatures, EveryFeatureOfAnArchitectureStaysOnNewerOnes) {
  // Monotone in the compute capability, except the architecture-specific features.
  auto facts = [](const ArchFeatures& a) {
    return std::vector<bool>{
        a.fp16_arith,  a.dp4a,     a.bf16_arith,     a.tensor_cores,    a.mma_f16_m16n8k8,
        a.mma_bf16,    a.mma_tf32, a.mma_s8_m8n8k16, a.mma_s8_m16n8k32, a.mma_fp8,
        a.ldmatrix,    a.cp_async, a.mbarrier,       a.redux,           a.tma,
        a.mbarrier_tx, a.clusters, a.stmatrix,       a.mma_f16_m16n8k16};
  };
  const int archs[] = {50, 53, 60, 61, 70, 72, 75, 80, 86, 87, 89, 90, 100, 103, 110, 120, 121};
  for (size_t i = 1; i < std::size(archs); ++i) {
    const std::vector<bool> older = facts(arch_features_of_sm(archs[i - 1]));
    const std::vector<bool> newer = facts(arch_features_of_sm(archs[i]));
    for (size_t f = 0; f < older.size(); ++f)
      EXPECT_TRUE(!older[f] || newer[f])
          << "fact " << f << ": sm_" << archs[i - 1] << " -> sm_" << archs[i];
  }
}

TEST(ArchFeatures, ARecordWithoutComputeCapabilityHasNothing) {
  DeviceCaps vulkan;
  const ArchFeatures none = arch_features(vulkan);
  EXPECT_EQ(none.sm, 0);
  EXPECT_FALSE(none.fp16_arith || none.tensor_cores);
}

// The architectures each tier's kernels are compiled for (kernels/CMakeLists.txt) and refused
// below, derived from the instructions they use.
TEST(ArchFeatures, EachTiersFirstArchitectureFollowsFromItsInstructions) {
  EXPECT_EQ(tier_min_sm(Tier::flash), 80);
  EXPECT_EQ(tier_min_sm(Tier::pipelined), 80);
  EXPECT_EQ(tier_min_sm(Tier::tiled), 75);
  EXPECT_EQ(tier_min_sm(Tier::int8_mma), 75);
  EXPECT_EQ(tier_min_sm(Tier::int_dot), 61);
  EXPECT_EQ(tier_min_sm(Tier::generic), 0);
  EXPECT_FALSE(tier_fits(arch_features(7, 5), Tier::flash));
  EXPECT_TRUE(tier_fits(arch_features(7, 5), Tier::tiled));
  EXPECT_TRUE(tier_fits(arch_features(12, 0), Tier::flash));
  EXPECT_FALSE(tier_fits(arch_features(7, 0), Tier::tiled)) << "Volta has no m16n8k8";
}

}  // namespace
}  // namespace duet::kernels
