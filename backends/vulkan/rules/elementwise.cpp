// Every op without a family of its own: one invocation per element (element-wise, rope,
// reductions), or one workgroup per row (softmax, rmsnorm, layernorm).
#include <algorithm>

#include "rules/rules.h"

namespace duet::vulkan::rules_detail {

namespace {

// Workgroup size for one-row-per-workgroup reductions: a power of two covering the row, at least
// a subgroup, at most 256 or the device's maximum.
int row_block(const DeviceCaps& c, int64_t n) {
  const uint64_t cap = pow2_floor(static_cast<uint64_t>(std::min(256, max_threads(c))));
  const uint64_t want =
      std::max<uint64_t>(pow2_ceil(static_cast<uint64_t>(std::max<int64_t>(n, 1))),
                         static_cast<uint64_t>(std::max(c.subgroup_size, 1)));
  return static_cast<int>(std::min(cap, want));
}

}  // namespace

KernelChoice elementwise_choice(const DeviceCaps& c, const OpDesc& op, DType t) {
  const bool rows =
      op.kind == OpKind::softmax || op.kind == OpKind::rmsnorm || op.kind == OpKind::layernorm;
  const Family f = rows ? Family::rows : Family::flat;
  KernelChoice k = base(c, op, t, Tier::generic, f);
  std::string why;
  if (!storage_ok(c, t, &why)) return k.reason = why, k;
  LaunchConfig& l = k.launch;
  l.set_variant(Kernel{.family = f});
  if (rows) {
    l.block_threads = row_block(c, op.output.dim(-1));
    k.reason =
        "one workgroup of " + std::to_string(l.block_threads) + " per row, " + compute_name(t);
  } else {
    l.block_threads = flat_block(c);
    k.reason = "one invocation per element, " + compute_name(t);
  }
  k.ok = true;
  return k;
}

}  // namespace duet::vulkan::rules_detail
