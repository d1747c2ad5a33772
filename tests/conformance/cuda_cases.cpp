#include "cuda_cases.h"

#include <array>
#include <cstdint>
#include <string>

#include "duet/op.h"

namespace duet::conformance {

namespace {

check::Case make_case(std::string name, OpKind k, OpAttrs a, std::vector<TensorDesc> in,
                      std::vector<check::Fill> fills) {
  check::Case c;
  c.name = std::move(name);
  c.kind = k;
  c.attrs = std::move(a);
  c.inputs = std::move(in);
  c.fills = std::move(fills);
  return c;
}

TensorDesc dense(DType t, std::initializer_list<int64_t> s) {
  return TensorDesc::contiguous(t, s);
}

}  // namespace

void add_cuda_cases(std::vector<check::Case>& out) {
  using check::Fill;
  const std::vector<Fill> qkv = {Fill::unit, Fill::unit, Fill::unit};
  const std::vector<Fill> qkvm = {Fill::unit, Fill::unit, Fill::unit, Fill::mask};
  for (DType t : {DType::f16, DType::bf16}) {
    const std::string ts = std::string(dtype_name(t));
    OpAttrs causal;
    causal.causal = true;
    // Several row blocks and key tiles, ragged at both ends, GQA 2:1, causal skipping.
    out.push_back(make_case(
        "kernels/attention/" + ts + "/multitile.causal.gqa", OpKind::attention, causal,
        {dense(t, {1, 4, 200, 64}), dense(t, {1, 2, 200, 64}), dense(t, {1, 2, 200, 64})}, qkv));
    // Head dim 256 (key tile 32), non-causal and causal with Lq < Lk.
    out.push_back(make_case(
        "kernels/attention/" + ts + "/hd256", OpKind::attention, {},
        {dense(t, {1, 2, 33, 256}), dense(t, {1, 2, 70, 256}), dense(t, {1, 2, 70, 256})}, qkv));
    out.push_back(make_case("kernels/attention/" + ts + "/hd256.causal.mask", OpKind::attention,
                            causal,
                            {dense(t, {1, 2, 20, 256}), dense(t, {1, 2, 70, 256}),
                             dense(t, {1, 2, 70, 256}), dense(DType::f32, {20, 70})},
                            qkvm));
    // Decode against a long cache: GQA packing and split-KV with the combine kernel.
    out.push_back(make_case(
        "kernels/attention/" + ts + "/hd128.decode.splits", OpKind::attention, {},
        {dense(t, {2, 8, 1, 128}), dense(t, {2, 2, 700, 128}), dense(t, {2, 2, 700, 128})}, qkv));
    // Chunked decode: a few queries at the end of a causal cache, with a mask.
    out.push_back(make_case("kernels/attention/" + ts + "/hd80.chunk.causal.mask",
                            OpKind::attention, causal,
                            {dense(t, {1, 2, 5, 80}), dense(t, {1, 1, 300, 80}),
                             dense(t, {1, 1, 300, 80}), dense(t, {1, 1, 5, 300})},
                            qkvm));
    // More queries than keys: the first 50 see no key and must be 0.
    out.push_back(make_case(
        "kernels/attention/" + ts + "/hd96.causal.lq>lk", OpKind::attention, causal,
        {dense(t, {1, 2, 70, 96}), dense(t, {1, 2, 20, 96}), dense(t, {1, 2, 20, 96})}, qkv));
    // The wgmma tier's edges (run on the emulated H100s only): more key tiles of 128 than
    // stages, ragged ends, GQA 2:1 with a block whose second warpgroup has 4 rows, causal with
    // Lq < Lk and Lq > Lk, a mask, GQA 4:1 at head dim 128.
    out.push_back(make_case(
        "kernels/attention/" + ts + "/wgmma.hd64.causal.gqa", OpKind::attention, causal,
        {dense(t, {1, 2, 130, 64}), dense(t, {1, 1, 700, 64}), dense(t, {1, 1, 700, 64})}, qkv));
    out.push_back(make_case("kernels/attention/" + ts + "/wgmma.hd128.mask.gqa4", OpKind::attention,
                            {},
                            {dense(t, {1, 4, 20, 128}), dense(t, {1, 1, 390, 128}),
                             dense(t, {1, 1, 390, 128}), dense(DType::f32, {20, 390})},
                            qkvm));
    out.push_back(make_case(
        "kernels/attention/" + ts + "/wgmma.hd64.causal.lq>lk", OpKind::attention, causal,
        {dense(t, {2, 2, 150, 64}), dense(t, {2, 2, 40, 64}), dense(t, {2, 2, 40, 64})}, qkv));
    // q, k, v as views of a [B, L, H, D] layout (seq stride H * D).
    const int order[4] = {0, 2, 1, 3};
    out.push_back(make_case(
        "kernels/attention/" + ts + "/blhd.views", OpKind::attention, {},
        {*permute(dense(t, {2, 40, 4, 64}), order), *permute(dense(t, {2, 50, 4, 64}), order),
         *permute(dense(t, {2, 50, 4, 64}), order)},
        qkv));

    // Matmuls: several block tiles with ragged edges, aligned (vector) and element-wise loads.
    out.push_back(make_case("kernels/matmul/" + ts + "/130x72x200", OpKind::matmul, {},
                            {dense(t, {130, 72}), dense(t, {72, 200})}, {Fill::unit, Fill::unit}));
    OpAttrs tb;
    tb.transpose_b = true;
    out.push_back(make_case("kernels/matmul/" + ts + "/3x70x64.tb.batch", OpKind::matmul, tb,
                            {dense(t, {3, 70, 64}), dense(t, {96, 64})}, {Fill::unit, Fill::unit}));
    out.push_back(make_case("kernels/matmul/" + ts + "/17x520x24.longk", OpKind::matmul, {},
                            {dense(t, {17, 520}), dense(t, {520, 24})}, {Fill::unit, Fill::unit}));
    OpAttrs ta;
    ta.transpose_a = true;
    out.push_back(make_case("kernels/matmul/" + ts + "/ta.tb.40x64x33", OpKind::matmul,
                            [] {
                              OpAttrs a;
                              a.transpose_a = a.transpose_b = true;
                              return a;
                            }(),
                            {dense(t, {64, 40}), dense(t, {33, 64})}, {Fill::unit, Fill::unit}));
  }
  // Rows held in registers by rows_kernel: a decode row of several elements a thread and a
  // ragged end (rmsnorm f32, layernorm f16 with weight and bias), a masked softmax, and a row
  // past the registers of the largest block (read in each pass).
  {
    OpAttrs n;
    n.eps = 1e-6f;
    out.push_back(make_case("kernels/rows/rmsnorm/f32/1x4100", OpKind::rmsnorm, n,
                            {dense(DType::f32, {1, 4100}), dense(DType::f32, {4100})},
                            {Fill::unit, Fill::positive}));
    out.push_back(make_case(
        "kernels/rows/layernorm/f16/2x1500", OpKind::layernorm, n,
        {dense(DType::f16, {2, 1500}), dense(DType::f16, {1500}), dense(DType::f16, {1500})},
        {Fill::unit, Fill::positive, Fill::unit}));
    OpAttrs sm;
    sm.scale = 0.5f;
    out.push_back(make_case("kernels/rows/softmax/bf16/3x2000.mask", OpKind::softmax, sm,
                            {dense(DType::bf16, {3, 2000}), dense(DType::f32, {3, 2000})},
                            {Fill::unit, Fill::mask}));
    out.push_back(make_case("kernels/rows/rmsnorm/f32/1x9000.passes", OpKind::rmsnorm, n,
                            {dense(DType::f32, {1, 9000})}, {Fill::unit}));
  }
  // The generic mat-vec (decode shapes, B [N, K]): a ragged K (element loads at the end), a
  // batch over a broadcast weight, more rows than one block of 8 warps owns, and a K longer than
  // one shared-memory chunk of A.
  {
    OpAttrs tb;
    tb.transpose_b = true;
    const std::vector<Fill> uu = {Fill::unit, Fill::unit};
    out.push_back(make_case("kernels/matvec/f16/1x1000x37", OpKind::matmul, tb,
                            {dense(DType::f16, {1, 1000}), dense(DType::f16, {37, 1000})}, uu));
    out.push_back(make_case("kernels/matvec/f16/2x1001x13.unaligned", OpKind::matmul, tb,
                            {dense(DType::f16, {2, 1001}), dense(DType::f16, {13, 1001})}, uu));
    out.push_back(make_case("kernels/matvec/bf16/2x3x256x300.batch", OpKind::matmul, tb,
                            {dense(DType::bf16, {2, 3, 256}), dense(DType::bf16, {300, 256})}, uu));
    out.push_back(make_case("kernels/matvec/f32/8x9000x5.chunks", OpKind::matmul, tb,
                            {dense(DType::f32, {8, 9000}), dense(DType::f32, {5, 9000})}, uu));
  }
  // Block-quantized weights (generic tier): K of more groups of 32 than a warp has lanes, rows of
  // A past one block of kQRows, batch dims broadcast over the weight, a bf16 activation.
  OpAttrs tb;
  tb.transpose_b = true;
  out.push_back(make_case("kernels/qmatmul/q4_k/9x2304x37", OpKind::matmul, tb,
                          {dense(DType::f16, {9, 2304}), dense(DType::q4_k, {37, 2304})},
                          {Fill::unit, Fill::blocks}));
  out.push_back(make_case("kernels/qmatmul/q8_0/batch.2x3x1088x6", OpKind::matmul, tb,
                          {dense(DType::bf16, {2, 3, 1088}), dense(DType::q8_0, {6, 1088})},
                          {Fill::unit, Fill::blocks}));
  // The integer tiers, every format, small: decode batches (dp4a; one activation row, whose
  // instance takes 4 weight rows a block, ragged at 7, and another of 2 to 8 rows, each count
  // by some format) and a prefill tile with ragged edges over several K chunks (int8 mma: 20 x 70
  // against 64 x 64 blocks).
  int i = 0;
  for (DType q : kQuantizedDTypes) {
    const std::string qs(dtype_name(q));
    const int64_t k = dtype_block_elems(q) == 32 ? 320 : 512,
                  m = std::array{5, 2, 3, 4, 6, 7, 8}[i++ % 7];
    for (int64_t rows : {int64_t{1}, m})
      out.push_back(make_case("kernels/qint/" + qs + "/decode." + std::to_string(rows) + "x" +
                                  std::to_string(k) + "x" + std::to_string(rows == 1 ? 7 : 9),
                              OpKind::matmul, tb,
                              {dense(DType::f32, {rows, k}), dense(q, {rows == 1 ? 7 : 9, k})},
                              {Fill::unit, Fill::blocks}));
    out.push_back(make_case("kernels/qint/" + qs + "/prefill.20x" + std::to_string(k) + "x70",
                            OpKind::matmul, tb, {dense(DType::f16, {20, k}), dense(q, {70, k})},
                            {Fill::unit, Fill::blocks}));
  }
  // Several tiles of 128 rows of A by 128 weight rows, ragged; decode batches whose K is more
  // groups than a block has threads, and not a multiple of them: a format per kind of scaling.
  for (DType q : {DType::q4_0, DType::q6_k}) {
    const std::string qs(dtype_name(q));
    out.push_back(make_case("kernels/qint/" + qs + "/tiles.130x512x140", OpKind::matmul, tb,
                            {dense(DType::f32, {130, 512}), dense(q, {140, 512})},
                            {Fill::unit, Fill::blocks}));
  }
  out.push_back(make_case("kernels/qint/q4_0/decode.8x6400x3.tail", OpKind::matmul, tb,
                          {dense(DType::f32, {8, 6400}), dense(DType::q4_0, {3, 6400})},
                          {Fill::unit, Fill::blocks}));
  out.push_back(make_case("kernels/qint/q6_k/decode.1x4864x5.tail", OpKind::matmul, tb,
                          {dense(DType::f32, {1, 4864}), dense(DType::q6_k, {5, 4864})},
                          {Fill::unit, Fill::blocks}));
}

}  // namespace duet::conformance
