// A device that faults is marked lost and every later call on it fails with device_lost,
// naming the fault; the process and other devices go on. Needs a GPU (label gpu); its own
// binary, because the fault poisons the device's CUDA context for the whole process.
#include <gtest/gtest.h>

#include "device.h"
#include "duet/backends.h"
#include "errors.h"

int duet_test_fault_device(int ordinal);

namespace duet::cuda {
namespace {

TEST(CudaGpuLost, IllegalAddressMarksTheDeviceLost) {
  Registry reg = open_registry();
  CudaDevice* d = nullptr;
  for (Device* dev : reg.devices())
    if (auto* c = dynamic_cast<CudaDevice*>(dev); c && !d) d = c;
  if (!d) {
    std::string why = "the CUDA backend is not in this build";
    for (const BackendReport& b : reg.backends())
      if (b.backend == "cuda") why = b.available ? "no usable CUDA device" : b.reason;
    GTEST_SKIP() << "no CUDA device: " << why;
  }
  auto buf = d->allocate(1 << 20);
  ASSERT_TRUE(buf.ok());
  std::vector<uint8_t> bytes(1 << 20, 7);
  ASSERT_TRUE(d->write(**buf, 0, bytes.data(), bytes.size()).ok());
  ASSERT_TRUE(d->synchronize().ok());

  const int ordinal = std::stoi(d->id().substr(d->id().find(':') + 1));
  ASSERT_EQ(duet_test_fault_device(ordinal), cuda_error::illegal_address);

  Status s = d->synchronize();
  EXPECT_EQ(s.code(), Code::device_lost) << s.message();
  EXPECT_NE(d->lost_reason().find("illegal memory access"), std::string::npos) << d->lost_reason();
  for (Status later : {d->allocate(64).status(), d->read(**buf, 0, bytes.data(), 16),
                       d->write(**buf, 0, bytes.data(), 16), d->synchronize()}) {
    EXPECT_EQ(later.code(), Code::device_lost) << later.message();
    EXPECT_NE(later.message().find(d->id()), std::string::npos) << later.message();
  }
  // The rest of the engine still works.
  Device* cpu = reg.find("cpu:0");
  ASSERT_NE(cpu, nullptr);
  EXPECT_TRUE(cpu->allocate(64).ok());
}

}  // namespace
}  // namespace duet::cuda
