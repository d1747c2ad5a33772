// A duet::Device whose kernels are the CUDA kernels run by the host emulator, with the
// capability record of a real GPU model: the rules are the CUDA kernel selection, execute() is
// kernels::emu::launch. Lets the check machinery (tools/check) run every tier's kernels in CI.
#pragma once

#include <memory>
#include <string>

#include "duet/device.h"
#include "duet/kernels/select.h"

namespace duet::kernels::testing {

// Capability records of GPU models, as a CUDA backend would probe them.
DeviceCaps a100_caps();       // sm_80, 108 SMs, 163 KiB shared per block
DeviceCaps rtx4090_caps();    // sm_89, 128 SMs, 99 KiB
DeviceCaps h100_caps();       // sm_90, 132 SMs, 227 KiB
DeviceCaps orin_nano_caps();  // sm_87, 8 SMs, 163 KiB: small grids are not split
DeviceCaps t4_caps();         // sm_75, 40 SMs, 64 KiB, f16 tensor cores, no bf16
DeviceCaps gtx1660_caps();    // sm_75 without tensor cores
DeviceCaps gtx1060_caps();    // sm_61

// Every architecture of the release build (sm_75..sm_90, sm_120 + PTX).
BuildArchs full_build();

std::unique_ptr<Device> make_emu_device(std::string id, DeviceCaps caps,
                                        BuildArchs build = full_build());

}  // namespace duet::kernels::testing
