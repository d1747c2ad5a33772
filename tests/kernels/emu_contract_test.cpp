// The device contract (tests/device/contract.h) on the emulated CUDA devices: a Turing and an
// Ampere record, so that both kernel families answer it.
#include "device/contract.h"
#include "emu_device.h"

namespace duet::kernels::testing {
namespace {

Result<std::vector<std::shared_ptr<Device>>> open_emulated() {
  return std::vector<std::shared_ptr<Device>>{make_emu_device("emu-t4", profile("t4")),
                                              make_emu_device("emu-a100", profile("a100"))};
}

using duet::testing::DeviceContract;
INSTANTIATE_TEST_SUITE_P(CudaEmulated, DeviceContract,
                         ::testing::Values(duet::testing::ContractTarget{"cuda_emulated",
                                                                         open_emulated}),
                         duet::testing::contract_name);

}  // namespace
}  // namespace duet::kernels::testing
