#include "duet/internal/index.h"
#include "kernels/gemm.h"
#include "kernels/isa.h"
#include "ops/ops.h"

namespace duet::cpu {

namespace {

// Element offset (from the storage start) of matrix `bi` of an operand, where bi counts over
// the output's batch dims and the operand broadcasts to them (numpy: right-aligned, size 1
// repeats).
int64_t batch_offset(const TensorDesc& out, const TensorDesc& x, int64_t bi) {
  int64_t off = x.offset, rem = bi;
  const int lead = out.rank - x.rank;
  for (int d = out.rank - 3; d >= 0; --d) {
    const int64_t i = rem % out.shape[u(d)];
    rem /= out.shape[u(d)];
    const int xd = d - lead;
    if (xd >= 0 && x.shape[u(xd)] != 1) off += i * x.strides[u(xd)];
  }
  return off;
}

// The logical matrix of `arg` (rows x cols after an optional transpose) for every output batch.
kernels::MatrixOperand operand(const HostArg& arg, bool transposed, const TensorDesc& out,
                               int64_t batches) {
  const TensorDesc& d = arg.desc;
  kernels::MatrixOperand m;
  m.base = arg.base;
  m.type = to_elem(d.dtype);
  m.rs = transposed ? d.stride(-1) : d.stride(-2);
  m.cs = transposed ? d.stride(-2) : d.stride(-1);
  m.offsets.resize(u(batches));
  for (int64_t i = 0; i < batches; ++i) m.offsets[u(i)] = batch_offset(out, d, i);
  return m;
}

}  // namespace

// A blocked GEMM (kernels/gemm.cpp) that reads both operands through their strides, converting
// f16/bf16 while packing: transposes, views and batch broadcasting cost no copy.
Status matmul(const OpArgs& a) {
  const TensorDesc& out = a.op.output;
  const bool ta = a.op.attrs.transpose_a, tb = a.op.attrs.transpose_b;
  kernels::GemmArgs g;
  g.M = out.dim(-2);
  g.N = out.dim(-1);
  g.K = ta ? a.in[0].desc.dim(-2) : a.in[0].desc.dim(-1);
  g.batches = out.numel() / (g.M * g.N);
  g.a = operand(a.in[0], ta, out, g.batches);
  g.b = operand(a.in[1], tb, out, g.batches);
  F32Out c(a.out, a.scratch);
  if (!c.data()) return {};
  g.c = c.data();
  g.ldc = g.N;
  g.c_batch_stride = g.M * g.N;
  g.bf16 = a.precision == Precision::bf16;
  kernels::gemm(kernels::active_kernels(), g, a.pool, a.scratch);
  if (a.scratch.failed()) return {};
  c.finish(a.pool);
  return {};
}

}  // namespace duet::cpu
