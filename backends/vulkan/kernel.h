// Which Vulkan kernel runs an op: the typed launch data the rules (rules/) fill and the recorder
// (ops/) reads, carried in LaunchConfig::variant. LaunchConfig holds the shape every kernel has
// (workgroup size, tiles, splits, shared memory); a Kernel names the shader family and holds what
// only that family needs. A new kernel family is a new Family value, the fields it needs, its
// rule and its recorder. No Vulkan API here: the rules are built without Vulkan too.
#pragma once

#include <cstdint>
#include <string>

#include "duet/device.h"

namespace duet::vulkan {

enum class Family : uint8_t {
  flat,               // one invocation per element (eltwise.comp, rope.comp, reduce.comp)
  rows,               // one workgroup per row (softmax.comp, norm.comp)
  convert,            // strided copy with conversion (convert.comp; cast, copy, concat)
  embedding,          // row gather (embedding.comp)
  write_slice,        // element copy into a slice at a run-time offset (write_slice.comp)
  dequantize_rows,    // rows of a block-quantized table dequantized (embedding_q.comp)
  gemm_tiled,         // shared-memory GEMM (matmul.comp)
  gemm_blocked,       // register-blocked GEMM, operands through texel buffers (matmul_blocked.comp)
  attention_flash,    // flash attention over shared-memory key tiles (attention.comp)
  attention_blocked,  // attention without shared memory (attention_blocked.comp)
  qgemm_tiled,        // block-quantized weight dequantized into shared memory (matmul_q_tiled.comp)
  qgemm_blocked,      // block-quantized weight read through a texel buffer (matmul_q.comp)
  qgemm_dot,          // activations quantized to q8, packed integer dot products (matmul_qdot.comp)
  matvec,             // the GPU mat-vec for decode, float or block-quantized weight (matvec.comp)
  gemm_coopmat,       // cooperative matrices, float or block-quantized weight (matmul_coopmat.comp)
  attention_decode,   // flash attention for GPUs at decode: few query rows, keys split across
                      // workgroups, subgroup reductions (attention_decode.comp)
};

struct Kernel {
  Family family = Family::flat;
  // gemm_tiled, gemm_blocked, qgemm_*: outputs per invocation (the register block), rows x
  // columns (qgemm: activation rows x weight rows).
  int tm = 0, tn = 0;
  // matvec: activation rows x weight rows per workgroup (every invocation streams all of its
  // weight rows, the workgroup splitting K).
  // attention_decode: query rows per workgroup in bm.
  // qgemm_tiled: outputs per workgroup, activation rows x weight rows.
  // gemm_coopmat: outputs per workgroup (bm = bn, 64 or 128).
  int bm = 0, bn = 0;
  // attention_blocked: query rows per invocation, and invocations along rows (the rest of the
  // workgroup runs along the keys).
  int query_rows = 0, row_lanes = 0;
  // qgemm_dot: byte pairs multiplied in 32-bit words instead of OpSDot (where the device
  // emulates packed dot products).
  bool swar = false;
  // attention_flash, attention_decode: keys split across workgroups (LaunchConfig::splits), partial
  // results merged by attention_combine.comp.
  bool split_keys = false;
  // matvec: the workgroup sums in shared memory alone (no subgroup arithmetic) instead of by
  // subgroupAdd first.
  bool shared_sum = false;

  // Shown in plans ("blocked_16x8", "qtiled_64x64_4x4", "qdot_32x4_swar", "matvec_1x4",
  // "coopmat_128", "decode_4_splitk").
  std::string name() const;
  bool operator==(const Kernel&) const = default;
};

// The Vulkan kernel a choice's launch names, or nullptr (a choice made without the rules).
inline const Kernel* kernel_of(const LaunchConfig& l) {
  return l.variant_as<Kernel>();
}

}  // namespace duet::vulkan
