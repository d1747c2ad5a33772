// Capability records from the properties of real cards, without a GPU.
#include <gtest/gtest.h>

#include <algorithm>

#include "caps.h"
#include "fake_driver.h"
#include "rules.h"

namespace duet::cuda {
namespace {

using namespace duet::cuda::testing;

bool has_unit(const DeviceCaps& c, int m, int n, int k, DType a) {
  return std::any_of(c.matrix_units.begin(), c.matrix_units.end(), [&](const MatrixUnit& u) {
    return u.api == "mma.sync" && u.m == m && u.n == n && u.k == k && u.a == a;
  });
}

TEST(CudaCaps, A100HasBf16TensorCoresAndAsyncCopy) {
  DeviceCaps c = caps_from_props(a100());
  EXPECT_EQ(c.backend, BackendKind::cuda);
  EXPECT_EQ(c.arch, "sm_80");
  EXPECT_EQ(c.cc_major, 8);
  EXPECT_EQ(c.cc_minor, 0);
  EXPECT_TRUE(c.bf16_arith);
  EXPECT_TRUE(c.fp16_arith);
  EXPECT_TRUE(c.tensor_cores);
  EXPECT_TRUE(c.async_copy);
  EXPECT_TRUE(has_unit(c, 16, 8, 16, DType::bf16));
  EXPECT_TRUE(has_unit(c, 16, 8, 16, DType::f16));
  EXPECT_TRUE(has_unit(c, 16, 8, 8, DType::f16));
  EXPECT_EQ(c.compute_units, 108);
  EXPECT_EQ(c.shared_mem_per_block, 48u * 1024);
  EXPECT_EQ(c.shared_mem_per_block_optin, 163u * 1024);
  EXPECT_EQ(c.registers_per_block, 65536u);
  EXPECT_EQ(c.subgroup_size, 32);
  EXPECT_EQ(c.memory_bytes, 42505273344ull);
  EXPECT_EQ(c.type, DeviceType::discrete_gpu);
}

TEST(CudaCaps, TuringHasFp16TensorCoresButNoBf16) {
  for (const DeviceProps& p : {t4(), rtx2080ti()}) {
    DeviceCaps c = caps_from_props(p);
    EXPECT_EQ(c.arch, "sm_75") << p.name;
    EXPECT_TRUE(c.tensor_cores) << p.name;
    EXPECT_FALSE(c.bf16_arith) << p.name << ": .bf16 requires sm_80";
    EXPECT_FALSE(c.async_copy) << p.name << ": cp.async requires sm_80";
    EXPECT_TRUE(has_unit(c, 16, 8, 8, DType::f16)) << p.name;
    EXPECT_FALSE(has_unit(c, 16, 8, 16, DType::f16)) << p.name << ": m16n8k16 requires sm_80";
    EXPECT_FALSE(has_unit(c, 16, 8, 16, DType::bf16)) << p.name;
    EXPECT_EQ(c.peak_gflops_bf16, 0) << p.name;
    EXPECT_EQ(c.shared_mem_per_block_optin, 64u * 1024) << p.name;
  }
}

TEST(CudaCaps, VoltaHasOnlyTheFirstTensorCoreShapes) {
  DeviceCaps c = caps_from_props(v100());
  EXPECT_TRUE(c.tensor_cores);
  EXPECT_TRUE(has_unit(c, 8, 8, 4, DType::f16));
  EXPECT_FALSE(has_unit(c, 16, 8, 8, DType::f16)) << "m16n8k8 requires sm_75";
  EXPECT_FALSE(c.bf16_arith);
  EXPECT_EQ(c.shared_mem_per_block_optin, 96u * 1024);
}

TEST(CudaCaps, Gtx1660IsTuringWithoutTensorCores) {
  DeviceCaps c = caps_from_props(gtx1660());
  EXPECT_EQ(c.arch, "sm_75");
  EXPECT_FALSE(c.tensor_cores);
  EXPECT_TRUE(c.matrix_units.empty());
  EXPECT_TRUE(c.fp16_arith) << "TU116 has fp16 units, just no tensor cores";
  EXPECT_NE(c.extra.at("tensor_cores").find("TU116"), std::string::npos)
      << c.extra.at("tensor_cores");
}

TEST(CudaCaps, TuringPartsWithoutTensorCoresAreFoundByPciIdOrName) {
  DeviceProps mx = mx450();
  EXPECT_TRUE(turing_without_tensor_cores(mx)) << "TU117 by PCI id";
  mx.pci_device_id = 0;  // id unknown: the name decides
  EXPECT_TRUE(turing_without_tensor_cores(mx));

  DeviceProps gtx = gtx1660();
  gtx.pci_device_id = 0;
  gtx.name = "NVIDIA GeForce GTX 1650";
  EXPECT_TRUE(turing_without_tensor_cores(gtx)) << "every Turing GTX part";

  DeviceProps quadro = t4();
  quadro.pci_device_id = 0;
  quadro.name = "NVIDIA T400 4GB";
  EXPECT_TRUE(turing_without_tensor_cores(quadro));
  quadro.name = "Quadro T2000 with Max-Q Design";
  EXPECT_TRUE(turing_without_tensor_cores(quadro));

  EXPECT_FALSE(turing_without_tensor_cores(t4())) << "Tesla T4 is not a T400";
  DeviceProps no_id_t4 = t4();
  no_id_t4.pci_device_id = 0;
  EXPECT_FALSE(turing_without_tensor_cores(no_id_t4));
  EXPECT_FALSE(turing_without_tensor_cores(rtx2080ti()));
  DeviceProps rtx2060 = rtx2080ti();
  rtx2060.name = "NVIDIA GeForce RTX 2060";
  rtx2060.pci_device_id = 0x1f08;  // TU106
  EXPECT_FALSE(turing_without_tensor_cores(rtx2060));
  DeviceProps ampere_mx = a100();
  ampere_mx.name = "NVIDIA GeForce MX570";
  EXPECT_FALSE(turing_without_tensor_cores(ampere_mx)) << "only sm_75 parts are affected";
}

TEST(CudaCaps, NewerArchitecturesKeepEveryAmpereFeature) {
  for (const DeviceProps& p : {rtx3090(), rtx4090(), h100(), rtx5090()}) {
    DeviceCaps c = caps_from_props(p);
    EXPECT_TRUE(c.bf16_arith) << p.name;
    EXPECT_TRUE(c.tensor_cores) << p.name;
    EXPECT_TRUE(c.async_copy) << p.name;
    EXPECT_TRUE(has_unit(c, 16, 8, 16, DType::bf16)) << p.name;
  }
  EXPECT_EQ(caps_from_props(rtx5090()).arch, "sm_120");
  EXPECT_EQ(caps_from_props(h100()).shared_mem_per_block_optin, 227u * 1024);
  EXPECT_EQ(caps_from_props(rtx3090()).shared_mem_per_block_optin, 99u * 1024);
}

struct Spec {
  DeviceProps props;
  double f32_tflops, f16_tflops, bandwidth_gbps;
};

// Published dense peaks (f16 on tensor cores with f32 accumulation; GeForce parts run that at
// half the f16-accumulate rate) and memory bandwidths.
TEST(CudaCaps, PeakEstimatesMatchPublishedFiguresWithinTenPercent) {
  const Spec specs[] = {
      {v100(), 15.7, 125, 900},       {t4(), 8.1, 65, 320},      {rtx2080ti(), 13.4, 53.8, 616},
      {gtx1660(), 5.0, 10.1, 192},    {a100(), 19.5, 312, 1555}, {rtx3090(), 35.6, 71, 936},
      {rtx4090(), 82.6, 165.2, 1008}, {h100(), 67, 989, 3350},   {rtx5090(), 104.8, 209.5, 1792},
  };
  for (const Spec& s : specs) {
    DeviceCaps c = caps_from_props(s.props);
    EXPECT_NEAR(c.peak_gflops_f32 / 1000, s.f32_tflops, 0.1 * s.f32_tflops) << s.props.name;
    EXPECT_NEAR(c.peak_gflops_f16 / 1000, s.f16_tflops, 0.1 * s.f16_tflops) << s.props.name;
    EXPECT_NEAR(c.memory_gbps, s.bandwidth_gbps, 0.05 * s.bandwidth_gbps) << s.props.name;
    if (c.bf16_arith) {
      EXPECT_EQ(c.peak_gflops_bf16, c.peak_gflops_f16) << s.props.name;
    }
  }
}

TEST(CudaCaps, IdentityCarriesUuidPciBusIdAndVersions) {
  DeviceProps p = rtx3090();
  p.pci_domain = 0;
  p.pci_bus = 0x65;
  p.pci_device = 0;
  p.driver_version = 13010;
  DeviceCaps c = caps_from_props(p);
  EXPECT_EQ(c.pci_bus_id, "0000:65:00.0");
  ASSERT_TRUE(c.uuid.has_value());
  EXPECT_EQ(*c.uuid, *p.uuid);
  EXPECT_EQ(c.vendor, "nvidia");
  EXPECT_EQ(c.vendor_id, 0x10deu);
  EXPECT_EQ(c.device_id, 0x2204u);
  EXPECT_EQ(c.driver_version, "CUDA 13.1");
  EXPECT_EQ(c.extra.at("pci_device_id"), "0x2204");
}

TEST(CudaCaps, PciIdsDecodeFromEitherHalf) {
  uint16_t vendor = 0, device = 0;
  ASSERT_TRUE(decode_pci_ids(0x220410de, &vendor, &device));
  EXPECT_EQ(vendor, 0x10de);
  EXPECT_EQ(device, 0x2204);
  ASSERT_TRUE(decode_pci_ids(0x10de2184, &vendor, &device));
  EXPECT_EQ(device, 0x2184);
  EXPECT_FALSE(decode_pci_ids(0, &vendor, &device));
}

TEST(CudaCaps, VersionStrings) {
  EXPECT_EQ(cuda_version_string(13000), "13.0");
  EXPECT_EQ(cuda_version_string(12040), "12.4");
  EXPECT_EQ(cuda_version_string(12080), "12.8");
}

}  // namespace
}  // namespace duet::cuda
