// A duet::Device whose kernels are the CUDA kernels run by the host emulator, with the
// capability record of a real GPU model: the rules are the CUDA kernel selection, execute() is
// kernels::emu::launch. Lets the check machinery (tools/check) run every tier's kernels in CI.
#pragma once

#include <memory>
#include <string>

#include "duet/device.h"
#include "duet/kernels/select.h"

namespace duet::kernels::testing {

// The capability record of a GPU model from profiles/<name>.json ("t4", "a100",
// "jetson-orin-nano", ...), as a CUDA backend would probe it; a missing profile fails the test.
DeviceCaps profile(const std::string& name);

// Every architecture of the release build (sm_75..sm_90, sm_120 + PTX).
BuildArchs full_build();

std::unique_ptr<Device> make_emu_device(std::string id, DeviceCaps caps,
                                        BuildArchs build = full_build());

}  // namespace duet::kernels::testing
