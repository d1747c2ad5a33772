// Emulated CUDA devices, for the tests: the CUDA backend itself (open_backend: the capability
// record from the card's properties, the CUDA rules with the kernel-image check and cuBLASLt's
// choice, the device's caching allocator, staging and stream) over the fake driver, whose kernels
// run on the host emulator (kernels/src/emu). The registry opens them as it opens any backend:
//
//   Registry::open({emulated_factory()}, options with cuda.emulate=a100,t4)
//
// gives the devices "emu-a100:0" and "emu-t4:0". Only the driver is not real: its memory is host
// memory, its kernels run about 10^4 times slower than on a GPU, and it has no cuBLASLt (the
// cuBLASLt choices are refused with that reason).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "device.h"
#include "duet/registry.h"

namespace duet::cuda::testing {

// The option naming the cards to emulate, comma-separated: fake_driver.h's catalog by name
// ("a100", "t4", "gtx1060", "jetson-orin-nano", "rtx3090", "h100", ...).
inline constexpr const char* kEmulateOption = "cuda.emulate";

// A card of the catalog by name.
Result<DeviceProps> card(std::string_view name);

// The kernel images the emulated devices are given: every architecture of a release build, sm_90a
// (Hopper's wgmma tier) and sm_61 (what a CUDA 12 toolkit can add), PTX compute_120.
BuildArchs emulated_build();

// The factory of the emulated devices ("cuda-emulated"); without the option it reports that no
// card was asked for.
BackendFactory emulated_factory();

// One emulated card, for tests that want a device rather than a registry.
std::unique_ptr<CudaDevice> open_emulated(std::string_view card_name);

}  // namespace duet::cuda::testing
