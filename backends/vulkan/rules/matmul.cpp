// Float matmul: the shared-memory GEMM (gemm_tiled), the register-blocked GEMM through texel
// buffers (gemm_blocked); and the GPU family, whose kernels take a float or block-quantized
// weight alike (quantized.cpp offers them too): the mat-vec for decode (matvec) and cooperative
// matrices (gemm_coopmat).
#include <algorithm>
#include <optional>

#include "duet/internal/env.h"
#include "rules/rules.h"
#include "vulkan_backend.h"

namespace duet::vulkan::rules_detail {

namespace {

struct MatmulTile {
  int bm, bn, bk, tm, tn;
  int threads() const { return (bm / tm) * (bn / tn); }
  // matmul.comp's slices: rows of vec4s, padded by one.
  uint64_t shared() const {
    return static_cast<uint64_t>((bm + 3) / 4 + 1 + (bn + 3) / 4 + 1) * bk * 16;
  }
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
  return pick_tile(c, kTiles, M, N, 8, "GEMM", why_not);
}

// The register-blocked GEMM's register block: TM x TN outputs per invocation, WG invocations per
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
  if (!on_cpu(c)) {
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

KernelChoice tiled_choice(const DeviceCaps& c, const OpDesc& op, DType t) {
  KernelChoice k = base(c, op, t, Tier::shared_memory, Family::gemm_tiled);
  std::string why;
  if (!storage_ok(c, t, &why)) return k.reason = why, k;
  const int64_t M = op.output.dim(-2), N = op.output.dim(-1);
  auto tile = pick_matmul_tile(c, M, N, &why);
  if (!tile) return k.reason = why, k;
  LaunchConfig& l = k.launch;
  l.block_threads = tile->threads();
  l.tile_m = tile->bm;
  l.tile_n = tile->bn;
  l.tile_k = tile->bk;
  l.shared_bytes = tile->shared();
  l.set_variant(Kernel{.family = Family::gemm_tiled, .tm = tile->tm, .tn = tile->tn});
  // In flight: each workgroup's BM x BK and BN x BK slices, loaded together per step (rows past
  // M are not loaded).
  const double wgs = static_cast<double>((M + tile->bm - 1) / tile->bm) *
                     static_cast<double>((N + tile->bn - 1) / tile->bn) *
                     static_cast<double>(batch_of(op));
  const double rows = static_cast<double>(std::min<int64_t>(tile->bm, M) + tile->bn);
  k.memory_share = streaming_share(c, wgs * rows * tile->bk * static_cast<double>(dtype_size(t)));
  k.reason = "shared-memory GEMM, " + compute_name(t) + ", tile " + std::to_string(tile->bm) + "x" +
             std::to_string(tile->bn) + "x" + std::to_string(tile->bk) + " (" +
             kib(l.shared_bytes) + " of " + kib(c.shared_mem_per_block) +
             " shared), register block " + std::to_string(tile->tm) + "x" +
             std::to_string(tile->tn);
  k.ok = true;
  return k;
}

KernelChoice blocked_choice(const DeviceCaps& c, const OpDesc& op, DType t) {
  KernelChoice k = base(c, op, t, Tier::register_blocked, Family::gemm_blocked);
  std::string why;
  if (!storage_ok(c, t, &why) || !texels_ok(c, &why)) return k.reason = why, k;
  const BlockTile s = pick_register_block(c, op, t);
  LaunchConfig& l = k.launch;
  l.block_threads = s.wg;
  l.tile_m = s.tm;
  l.tile_n = s.wg * s.tn;
  l.subgroup = c.subgroup_size;
  l.set_variant(Kernel{.family = Family::gemm_blocked, .tm = s.tm, .tn = s.tn});
  // In flight: each invocation's TM + TN texels (16 bytes at most) of a step along K.
  const int64_t M = op.output.dim(-2), N = op.output.dim(-1);
  const double inv = static_cast<double>((N + l.tile_n - 1) / l.tile_n) * s.wg *
                     static_cast<double>((M + s.tm - 1) / s.tm) * static_cast<double>(batch_of(op));
  k.memory_share =
      streaming_share(c, inv * static_cast<double>(std::min<int64_t>(s.tm, M) + s.tn) * 16.0);
  k.reason = "register-blocked GEMM without shared memory, " + compute_name(t) + ", " +
             std::to_string(s.tm) + "x" + std::to_string(s.tn) + " outputs per invocation, " +
             std::to_string(s.wg) + " per workgroup, operands read through texel buffers";
  k.ok = true;
  return k;
}

}  // namespace

// The GPU family's mat-vec (matvec.comp) for decode: a workgroup owns a few weight rows and all
// of its invocations split K, each reading 16 bytes of a float weight (or 8 elements of a block
// format) of every row at a time, neighbouring invocations neighbouring bytes, so that the weight
// is read once, in order and with coalesced loads; the sums meet through subgroupAdd and shared
// memory where the device has subgroup arithmetic, else through a tree in shared memory.
KernelChoice matvec_choice(const DeviceCaps& c, const OpDesc& op, DType t) {
  const DType w = op.inputs[1].dtype;
  const bool quant = is_quantized(w);
  KernelChoice k = base(c, op, t, Tier::matvec, Family::matvec);
  if (quant) k.input_dtypes[1] = w;
  const int64_t M = op.output.dim(-2);
  std::string why;
  if (M > kMatvecRows) {
    k.reason = "a mat-vec for decode: at most " + std::to_string(kMatvecRows) +
               " activation rows, not " + std::to_string(M);
    return k;
  }
  if (!quant) {
    // The weight's K axis: its last dim when transposed (stored [N, K]), else its second last.
    const TensorDesc& b = op.inputs[1];
    const int kd = op.attrs.transpose_b ? b.rank - 1 : b.rank - 2;
    if (b.dim(kd) > 1 && b.strides[static_cast<size_t>(kd)] != 1) {
      k.reason = "the weight is not contiguous along K (a mat-vec reads weight rows along K)";
      return k;
    }
  }
  if (!storage_ok(c, t, &why)) return k.reason = why, k;
  const int mt = max_threads(c);
  const int sg = std::max(c.subgroup_size, 1);
  LaunchConfig& l = k.launch;
  l.subgroup = c.subgroup_size;
  Kernel kern{.family = Family::matvec};
  // Activation rows per workgroup: M rounded up to a power of two on GPUs (each weight row is
  // read once for all of them); one on CPU devices, where the kernel only runs when forced and
  // every row more costs LLVM compile time.
  kern.bm =
      on_cpu(c) ? 1 : static_cast<int>(pow2_ceil(static_cast<uint64_t>(std::max<int64_t>(M, 1))));
  // Weight rows per workgroup, every invocation streaming all of them at once: on GPUs two of a
  // float weight and four of a block format (whose f32 activations are several times its bytes:
  // each activation read serves them all, and each invocation has that many rows' loads in
  // flight); one on CPU devices (compile time). Workgroups of up to 128 invocations, whole
  // subgroups: on GPUs N / rows of them fill the device at decode's N (4096: 2048 of 128 for a
  // float weight), each with K / 8 pieces of a row to share; on CPU devices one subgroup, whose
  // sum needs no shared memory and no barrier.
  kern.bn = on_cpu(c) ? 1 : (quant ? 4 : 2);
  // Tuning runs on a GPU: DUET_VULKAN_MATVEC_ROWS (weight rows a workgroup, 1..8) and
  // DUET_VULKAN_MATVEC_THREADS (invocations a workgroup, whole subgroups) replace the two
  // choices here and below.
  std::optional<int64_t> rows_env, threads_env;
  if (!on_cpu(c)) {
    rows_env = env_int("DUET_VULKAN_MATVEC_ROWS", 1, 8, "the rules' choice");
    threads_env = env_int("DUET_VULKAN_MATVEC_THREADS", 1, 1024, "the rules' choice");
    if (threads_env && (*threads_env % sg != 0 || *threads_env > mt)) threads_env.reset();
  }
  if (rows_env) kern.bn = static_cast<int>(*rows_env);
  if (c.subgroup_arithmetic && sg <= mt) {
    l.block_threads = on_cpu(c) ? sg : std::max(sg, std::min(128, mt) / sg * sg);
    if (threads_env) l.block_threads = static_cast<int>(*threads_env);
    const int sg_min = std::max(c.subgroup_min, 1);
    const int nsg = (l.block_threads + sg_min - 1) / sg_min;
    l.shared_bytes = nsg > 1 ? static_cast<uint64_t>(nsg * kern.bn * kern.bm) * 4 : 0;
  } else {
    kern.shared_sum = true;
    l.block_threads = static_cast<int>(pow2_floor(static_cast<uint64_t>(std::min(128, mt))));
    l.shared_bytes = static_cast<uint64_t>(l.block_threads) * 4;
  }
  l.tile_m = kern.bm;
  l.tile_n = kern.bn;
  l.set_variant(kern);
  // In flight: a workgroup's loads of one step along its rows, a piece (16 bytes, or 8 elements
  // of a block format) per invocation and row: the whole weight streams with T invocations per
  // row.
  {
    const int64_t N = op.output.dim(-1), K = op.inputs[0].dim(-1);
    const double piece = quant ? static_cast<double>(dtype_block_bytes(w)) * 8.0 /
                                     static_cast<double>(dtype_block_elems(w))
                               : 16.0;
    const double row = quant ? static_cast<double>(dtype_bytes(w, K))
                             : static_cast<double>(K) * static_cast<double>(dtype_size(t));
    k.memory_share = streaming_share(c, static_cast<double>(N) * static_cast<double>(batch_of(op)) *
                                            std::min(l.block_threads * piece, row));
  }
  k.ok = true;
  k.reason =
      std::string("mat-vec, ") +
      (quant ? std::string(dtype_name(w)) + " weight decoded in registers from its blocks, " : "") +
      compute_name(t) + ", " + std::to_string(kern.bn) + " weight rows per workgroup of " +
      std::to_string(l.block_threads) + " splitting K, " +
      (quant ? std::string("8 elements") : std::string("16 bytes")) + " per load step and row, " +
      (kern.shared_sum ? std::string("summed in shared memory (no subgroup arithmetic)")
                       : "summed by subgroupAdd (subgroups of " + std::to_string(sg) + ")") +
      ", " + std::to_string(kern.bm) + " activation rows per workgroup";
  return k;
}

// GEMM on cooperative matrices (matmul_coopmat.comp): 16x16x16 f16 matrices with f32
// accumulators, a TILE x TILE block per workgroup of four subgroups, 32-deep slices of A and B
// staged in shared memory as f16. Float GEMM at f16 precision; a block-quantized weight is
// decoded group by group into the slice, its activations rounded to f16 there (judged by the
// quantized-weight tolerance, as int_dot's 8-bit activations are).
KernelChoice coopmat_choice(const DeviceCaps& c, const OpDesc& op, DType t) {
  const DType w = op.inputs[1].dtype;
  const bool quant = is_quantized(w);
  KernelChoice k = base(c, op, t, Tier::coopmat, Family::gemm_coopmat);
  if (quant) k.input_dtypes[1] = w;
  bool shape = false;
  std::string usable, nv;
  for (const MatrixUnit& u : c.matrix_units) {
    const std::string text = std::to_string(u.m) + "x" + std::to_string(u.n) + "x" +
                             std::to_string(u.k) + " " + std::string(dtype_name(u.a)) + "+" +
                             std::string(dtype_name(u.acc));
    std::string& to = u.api == kCoopMatNvApi ? nv : usable;
    to += (to.empty() ? "" : ", ") + text;
    if (u.api != kCoopMatNvApi)
      shape = shape ||
              (u.m == 16 && u.n == 16 && u.k == 16 && u.a == DType::f16 && u.acc == DType::f32);
  }
  if (usable.empty()) {
    k.reason = nv.empty() ? "device has no VK_KHR_cooperative_matrix"
                          : "device has only VK_NV_cooperative_matrix (" + nv +
                                "); the coopmat kernels use VK_KHR_cooperative_matrix";
    return k;
  }
  if (!shape) {
    k.reason =
        "the coopmat kernels use 16x16x16 f16 matrices with f32 accumulators; this device "
        "offers " +
        usable;
    return k;
  }
  if (!quant && t != DType::f16) {
    k.reason = t == DType::bf16
                   ? "bf16 operands on cooperative matrices need VK_KHR_shader_bfloat16, which no "
                     "coopmat kernel here uses"
                   : "the coopmat kernels multiply f16 operands; f32 needs f32 operands";
    return k;
  }
  if (!c.fp16_arith) {
    k.reason =
        "device lacks f16 arithmetic in shaders (shaderFloat16), which the coopmat kernels' f16 "
        "slices need";
    return k;
  }
  std::string why;
  if (!storage_ok(c, t, &why)) return k.reason = why, k;
  const int sg = std::max(c.subgroup_size, 1);
  const int wg = 4 * sg;
  if (wg > max_threads(c)) {
    k.reason = "four subgroups of " + std::to_string(sg) + " exceed the device's " +
               std::to_string(max_threads(c)) + " invocations per workgroup";
    return k;
  }
  // matmul_coopmat.comp's shared memory: A and B slices of TILE x 32 f16 (rows padded to 40),
  // and a 16x16 f32 staging matrix per subgroup.
  auto shared = [](int tile) { return static_cast<uint64_t>(2 * tile * 40 * 2 + 4 * 256 * 4); };
  const uint64_t smem = shared_limit(c);
  const int64_t M = op.output.dim(-2), N = op.output.dim(-1);
  int64_t batch = 1;
  for (int i = 0; i + 2 < op.output.rank; ++i) batch *= op.output.dim(i);
  // 128 x 128 blocks where they fit and still give every compute unit two workgroups.
  const int64_t target = 2 * std::max(c.compute_units, 32);
  int tile = 64;
  if (!quant && shared(128) <= smem && ((M + 127) / 128) * ((N + 127) / 128) * batch >= target)
    tile = 128;
  if (shared(tile) > smem) {
    k.reason = "the coopmat kernel needs " + kib(shared(tile)) +
               " of shared memory; the device has " + kib(smem);
    return k;
  }
  LaunchConfig& l = k.launch;
  l.block_threads = wg;
  l.tile_m = l.tile_n = tile;
  l.tile_k = 32;
  l.subgroup = sg;
  l.shared_bytes = shared(tile);
  l.set_variant(Kernel{.family = Family::gemm_coopmat, .bm = tile, .bn = tile});
  // In flight: each workgroup's 32-deep slices of its rows of A (those below M) and of B (a
  // block format's groups of 32).
  {
    const double esize = static_cast<double>(dtype_size(t));
    const double b_row = quant ? static_cast<double>(dtype_block_bytes(w)) * 32.0 /
                                     static_cast<double>(dtype_block_elems(w))
                               : 32.0 * esize;
    const double wgs = static_cast<double>((M + tile - 1) / tile) *
                       static_cast<double>((N + tile - 1) / tile) *
                       static_cast<double>(batch_of(op));
    k.memory_share = streaming_share(
        c, wgs * (static_cast<double>(std::min<int64_t>(tile, M)) * 32.0 * esize + tile * b_row));
  }
  k.ok = true;
  k.reason = "cooperative matrices 16x16x16 f16 with f32 accumulators, " + std::to_string(tile) +
             "x" + std::to_string(tile) +
             " per workgroup of 4 subgroups, 32-deep f16 slices in shared memory (" +
             kib(l.shared_bytes) + ")" +
             (quant ? ", the " + std::string(dtype_name(w)) +
                          " weight decoded group by group into them (never expanded in memory)" +
                          (t != DType::f16 ? ", activations rounded to f16 there" : "")
                    : "");
  return k;
}

// On a GPU the mat-vec first where it applies (decode); on a CPU device the register-blocked
// kernel first (its shared-memory reads are gathers) and the mat-vec last.
std::vector<KernelChoice> matmul_choices(const DeviceCaps& c, const OpDesc& op, DType t) {
  std::vector<KernelChoice> out;
  KernelChoice mv = matvec_choice(c, op, t);
  const bool mv_first = mv.ok && !on_cpu(c);
  if (mv_first) out.push_back(mv);
  out.push_back(coopmat_choice(c, op, t));
  if (on_cpu(c)) out.push_back(blocked_choice(c, op, t));
  out.push_back(tiled_choice(c, op, t));
  if (!on_cpu(c)) out.push_back(blocked_choice(c, op, t));
  if (!mv_first) out.push_back(std::move(mv));
  return out;
}

}  // namespace duet::vulkan::rules_detail
