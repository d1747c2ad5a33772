// Float matmul: the shared-memory GEMM (gemm_tiled), the register-blocked GEMM through texel
// buffers (gemm_blocked), and cooperative matrices (refused with the reason).
#include <algorithm>
#include <optional>

#include "rules/rules.h"
#include "vulkan_backend.h"

namespace duet::vulkan::rules_detail {

namespace {

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
  const uint64_t smem = shared_limit(c);
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

KernelChoice coopmat_choice(const DeviceCaps& c, const OpDesc& op, DType t) {
  KernelChoice k = base(op, t, Tier::coopmat);
  std::string usable, nv;
  for (const MatrixUnit& u : c.matrix_units) {
    std::string& to = u.api == kCoopMatNvApi ? nv : usable;
    to += (to.empty() ? "" : ", ") + std::to_string(u.m) + "x" + std::to_string(u.n) + "x" +
          std::to_string(u.k) + " " + std::string(dtype_name(u.a)) + "+" +
          std::string(dtype_name(u.acc));
  }
  if (usable.empty()) {
    if (!nv.empty())
      k.reason = "device has only VK_NV_cooperative_matrix (" + nv +
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

KernelChoice tiled_choice(const DeviceCaps& c, const OpDesc& op, DType t) {
  KernelChoice k = base(c, op, t, Tier::tiled, Family::gemm_tiled);
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
  k.reason = "register-blocked GEMM without shared memory, " + compute_name(t) + ", " +
             std::to_string(s.tm) + "x" + std::to_string(s.tn) + " outputs per invocation, " +
             std::to_string(s.wg) + " per workgroup, operands read through texel buffers";
  k.ok = true;
  return k;
}

}  // namespace

// On a CPU device the register-blocked kernel first: its shared-memory reads are gathers.
std::vector<KernelChoice> matmul_choices(const DeviceCaps& c, const OpDesc& op, DType t) {
  std::vector<KernelChoice> out;
  out.push_back(coopmat_choice(c, op, t));
  if (on_cpu(c)) out.push_back(blocked_choice(c, op, t));
  out.push_back(tiled_choice(c, op, t));
  if (!on_cpu(c)) out.push_back(blocked_choice(c, op, t));
  return out;
}

}  // namespace duet::vulkan::rules_detail
