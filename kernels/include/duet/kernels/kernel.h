// Which CUDA kernel of kernels/ runs an op: the typed launch data the selection (src/select/)
// fills, carried in LaunchConfig::variant beside the launch shape. A new kernel family is a new
// Family value, the fields it needs, its selection and its launch planning (src/host/).
#pragma once

#include <cstdint>
#include <string>

#include "duet/device.h"

namespace duet::kernels {

enum class Family : uint8_t {
  flash_attention,           // sm_80 tensor cores, cp.async pipeline (device/attention_tc.h)
  tiled_attention,           // sm_75 tensor cores (device/attention_tc.h)
  generic_attention,         // SIMT f32, a block per query row (device/generic.h)
  generic_flash_attention,   // SIMT f32 tiles, online softmax, prefill (attention_simt.h)
  generic_decode_attention,  // SIMT f32 split-KV decode (device/attention_simt.h)
  wgmma_attention,           // sm_90a: wgmma fed by TMA, warp-specialised (attention_wgmma.h)
  pipelined_matmul,          // sm_80 tensor cores, cp.async pipeline (device/matmul_tc.h)
  tiled_matmul,              // sm_75 tensor cores (device/matmul_tc.h)
  generic_matmul,            // SIMT f32 (device/generic.h)
  generic_matvec,    // decode shapes: B read once in 16-byte loads, SIMT f32 (device/matvec.h)
  generic_rows,      // softmax, rmsnorm, layernorm: a block per row (device/generic.h)
  generic_op,        // every other op, one thread per element (device/generic.h)
  int8_mma_qmatmul,  // block formats on int8 tensor cores, tiles (device/quant_mmq.h)
  int_dot_qmatvec,   // block formats with dp4a, weight rows through shared memory (quant_mv.h)
  generic_qmatmul,   // block formats dequantized in registers, SIMT f32 (device/quant.h)
  generic_qrows,     // rows of a block-quantized table dequantized (device/quant.h)
};

struct Kernel {
  Family family = Family::generic_op;
  Precision precision = Precision::f32;  // the tensor-core families: f16 or bf16
  int head_dim = 0;                      // the tensor-core attention families
  bool b_nmajor = false;    // the tensor-core matmul families: B read along N (else along K)
  bool k32 = false;         // int8_mma_qmatmul: mma.sync m16n8k32 (sm_80), else m8n8k16
  bool async = false;       // int_dot_qmatvec: weight rows staged by cp.async (sm_80)
  bool fused_act = false;   // int_dot_qmatvec: A quantized by the mat-vec itself (one launch)
  OpKind op = OpKind::add;  // generic_op: the op

  // Shown in plans ("flash_attention_f16_hd128", "pipelined_matmul_bf16_bn").
  std::string name() const;
  // The share of the device's peak (at the kernel's precision) the family reaches on a large
  // problem: its efficiency class (KernelChoice::efficiency, read by the cost model).
  double efficiency() const;
  bool operator==(const Kernel&) const = default;
};

}  // namespace duet::kernels
