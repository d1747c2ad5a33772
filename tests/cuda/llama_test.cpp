// The Llama decoder on a CUDA device of the fake driver (kernels on the emulator): decode steps
// recorded as graphs and replayed, the position and cache length read from device memory at
// each replay, give the greedy tokens of the llama.cpp fixture's float64 reference.
#include <gtest/gtest.h>

#include "device.h"
#include "duet/llama.h"
#include "duet/safetensors.h"
#include "fake_driver.h"

namespace duet::cuda {
namespace {

using namespace duet::cuda::testing;

TEST(CudaLlama, RecordedDecodeStepsGiveTheReferencesTokens) {
  auto driver = std::make_shared<FakeDriver>(std::vector<DeviceProps>{a100()});
  DeviceCaps caps = caps_from_props(a100());
  caps.extra[std::string(kCublasKey)] = driver->blas;
  std::unique_ptr<CudaDevice> dev =
      make_device(driver, a100(), caps, parse_build_archs("75;80", "80"), {});
  const std::string dir = DUET_LLAMA_DATA;
  auto want = load_safetensors(dir + "/llamacpp_tiny.expected.safetensors");
  ASSERT_TRUE(want.ok());
  const HostTensor& prompt = want->at("prompt");
  const HostTensor& tokens = want->at("tokens");
  std::vector<int32_t> p(prompt.data<int32_t>(), prompt.data<int32_t>() + prompt.numel());
  auto m = llama::Model::open(dir + "/llamacpp_tiny.gguf", {dev.get()}, {}, Policy{});
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto ids = (*m)->generate(p, static_cast<int>(tokens.numel() - prompt.numel()));
  ASSERT_TRUE(ids.ok()) << ids.status().message();
  EXPECT_EQ(*ids, std::vector<int32_t>(tokens.data<int32_t>() + p.size(),
                                       tokens.data<int32_t>() + tokens.numel()));
  const std::string replayed = (*m)->engine().recording_summary();
  EXPECT_NE(replayed.find("cuda:0: "), std::string::npos) << replayed;
  EXPECT_GE(driver->graphs_launched, 3) << "the later decode steps replay";
}

}  // namespace
}  // namespace duet::cuda
