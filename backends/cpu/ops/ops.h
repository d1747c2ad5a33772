// The CPU backend's f32 implementations of the op set, one family per file.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "duet/op.h"
#include "ops/tensor_io.h"

namespace duet::cpu {

struct OpArgs {
  const OpDesc& op;
  std::span<const HostArg> in;
  const HostArg& out;
  ThreadPool& pool;
  const std::string& device;  // for messages
  Scratch& scratch;  // every buffer sized by the inputs; the device reports a failed request
  Precision precision = Precision::f32;  // of the planned kernel choice (bf16: matmul's bf16 dots)
};

Status elementwise(const OpArgs& a);  // every function of duet/eltwise.h
Status softmax(const OpArgs& a);
Status norm(const OpArgs& a);  // rmsnorm, layernorm
Status rope(const OpArgs& a);
Status reduce(const OpArgs& a);  // reduce_sum ... reduce_min, reduce_prod
Status matmul(const OpArgs& a);
Status attention(const OpArgs& a);
Status data_movement(const OpArgs& a);  // cast, copy, concat, embedding, write_slice

// Ops reading block-quantized tensors (ops/quantized.cpp).
Status quantized_matmul(const OpArgs& a);     // matmul with a quantized 'b' [N, K]
Status quantized_embedding(const OpArgs& a);  // embedding of a quantized table
Status quantized_cast(const OpArgs& a);       // cast from a block format to a float dtype

// Checks an embedding's ids against [0, V) (or [-V, V) with negative_ids, which it then maps to
// id + V): an error naming the first bad id and its position.
Status resolve_ids(const OpArgs& a, std::vector<int32_t>& ids, int64_t V);

}  // namespace duet::cpu
