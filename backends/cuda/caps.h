// CUDA device properties as a plain struct, and their conversion to the engine's capability
// record. The conversion is a pure function, unit-tested with the properties of real cards.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "duet/device.h"

namespace duet::cuda {

// What the CUDA runtime reports about one device (cudaDeviceProp and a few attributes). 0 means
// "not reported".
struct DeviceProps {
  int ordinal = 0;
  std::string name;  // "NVIDIA GeForce RTX 3090"
  int major = 0, minor = 0;
  int sm_count = 0;
  int clock_khz = 0;         // peak SM clock
  int memory_clock_khz = 0;  // peak memory clock (double data rate)
  int memory_bus_bits = 0;
  uint64_t total_memory = 0;
  uint64_t shared_per_block = 0;        // default limit per block
  uint64_t shared_per_block_optin = 0;  // with cudaFuncAttributeMaxDynamicSharedMemorySize
  uint64_t shared_per_sm = 0;
  int regs_per_block = 0, regs_per_sm = 0;
  int warp_size = 32;
  int max_threads_per_block = 0, max_threads_per_sm = 0;
  std::array<int, 3> max_block{}, max_grid{};
  int l2_bytes = 0;
  bool integrated = false;
  bool ecc = false;
  uint16_t pci_vendor_id = 0, pci_device_id = 0;  // e.g. 0x10de, 0x2204
  int pci_domain = 0, pci_bus = 0, pci_device = 0;
  std::optional<std::array<uint8_t, 16>> uuid;
  int driver_version = 0;   // CUDA version the driver supports, e.g. 13000
  int runtime_version = 0;  // CUDA version of the runtime linked in, e.g. 13000
};

// The record the planner and the kernels see. Kernel-image status and cuBLAS availability are
// added by the backend when it opens the device (they depend on the build, not the card).
DeviceCaps caps_from_props(const DeviceProps& p);

// Turing parts (sm_75) built without tensor cores: TU116 and TU117 dies (GTX 16xx, MX450/MX550,
// T400..T1200). Returns the explanation when the part is one of them. Matched by PCI device id
// when known (TU116 = 0x2180..0x21ff, TU117 = 0x1f80..0x1fff, and the TU106-based GTX 1650), else
// by name ("GTX" on an sm_75 part, MX450/MX550, Quadro T400..T2000).
std::optional<std::string> turing_without_tensor_cores(const DeviceProps& p);

// Splits cudaDeviceProp::gpuPciDeviceID (the 16-bit device and vendor ids in one word) into its
// halves; the vendor half is the one that reads 0x10de. False when neither does.
bool decode_pci_ids(uint32_t combined, uint16_t* vendor, uint16_t* device);

// "13.0" from 13000.
std::string cuda_version_string(int version);
// "0000:65:00.0"
std::string pci_bus_id_string(int domain, int bus, int device);

}  // namespace duet::cuda
