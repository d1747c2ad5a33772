// What the Vulkan rules' files share: the device limits launch shapes are derived from, the
// checks every choice makes, and each op family's choices (one file per family). Pure functions
// of a capability record; no Vulkan API.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "duet/device.h"
#include "kernel.h"

namespace duet::vulkan::rules_detail {

uint64_t pow2_ceil(uint64_t v);
uint64_t pow2_floor(uint64_t v);
// The most invocations a workgroup may have (128 where the record does not say).
int max_threads(const DeviceCaps& c);
// Workgroup size for one-element-per-invocation kernels: 256, or less where the device caps it.
int flat_block(const DeviceCaps& c);
// The shared memory a workgroup may use (16 KiB where the record does not say).
uint64_t shared_limit(const DeviceCaps& c);
std::string kib(uint64_t b);

// A Vulkan API on the host's cores (lavapipe): shared memory and per-invocation reads are scalar
// loops over the lanes there, which is what orders and rates its kernel families.
bool on_cpu(const DeviceCaps& c);

// The share of a GPU's streaming bandwidth a kernel reaches with `bytes_in_flight` bytes of loads
// outstanding across the device at once (KernelChoice::memory_share; 0 on CPU devices, which do
// not say). Rules compute the bytes from what their kernel's invocations load per step.
double streaming_share(const DeviceCaps& c, double bytes_in_flight);
// The batch entries of a matmul's output (every dimension but the last two).
int64_t batch_of(const OpDesc& op);

// The efficiency class of a kernel family on this device (KernelChoice::efficiency): the share
// of the device's peak it reaches on a large problem.
double efficiency(const DeviceCaps& c, Family f);

// A choice of `op` at float dtype `t` for `tier`, a kernel of family `f`: precision, the storage
// dtypes it reads (masks may stay f32, ids stay i32) and writes, the family's efficiency class.
KernelChoice base(const DeviceCaps& c, const OpDesc& op, DType t, Tier tier, Family f);
// The same for a tier that has no kernel family yet (no efficiency class).
KernelChoice base(const OpDesc& op, DType t, Tier tier);
// Whether the device stores `t` (16-bit and 8-bit storage buffers); else why not.
bool storage_ok(const DeviceCaps& c, DType t, std::string* why);
// Whether the device reads the texel buffers the register_blocked and integer-dot kernels read
// their operands through (a record that does not say is assumed to: Vulkan requires the formats).
bool texels_ok(const DeviceCaps& c, std::string* why);
// "f32", or "f16 storage, f32 compute".
std::string compute_name(DType t);

// The shared-memory GEMMs' tile (matmul.cpp, quantized.cpp): the first of `tiles` (largest
// first) whose invocations and shared memory fit the device, whose workgroup is whole subgroups,
// and which is at most twice the output (M counted as at least `min_m`, N as at least 8), since a
// larger tile wastes most of its work; else the first that fits at all; else none, and why not.
template <class Tile, size_t Count>
std::optional<Tile> pick_tile(const DeviceCaps& c, const Tile (&tiles)[Count], int64_t M, int64_t N,
                              int64_t min_m, const std::string& what, std::string* why_not) {
  const int mt = max_threads(c);
  const uint64_t smem = shared_limit(c);
  const int sg = std::max(c.subgroup_size, 1);
  std::optional<Tile> fallback;
  for (const Tile& t : tiles) {
    if (t.threads() > mt || t.shared() > smem) continue;
    if (t.threads() % sg != 0 && t.threads() > sg) continue;
    if (!fallback) fallback = t;
    if (t.bm > 2 * std::max<int64_t>(M, min_m) || t.bn > 2 * std::max<int64_t>(N, 8)) continue;
    return t;
  }
  if (fallback) return fallback;
  *why_not = "no " + what + " tile fits " + kib(smem) + " of shared memory and " +
             std::to_string(mt) + " invocations per workgroup";
  return std::nullopt;
}

// Each op family's choices: data.cpp, elementwise.cpp, matmul.cpp, attention.cpp, quantized.cpp.
KernelChoice data_choice(const DeviceCaps& c, const OpDesc& op);
KernelChoice write_slice_choice(const DeviceCaps& c, const OpDesc& op);
KernelChoice elementwise_choice(const DeviceCaps& c, const OpDesc& op, DType t);
std::vector<KernelChoice> matmul_choices(const DeviceCaps& c, const OpDesc& op, DType t);
std::vector<KernelChoice> attention_choices(const DeviceCaps& c, const OpDesc& op, DType t);
std::vector<KernelChoice> quantized_choices(const DeviceCaps& c, const OpDesc& op);

// The GPU family's matmul kernels (matmul.cpp), for a float or a block-quantized weight: the
// mat-vec for decode (at most kMatvecRows activation rows) and the cooperative-matrix GEMM.
constexpr int64_t kMatvecRows = 8;
KernelChoice matvec_choice(const DeviceCaps& c, const OpDesc& op, DType t);
KernelChoice coopmat_choice(const DeviceCaps& c, const OpDesc& op, DType t);

}  // namespace duet::vulkan::rules_detail
