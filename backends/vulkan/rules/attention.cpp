// Attention: flash attention over shared-memory key tiles (attention_flash), its decode kernel
// for few query rows with the keys split across workgroups (attention_decode), and attention
// without shared memory, K and V through texel buffers (attention_blocked).
#include <algorithm>
#include <optional>

#include "rules/rules.h"

namespace duet::vulkan::rules_detail {

namespace {

struct AttnTile {
  int br = 0, bc = 0, threads = 0;
  uint64_t shared = 0;
};

uint64_t attn_shared(int br, int bc, int64_t d) {
  return 4ull * static_cast<uint64_t>(br * d + bc * (d + 1) + bc * d + br * bc + 3 * br);
}

// Rows of queries per workgroup (BR) and keys per tile (BC) that fit the device's shared memory,
// with enough invocations that each keeps at most 8 output accumulators.
std::optional<AttnTile> pick_attention_tile(const DeviceCaps& c, int64_t D, int64_t rows,
                                            std::string* why_not) {
  const int mt = max_threads(c);
  const uint64_t smem = shared_limit(c);
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

// Query rows per KV head up to which the decode kernel runs (its registers hold every row).
constexpr int64_t kDecodeRows = 8;

// The decode kernel (attention_decode.comp): a workgroup of up to 128 invocations takes tiles of
// as many keys, every query row of its KV head (up to 8) at once, and the keys are split across
// workgroups until every compute unit has several. Nullopt, with why, where it cannot run.
std::optional<KernelChoice> decode_choice(const DeviceCaps& c, const OpDesc& op, DType t,
                                          std::string* why) {
  const int64_t B = op.inputs[0].dim(0), Hq = op.inputs[0].dim(1), Lq = op.inputs[0].dim(2);
  const int64_t D = op.inputs[0].dim(3), Hkv = op.inputs[1].dim(1), Lk = op.inputs[1].dim(2);
  const int64_t rows = (Hq / Hkv) * Lq;
  if (rows > kDecodeRows) {
    *why = std::to_string(rows) + " query rows per KV head (the decode kernel takes at most " +
           std::to_string(kDecodeRows) + ")";
    return std::nullopt;
  }
  if (!c.subgroup_arithmetic) {
    *why = "device lacks subgroup arithmetic in compute shaders (the decode kernel's reductions)";
    return std::nullopt;
  }
  const int nt = std::min(128, max_threads(c));
  const int64_t vec = t == DType::f32 ? 4 : 8;
  const int64_t chunks = (D + vec - 1) / vec;
  const int mr = static_cast<int>(pow2_ceil(static_cast<uint64_t>(std::max<int64_t>(rows, 1))));
  const uint64_t shared =
      4ull * static_cast<uint64_t>(mr * ((D + 3) / 4 * 4) + 3 * mr * nt + nt * vec);
  if (chunks > nt || shared > shared_limit(c)) {
    *why = "head dim " + std::to_string(D) + " needs " + kib(shared) + " of shared memory and " +
           std::to_string(chunks) + " invocations; the device has " + kib(shared_limit(c)) +
           " and " + std::to_string(nt);
    return std::nullopt;
  }
  KernelChoice k = base(c, op, t, Tier::flash, Family::attention_decode);
  LaunchConfig& l = k.launch;
  l.block_threads = nt;
  l.tile_m = mr;
  l.tile_n = nt;
  l.tile_k = static_cast<int>(D);
  l.shared_bytes = shared;
  l.subgroup = c.subgroup_size;
  // Several workgroups per compute unit, each streaming at least two tiles of keys.
  const int64_t wgs = B * Hkv * ((rows + mr - 1) / mr);
  const int64_t target = 8 * std::max(c.compute_units, 8);
  const int64_t splits =
      std::clamp<int64_t>((target + wgs - 1) / wgs, 1, std::max<int64_t>(Lk / (2 * nt), 1));
  l.splits = static_cast<int>(splits);
  l.set_variant(Kernel{.family = Family::attention_decode, .bm = mr, .split_keys = splits > 1});
  k.reason = "flash attention for decode, " + compute_name(t) + ", " + std::to_string(rows) +
             " query row" + (rows > 1 ? "s" : "") + " per KV head in registers, " +
             std::to_string(nt) + "-key tiles, subgroupMax/subgroupAdd softmax in f32" +
             (splits > 1 ? ", keys split " + std::to_string(splits) + " ways" : "");
  k.ok = true;
  return k;
}

KernelChoice flash_choice(const DeviceCaps& c, const OpDesc& op, DType t) {
  KernelChoice k = base(c, op, t, Tier::flash, Family::attention_flash);
  std::string why;
  if (!storage_ok(c, t, &why)) return k.reason = why, k;
  const int64_t B = op.inputs[0].dim(0), Hq = op.inputs[0].dim(1), Lq = op.inputs[0].dim(2);
  const int64_t D = op.inputs[0].dim(3), Hkv = op.inputs[1].dim(1), Lk = op.inputs[1].dim(2);
  const int64_t rows = (Hq / Hkv) * Lq;
  std::string decode_why;
  if (auto d = decode_choice(c, op, t, &decode_why)) return *d;
  auto tile = pick_attention_tile(c, D, rows, &why);
  if (!tile) return k.reason = why, k;
  LaunchConfig& l = k.launch;
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
  l.set_variant(Kernel{.family = Family::attention_flash, .split_keys = splits > 1});
  k.reason =
      "flash attention, " + compute_name(t) + ", " + std::to_string(tile->br) + " query rows x " +
      std::to_string(tile->bc) + "-key tiles (" + kib(l.shared_bytes) +
      " shared), online softmax in f32" +
      (Hq != Hkv ? ", KV tiles shared by " + std::to_string(Hq / Hkv) + " query heads" : "") +
      (op.attrs.causal ? ", causal tiles skipped" : "") +
      (splits > 1 ? ", keys split " + std::to_string(splits) + " ways" : "") +
      " (not the decode kernel: " + decode_why + ")";
  k.ok = true;
  return k;
}

KernelChoice blocked_choice(const DeviceCaps& c, const OpDesc& op, DType t) {
  KernelChoice k = base(c, op, t, Tier::register_blocked, Family::attention_blocked);
  std::string why;
  if (!storage_ok(c, t, &why) || !texels_ok(c, &why)) return k.reason = why, k;
  const int64_t B = op.inputs[0].dim(0), Hq = op.inputs[0].dim(1), Lq = op.inputs[0].dim(2);
  const int64_t D = op.inputs[0].dim(3), Hkv = op.inputs[1].dim(1), Lk = op.inputs[1].dim(2);
  const int64_t rows = (Hq / Hkv) * Lq;
  // Queries and outputs of R rows stay in each invocation's registers: 2 x 256 floats on a
  // CPU device (they spill to L1), 2 x 64 on a GPU. On lavapipe R x D = 256 runs as fast as
  // 512 (measured, D = 64) and compiles 3x faster (1.5 s against 4.5 s per pipeline).
  const int64_t budget = on_cpu(c) ? 256 : 64;
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
    splits = std::clamp<int64_t>((target + wgs - 1) / wgs, 1, std::max<int64_t>(Lk / (64 * lk), 1));
  LaunchConfig& l = k.launch;
  l.block_threads = wg;
  l.tile_m = lr * R;
  l.tile_n = lk;
  l.tile_k = static_cast<int>(D);
  l.splits = static_cast<int>(splits);
  l.subgroup = c.subgroup_size;
  l.set_variant(Kernel{.family = Family::attention_blocked, .query_rows = R, .row_lanes = lr});
  k.reason = "attention without shared memory, " + compute_name(t) + ", " + std::to_string(R) +
             " query rows per invocation, keys across " + std::to_string(lk) + " invocations" +
             (splits > 1 ? " and " + std::to_string(splits) + " splits" : "") +
             ", K and V read through texel buffers, online softmax in f32";
  k.ok = true;
  return k;
}

}  // namespace

// On a CPU device the register-blocked kernel first: its shared-memory reads are gathers.
std::vector<KernelChoice> attention_choices(const DeviceCaps& c, const OpDesc& op, DType t) {
  std::vector<KernelChoice> out;
  if (on_cpu(c)) out.push_back(blocked_choice(c, op, t));
  out.push_back(flash_choice(c, op, t));
  if (!on_cpu(c)) out.push_back(blocked_choice(c, op, t));
  return out;
}

}  // namespace duet::vulkan::rules_detail
