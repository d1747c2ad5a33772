// Block-quantized weights: matmul (weight 'b') by the shared-memory kernel (qgemm_tiled), the
// texel-buffer kernel (qgemm_blocked) or integer dot products (qgemm_dot); embedding (the table)
// and cast by dequantizing rows (dequantize_rows). Blocks are read in place, never expanded in
// device memory.
#include <algorithm>
#include <optional>

#include "rules/rules.h"

namespace duet::vulkan::rules_detail {

namespace {

// The quantized matmul's register block (matmul_q.comp): TM rows of activations x TN weight rows
// per invocation. One activation row (decode) reads each weight byte once; for more rows each
// decoded group of 32 weights serves up to 32 rows on a CPU device (4 elsewhere), so decoding
// costs a few percent of the multiply-adds. Measured on lavapipe, q4_0 prefill of 512 rows,
// K = 14336: 8x8 8.5 s, 16x8 7.0 s, 32x4 6.0 s. Blocks shrink until there are workgroups for
// every compute unit.
struct BlockTile {
  int wg, tm, tn;
};

BlockTile pick_quant_block(const DeviceCaps& c, const OpDesc& op, bool int_dot) {
  const int64_t M = op.output.dim(-2), N = op.output.dim(-1);
  int64_t batch = 1;
  for (int i = 0; i + 2 < op.output.rank; ++i) batch *= op.output.dim(i);
  const int sg = std::max(c.subgroup_size, 1);
  BlockTile s{std::min(sg, max_threads(c)), 1, 4};
  if (!on_cpu(c)) s.wg = std::max(s.wg, std::min(64, max_threads(c)) / s.wg * s.wg);
  // The integer-dot kernel keeps a weight group in 8 words where the float one keeps 32 floats:
  // on a GPU it affords 8 activation rows per invocation. On lavapipe 32x4 stays best for both
  // (q4_0 prefill, K = 14336: int_dot 32x4 3.7 s, 32x8 3.8 s, 64x4 3.9 s, 16x16 4.9 s).
  const int tm_cap = on_cpu(c) ? 32 : int_dot ? 8 : 4;
  s.tm = static_cast<int>(
      std::min<uint64_t>(tm_cap, pow2_ceil(static_cast<uint64_t>(std::max<int64_t>(M, 1)))));
  s.tn = 4;
  const int64_t target = 2 * std::max(c.compute_units, 1);
  auto groups = [&] {
    return ((N + s.wg * s.tn - 1) / (s.wg * s.tn)) * ((M + s.tm - 1) / s.tm) * batch;
  };
  while (groups() < target && s.tn > 1) s.tn /= 2;
  while (groups() < target && s.tm > 1) s.tm /= 2;
  return s;
}

// The quantized shared-memory GEMM's tile (matmul_q_tiled.comp): BM x 32 activations and BN x 32
// dequantized weights in shared memory, TM x TN outputs per invocation. Candidates largest first;
// the first whose workgroup and shared memory fit the device and that is not far larger than the
// problem is used.
struct QuantTile {
  int bm, bn, tm, tn;
  int threads() const { return (bm / tm) * (bn / tn); }
  uint64_t shared() const { return static_cast<uint64_t>(bm + bn) * 32 * 4; }
};

constexpr QuantTile kQuantTiles[] = {
    {64, 64, 4, 4}, {32, 64, 4, 4}, {64, 32, 4, 4}, {32, 32, 4, 4}, {16, 64, 2, 4},
    {16, 32, 2, 4}, {16, 16, 2, 2}, {8, 16, 2, 2},  {4, 8, 1, 2},
};

std::optional<QuantTile> pick_quant_tile(const DeviceCaps& c, int64_t M, int64_t N,
                                         std::string* why_not) {
  return pick_tile(c, kQuantTiles, M, N, 4, "quantized GEMM", why_not);
}

// Bytes of one 32-element group of a block format (what a lane loads per step along K).
double group_bytes(DType q) {
  return static_cast<double>(dtype_block_bytes(q)) * 32.0 /
         static_cast<double>(dtype_block_elems(q));
}

// The register-blocked and integer-dot kernels' loads in flight: each invocation streams its TN
// weight rows along K, one 32-element group of each per step (the activations come from the
// cache). A decode (M = 1) launches N / TN invocations of them: N groups in flight, a few hundred
// KB, where a GPU needs megabytes (streaming_share).
double block_share(const DeviceCaps& c, const OpDesc& op, const BlockTile& s, DType q) {
  const int64_t M = op.output.dim(-2), N = op.output.dim(-1);
  const int64_t per = static_cast<int64_t>(s.wg) * s.tn;
  const double inv = static_cast<double>((N + per - 1) / per) * s.wg *
                     static_cast<double>((M + s.tm - 1) / s.tm) * static_cast<double>(batch_of(op));
  return streaming_share(c, inv * s.tn * group_bytes(q));
}

bool int_dot_accelerated(const DeviceCaps& c) {
  return c.int_dot && c.int_dot_accelerated;
}

// Rows of a block-quantized table or tensor (embedding, cast), each group of 32 dequantized in
// registers, read through a texel buffer.
KernelChoice dequantize_rows_choice(const DeviceCaps& c, const OpDesc& op) {
  const DType q = op.inputs[0].dtype;
  KernelChoice k;
  k.tier = Tier::generic;
  k.precision = Precision::f32;
  for (const auto& t : op.inputs) k.input_dtypes.push_back(t.dtype);
  k.output_dtype = op.output.dtype;
  k.efficiency = efficiency(c, Family::dequantize_rows);
  k.launch.block_threads = flat_block(c);
  k.launch.set_variant(Kernel{.family = Family::dequantize_rows});
  std::string why;
  if (!texels_ok(c, &why) || !storage_ok(c, op.output.dtype, &why)) return k.reason = why, k;
  k.ok = true;
  k.reason = (op.kind == OpKind::embedding ? "row gather of the " : "rows of the ") +
             std::string(dtype_name(q)) + (op.kind == OpKind::embedding ? " table" : " tensor") +
             ", each group of 32 dequantized in registers from its blocks (read through a "
             "texel buffer) and rounded once to " +
             std::string(dtype_name(op.output.dtype)) +
             (op.kind == OpKind::embedding ? "; ids checked on the device" : "");
  return k;
}

// The shared-memory kernel (matmul_q_tiled.comp): BM x 32 activations and BN weight groups
// dequantized once into shared memory per step, the tile sized from the device's shared memory
// and workgroup limits.
KernelChoice tiled_choice(const DeviceCaps& c, const OpDesc& op, DType t) {
  const DType q = op.inputs[1].dtype;
  KernelChoice k = base(c, op, t, Tier::shared_memory, Family::qgemm_tiled);
  k.input_dtypes[1] = q;
  std::string why;
  if (!storage_ok(c, t, &why)) return k.reason = why, k;
  auto tile = pick_quant_tile(c, op.output.dim(-2), op.output.dim(-1), &why);
  if (!tile) return k.reason = why, k;
  LaunchConfig& l = k.launch;
  l.block_threads = tile->threads();
  l.tile_m = tile->bm;
  l.tile_n = tile->bn;
  l.tile_k = 32;
  l.shared_bytes = tile->shared();
  l.subgroup = c.subgroup_size;
  l.set_variant(Kernel{.family = Family::qgemm_tiled,
                       .tm = tile->tm,
                       .tn = tile->tn,
                       .bm = tile->bm,
                       .bn = tile->bn});
  // In flight: each workgroup's BN weight groups and BM x 32 activations of a step (rows past M
  // are not loaded).
  const int64_t M = op.output.dim(-2), N = op.output.dim(-1);
  const double wgs = static_cast<double>((M + tile->bm - 1) / tile->bm) *
                     static_cast<double>((N + tile->bn - 1) / tile->bn) *
                     static_cast<double>(batch_of(op));
  const double rows = static_cast<double>(std::min<int64_t>(tile->bm, M));
  k.memory_share = streaming_share(
      c, wgs * (tile->bn * group_bytes(q) + rows * 32.0 * static_cast<double>(dtype_size(t))));
  k.ok = true;
  k.reason = std::string(dtype_name(q)) +
             " weight dequantized group by group into shared memory (never expanded in device "
             "memory), " +
             compute_name(t) + ", tile " + std::to_string(tile->bm) + "x" +
             std::to_string(tile->bn) + "x32 (" + kib(l.shared_bytes) + " of " +
             kib(c.shared_mem_per_block) + " shared), register block " + std::to_string(tile->tm) +
             "x" + std::to_string(tile->tn);
  return k;
}

// The integer-dot path: activations quantized to q8 blocks by a small shader, the weight
// unpacked to signed bytes, OpSDot. Its precision is the activations' dtype, as for the CPU's
// integer kernels: 8-bit activations per 32 are within what a quantized weight's product is
// judged by (docs/quantization.md, "Tolerance").
KernelChoice dot_choice(const DeviceCaps& c, const OpDesc& op, DType t) {
  const DType q = op.inputs[1].dtype;
  const std::string f(dtype_name(q));
  KernelChoice k = base(c, op, t, Tier::int_dot, Family::qgemm_dot);
  k.input_dtypes[1] = q;
  std::string why;
  if (!c.int_dot) {
    k.reason =
        "device lacks packed integer dot products (VK_KHR_shader_integer_dot_product, "
        "shaderIntegerDotProduct)";
    return k;
  }
  if (!storage_ok(c, t, &why) || !texels_ok(c, &why)) return k.reason = why, k;
  const BlockTile s = pick_quant_block(c, op, true);
  LaunchConfig& l = k.launch;
  l.block_threads = s.wg;
  l.tile_m = s.tm;
  l.tile_n = s.wg * s.tn;
  l.subgroup = c.subgroup_size;
  // Where OpSDot is emulated byte by byte (lavapipe), formats whose integers are 0..63 multiply
  // byte pairs in 32-bit words instead: q4_0 prefill on lavapipe 1.4x faster (performance.md).
  const bool swar = !int_dot_accelerated(c) && on_cpu(c) && q != DType::q8_0 && q != DType::q3_k;
  l.set_variant(Kernel{.family = Family::qgemm_dot, .tm = s.tm, .tn = s.tn, .swar = swar});
  k.memory_share = block_share(c, op, s, q);
  // quantize_q8.comp before every product: a dispatch and a barrier more on a GPU (on a CPU
  // device both ride one submission).
  if (!on_cpu(c)) k.extra_launches = 1;
  k.ok = true;
  k.reason = f + " weight unpacked to signed bytes in registers (never expanded in memory), " +
             "activations quantized to 8 bits per 32 (" + std::string(dtype_name(t)) +
             " in and out), packed 4x8-bit integer dot products (" +
             (int_dot_accelerated(c) ? "accelerated"
              : swar ? "not accelerated by this device: byte pairs multiplied in 32-bit words"
                     : "not accelerated by this device") +
             "), " + std::to_string(s.tm) + "x" + std::to_string(s.tn) +
             " outputs per invocation, " + std::to_string(s.wg) + " per workgroup";
  return k;
}

// The float path through a texel buffer (matmul_q.comp): blocks dequantized in registers.
KernelChoice blocked_choice(const DeviceCaps& c, const OpDesc& op, DType t) {
  const DType q = op.inputs[1].dtype;
  KernelChoice k = base(c, op, t, Tier::register_blocked, Family::qgemm_blocked);
  k.input_dtypes[1] = q;
  std::string why;
  if (!storage_ok(c, t, &why) || !texels_ok(c, &why)) return k.reason = why, k;
  const BlockTile s = pick_quant_block(c, op, false);
  LaunchConfig& l = k.launch;
  l.block_threads = s.wg;
  l.tile_m = s.tm;
  l.tile_n = s.wg * s.tn;
  l.subgroup = c.subgroup_size;
  l.set_variant(Kernel{.family = Family::qgemm_blocked, .tm = s.tm, .tn = s.tn});
  k.memory_share = block_share(c, op, s, q);
  k.ok = true;
  k.reason = std::string(dtype_name(q)) +
             " weight read block by block through a texel buffer and dequantized in " +
             "registers (never expanded in memory), " + compute_name(t) + ", " +
             std::to_string(s.tm) + "x" + std::to_string(s.tn) + " outputs per invocation, " +
             std::to_string(s.wg) + " per workgroup";
  return k;
}

}  // namespace

std::vector<KernelChoice> quantized_choices(const DeviceCaps& c, const OpDesc& op) {
  const size_t qi = *quantized_input(op);
  if ((op.kind == OpKind::embedding || op.kind == OpKind::cast) && qi == 0)
    return {dequantize_rows_choice(c, op)};
  if (op.kind != OpKind::matmul || qi != 1) return {no_quantized_kernel(op, "Vulkan")};
  // The integer-dot path first where the device accelerates packed 4x8-bit dot products, and
  // on CPU devices (lavapipe: measured faster, docs/performance.md); after the float path on
  // GPUs that only emulate them.
  const bool dot_first = int_dot_accelerated(c) || on_cpu(c);
  // The float path's two families as for float matmuls: on a CPU device the texel-buffer
  // kernel first, on a GPU the shared-memory one for prefill (more than 8 rows) and the
  // texel-buffer mat-vec for decode.
  const bool tiled_first = !on_cpu(c) && op.output.dim(-2) > 8;
  std::vector<KernelChoice> out;
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    // The GPU family's mat-vec first on GPUs for decode (it reads each weight byte once, the
    // rows of a weight spread over subgroups), last on CPU devices and for prefill.
    KernelChoice mv = matvec_choice(c, op, t);
    const bool mv_first = mv.ok && !on_cpu(c);
    if (mv_first) out.push_back(mv);
    out.push_back(coopmat_choice(c, op, t));
    if (dot_first) out.push_back(dot_choice(c, op, t));
    if (tiled_first) out.push_back(tiled_choice(c, op, t));
    out.push_back(blocked_choice(c, op, t));
    if (!tiled_first) out.push_back(tiled_choice(c, op, t));
    if (!dot_first) out.push_back(dot_choice(c, op, t));
    if (!mv_first) out.push_back(std::move(mv));
  }
  return out;
}

}  // namespace duet::vulkan::rules_detail
