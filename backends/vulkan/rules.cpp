// The Vulkan backend's selection rules: pure functions of a capability record, so the planner can
// explain them for profiles of GPUs that are not present. Launch shapes (workgroup size, tiles,
// splits) are derived here from the caps' limits (shared memory, workgroup size, subgroup size)
// and handed to the device in KernelChoice::launch.
#include <algorithm>
#include <cmath>
#include <vector>

#include "vulkan_backend.h"

namespace duet::vulkan {

namespace {

uint64_t pow2_ceil(uint64_t v) {
  uint64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

uint64_t pow2_floor(uint64_t v) {
  uint64_t p = 1;
  while (p * 2 <= v) p <<= 1;
  return p;
}

int max_threads(const DeviceCaps& c) {
  uint64_t m = c.max_threads_per_block ? c.max_threads_per_block : 128;
  if (c.max_block_dims[0]) m = std::min<uint64_t>(m, c.max_block_dims[0]);
  return static_cast<int>(std::max<uint64_t>(1, m));
}

// Workgroup size for one-element-per-invocation kernels: 256, or less where the device caps it.
int flat_block(const DeviceCaps& c) {
  return static_cast<int>(pow2_floor(static_cast<uint64_t>(std::min(256, max_threads(c)))));
}

// Workgroup size for one-row-per-workgroup reductions: a power of two covering the row, at least
// a subgroup, at most 256 or the device's maximum.
int row_block(const DeviceCaps& c, int64_t n) {
  const uint64_t cap = pow2_floor(static_cast<uint64_t>(std::min(256, max_threads(c))));
  const uint64_t want =
      std::max<uint64_t>(pow2_ceil(static_cast<uint64_t>(std::max<int64_t>(n, 1))),
                         static_cast<uint64_t>(std::max(c.subgroup_size, 1)));
  return static_cast<int>(std::min(cap, want));
}

std::string kib(uint64_t b) {
  return b % 1024 == 0 ? std::to_string(b / 1024) + " KiB" : std::to_string(b) + " bytes";
}

struct MatmulTile {
  int bm, bn, bk, tm, tn;
  int threads() const { return (bm / tm) * (bn / tn); }
  uint64_t shared() const { return static_cast<uint64_t>(bm + bn) * bk * 4; }
};

// Candidates, largest first. The first whose workgroup and shared memory fit the device, and
// whose tile is not far larger than the problem, is used.
constexpr MatmulTile kTiles[] = {
    {128, 128, 16, 8, 8}, {64, 128, 16, 4, 8}, {64, 64, 16, 4, 4}, {64, 64, 8, 4, 4},
    {32, 64, 8, 4, 4},    {32, 32, 8, 4, 4},   {16, 64, 16, 2, 4}, {16, 32, 8, 2, 4},
    {16, 16, 8, 2, 2},    {8, 8, 8, 2, 2},     {4, 4, 4, 1, 1},
};

std::optional<MatmulTile> pick_matmul_tile(const DeviceCaps& c, int64_t M, int64_t N,
                                           std::string* why_not) {
  const int mt = max_threads(c);
  const uint64_t smem = c.shared_mem_per_block ? c.shared_mem_per_block : 16384;
  const int sg = std::max(c.subgroup_size, 1);
  std::optional<MatmulTile> fallback;
  for (const MatmulTile& t : kTiles) {
    if (t.threads() > mt || t.shared() > smem) continue;
    if (t.threads() % sg != 0 && t.threads() > sg) continue;
    if (!fallback) fallback = t;
    // Tiles much larger than the output waste most of their work: prefer a smaller one.
    if (t.bm > 2 * std::max<int64_t>(M, 8) || t.bn > 2 * std::max<int64_t>(N, 8)) continue;
    return t;
  }
  if (fallback) return fallback;
  *why_not = "no GEMM tile fits " + kib(smem) + " of shared memory and " + std::to_string(mt) +
             " invocations per workgroup";
  return std::nullopt;
}

// The "register_blocked" GEMM's register block: TM x TN outputs per invocation, WG invocations per
// workgroup along N. On a CPU device (lavapipe: a workgroup is one core, its invocations the SIMD
// lanes, every read a gather) large blocks amortise the fetches but cost LLVM compile time at
// the first dispatch. Measured at 1024^3 on lavapipe, CPU time (first dispatch): f16 16x8 70 ms
// (2 s), 16x16 62 ms (7.5 s), 32x16 67 ms (29 s), 8x8 78 ms (0.7 s); f32 alike. 16x8 it is, or
// 1x16 .. 8x16 for a few rows. Elsewhere a block of 4x4 keeps to the registers a GPU invocation
// has. Blocks shrink (rows first) until there are workgroups for every compute unit.
struct BlockTile {
  int wg, tm, tn;
};

BlockTile pick_register_block(const DeviceCaps& c, const OpDesc& op, DType t) {
  const int64_t M = op.output.dim(-2), N = op.output.dim(-1);
  int64_t batch = 1;
  for (int i = 0; i + 2 < op.output.rank; ++i) batch *= op.output.dim(i);
  const int sg = std::max(c.subgroup_size, 1);
  BlockTile s{std::min(sg, max_threads(c)), 4, 4};
  if (c.type != DeviceType::cpu) {
    s.wg = std::max(s.wg, std::min(64, max_threads(c)) / s.wg * s.wg);
    return s;
  }
  const int vec = t == DType::f32 ? 4 : 8;
  s.tm = static_cast<int>(
      std::min<uint64_t>(16, pow2_ceil(static_cast<uint64_t>(std::max<int64_t>(M, 1)))));
  s.tn = M <= 4 ? 16 : 8;
  const int64_t target = 2 * std::max(c.compute_units, 1);
  auto groups = [&] {
    return ((N + s.wg * s.tn - 1) / (s.wg * s.tn)) * ((M + s.tm - 1) / s.tm) * batch;
  };
  while (groups() < target && s.tm > 4) s.tm /= 2;
  while (groups() < target && s.tn > vec) s.tn /= 2;
  return s;
}

// The quantized matmul's register block (matmul_q.comp): TM rows of activations x TN weight rows
// per invocation. One activation row (decode) reads each weight byte once; for more rows each
// decoded group of 32 weights serves up to 32 rows on a CPU device (4 elsewhere), so decoding
// costs a few percent of the multiply-adds. Measured on lavapipe, q4_0 prefill of 512 rows,
// K = 14336: 8x8 8.5 s, 16x8 7.0 s, 32x4 6.0 s. Blocks shrink until there are workgroups for
// every compute unit.
BlockTile pick_quant_block(const DeviceCaps& c, const OpDesc& op, bool int_dot) {
  const int64_t M = op.output.dim(-2), N = op.output.dim(-1);
  int64_t batch = 1;
  for (int i = 0; i + 2 < op.output.rank; ++i) batch *= op.output.dim(i);
  const int sg = std::max(c.subgroup_size, 1);
  BlockTile s{std::min(sg, max_threads(c)), 1, 4};
  if (c.type != DeviceType::cpu) s.wg = std::max(s.wg, std::min(64, max_threads(c)) / s.wg * s.wg);
  // The integer-dot kernel keeps a weight group in 8 words where the float one keeps 32 floats:
  // on a GPU it affords 8 activation rows per invocation. On lavapipe 32x4 stays best for both
  // (q4_0 prefill, K = 14336: int_dot 32x4 3.7 s, 32x8 3.8 s, 64x4 3.9 s, 16x16 4.9 s).
  const int tm_cap = c.type == DeviceType::cpu ? 32 : int_dot ? 8 : 4;
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
  const int mt = max_threads(c);
  const uint64_t smem = c.shared_mem_per_block ? c.shared_mem_per_block : 16384;
  const int sg = std::max(c.subgroup_size, 1);
  std::optional<QuantTile> fallback;
  for (const QuantTile& t : kQuantTiles) {
    if (t.threads() > mt || t.shared() > smem) continue;
    if (t.threads() % sg != 0 && t.threads() > sg) continue;
    if (!fallback) fallback = t;
    if (t.bm > 2 * std::max<int64_t>(M, 4) || t.bn > 2 * std::max<int64_t>(N, 8)) continue;
    return t;
  }
  if (fallback) return fallback;
  *why_not = "no quantized GEMM tile fits " + kib(smem) + " of shared memory and " +
             std::to_string(mt) + " invocations per workgroup";
  return std::nullopt;
}

struct AttnTile {
  int br = 0, bc = 0, threads = 0;
  uint64_t shared = 0;
};

uint64_t attn_shared(int br, int bc, int64_t d) {
  return 4ull * static_cast<uint64_t>(br * d + 2 * bc * d + br * bc + 3 * br);
}

// Rows of queries per workgroup (BR) and keys per tile (BC) that fit the device's shared memory,
// with enough invocations that each keeps at most 8 output accumulators.
std::optional<AttnTile> pick_attention_tile(const DeviceCaps& c, int64_t D, int64_t rows,
                                            std::string* why_not) {
  const int mt = max_threads(c);
  const uint64_t smem = c.shared_mem_per_block ? c.shared_mem_per_block : 16384;
  const int sg = std::max(c.subgroup_size, 1);
  const int br_cap =
      static_cast<int>(std::min<uint64_t>(16, pow2_ceil(static_cast<uint64_t>(rows))));
  for (int br = br_cap; br >= 1; br /= 2) {
    for (int bc = 32; bc >= 1; bc /= 2) {
      const uint64_t sh = attn_shared(br, bc, D);
      if (sh > smem) continue;
      int threads = static_cast<int>((br * D + 7) / 8);
      threads = std::max({threads, br, sg});
      threads = (threads + sg - 1) / sg * sg;
      if (threads > mt) {
        threads = mt;
        if ((br * D + threads - 1) / threads > 32) continue;  // too many accumulators each
      }
      if (threads < br) continue;
      return AttnTile{br, bc, threads, sh};
    }
  }
  *why_not = "head dim " + std::to_string(D) + " does not fit one query row and one key in " +
             kib(smem) + " of shared memory";
  return std::nullopt;
}

// The storage dtype a choice reads for input i, given the op and the choice's float dtype.
DType input_storage(const OpDesc& op, size_t i, DType t) {
  const DType in = op.inputs[i].dtype;
  if (!is_float(in)) return in;  // ids stay i32
  const bool is_mask =
      (op.kind == OpKind::softmax && i == 1) ||
      (op.kind == OpKind::attention && static_cast<int>(i) == attention_mask_input(op));
  if (is_mask && in == DType::f32) return DType::f32;  // masks may stay f32
  return t;
}

bool storage_ok(const DeviceCaps& c, DType t, std::string* why) {
  if ((t == DType::f16 && !c.fp16_storage) || (t == DType::bf16 && !c.bf16_storage)) {
    *why = "device lacks 16-bit storage buffers (storageBuffer16BitAccess)";
    return false;
  }
  if (t == DType::i8 && !c.int8_storage) {
    *why = "device lacks 8-bit storage buffers (storageBuffer8BitAccess)";
    return false;
  }
  return true;
}

class Rules final : public BackendRules {
 public:
  BackendKind backend() const override { return BackendKind::vulkan; }

  std::vector<KernelChoice> choices(const DeviceCaps& c, const OpDesc& op) const override {
    if (is_view(op.kind)) {
      KernelChoice k;
      k.tier = Tier::generic;
      k.reason = "views are resolved by the executor, not run as kernels";
      return {k};
    }
    if (quantized_input(op)) return quantized_choices(c, op);
    switch (op.kind) {
      case OpKind::cast:
      case OpKind::copy:
      case OpKind::concat:
      case OpKind::embedding:
        return {data_choice(c, op)};
      case OpKind::write_slice:
        return {write_choice(c, op)};
      default:
        break;
    }
    std::vector<KernelChoice> out;
    for (DType t : {DType::f32, DType::f16, DType::bf16}) {
      if (op.kind == OpKind::matmul) {
        // On a CPU device the register-blocked kernel first: its shared-memory reads are gathers.
        out.push_back(coopmat_choice(c, op, t));
        if (c.type == DeviceType::cpu) out.push_back(register_blocked_choice(c, op, t));
        out.push_back(compute_choice(c, op, t));
        if (c.type != DeviceType::cpu) out.push_back(register_blocked_choice(c, op, t));
      } else if (op.kind == OpKind::attention) {
        if (c.type == DeviceType::cpu) out.push_back(register_blocked_choice(c, op, t));
        out.push_back(compute_choice(c, op, t));
        if (c.type != DeviceType::cpu) out.push_back(register_blocked_choice(c, op, t));
      } else {
        out.push_back(compute_choice(c, op, t));
      }
    }
    return out;
  }

 private:
  static KernelChoice base(const OpDesc& op, DType t, Tier tier) {
    KernelChoice k;
    k.tier = tier;
    k.precision = precision_of(t);
    for (size_t i = 0; i < op.inputs.size(); ++i) k.input_dtypes.push_back(input_storage(op, i, t));
    k.output_dtype = is_float(op.output.dtype) ? t : op.output.dtype;
    return k;
  }

  // Cast, copy, concat, embedding: move or convert what is stored, at its own dtype.
  static KernelChoice data_choice(const DeviceCaps& c, const OpDesc& op) {
    KernelChoice k;
    k.tier = Tier::generic;
    const DType src = op.inputs[0].dtype;
    k.precision = is_float(src) ? precision_of(src) : Precision::f32;
    for (const auto& t : op.inputs) k.input_dtypes.push_back(t.dtype);
    k.output_dtype = op.output.dtype;
    k.launch.block_threads = flat_block(c);
    k.launch.variant = op.kind == OpKind::embedding ? "embedding" : "convert";
    std::string why;
    for (DType t : k.input_dtypes)
      if (!storage_ok(c, t, &why)) return k.reason = why, k;
    if (!storage_ok(c, op.output.dtype, &why)) return k.reason = why, k;
    k.ok = true;
    k.reason = op.kind == OpKind::embedding
                   ? "row gather at the table's dtype; ids checked on the device"
                   : "strided element copy with exact conversion (round to nearest even)";
    return k;
  }

  // write_slice: elements copied as stored, so x comes in the state's dtype (the planner casts it).
  static KernelChoice write_choice(const DeviceCaps& c, const OpDesc& op) {
    KernelChoice k;
    k.tier = Tier::generic;
    const DType t = op.inputs[0].dtype;
    k.precision = is_float(t) ? precision_of(t) : Precision::f32;
    k.input_dtypes = {t, t};
    if (op.inputs.size() > 2) k.input_dtypes.push_back(DType::i32);
    k.output_dtype = t;
    k.launch.block_threads = flat_block(c);
    k.launch.variant = "write_slice";
    std::string why;
    if (!storage_ok(c, t, &why)) return k.reason = why, k;
    k.ok = true;
    k.reason = "element copy into the slice at the run-time offset (checked on the device)";
    return k;
  }

  // Block-quantized weights: matmul (weight 'b'), embedding (the table) and cast read the blocks
  // through a texel buffer of 32-bit words and dequantize them in registers.
  static std::vector<KernelChoice> quantized_choices(const DeviceCaps& c, const OpDesc& op) {
    const size_t qi = *quantized_input(op);
    const DType q = op.inputs[qi].dtype;
    const std::string f(dtype_name(q));
    std::string why;
    if ((op.kind == OpKind::embedding || op.kind == OpKind::cast) && qi == 0) {
      KernelChoice k;
      k.tier = Tier::generic;
      k.precision = Precision::f32;
      for (const auto& t : op.inputs) k.input_dtypes.push_back(t.dtype);
      k.output_dtype = op.output.dtype;
      k.launch.block_threads = flat_block(c);
      k.launch.variant = "dequantize_rows";
      if (!texels_ok(c, &why) || !storage_ok(c, op.output.dtype, &why)) {
        k.reason = why;
        return {k};
      }
      k.ok = true;
      k.reason = (op.kind == OpKind::embedding ? "row gather of the " : "rows of the ") + f +
                 (op.kind == OpKind::embedding ? " table" : " tensor") +
                 ", each group of 32 dequantized in registers from its blocks (read through a "
                 "texel buffer) and rounded once to " +
                 std::string(dtype_name(op.output.dtype)) +
                 (op.kind == OpKind::embedding ? "; ids checked on the device" : "");
      return {k};
    }
    if (op.kind != OpKind::matmul || qi != 1) return {no_quantized_kernel(op, "Vulkan")};
    // The integer-dot path first where the device accelerates packed 4x8-bit dot products, and
    // on CPU devices (lavapipe: measured faster, docs/performance.md); after the float path on
    // GPUs that only emulate them.
    const bool dot_first = int_dot_accelerated(c) || c.type == DeviceType::cpu;
    // The float path's two families as for float matmuls: on a CPU device the texel-buffer
    // kernel first, on a GPU the shared-memory one for prefill (more than 8 rows) and the
    // texel-buffer mat-vec for decode.
    const bool tiled_first = c.type != DeviceType::cpu && op.output.dim(-2) > 8;
    std::vector<KernelChoice> out;
    for (DType t : {DType::f32, DType::f16, DType::bf16}) {
      if (dot_first) out.push_back(int_dot_choice(c, op, t));
      if (tiled_first) out.push_back(tiled_quant_choice(c, op, t));
      out.push_back(float_quant_choice(c, op, t));
      if (!tiled_first) out.push_back(tiled_quant_choice(c, op, t));
      if (!dot_first) out.push_back(int_dot_choice(c, op, t));
    }
    return out;
  }

  // The shared-memory kernel for a block-quantized weight (matmul_q_tiled.comp): BM x 32
  // activations and BN weight groups dequantized once into shared memory per step, the tile
  // sized from the device's shared memory and workgroup limits.
  static KernelChoice tiled_quant_choice(const DeviceCaps& c, const OpDesc& op, DType t) {
    const DType q = op.inputs[1].dtype;
    KernelChoice k = base(op, t, Tier::tiled);
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
    l.variant = "qtiled_" + std::to_string(tile->bm) + "x" + std::to_string(tile->bn) + "_" +
                std::to_string(tile->tm) + "x" + std::to_string(tile->tn);
    k.ok = true;
    k.reason = std::string(dtype_name(q)) +
               " weight dequantized group by group into shared memory (never expanded in device "
               "memory), " +
               compute_name(t) + ", tile " + std::to_string(tile->bm) + "x" +
               std::to_string(tile->bn) + "x32 (" + kib(l.shared_bytes) + " of " +
               kib(c.shared_mem_per_block) + " shared), register block " +
               std::to_string(tile->tm) + "x" + std::to_string(tile->tn);
    return k;
  }

  static bool int_dot_accelerated(const DeviceCaps& c) {
    auto a = c.extra.find("integer_dot_accelerated");
    return c.int_dot && a != c.extra.end() && a->second == "yes";
  }

  // The integer-dot path for a block-quantized weight: activations quantized to q8 blocks by a
  // small shader, the weight unpacked to signed bytes, OpSDot. Its precision is the activations'
  // dtype, as for the CPU's integer kernels: 8-bit activations per 32 are within what a
  // quantized weight's product is judged by (docs/quantization.md, "Tolerance").
  static KernelChoice int_dot_choice(const DeviceCaps& c, const OpDesc& op, DType t) {
    const DType q = op.inputs[1].dtype;
    const std::string f(dtype_name(q));
    KernelChoice k = base(op, t, Tier::int_dot);
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
    l.variant = "qdot_" + std::to_string(s.tm) + "x" + std::to_string(s.tn);
    // Where OpSDot is emulated byte by byte (lavapipe), formats whose integers are 0..63 multiply
    // byte pairs in 32-bit words instead: q4_0 prefill on lavapipe 1.4x faster (performance.md).
    const bool swar = !int_dot_accelerated(c) && c.type == DeviceType::cpu && q != DType::q8_0 &&
                      q != DType::q3_k;
    if (swar) l.variant += "_swar";
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

  static KernelChoice float_quant_choice(const DeviceCaps& c, const OpDesc& op, DType t) {
    const DType q = op.inputs[1].dtype;
    const std::string f(dtype_name(q));
    std::string why;
    {
      KernelChoice k = base(op, t, Tier::register_blocked);
      k.input_dtypes[1] = q;
      if (!storage_ok(c, t, &why) || !texels_ok(c, &why)) return k.reason = why, k;
      const BlockTile s = pick_quant_block(c, op, false);
      LaunchConfig& l = k.launch;
      l.block_threads = s.wg;
      l.tile_m = s.tm;
      l.tile_n = s.wg * s.tn;
      l.subgroup = c.subgroup_size;
      l.variant = "q_" + std::to_string(s.tm) + "x" + std::to_string(s.tn);
      k.ok = true;
      k.reason = f + " weight read block by block through a texel buffer and dequantized in " +
                 "registers (never expanded in memory), " + compute_name(t) + ", " +
                 std::to_string(s.tm) + "x" + std::to_string(s.tn) + " outputs per invocation, " +
                 std::to_string(s.wg) + " per workgroup";
      return k;
    }
  }

  static KernelChoice coopmat_choice(const DeviceCaps& c, const OpDesc& op, DType t) {
    KernelChoice k = base(op, t, Tier::coopmat);
    if (c.matrix_units.empty()) {
      auto nv = c.extra.find("cooperative_matrix_nv");
      if (nv != c.extra.end() && nv->second != "absent")
        k.reason = "device has only VK_NV_cooperative_matrix (" + nv->second +
                   "), which no Vulkan kernel uses: NVIDIA's matrix units run through the CUDA "
                   "backend";
      else
        k.reason = "device has no VK_KHR_cooperative_matrix";
      return k;
    }
    // The shader needs GL_KHR_cooperative_matrix, which glslang learned in 13.0; this build's
    // toolchain (Debian 12: glslang 12, spirv-tools 2023.1) can neither compile nor validate it.
    k.reason =
        "device has VK_KHR_cooperative_matrix, but this build has no cooperative-matrix "
        "shader (needs glslang >= 13)";
    return k;
  }

  // Whether the device reads uniform texel buffers with the formats the "register_blocked" kernels
  // use (probed; a profile that does not say is assumed to: the formats are required by Vulkan).
  static bool texels_ok(const DeviceCaps& c, std::string* why) {
    auto it = c.extra.find("max_texel_buffer_elements");
    if (it != c.extra.end() && it->second == "0") {
      *why = "device lacks uniform texel buffers of R32G32B32A32_UINT, R32_UINT and R16_UINT";
      return false;
    }
    return true;
  }

  static std::string compute_name(DType t) {
    return t == DType::f32 ? "f32" : std::string(dtype_name(t)) + " storage, f32 compute";
  }

  static KernelChoice register_blocked_choice(const DeviceCaps& c, const OpDesc& op, DType t) {
    KernelChoice k = base(op, t, Tier::register_blocked);
    std::string why;
    if (!storage_ok(c, t, &why) || !texels_ok(c, &why)) return k.reason = why, k;
    LaunchConfig& l = k.launch;
    if (op.kind == OpKind::matmul) {
      const BlockTile s = pick_register_block(c, op, t);
      l.block_threads = s.wg;
      l.tile_m = s.tm;
      l.tile_n = s.wg * s.tn;
      l.subgroup = c.subgroup_size;
      l.variant = "blocked_" + std::to_string(s.tm) + "x" + std::to_string(s.tn);
      k.reason = "register-blocked GEMM without shared memory, " + compute_name(t) + ", " +
                 std::to_string(s.tm) + "x" + std::to_string(s.tn) + " outputs per invocation, " +
                 std::to_string(s.wg) + " per workgroup, operands read through texel buffers";
    } else {
      const int64_t B = op.inputs[0].dim(0), Hq = op.inputs[0].dim(1), Lq = op.inputs[0].dim(2);
      const int64_t D = op.inputs[0].dim(3), Hkv = op.inputs[1].dim(1), Lk = op.inputs[1].dim(2);
      const int64_t rows = (Hq / Hkv) * Lq;
      // Queries and outputs of R rows stay in each invocation's registers: 2 x 256 floats on a
      // CPU device (they spill to L1), 2 x 64 on a GPU. On lavapipe R x D = 256 runs as fast as
      // 512 (measured, D = 64) and compiles 3x faster (1.5 s against 4.5 s per pipeline).
      const int64_t budget = c.type == DeviceType::cpu ? 256 : 64;
      const int R = static_cast<int>(std::clamp<int64_t>(budget / D, 1, 16));
      const int wg = std::min(std::max(c.subgroup_size, 1), max_threads(c));
      // Rows across invocations while there are rows for them, the rest of them across keys.
      int lr = 1;
      while (lr * 2 <= wg && wg % (lr * 2) == 0 && static_cast<int64_t>(lr) * R < rows) lr *= 2;
      const int lk = wg / lr;
      const int64_t wgs = B * Hkv * ((rows + static_cast<int64_t>(lr) * R - 1) / (lr * R));
      const int64_t target = 4 * std::max(c.compute_units, 2);
      int64_t splits = 1;
      if (wgs < target)  // decoding: split the keys too, each invocation keeping 64 or more
        splits =
            std::clamp<int64_t>((target + wgs - 1) / wgs, 1, std::max<int64_t>(Lk / (64 * lk), 1));
      l.block_threads = wg;
      l.tile_m = lr * R;
      l.tile_n = lk;
      l.tile_k = static_cast<int>(D);
      l.splits = static_cast<int>(splits);
      l.subgroup = c.subgroup_size;
      l.variant = "blocked_" + std::to_string(R) + "x" + std::to_string(lr);
      k.reason = "attention without shared memory, " + compute_name(t) + ", " + std::to_string(R) +
                 " query rows per invocation, keys across " + std::to_string(lk) + " invocations" +
                 (splits > 1 ? " and " + std::to_string(splits) + " splits" : "") +
                 ", K and V read through texel buffers, online softmax in f32";
    }
    k.ok = true;
    return k;
  }

  static KernelChoice compute_choice(const DeviceCaps& c, const OpDesc& op, DType t) {
    const bool is_mm = op.kind == OpKind::matmul, is_attn = op.kind == OpKind::attention;
    KernelChoice k = base(op, t, is_mm ? Tier::tiled : is_attn ? Tier::flash : Tier::generic);
    std::string why;
    if (!storage_ok(c, t, &why)) return k.reason = why, k;
    const std::string compute =
        t == DType::f32 ? "f32" : std::string(dtype_name(t)) + " storage, f32 compute";
    LaunchConfig& l = k.launch;
    switch (op.kind) {
      case OpKind::matmul: {
        const int64_t M = op.output.dim(-2), N = op.output.dim(-1);
        auto tile = pick_matmul_tile(c, M, N, &why);
        if (!tile) return k.reason = why, k;
        l.block_threads = tile->threads();
        l.tile_m = tile->bm;
        l.tile_n = tile->bn;
        l.tile_k = tile->bk;
        l.shared_bytes = tile->shared();
        l.variant = "tiled_" + std::to_string(tile->tm) + "x" + std::to_string(tile->tn);
        k.reason = "shared-memory GEMM, " + compute + ", tile " + std::to_string(tile->bm) + "x" +
                   std::to_string(tile->bn) + "x" + std::to_string(tile->bk) + " (" +
                   kib(l.shared_bytes) + " of " + kib(c.shared_mem_per_block) +
                   " shared), register block " + std::to_string(tile->tm) + "x" +
                   std::to_string(tile->tn);
        break;
      }
      case OpKind::attention: {
        const int64_t B = op.inputs[0].dim(0), Hq = op.inputs[0].dim(1), Lq = op.inputs[0].dim(2);
        const int64_t D = op.inputs[0].dim(3), Hkv = op.inputs[1].dim(1), Lk = op.inputs[1].dim(2);
        const int64_t rows = (Hq / Hkv) * Lq;
        auto tile = pick_attention_tile(c, D, rows, &why);
        if (!tile) return k.reason = why, k;
        l.block_threads = tile->threads;
        l.tile_m = tile->br;
        l.tile_n = tile->bc;
        l.tile_k = static_cast<int>(D);
        l.shared_bytes = tile->shared;
        // Split the keys when the row blocks alone leave the device idle (decoding).
        const int64_t wgs = B * Hkv * ((rows + tile->br - 1) / tile->br);
        const int64_t target = 4 * std::max(c.compute_units, 8);
        int64_t splits = 1;
        if (wgs < target) {
          splits = std::min<int64_t>((target + wgs - 1) / wgs, Lk / (4 * tile->bc));
          splits = std::max<int64_t>(splits, 1);
        }
        l.splits = static_cast<int>(splits);
        l.variant = splits > 1 ? "flash_splitk" : "flash";
        k.reason =
            "flash attention, " + compute + ", " + std::to_string(tile->br) + " query rows x " +
            std::to_string(tile->bc) + "-key tiles (" + kib(l.shared_bytes) +
            " shared), online softmax in f32" +
            (Hq != Hkv ? ", KV tiles shared by " + std::to_string(Hq / Hkv) + " query heads" : "") +
            (op.attrs.causal ? ", causal tiles skipped" : "") +
            (splits > 1 ? ", keys split " + std::to_string(splits) + " ways" : "");
        break;
      }
      case OpKind::softmax:
      case OpKind::rmsnorm:
      case OpKind::layernorm:
        l.block_threads = row_block(c, op.output.dim(-1));
        l.variant = "row";
        k.reason = "one workgroup of " + std::to_string(l.block_threads) + " per row, " + compute;
        break;
      default:
        l.block_threads = flat_block(c);
        l.variant = "flat";
        k.reason = "one invocation per element, " + compute;
        break;
    }
    k.ok = true;
    return k;
  }
};

}  // namespace

const BackendRules& rules() {
  static const Rules r;
  return r;
}

}  // namespace duet::vulkan
