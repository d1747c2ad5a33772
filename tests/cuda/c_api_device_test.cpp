// The C API's device memory (duet.h, "device memory") on an emulated T4: the caller's memory in,
// read in place; outputs left on the device, read through their pointer and put back in; each
// with no copy between host and device (the fake driver counts them); every error a status with a
// message. The C API's registry is opened with the emulated card (machine_opener) by the first
// test that needs it, and lives while a handle uses it.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "c_api_internal.h"
#include "duet/backends.h"
#include "duet/duet.h"
#include "emulated.h"
#include "fake_driver.h"
#include "support/small_graph.h"

// A namespace of its own: unity builds compile it with device_io_test.cpp, whose names it shares.
namespace duet::cuda::capi_device_test {
namespace {

using testing::FakeDriver;

constexpr int kRows = 2, kWidth = test_support::kSmallGraphWidth;

// The fake driver of the C API's emulated card, made when the registry opens it.
std::shared_ptr<FakeDriver>& driver() {
  static auto* d = new std::shared_ptr<FakeDriver>();
  return *d;
}

void open_emulated_machine() {
  capi::machine_opener() = [] {
    BackendFactory t4{"cuda-emulated", [](const BackendOptions& o) -> Result<BackendOpenResult> {
                        DUET_ASSIGN_OR_RETURN(DeviceProps props, testing::card("t4"));
                        auto d = std::make_shared<FakeDriver>(std::vector<DeviceProps>{props});
                        d->blas = "unavailable: an emulated device has no cuBLASLt";
                        driver() = d;
                        DeviceOptions options = DeviceOptions::from(o);
                        options.id_prefix = "emu-t4";
                        return open_backend(d, testing::emulated_build(), options);
                      }};
    std::vector<BackendFactory> factories{t4};
    for (BackendFactory& f : builtin_backends())
      if (f.name == "cpu") factories.push_back(std::move(f));
    return Registry::open(factories);
  };
}

struct CEngine {
  duet_engine* e = nullptr;
  ~CEngine() { duet_engine_destroy(e); }
};

// The small graph, planned onto `backend` alone.
void make_engine(CEngine& c, const char* backend) {
  open_emulated_machine();
  duet_graph* g = nullptr;
  ASSERT_EQ(duet_graph_parse(test_support::small_graph_json(kRows).c_str(), nullptr, &g), DUET_OK)
      << duet_last_error();
  const std::string policy = std::string("device=") + backend;
  const duet_status s = duet_engine_create(g, policy.c_str(), &c.e);
  duet_graph_destroy(g);
  ASSERT_EQ(s, DUET_OK) << duet_last_error();
}

TEST(CApiDeviceMemory, TheCallersMemoryIsReadInPlaceAndOutputsStayOnTheDevice) {
  CEngine c;
  make_engine(c, "cuda");
  ASSERT_TRUE(driver());
  FakeDriver& fake = *driver();
  // The caller's memory, from the (fake) driver, as cudaMalloc would give it.
  const std::vector<float> x = test_support::small_graph_input(kRows, 0.3f);
  ASSERT_TRUE(fake.use(0).ok());
  Result<void*> mem = fake.device_alloc(x.size() * sizeof(float));
  ASSERT_TRUE(mem.ok());
  std::memcpy(*mem, x.data(), x.size() * sizeof(float));  // the fake's device memory is the host's
  const int64_t shape[] = {kRows, kWidth};
  duet_device_tensor* in = nullptr;
  ASSERT_EQ(
      duet_device_tensor_adopt("emu-t4:0", *mem, x.size() * sizeof(float), DUET_F32, shape, 2, &in),
      DUET_OK)
      << duet_last_error();
  EXPECT_EQ(duet_device_tensor_data(in), *mem);
  EXPECT_STREQ(duet_device_tensor_device(in), "emu-t4:0");
  uint64_t stream = 0;
  ASSERT_EQ(duet_engine_device_stream(c.e, "emu-t4:0", &stream), DUET_OK) << duet_last_error();
  EXPECT_NE(stream, 0u);

  const char* names[] = {"x"};
  duet_tensor* host_out[1] = {nullptr};
  duet_device_tensor* dev_out[1] = {nullptr};
  const uint64_t up = fake.bytes_to_device, down = fake.bytes_to_host;
  ASSERT_EQ(
      duet_engine_run_device(c.e, nullptr, nullptr, 0, names, &in, 1, 1, host_out, dev_out, 1),
      DUET_OK)
      << duet_last_error();
  EXPECT_EQ(fake.bytes_to_device, up);  // x read where it is
  EXPECT_EQ(fake.bytes_to_host, down);  // y left on the device
  ASSERT_EQ(host_out[0], nullptr);
  ASSERT_NE(dev_out[0], nullptr);
  EXPECT_EQ(duet_device_tensor_dtype(dev_out[0]), DUET_F32);
  EXPECT_EQ(duet_device_tensor_dim(dev_out[0], 1), kWidth);
  EXPECT_EQ(duet_device_tensor_nbytes(dev_out[0]), x.size() * sizeof(float));
  // The run is over when it returns: the output is ready, read through its pointer.
  std::vector<float> y(x.size());
  std::memcpy(y.data(), duet_device_tensor_data(dev_out[0]), y.size() * sizeof(float));
  EXPECT_LT(test_support::small_graph_error(x, y.data(), kRows), 1e-5);

  // The output back in, its result on the host.
  const duet_device_tensor* again[] = {dev_out[0]};
  ASSERT_EQ(
      duet_engine_run_device(c.e, nullptr, nullptr, 0, names, again, 1, 0, host_out, dev_out, 1),
      DUET_OK)
      << duet_last_error();
  ASSERT_NE(host_out[0], nullptr);
  EXPECT_EQ(dev_out[0], nullptr);
  EXPECT_LT(test_support::small_graph_error(
                y, static_cast<const float*>(duet_tensor_data(host_out[0])), kRows),
            1e-5);
  EXPECT_EQ(duet_device_tensor_release_after(const_cast<duet_device_tensor*>(again[0]), 1), DUET_OK)
      << duet_last_error();
  duet_tensor_destroy(host_out[0]);
  duet_device_tensor_destroy(const_cast<duet_device_tensor*>(again[0]));
  duet_device_tensor_destroy(in);
  fake.device_free(*mem);
}

TEST(CApiDeviceMemory, EveryMistakeIsAStatusWithAMessage) {
  CEngine c;
  make_engine(c, "cpu");
  float mem[kRows * kWidth] = {};
  const int64_t shape[] = {kRows, kWidth};
  duet_device_tensor* t = nullptr;
  auto error_has = [](const std::string& what) {
    return std::string(duet_last_error()).find(what) != std::string::npos;
  };
  EXPECT_EQ(duet_device_tensor_adopt("cuda:7", mem, sizeof mem, DUET_F32, shape, 2, &t),
            DUET_ERROR_NOT_FOUND);
  EXPECT_TRUE(error_has("no device 'cuda:7'") && error_has("emu-t4:0")) << duet_last_error();
  EXPECT_EQ(duet_device_tensor_adopt("cpu:0", mem, sizeof mem, DUET_F32, shape, 2, &t),
            DUET_ERROR_UNSUPPORTED)
      << duet_last_error();
  EXPECT_EQ(duet_device_tensor_adopt("emu-t4:0", mem, sizeof mem - 4, DUET_F32, shape, 2, &t),
            DUET_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_has("takes " + std::to_string(sizeof mem))) << duet_last_error();
  EXPECT_EQ(duet_device_tensor_adopt("emu-t4:0", nullptr, sizeof mem, DUET_F32, shape, 2, &t),
            DUET_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(duet_device_tensor_adopt("emu-t4:0", mem, sizeof mem, DUET_Q4_0, shape, 2, &t),
            DUET_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(duet_device_tensor_adopt("emu-t4:0", mem, sizeof mem, DUET_F32, shape, 5, &t),
            DUET_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(t, nullptr);
  uint64_t stream = 7;
  EXPECT_EQ(duet_engine_device_stream(c.e, "cpu:0", &stream), DUET_ERROR_UNSUPPORTED);
  EXPECT_EQ(stream, 0u);

  // A tensor on the emulated card, for an engine planned on the CPU: refused, naming both.
  ASSERT_EQ(duet_device_tensor_adopt("emu-t4:0", mem, sizeof mem, DUET_F32, shape, 2, &t), DUET_OK)
      << duet_last_error();
  const char* names[] = {"x"};
  duet_tensor* host_out[1] = {nullptr};
  duet_device_tensor* dev_out[1] = {nullptr};
  EXPECT_EQ(duet_engine_run_device(c.e, nullptr, nullptr, 0, names, &t, 1, 1, host_out, dev_out, 1),
            DUET_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_has("'x'") && error_has("cpu:0") && error_has("emu-t4:0")) << duet_last_error();
  EXPECT_EQ(host_out[0], nullptr);
  EXPECT_EQ(duet_engine_run_device(c.e, nullptr, nullptr, 0, names, &t, 1, 1, host_out, nullptr, 1),
            DUET_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(duet_device_tensor_release_after(nullptr, 1), DUET_ERROR_INVALID_ARGUMENT);
  duet_device_tensor_destroy(t);
}

}  // namespace
}  // namespace duet::cuda::capi_device_test
