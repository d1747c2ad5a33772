// The device contract: what every Device promises its caller, whatever the backend (IREE's CTS is
// the model). Device::execute, write and read validate their arguments in the core
// (core/src/device.cpp); these tests hold every backend to that and to the rest of the contract:
// copies stay inside their buffer, nothing runs after a refused argument, refused kernel choices
// and views never run, a data error names the op, the tensor and the value, and a read waits for
// the work recorded before it.
//
// Each backend's test binary links tests/device and instantiates the suite for its devices:
//   INSTANTIATE_TEST_SUITE_P(Cpu, DeviceContract, ::testing::Values(ContractTarget{"cpu", open}),
//                            contract_name);
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "duet/device.h"

namespace duet::testing {

struct ContractTarget {
  std::string name;  // in the test's name: "cpu", "vulkan", "cuda_emulated", ...
  // Every device of the target; an error skips the test with its message (no Vulkan device).
  std::function<Result<std::vector<std::shared_ptr<Device>>>()> open;
};

class DeviceContract : public ::testing::TestWithParam<ContractTarget> {
 protected:
  void SetUp() override;
  std::vector<std::shared_ptr<Device>> devices_;
};

std::string contract_name(const ::testing::TestParamInfo<ContractTarget>& info);

}  // namespace duet::testing
