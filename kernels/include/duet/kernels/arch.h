// The one record of what an NVIDIA architecture has, derived once from its compute capability.
// The CUDA capability record (backends/cuda/caps.cpp), the kernels' selection and launch
// planning, the CUDA rules and the benchmarks read it; no other host code compares a compute
// capability with a number. Device code tests __CUDA_ARCH__ against the same first
// architectures (duet/kernels/arch_since.h).
//
// What a particular part lacks although its architecture has it (the tensor cores of TU116/TU117
// Turing parts) is the capability record's (DeviceCaps::tensor_cores), not this record's.
#pragma once

#include <string>
#include <vector>

#include "duet/device.h"
#include "duet/kernels/arch_since.h"
#include "duet/tier.h"

namespace duet::kernels {

struct ArchFeatures {
  int major = 0, minor = 0;
  int sm = 0;  // major*10 + minor (86 = sm_86); 0 for a record without a compute capability

  // CUDA-core arithmetic
  bool fp16_arith = false;  // half / half2 (sm_53)
  bool dp4a = false;        // dp4a / dp2a 8-bit integer dot products (sm_61)
  bool bf16_arith = false;  // bf16 / bf16x2 (sm_80)

  // Tensor cores: the mma.sync shapes the architecture has
  bool tensor_cores = false;      // any: mma.sync m8n8k4 f16 and wmma (sm_70)
  bool mma_f16_m16n8k8 = false;   // (sm_75)
  bool mma_f16_m16n8k16 = false;  // (sm_80)
  bool mma_bf16 = false;          // m16n8k8 and m16n8k16 with bf16 operands (sm_80)
  bool mma_tf32 = false;          // m16n8k4 and m16n8k8 tf32 (sm_80)
  bool mma_s8_m8n8k16 = false;    // int8 operands, s32 accumulation (sm_75)
  bool mma_s8_m16n8k32 = false;   // and m16n8k16 s8 (sm_80)
  bool mma_fp8 = false;           // m16n8k32 e4m3 / e5m2 (sm_89)

  // Data movement and synchronisation
  bool ldmatrix = false;  // ldmatrix.m8n8 from shared memory (sm_75)
  bool cp_async = false;  // cp.async global -> shared, 4 to 16 bytes (sm_80)
  bool mbarrier = false;  // mbarrier objects in shared memory (sm_80)
  bool redux = false;     // redux.sync warp reductions (sm_80)

  // Hopper and newer
  bool tma = false;          // cp.async.bulk(.tensor): the Tensor Memory Accelerator (sm_90)
  bool mbarrier_tx = false;  // mbarrier.expect_tx / try_wait, completing bulk copies (sm_90)
  bool clusters = false;     // thread block clusters, distributed shared memory (sm_90)
  bool stmatrix = false;     // stmatrix.m8n8 (sm_90)

  // Architecture-specific features: only on exactly this architecture, and only in code compiled
  // for its 'a' target (sm_90a, sm_100a): an sm_90 cubin or compute_90 PTX has none of them. A
  // tier that uses one needs an arch-specific image (BuildArchs::arch_specific).
  bool wgmma = false;    // warpgroup mma.async, 64xNx16 from shared memory (sm_90a)
  bool tcgen05 = false;  // fifth-generation tensor cores, tensor memory (sm_100a, sm_103a, sm_110a)

  // Rates CUDA does not report, for the capability record's peaks (0 = none or unknown)
  int fp32_lanes_per_sm = 0;
  int tensor_flops_per_sm_clock = 0;  // dense f16 mma, f16 accumulation
  double fp16_simt_rate = 0;          // f16 FLOPs per f32 FLOP on the CUDA cores (half2: 2)

  std::string name() const;  // "sm_86"
  // The 'a' target of the architecture's specific features ("sm_90a"), empty if it has none.
  std::string specific_target() const;
  // The matrix-unit shapes of the capability record (DeviceCaps::matrix_units), oldest first.
  std::vector<MatrixUnit> matrix_units() const;
  // "fp16 mma (sm_70+), m16n8k8 and int8 mma (sm_75+), ...": what `duet devices` shows.
  std::string tensor_core_summary() const;
};

ArchFeatures arch_features(int cc_major, int cc_minor);
// From the record's compute capability (cc_major, cc_minor); a record without one (cc_major 0)
// gets a record of nothing.
ArchFeatures arch_features(const DeviceCaps& caps);
// From major*10 + minor (Launch::sm).
ArchFeatures arch_features_of_sm(int sm);

// Whether the architecture has every instruction the kernels of `tier` use (flash and pipelined:
// m16n8k16 f16 and bf16 mma, cp.async, ldmatrix; tiled: m16n8k8 mma, ldmatrix; int8_mma: m8n8k16
// s8 mma; int_dot: dp4a; generic and the tiers that are not CUDA kernels: any architecture).
bool tier_fits(const ArchFeatures& a, Tier tier);
// The oldest architecture tier_fits: the tier's kernels are compiled for it and newer
// (kernels/CMakeLists.txt), and refused on older devices with this number. 0 for any.
int tier_min_sm(Tier tier);

std::string sm_name(int sm);  // "sm_75"

}  // namespace duet::kernels
