// From CUDA device properties to the capability record. Everything the kernels derive launch
// shapes from is read from the device; the tables here hold only what CUDA does not report
// (which instructions an architecture has, how many lanes an SM has, tensor-core rates).
#include "caps.h"

#include <cctype>
#include <cstdio>

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

// FP32 lanes per SM: 64 through sm_80, 128 from GA10x (sm_86) on, except GA100 (sm_80).
int fp32_lanes_per_sm(int major, int minor) {
  if (major >= 9 || (major == 8 && minor >= 6)) return 128;
  if (major == 6 && minor == 0) return 64;
  if (major == 6 || major == 5) return 128;
  return 64;
}

// Dense f16 tensor-core FLOPs per SM per clock with f16 accumulation (f32 accumulation runs at
// the same rate on data-centre and workstation parts, at half on GeForce parts).
int tensor_flops_per_sm_clock(int major, int minor) {
  if (major >= 10 && major < 12) return 8192;  // B100/B200 (sm_100, sm_103), Thor (sm_110)
  if (major == 9) return 4096;                 // H100/H200 (reached with wgmma)
  if (major == 8 && minor == 0) return 2048;   // A100
  if (major >= 7) return 1024;                 // V100, T4/RTX 20, RTX 30, RTX 40, RTX 50
  return 0;
}

std::vector<MatrixUnit> matrix_units(int major, int minor) {
  const int sm = major * 10 + minor;
  std::vector<MatrixUnit> u;
  auto add = [&u](const char* api, int m, int n, int k, DType a, DType acc) {
    u.push_back(MatrixUnit{api, m, n, k, a, acc});
  };
  if (sm >= 70) {  // Volta: first tensor cores
    add("mma.sync", 8, 8, 4, DType::f16, DType::f32);
    add("mma.sync", 8, 8, 4, DType::f16, DType::f16);
    add("wmma", 16, 16, 16, DType::f16, DType::f32);
    add("wmma", 16, 16, 16, DType::f16, DType::f16);
  }
  if (sm >= 75) {  // Turing: m16n8k8 and integer mma
    add("mma.sync", 16, 8, 8, DType::f16, DType::f32);
    add("mma.sync", 16, 8, 8, DType::f16, DType::f16);
    add("mma.sync", 8, 8, 16, DType::i8, DType::i32);
  }
  if (sm >= 80) {  // Ampere: m16n8k16, bf16
    add("mma.sync", 16, 8, 16, DType::f16, DType::f32);
    add("mma.sync", 16, 8, 16, DType::f16, DType::f16);
    add("mma.sync", 16, 8, 8, DType::bf16, DType::f32);
    add("mma.sync", 16, 8, 16, DType::bf16, DType::f32);
    add("mma.sync", 16, 8, 32, DType::i8, DType::i32);
    add("wmma", 16, 16, 16, DType::bf16, DType::f32);
  }
  return u;
}

std::string tensor_core_summary(int sm) {
  std::string s = "fp16 mma (sm_70+)";
  if (sm >= 75) s += ", m16n8k8 and int8 mma (sm_75+)";
  if (sm >= 80) s += ", bf16 and m16n8k16 mma, cp.async (sm_80+)";
  return s;
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

  const int sm = p.major * 10 + p.minor;
  c.cc_major = p.major;
  c.cc_minor = p.minor;
  c.arch = "sm_" + std::to_string(sm);
  c.compute_units = p.sm_count;
  c.clock_mhz = p.clock_khz / 1000.0;

  const std::optional<std::string> no_tc = turing_without_tensor_cores(p);
  c.fp16_storage = c.bf16_storage = c.int8_storage = true;
  c.fp16_arith = sm >= 53;
  c.bf16_arith = sm >= 80;
  c.int8_arith = c.int_dot = sm >= 61;  // dp4a
  c.tensor_cores = sm >= 70 && !no_tc;
  if (c.tensor_cores) c.matrix_units = matrix_units(p.major, p.minor);
  c.async_copy = sm >= 80;
  c.extra[std::string(kTensorCoresKey)] = no_tc            ? *no_tc
                                          : c.tensor_cores ? tensor_core_summary(sm)
                                                           : "none: before sm_70";

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
  c.peak_gflops_f32 = p.sm_count * fp32_lanes_per_sm(p.major, p.minor) * 2.0 * ghz;
  if (c.tensor_cores) {
    const bool geforce = contains(p.name, "GeForce");  // f32 accumulation at half rate
    c.peak_gflops_f16 =
        p.sm_count * tensor_flops_per_sm_clock(p.major, p.minor) * ghz / (geforce ? 2.0 : 1.0);
  } else if (sm == 61) {
    c.peak_gflops_f16 = c.peak_gflops_f32 / 64;  // GP10x consumer parts: 1/64-rate fp16
  } else if (c.fp16_arith) {
    c.peak_gflops_f16 = c.peak_gflops_f32 * 2;  // paired half2 arithmetic (TU116/117 FP16 units)
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
