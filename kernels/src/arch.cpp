// An architecture's features from its compute capability: the first architecture of each
// instruction family is arch_since.h's; the rates are the architecture whitepapers'.
#include "duet/kernels/arch.h"

namespace duet::kernels {

namespace {

// FP32 lanes per SM: 64 through sm_80, 128 from GA10x (sm_86) on, except GA100 (sm_80).
int fp32_lanes_per_sm(int major, int minor) {
  if (major >= 9 || (major == 8 && minor >= 6)) return 128;
  if (major == 6 && minor == 0) return 64;
  if (major == 6 || major == 5) return 128;
  return 64;
}

// Dense f16 tensor-core FLOPs per SM per clock with f16 accumulation (f32 accumulation runs at
// the same rate on data-centre and workstation parts, at half on GeForce parts).
int tensor_flops_per_sm_clock(int major, int minor) {
  if (major >= 10 && major < 12) return 8192;  // B100/B200 (sm_100, sm_103), Thor (sm_110)
  if (major == 9) return 4096;                 // H100/H200 (reached with wgmma)
  if (major == 8 && minor == 0) return 2048;   // A100
  if (major >= 7) return 1024;                 // V100, T4/RTX 20, RTX 30, RTX 40, RTX 50
  return 0;
}

}  // namespace

std::string sm_name(int sm) {
  return "sm_" + std::to_string(sm);
}

ArchFeatures arch_features(int cc_major, int cc_minor) {
  ArchFeatures a;
  if (cc_major <= 0) return a;
  a.major = cc_major;
  a.minor = cc_minor;
  const int sm = a.sm = cc_major * 10 + cc_minor;

  a.fp16_arith = sm >= DUET_SM_FP16_ARITH;
  a.dp4a = sm >= DUET_SM_DP4A;
  a.bf16_arith = sm >= DUET_SM_BF16;

  a.tensor_cores = sm >= DUET_SM_MMA_F16_M8N8K4;
  a.mma_f16_m16n8k8 = sm >= DUET_SM_MMA_F16_M16N8K8;
  a.mma_f16_m16n8k16 = sm >= DUET_SM_MMA_F16_M16N8K16;
  a.mma_bf16 = sm >= DUET_SM_BF16;
  a.mma_tf32 = sm >= DUET_SM_MMA_TF32;
  a.mma_s8_m8n8k16 = sm >= DUET_SM_MMA_S8_M8N8K16;
  a.mma_s8_m16n8k32 = sm >= DUET_SM_MMA_S8_M16N8K32;
  a.mma_fp8 = sm >= DUET_SM_MMA_FP8;

  a.ldmatrix = sm >= DUET_SM_LDMATRIX;
  a.cp_async = sm >= DUET_SM_CP_ASYNC;
  a.mbarrier = sm >= DUET_SM_MBARRIER;
  a.redux = sm >= DUET_SM_REDUX;

  a.tma = sm >= DUET_SM_TMA;
  a.mbarrier_tx = sm >= DUET_SM_MBARRIER_TX;
  a.clusters = sm >= DUET_SM_CLUSTERS;
  a.stmatrix = sm >= DUET_SM_STMATRIX;

  a.wgmma = sm == DUET_SM_WGMMA;
  // sm_100a, sm_103a and sm_110a (Thor; sm_101a before CUDA 13); not the consumer sm_120.
  a.tcgen05 = sm == 100 || sm == 101 || sm == 103 || sm == 110;

  a.fp32_lanes_per_sm = fp32_lanes_per_sm(cc_major, cc_minor);
  a.tensor_flops_per_sm_clock = tensor_flops_per_sm_clock(cc_major, cc_minor);
  // GP10x consumer parts (sm_61) run f16 at 1/64 of f32; elsewhere half2 pairs double it.
  a.fp16_simt_rate = sm == 61 ? 1.0 / 64 : a.fp16_arith ? 2.0 : 0.0;
  return a;
}

ArchFeatures arch_features(const DeviceCaps& caps) {
  return arch_features(caps.cc_major, caps.cc_minor);
}

ArchFeatures arch_features_of_sm(int sm) {
  return arch_features(sm / 10, sm % 10);
}

std::string ArchFeatures::name() const {
  return sm_name(sm);
}

std::string ArchFeatures::specific_target() const {
  return wgmma || tcgen05 ? name() + "a" : std::string();
}

std::vector<MatrixUnit> ArchFeatures::matrix_units() const {
  std::vector<MatrixUnit> u;
  auto add = [&u](const char* api, int m, int n, int k, DType a, DType acc) {
    u.push_back(MatrixUnit{api, m, n, k, a, acc});
  };
  if (tensor_cores) {  // Volta: first tensor cores
    add("mma.sync", 8, 8, 4, DType::f16, DType::f32);
    add("mma.sync", 8, 8, 4, DType::f16, DType::f16);
    add("wmma", 16, 16, 16, DType::f16, DType::f32);
    add("wmma", 16, 16, 16, DType::f16, DType::f16);
  }
  if (mma_f16_m16n8k8) {  // Turing: m16n8k8 and integer mma
    add("mma.sync", 16, 8, 8, DType::f16, DType::f32);
    add("mma.sync", 16, 8, 8, DType::f16, DType::f16);
  }
  if (mma_s8_m8n8k16) add("mma.sync", 8, 8, 16, DType::i8, DType::i32);
  if (mma_f16_m16n8k16) {  // Ampere: m16n8k16, bf16
    add("mma.sync", 16, 8, 16, DType::f16, DType::f32);
    add("mma.sync", 16, 8, 16, DType::f16, DType::f16);
  }
  if (mma_bf16) {
    add("mma.sync", 16, 8, 8, DType::bf16, DType::f32);
    add("mma.sync", 16, 8, 16, DType::bf16, DType::f32);
  }
  if (mma_s8_m16n8k32) add("mma.sync", 16, 8, 32, DType::i8, DType::i32);
  if (mma_bf16) add("wmma", 16, 16, 16, DType::bf16, DType::f32);
  return u;
}

std::string ArchFeatures::tensor_core_summary() const {
  std::string s = "fp16 mma (" + sm_name(DUET_SM_MMA_F16_M8N8K4) + "+)";
  if (mma_f16_m16n8k8 && mma_s8_m8n8k16)
    s += ", m16n8k8 and int8 mma (" + sm_name(DUET_SM_MMA_F16_M16N8K8) + "+)";
  if (mma_bf16 && mma_f16_m16n8k16 && cp_async)
    s += ", bf16 and m16n8k16 mma, cp.async (" + sm_name(DUET_SM_MMA_F16_M16N8K16) + "+)";
  return s;
}

bool tier_fits(const ArchFeatures& a, Tier tier) {
  switch (tier) {
    case Tier::flash:
    case Tier::pipelined:
      return a.mma_f16_m16n8k16 && a.mma_bf16 && a.cp_async && a.ldmatrix;
    case Tier::tiled:
      return a.mma_f16_m16n8k8 && a.ldmatrix;
    case Tier::int8_mma:
      return a.mma_s8_m8n8k16;
    case Tier::int_dot:
      return a.dp4a;
    case Tier::wgmma:  // and an sm_90a image (check_image with the arch-specific cubins)
      return a.wgmma && a.tma && a.mbarrier_tx && a.ldmatrix;
    default:
      return true;
  }
}

int tier_min_sm(Tier tier) {
  if (tier_fits(ArchFeatures{}, tier)) return 0;
  for (int major = 1; major <= 12; ++major)
    for (int minor = 0; minor <= 9; ++minor)
      if (tier_fits(arch_features(major, minor), tier)) return major * 10 + minor;
  return 0;
}

}  // namespace duet::kernels
