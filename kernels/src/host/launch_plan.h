// From (tier, op, views, launch) to the kernel launches that compute it: checked arguments, grid
// shapes and the kernel instance to use. Shared by gpu::launch and emu::launch, so that the GPU
// and the emulator run exactly the same launches.
#pragma once

#include <span>
#include <string>
#include <variant>
#include <vector>

#include "device/params.h"
#include "duet/kernels/launch.h"

namespace duet::kernels::detail {

enum class Kernel : uint8_t {
  attention_tc,       // flash / tiled
  attention_wgmma,    // wgmma (sm_90a)
  attention_combine,  // split-KV merge (generic)
  matmul_tc,          // pipelined / tiled
  eltwise,
  copy,
  rows,
  rope,
  rope_write,  // rope, its output's KV-cache write and V's (launch_rope_write)
  gen_attention,
  gen_flash,   // generic attention: SIMT flash (prefill)
  gen_decode,  // generic attention: SIMT split-KV decode
  gen_matmul,
  embedding,
  write_slice,
  fill_u64,
  gen_qmatmul,  // block-quantized weight (generic)
  gen_qrows,    // block-quantized rows: embedding, cast (generic)
  qdequant,     // block-quantized rows cast in order, staged (generic)
  q8_act,       // activations quantized to int8 per 32 (the integer tiers)
  qmv,          // block-quantized weight, mat-vec with dp4a (int_dot)
  mmq,          // block-quantized weight, int8 mma.sync tiles (int8_mma)
  matvec,       // decode shapes, f32 on the CUDA cores (generic)
  reduce,
};

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

using Params = std::variant<dev::AttnParams, dev::WgAttnParams, dev::CombineParams,
                            dev::MatmulParams, dev::EltwiseParams, dev::CopyParams, dev::RowParams,
                            dev::RopeParams, dev::GenAttnParams, dev::EmbedParams, dev::WriteParams,
                            dev::FillParams, dev::QMatmulParams, dev::QMvParams, dev::QRowsParams,
                            dev::Q8ActParams, dev::ReduceParams, dev::RopeWriteParams>;

struct Call {
  Kernel kernel = Kernel::eltwise;
  Tier tier = Tier::generic;
  bool bf16 = false;          // tensor-core kernels: bf16 (else f16)
  int head_dim = 0;           // attention_tc instance
  bool b_nmajor = false;      // matmul_tc instance
  bool sm80 = false;          // qmv, mmq instance: cp.async and m16n8k32 (sm_80+), else sync copies
                              // and m8n8k16 (sm_75) / dp4a (sm_61)
  int block_rows = 0;         // gen_decode instance: rows a block owns
  bool programmatic = false;  // launched with programmatic stream serialization (Launch)
  Dim3 grid;
  int threads = 0;
  uint64_t smem = 0;
  Params params;
  std::string name() const;  // "flash attention_tc<bf16, hd 128>"
};

Result<std::vector<Call>> plan(Tier tier, const OpDesc& op, std::span<const View> inputs,
                               const View& output, const Launch& launch, std::string_view device);

// The launches of a group of mat-vecs sharing their activations (launch.h, launch_group): one
// q8_act (or, with `norm`, the rmsnorm quantizing its output itself, and with `add` too, adding
// the residual before it; or the element-wise op `norm` quantizing its output), then a grouped qmv
// per block format (at most dev::kQMvGroup members each).
Result<std::vector<Call>> plan_group(Tier tier, std::span<const GroupMember> members,
                                     const Launch& launch, std::string_view device,
                                     const GroupMember* norm = nullptr,
                                     const GroupMember* add = nullptr);

// The one launch of a rope, the write_slice of its output and optionally a second write_slice
// (launch.h, launch_rope_write), each op's error word preset in its `error`.
Result<std::vector<Call>> plan_rope_write(std::span<const FusedOp> ops, const Launch& launch,
                                          std::string_view device);

// Error from a kernel-found data error (embedding ids, run-time scalars out of range), given the
// error bytes.
Status data_error(const OpDesc& op, const void* error_bytes, std::string_view device);

}  // namespace duet::kernels::detail
