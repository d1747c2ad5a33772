// Opening the CUDA backend: why it is unavailable, and what each device's record says.
#include <gtest/gtest.h>

#include "device.h"
#include "errors.h"
#include "fake_driver.h"

namespace duet::cuda {
namespace {

using namespace duet::cuda::testing;

TEST(CudaAvailability, NoDriverLibrary) {
  DriverStatus s;
  s.runtime_version = 13000;
  Status st = availability(s);
  EXPECT_EQ(st.code(), Code::unsupported);
  EXPECT_EQ(st.message(), "no NVIDIA driver (libcuda.so.1 not found)");
}

TEST(CudaAvailability, DriverOlderThanTheBuild) {
  DriverStatus s{true, 12040, 13000, 1, ""};
  EXPECT_EQ(availability(s).message(),
            "driver too old for this build: driver supports CUDA 12.4, build needs 13.0");
  s.runtime_version = 13020;  // minor version compatibility: a 13.0 driver runs a 13.2 runtime
  s.driver_version = 13000;
  EXPECT_TRUE(availability(s).ok());
}

TEST(CudaAvailability, NoDeviceOrCountingError) {
  DriverStatus s{true, 13000, 13000, 0, ""};
  EXPECT_EQ(availability(s).message(), "no device");
  s.count_error = "cudaGetDeviceCount: all CUDA-capable devices are busy or unavailable";
  EXPECT_EQ(availability(s).message(), s.count_error);
  s = {true, 13000, 13000, 2, ""};
  EXPECT_TRUE(availability(s).ok());
}

TEST(CudaErrors, StickyErrorsLoseTheDevice) {
  EXPECT_EQ(classify_cuda_error(cuda_error::illegal_address), Code::device_lost);
  EXPECT_EQ(classify_cuda_error(cuda_error::launch_failure), Code::device_lost);
  EXPECT_EQ(classify_cuda_error(cuda_error::ecc_uncorrectable), Code::device_lost);
  EXPECT_EQ(classify_cuda_error(cuda_error::memory_allocation), Code::out_of_memory);
  EXPECT_EQ(classify_cuda_error(cuda_error::no_kernel_image), Code::unsupported);
  EXPECT_EQ(classify_cuda_error(cuda_error::launch_out_of_resources), Code::internal);
  EXPECT_EQ(classify_cuda_error(1), Code::internal);  // invalid value: a bug of ours
  EXPECT_EQ(classify_cuda_error(0), Code::ok);
}

TEST(CudaOpen, ReportsWhyTheBackendIsUnavailable) {
  auto driver = std::make_shared<FakeDriver>(std::vector<DeviceProps>{});
  driver->driver_status = DriverStatus{false, 0, 13000, 0, ""};
  BackendFactory f{
      "cuda", [driver](const BackendOptions&) { return open_backend(driver, this_build(), {}); }};
  Registry reg = Registry::open({f});
  ASSERT_EQ(reg.backends().size(), 1u);
  EXPECT_FALSE(reg.backends()[0].available);
  EXPECT_EQ(reg.backends()[0].reason, "no NVIDIA driver (libcuda.so.1 not found)");
}

TEST(CudaOpen, MixedBoxOpensEveryDeviceWithItsOwnImageStatus) {
  auto driver = std::make_shared<FakeDriver>(std::vector<DeviceProps>{rtx2080ti(), rtx3090()});
  auto opened = open_backend(driver, parse_build_archs("75", ""), {});
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  ASSERT_EQ(opened->devices.size(), 2u);
  const Device& turing = *opened->devices[0];
  const Device& ampere = *opened->devices[1];
  EXPECT_EQ(turing.id(), "cuda:0");
  EXPECT_EQ(ampere.id(), "cuda:1");
  EXPECT_EQ(turing.caps().extra.at("kernel_image"), "exact cubin sm_75");
  EXPECT_EQ(ampere.caps().extra.at("kernel_image").rfind("none: no kernel image for sm_86", 0), 0u)
      << ampere.caps().extra.at("kernel_image");
  EXPECT_EQ(turing.caps().extra.at("cublas"), driver->blas);
  EXPECT_EQ(turing.caps().gemm_library, driver->blas);
  EXPECT_TRUE(turing.caps().gemm_library_loaded);
  ASSERT_EQ(opened->notes.size(), 1u);
  EXPECT_NE(opened->notes[0].find("cuda:1 (NVIDIA GeForce RTX 3090, sm_86)"), std::string::npos)
      << opened->notes[0];

  auto op = make_op(
      OpKind::matmul, {},
      {TensorDesc::contiguous(DType::f16, {16, 32}), TensorDesc::contiguous(DType::f16, {32, 8})});
  ASSERT_TRUE(op.ok());
  EXPECT_TRUE(turing.supports(*op, Precision::f16).ok());
  Result<KernelChoice> no = ampere.supports(*op, Precision::f16);
  ASSERT_FALSE(no.ok());
  EXPECT_NE(no.status().message().find("cuda:1"), std::string::npos) << no.status().message();
  EXPECT_NE(no.status().message().find("sm_86"), std::string::npos) << no.status().message();
}

TEST(CudaOpen, ADeviceThatRunsJitCompiledPtxIsNamedInANote) {
  auto driver = std::make_shared<FakeDriver>(std::vector<DeviceProps>{rtx3090(), h100()});
  auto opened = open_backend(driver, parse_build_archs("75;80", "80"), {});
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  ASSERT_EQ(opened->devices.size(), 2u);
  EXPECT_EQ(opened->devices[0]->caps().extra.at("kernel_image"),
            "compatible cubin sm_80 runs on sm_86");
  EXPECT_EQ(opened->devices[1]->caps().extra.at("kernel_image").rfind("PTX compute_80", 0), 0u);
  // The sm_86 card runs a cubin: one note, the Hopper one's.
  ASSERT_EQ(opened->notes.size(), 1u);
  const std::string& n = opened->notes[0];
  EXPECT_EQ(n.rfind("cuda:1 (NVIDIA H100", 0), 0u) << n;
  EXPECT_NE(n.find("runs JIT-compiled PTX"), std::string::npos) << n;
  EXPECT_NE(n.find("rebuild with 90a in DUET_CUDA_ARCHS"), std::string::npos) << n;
  // It still runs everything.
  auto op = make_op(
      OpKind::matmul, {},
      {TensorDesc::contiguous(DType::f16, {16, 32}), TensorDesc::contiguous(DType::f16, {32, 8})});
  ASSERT_TRUE(op.ok());
  EXPECT_TRUE(opened->devices[1]->supports(*op, Precision::f16).ok());
}

TEST(CudaOpen, ADataCentreBlackwellJitsThePtxOfTheDefaultList) {
  // sm_100 has no cubin in the default list (75, 80, 90a, 120): sm_80's PTX runs on it, where
  // sm_120's would not.
  const BuildArchs def = parse_build_archs("75;80;90a;120", "80");
  EXPECT_EQ(check_image(def, 10, 0).match, ImageMatch::ptx_jit);
  EXPECT_EQ(check_image(def, 11, 0).match, ImageMatch::ptx_jit);
  EXPECT_EQ(check_image(parse_build_archs("75;80;90a;120", "120"), 10, 0).match, ImageMatch::none);
  EXPECT_EQ(check_image(def, 12, 1).match, ImageMatch::compatible_cubin);
  EXPECT_EQ(check_image(def, 9, 0).match, ImageMatch::exact_cubin);
}

TEST(CudaOpen, ADeviceWhosePropertiesFailIsSkippedWithANote) {
  auto driver = std::make_shared<FakeDriver>(std::vector<DeviceProps>{t4()});
  driver->driver_status.device_count = 2;  // the second ordinal does not answer
  auto opened = open_backend(driver, this_build(), {});
  ASSERT_TRUE(opened.ok());
  EXPECT_EQ(opened->devices.size(), 1u);
  ASSERT_EQ(opened->notes.size(), 1u);
  EXPECT_NE(opened->notes[0].find("cuda:1 skipped"), std::string::npos);
}

TEST(CudaOpen, OptionsSetStagingAndCacheLimit) {
  BackendOptions o;
  o.values["cuda.staging_mib"] = "16";
  o.values["cuda.staging_slots"] = "2";
  o.values["cuda.cache_limit_mib"] = "512";
  DeviceOptions d = DeviceOptions::from(o);
  EXPECT_EQ(d.staging_slot_bytes, 16ull << 20);
  EXPECT_EQ(d.staging_slots, 2);
  EXPECT_EQ(d.cache_limit, 512ull << 20);
  EXPECT_EQ(DeviceOptions::from({}).cache_limit, UINT64_MAX);
  EXPECT_TRUE(DeviceOptions::from({}).cublas);
}

TEST(CudaOpen, CublasCanBeSwitchedOff) {
  auto driver = std::make_shared<FakeDriver>(std::vector<DeviceProps>{a100()});
  DeviceOptions o;
  o.cublas = false;
  auto opened = open_backend(driver, this_build(), o);
  ASSERT_TRUE(opened.ok());
  const Device& d = *opened->devices[0];
  EXPECT_EQ(d.caps().extra.at("cublas"), "unavailable: disabled by cuda.cublas=off");
  EXPECT_FALSE(d.caps().gemm_library_loaded);
  auto op = make_op(
      OpKind::matmul, {},
      {TensorDesc::contiguous(DType::f16, {16, 32}), TensorDesc::contiguous(DType::f16, {32, 8})});
  for (const KernelChoice& c : d.choices(*op))
    if (c.tier == Tier::cublas) {
      EXPECT_FALSE(c.ok);
      EXPECT_NE(c.reason.find("disabled by cuda.cublas=off"), std::string::npos) << c.reason;
    }
}

}  // namespace
}  // namespace duet::cuda
