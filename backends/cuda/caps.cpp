// From CUDA device properties to the capability record. Everything the kernels derive launch
// shapes from is read from the device; what CUDA does not report (which instructions an
// architecture has, how many lanes an SM has, tensor-core rates) is the architecture's record
// (duet/kernels/arch.h), and which parts lack the tensor cores of their architecture is here.
#include "caps.h"

#include <cctype>
#include <cstdio>

#include "duet/kernels/arch.h"
#include "rules.h"

namespace duet::cuda {

namespace {

bool contains(std::string_view hay, std::string_view needle) {
  return hay.find(needle) != std::string_view::npos;
}

// Whether `name` contains `token` as a whole word ("T400" in "NVIDIA T400 4GB", not in "T4000").
bool has_token(std::string_view name, std::string_view token) {
  for (size_t pos = name.find(token); pos != std::string_view::npos;
       pos = name.find(token, pos + 1)) {
    const bool left = pos == 0 || !std::isalnum(static_cast<unsigned char>(name[pos - 1]));
    const size_t end = pos + token.size();
    const bool right = end == name.size() || !std::isalnum(static_cast<unsigned char>(name[end]));
    if (left && right) return true;
  }
  return false;
}

std::string mib(uint64_t bytes) {
  return std::to_string(bytes / (1024 * 1024)) + " MiB";
}

}  // namespace

bool decode_pci_ids(uint32_t combined, uint16_t* vendor, uint16_t* device) {
  const auto lo = static_cast<uint16_t>(combined & 0xffffu);
  const auto hi = static_cast<uint16_t>(combined >> 16);
  if (lo == 0x10de) {
    *vendor = lo;
    *device = hi;
  } else if (hi == 0x10de) {
    *vendor = hi;
    *device = lo;
  } else {
    return false;
  }
  return true;
}

std::string cuda_version_string(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

std::string pci_bus_id_string(int domain, int bus, int device) {
  char b[32];
  std::snprintf(b, sizeof b, "%04x:%02x:%02x.0", static_cast<unsigned>(domain) & 0xffffu,
                static_cast<unsigned>(bus) & 0xffu, static_cast<unsigned>(device) & 0xffu);
  return b;
}

std::optional<std::string> turing_without_tensor_cores(const DeviceProps& p) {
  if (p.major != 7 || p.minor != 5) return std::nullopt;
  const unsigned id = p.pci_device_id;
  if (p.pci_vendor_id == 0x10de || p.pci_vendor_id == 0) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%04x", id);
    if (id >= 0x2180 && id <= 0x21ff)
      return "none: TU116 die (PCI device id " + std::string(hex) + ") has no tensor cores";
    if (id >= 0x1f80 && id <= 0x1fff)
      return "none: TU117 die (PCI device id " + std::string(hex) + ") has no tensor cores";
  }
  // Every Turing GeForce GTX part (GTX 1630..1660 Super, including the TU106-based GTX 1650) has
  // its tensor cores absent or fused off; RTX parts have them.
  if (contains(p.name, "GTX"))
    return "none: " + p.name + " is a Turing GTX part (TU116/TU117 class), no tensor cores";
  for (const char* t :
       {"MX450", "MX550", "T400", "T500", "T550", "T600", "T1000", "T1200", "T2000"})
    if (has_token(p.name, t)) return "none: " + p.name + " is a TU117 part, no tensor cores";
  return std::nullopt;
}

DeviceCaps caps_from_props(const DeviceProps& p) {
  DeviceCaps c;
  c.backend = BackendKind::cuda;
  c.name = p.name;
  c.vendor = "nvidia";
  c.vendor_id = p.pci_vendor_id ? p.pci_vendor_id : 0x10de;
  c.device_id = p.pci_device_id;
  c.type = p.integrated ? DeviceType::integrated_gpu : DeviceType::discrete_gpu;
  c.driver_name = "NVIDIA";
  if (p.driver_version) c.driver_version = "CUDA " + cuda_version_string(p.driver_version);
  if (p.runtime_version) c.api_version = "CUDA runtime " + cuda_version_string(p.runtime_version);
  c.uuid = p.uuid;
  if (p.pci_bus || p.pci_device || p.pci_domain)
    c.pci_bus_id = pci_bus_id_string(p.pci_domain, p.pci_bus, p.pci_device);

  const kernels::ArchFeatures arch = kernels::arch_features(p.major, p.minor);
  c.cc_major = p.major;
  c.cc_minor = p.minor;
  c.arch = arch.name();
  c.compute_units = p.sm_count;
  c.clock_mhz = p.clock_khz / 1000.0;

  const std::optional<std::string> no_tc = turing_without_tensor_cores(p);
  c.fp16_storage = c.bf16_storage = c.int8_storage = true;
  c.fp16_arith = arch.fp16_arith;
  c.bf16_arith = arch.bf16_arith;
  c.int8_arith = c.int_dot = arch.dp4a;
  c.tensor_cores = arch.tensor_cores && !no_tc;
  if (c.tensor_cores) c.matrix_units = arch.matrix_units();
  c.async_copy = arch.cp_async;
  c.extra[std::string(kTensorCoresKey)] =
      no_tc            ? *no_tc
      : c.tensor_cores ? arch.tensor_core_summary()
                       : "none: before " + kernels::sm_name(DUET_SM_MMA_F16_M8N8K4);

  c.subgroup_size = c.subgroup_min = c.subgroup_max = p.warp_size > 0 ? p.warp_size : 32;
  c.shared_mem_per_block = p.shared_per_block;
  c.shared_mem_per_block_optin =
      p.shared_per_block_optin ? p.shared_per_block_optin : p.shared_per_block;
  c.registers_per_block = static_cast<uint32_t>(p.regs_per_block);
  c.max_threads_per_block = static_cast<uint32_t>(p.max_threads_per_block);
  for (size_t i = 0; i < 3; ++i) {
    c.max_block_dims[i] = static_cast<uint32_t>(p.max_block[i]);
    c.max_grid_dims[i] = static_cast<uint32_t>(p.max_grid[i]);
  }
  c.memory_bytes = p.total_memory;
  c.host_visible_device_memory = p.integrated;

  // Peaks for the cost model: lanes x 2 FLOPs x clock; tensor rates from the architecture.
  const double ghz = p.clock_khz / 1e6;
  c.peak_gflops_f32 = p.sm_count * arch.fp32_lanes_per_sm * 2.0 * ghz;
  if (c.tensor_cores) {
    const bool geforce = contains(p.name, "GeForce");  // f32 accumulation at half rate
    c.peak_gflops_f16 = p.sm_count * arch.tensor_flops_per_sm_clock * ghz / (geforce ? 2.0 : 1.0);
  } else {
    // Paired half2 arithmetic (TU116/117 FP16 units), 1/64 rate on GP10x consumer parts.
    c.peak_gflops_f16 = c.peak_gflops_f32 * arch.fp16_simt_rate;
  }
  if (c.bf16_arith) c.peak_gflops_bf16 = c.peak_gflops_f16;
  c.memory_gbps = 2.0 * p.memory_clock_khz * 1e3 * (p.memory_bus_bits / 8.0) / 1e9;

  c.extra["shared_mem_per_sm"] = std::to_string(p.shared_per_sm / 1024) + " KiB";
  c.extra["registers_per_sm"] = std::to_string(p.regs_per_sm);
  if (p.l2_bytes) c.extra["l2_cache"] = mib(static_cast<uint64_t>(p.l2_bytes));
  if (p.pci_device_id) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%04x", static_cast<unsigned>(p.pci_device_id));
    c.extra["pci_device_id"] = hex;
  }
  if (p.ecc) c.extra["ecc"] = "on";
  return c;
}

}  // namespace duet::cuda
