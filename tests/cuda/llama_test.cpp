// The Llama decoder on a CUDA device of the fake driver (kernels on the emulator): decode steps
// recorded as graphs and replayed, the position and cache length read from device memory at
// each replay, give the greedy tokens of the llama.cpp fixture's float64 reference.
#include <gtest/gtest.h>

#include <cstdio>

#include "cpu/cpu_backend.h"
#include "device.h"
#include "duet/gguf.h"
#include "duet/kernels/launch.h"
#include "duet/llama.h"
#include "duet/quantize.h"
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

// The fixture with its projections in q4_0 (and ffn_down, whose K of 48 is not whole blocks,
// in f32): a decode step's q, k and v and its gate and up run as grouped int_dot mat-vecs on the
// emulated card, the rmsnorms before them quantize their activations, k's rope writes the K and
// V cache rows, and greedy decoding gives the CPU's tokens, with those fusions and without.
// Kernels of one decode step (a replayed recording), fused and not, are printed.
TEST(CudaLlama, GroupedQuantizedMatvecsGiveTheCpusGreedyTokens) {
  auto f = read_gguf(std::string(DUET_LLAMA_DATA) + "/llamacpp_tiny.gguf");
  ASSERT_TRUE(f.ok()) << f.status().message();
  std::vector<std::pair<std::string, HostTensor>> tensors;
  for (const GgufTensorInfo& t : f->tensors) {
    HostTensor h = *f->tensor(t.name);
    if (h.desc().rank == 2 && h.desc().dim(-1) % 32 == 0 && t.name != "token_embd.weight")
      h = *quantize(h, DType::q4_0, t.name);
    tensors.emplace_back(t.name, std::move(h));
  }
  auto bytes = encode_gguf(f->metadata, tensors);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  auto driver = std::make_shared<FakeDriver>(std::vector<DeviceProps>{a100()});
  std::unique_ptr<CudaDevice> dev =
      make_device(driver, a100(), caps_from_props(a100()), parse_build_archs("75;80", "80"), {});
  DeviceOptions unfused;
  unfused.fuse_norm_quant = unfused.fuse_rope_write = false;
  auto plain_driver = std::make_shared<FakeDriver>(std::vector<DeviceProps>{a100()});
  std::unique_ptr<CudaDevice> plain = make_device(plain_driver, a100(), caps_from_props(a100()),
                                                  parse_build_archs("75;80", "80"), unfused);
  BackendOptions two;
  two.values["cpu.threads"] = "2";
  auto cpu = cpu::factory().open(two);
  ASSERT_TRUE(cpu.ok() && !cpu->devices.empty());
  const std::vector<int32_t> prompt = {1, 5, 9, 13};
  std::vector<int32_t> ids[3];
  uint64_t step_kernels[3] = {};
  Device* devices[3] = {cpu->devices[0].get(), dev.get(), plain.get()};
  for (int i = 0; i < 3; ++i) {
    llama::BuildOptions o;
    o.max_context = 16;
    auto m = llama::Model::open(*parse_gguf(*bytes), {devices[i]}, o, Policy{});
    ASSERT_TRUE(m.ok()) << m.status().message();
    auto got = (*m)->generate(prompt, 5);
    ASSERT_TRUE(got.ok()) << got.status().message();
    ids[i] = *got;
    const uint64_t before = kernels::emu::kernels_run();
    ASSERT_TRUE((*m)->forward(std::span<const int32_t>(&ids[i].back(), 1)).ok());
    step_kernels[i] = kernels::emu::kernels_run() - before;
  }
  EXPECT_EQ(ids[1], ids[0]);
  EXPECT_EQ(ids[2], ids[0]);
  std::printf("kernels a decode step (2 layers): %llu fused, %llu unfused\n",
              static_cast<unsigned long long>(step_kernels[1]),
              static_cast<unsigned long long>(step_kernels[2]));
  // A layer: two q8_act launches fewer (q/k/v, gate/up), and k's rope writes both caches (two
  // write_slice launches fewer). Three residual adds run in the norm after them (the last add's
  // norm feeds the output layer, which reads the f32 embedding table: no q8_act to save there,
  // so that norm and its add run alone).
  EXPECT_EQ(step_kernels[1] + 2 * 4 + 3, step_kernels[2]);
  EXPECT_GE(driver->fused_adds, 3);
  EXPECT_EQ(plain_driver->fused_adds, 0);
  EXPECT_GE(driver->fused_norms, 5);
  EXPECT_GE(driver->rope_writes.size(), 2u);
  EXPECT_EQ(plain_driver->fused_norms, 0);
  EXPECT_TRUE(plain_driver->rope_writes.empty());
  size_t grouped = 0;
  for (size_t n : driver->group_launches) grouped += n;
  // Two layers: q, k, v and gate, up in each decode step (the prefill of 4 rows too).
  EXPECT_GE(driver->group_launches.size(), 4u);
  EXPECT_GE(grouped, 10u);
}

}  // namespace
}  // namespace duet::cuda
