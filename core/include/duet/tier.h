// Kernel tiers: each a family of kernels of a backend, named for what it does. A KernelChoice,
// a policy term (deny=cuda.flash), a plan and the cost model refer to a tier by this typed
// identity; its name is what users write in policies and read in plans.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "duet/export.h"

namespace duet {

enum class Tier : uint8_t {
  reference,  // cpu: float64 loops over the semantics of op.h; what results are checked against
  simd,       // cpu: vector f32 kernels (AVX-512, AVX2 or plain C++), chosen at run time
  generic,    // gpu: one invocation per element or row (CUDA: SIMT f32), any architecture
  tiled,      // cuda: sm_75 tensor cores (mma.sync m16n8k8): tiled SDPA and GEMM
  flash,      // attention with online softmax over key tiles (CUDA sm_80+; Vulkan shared memory)
  pipelined,  // cuda: sm_80+ tensor-core GEMM fed by cp.async pipelines
  register_blocked,  // vulkan: outputs blocked in registers, operands through texel buffers, no
                     // shared memory
  cublas,            // cuda: NVIDIA's cuBLASLt
  coopmat,           // vulkan: cooperative-matrix (matrix unit) kernels
  int_dot,   // block-quantized weights: activations quantized to q8 blocks, packed 4x8-bit integer
             // dot products (Vulkan VK_KHR_shader_integer_dot_product, CUDA dp4a on sm_61+)
  int8_mma,  // cuda: block-quantized weights dequantized to int8 in registers, int8 tensor-core
             // mma.sync (m8n8k16 on sm_75, m16n8k32 on sm_80+)
  matvec,    // vulkan: the GPU mat-vec for decode: each weight row read by a subgroup and summed
             // across it (subgroupAdd), or by a workgroup summing in shared memory
  wgmma,     // cuda: Hopper (sm_90a) kernels on warpgroup MMA (wgmma) fed by the TMA copy engine,
             // warp-specialised (attention)
  shared_memory,  // vulkan: GEMM tiles staged in workgroup shared memory (named "tiled" until
                  // that name was left to CUDA's sm_75 tier; policies saying vulkan.tiled still
                  // mean it)
};

DUET_API std::string_view tier_name(Tier t);
DUET_API std::ostream& operator<<(std::ostream& os, Tier t);  // the name
DUET_API std::optional<Tier> parse_tier(std::string_view name);
DUET_API std::span<const Tier> all_tiers();
// "reference, simd, generic, ...": for messages listing what is accepted.
DUET_API std::string tier_names();
// For a name tiers had before they were renamed ("subgroup"), what it is now called; empty for
// any other name.
DUET_API std::string renamed_tier(std::string_view old_name);

}  // namespace duet
