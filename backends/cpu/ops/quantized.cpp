// Ops that read block-quantized tensors: matmul with a quantized weight, embedding of a
// quantized table, cast out of a block format. The weight is read in its blocks, never copied
// to a dequantized buffer.
#include <vector>

#include "duet/half.h"
#include "duet/internal/index.h"
#include "duet/quantize.h"
#include "kernels/isa.h"
#include "kernels/qgemm.h"
#include "ops/ops.h"
#include "ops/rows.h"

namespace duet::cpu {

namespace {

// The first byte of element `elem` (a block start) of a quantized argument.
const uint8_t* block_at(const HostArg& a, int64_t elem) {
  return reinterpret_cast<const uint8_t*>(a.base) + quantized_byte_offset(a.desc.dtype, elem);
}

}  // namespace

const kernels::QuantKernels& active_quant_kernels() {
  return kernels::quant_kernels_for(kernels::active_isa());
}

Status quantized_matmul(const OpArgs& a) {
  const HostArg& x = a.in[0];
  const HostArg& w = a.in[1];
  const TensorDesc& wd = w.desc;
  const int64_t N = wd.dim(0), K = wd.dim(1);
  // The activations as dense f32 rows [..., M, K] (a transposed 'a' is read through its view).
  HostArg xv = x;
  if (a.op.attrs.transpose_a) {
    auto t = transpose(x.desc, -1, -2);
    if (!t.ok()) return t.status();
    xv.desc = *t;
  }
  F32In xf(xv, a.pool, a.scratch);
  F32Out y(a.out, a.scratch);
  if (a.scratch.failed()) return {};
  kernels::QuantMatmul q;
  q.format = wd.dtype;
  q.w = block_at(w, wd.offset);
  q.w_row_bytes = quantized_byte_offset(wd.dtype, wd.stride(0));
  q.n = N;
  q.k = K;
  q.x = xf.data();
  q.m = xf.desc().numel() / K;
  q.ldx = K;
  q.y = y.data();
  q.ldy = N;
  kernels::quantized_matmul(active_quant_kernels(), q, a.pool, a.scratch);
  if (a.scratch.failed()) return {};
  y.finish(a.pool);
  return {};
}

// Rows of a quantized table, dequantized (exactly, rounded once) into f32.
Status quantized_embedding(const OpArgs& a) {
  const HostArg& table = a.in[0];
  const int64_t V = table.desc.dim(0), D = table.desc.dim(1);
  const HostArg& idx = a.in[1];
  std::vector<int32_t> ids;
  if (!a.scratch.grow(ids, idx.desc.numel(), "the ids")) return {};
  ids.resize(u(idx.desc.numel()));  // within the capacity just grown (numel may be 0)
  const auto* ib = reinterpret_cast<const int32_t*>(idx.base);
  size_t n = 0;
  for_each_index(idx.desc, [&](int64_t, int64_t off) { ids[n++] = ib[off]; });
  DUET_TRY(resolve_ids(a, ids, V));
  auto* out = static_cast<float*>(a.out.elem0());
  a.pool.parallel_for(static_cast<int64_t>(ids.size()), 16, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      dequantize(table.desc.dtype,
                 block_at(table, table.desc.offset + ids[u(r)] * table.desc.stride(0)), out + r * D,
                 D);
  });
  return {};
}

// A block format to a float dtype, row by row: exact, rounded once to the output dtype.
Status quantized_cast(const OpArgs& a) {
  const HostArg& in = a.in[0];
  const TensorDesc& d = in.desc;
  const int64_t K = d.dim(-1), rows = d.numel() / K;
  const size_t es = dtype_size(a.out.desc.dtype);
  auto* out = static_cast<std::byte*>(a.out.elem0());
  a.pool.parallel_for(rows, std::max<int64_t>(1, 65536 / K), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      convert(block_at(in, d.offset + row_offset(d, d.strides, r)), d.dtype, out + u(r * K) * es,
              a.out.desc.dtype, K);
  });
  return {};
}

}  // namespace duet::cpu
