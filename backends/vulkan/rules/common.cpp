// The limits launch shapes are derived from, the checks every Vulkan choice makes, and the
// efficiency class of each kernel family.
#include <algorithm>

#include "rules/rules.h"

namespace duet::vulkan::rules_detail {

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

int flat_block(const DeviceCaps& c) {
  return static_cast<int>(pow2_floor(static_cast<uint64_t>(std::min(256, max_threads(c)))));
}

uint64_t shared_limit(const DeviceCaps& c) {
  return c.shared_mem_per_block ? c.shared_mem_per_block : 16384;
}

std::string kib(uint64_t b) {
  return b % 1024 == 0 ? std::to_string(b / 1024) + " KiB" : std::to_string(b) + " bytes";
}

bool on_cpu(const DeviceCaps& c) {
  return c.type == DeviceType::cpu;
}

// On a GPU, as its families are built; on a CPU device as measured on lavapipe
// (docs/performance.md): the shared-memory families reach a few percent of the host's peak, the
// register-blocked and integer-dot ones about a third. Packed 4x8-bit dot products run at 4
// multiply-adds per instruction where the device accelerates them; emulated, as f32 FMAs do.
double efficiency(const DeviceCaps& c, Family f) {
  const bool cpu = on_cpu(c);
  switch (f) {
    case Family::flat:
    case Family::rows:
    case Family::convert:
    case Family::embedding:
    case Family::write_slice:
    case Family::dequantize_rows:
      return cpu ? 0.1 : 0.15;
    case Family::gemm_tiled:
    case Family::qgemm_tiled:
      return cpu ? 0.04 : 0.4;
    case Family::gemm_blocked:
    case Family::attention_blocked:
    case Family::qgemm_blocked:
      return 0.3;
    case Family::attention_flash:
      return cpu ? 0.005 : 0.6;
    // Decode attention is bound by the cache's bytes; its flop rate matters little.
    case Family::attention_decode:
      return cpu ? 0.005 : 0.3;
    case Family::qgemm_dot:
      return !cpu && c.int_dot_accelerated ? 0.6 : 0.3;
    // A mat-vec is bound by the weight's bytes, not by its flops: its flop rate matters little.
    case Family::matvec:
      return cpu ? 0.1 : 0.3;
    case Family::gemm_coopmat:
      return cpu ? 0.04 : 0.5;
  }
  return 0.1;
}

// Little's law: a device streams at its bandwidth only with bandwidth x latency bytes of loads
// outstanding. A loaded GPU's memory latency is about a microsecond, so it needs about
// memory_gbps x 1000 bytes in flight (an H100: 3.3 MB); where the record states no bandwidth
// (Vulkan drivers do not), 32 KiB per compute unit (an H100's 3.35 TB/s over 132 SMs is 25 GB/s,
// 25 KB a microsecond, per SM).
double streaming_share(const DeviceCaps& c, double bytes_in_flight) {
  if (on_cpu(c)) return 0;
  constexpr double kLatencyUs = 1.0;
  constexpr double kPerUnitBytes = 32768;
  const double need = c.memory_gbps > 0 ? c.memory_gbps * 1e3 * kLatencyUs
                                        : std::max(c.compute_units, 32) * kPerUnitBytes;
  return std::clamp(bytes_in_flight / need, 1e-3, 1.0);
}

int64_t batch_of(const OpDesc& op) {
  int64_t batch = 1;
  for (int i = 0; i + 2 < op.output.rank; ++i) batch *= op.output.dim(i);
  return batch;
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

KernelChoice base(const OpDesc& op, DType t, Tier tier) {
  KernelChoice k;
  k.tier = tier;
  k.precision = precision_of(t);
  for (size_t i = 0; i < op.inputs.size(); ++i) k.input_dtypes.push_back(input_storage(op, i, t));
  k.output_dtype = is_float(op.output.dtype) ? t : op.output.dtype;
  return k;
}

KernelChoice base(const DeviceCaps& c, const OpDesc& op, DType t, Tier tier, Family f) {
  KernelChoice k = base(op, t, tier);
  k.efficiency = efficiency(c, f);
  return k;
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

bool texels_ok(const DeviceCaps& c, std::string* why) {
  if (c.max_texel_elements && *c.max_texel_elements == 0) {
    *why = "device lacks uniform texel buffers of R32G32B32A32_UINT, R32_UINT and R16_UINT";
    return false;
  }
  return true;
}

std::string compute_name(DType t) {
  return t == DType::f32 ? "f32" : std::string(dtype_name(t)) + " storage, f32 compute";
}

}  // namespace duet::vulkan::rules_detail
