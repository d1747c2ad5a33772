// Inputs and outputs in device memory (DeviceIo) on an emulated CUDA device: an output stays in
// the buffer its kernel wrote, goes back in as the next run's input, and memory another library
// allocated is used in place, each with no copy between host and device (the fake driver counts
// the bytes copied); a tensor on another device is refused naming the input and both devices.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "device.h"
#include "duet/engine.h"
#include "duet/graph_file.h"
#include "fake_driver.h"
#include "support/small_graph.h"

namespace duet::cuda {
namespace {

using namespace duet::cuda::testing;

constexpr int kRows = 3, kWidth = test_support::kSmallGraphWidth;

struct Card {
  std::shared_ptr<FakeDriver> driver;
  std::unique_ptr<CudaDevice> device;
  std::unique_ptr<Engine> engine;  // the small graph on this card alone
};

Card card(int ordinal = 0) {
  Card c;
  DeviceProps props = t4();
  props.ordinal = ordinal;
  c.driver = std::make_shared<FakeDriver>(std::vector<DeviceProps>(ordinal + 1, props));
  DeviceCaps caps = caps_from_props(props);
  caps.gemm_library = c.driver->blas;
  caps.gemm_library_loaded = true;
  c.device = make_device(c.driver, props, caps, parse_build_archs("75;80", "80"), {});
  auto g = graph_from_json(test_support::small_graph_json(kRows));
  EXPECT_TRUE(g.ok()) << g.status().message();
  auto e = Engine::create(std::move(*g), {c.device.get()});
  EXPECT_TRUE(e.ok()) << e.status().message();
  if (e.ok()) c.engine = std::move(*e);
  return c;
}

std::vector<float> read_back(Device& d, const DeviceTensor& t) {
  std::vector<float> v(static_cast<size_t>(t.desc.numel()));
  EXPECT_TRUE(d.read(*t.buffer, 0, v.data(), v.size() * sizeof(float)).ok());
  return v;
}

HostTensor host_input(const std::vector<float>& x) {
  HostTensor t = HostTensor::empty(DType::f32, std::vector<int64_t>{kRows, kWidth});
  std::copy(x.begin(), x.end(), t.data<float>());
  return t;
}

// A run whose output stays on the card (device_outputs=True in Python), from the small graph's
// input of `seed`.
DeviceTensor run_kept(Card& c, float seed) {
  DeviceIo io;
  io.keep_outputs_on = {c.device.get()};
  auto out = c.engine->run({{"x", host_input(test_support::small_graph_input(kRows, seed))}}, io);
  EXPECT_TRUE(out.ok()) << out.status().message();
  return io.outputs.count("y") ? io.outputs.at("y") : DeviceTensor{};
}

TEST(DeviceIo, AnOutputStaysOnTheDeviceAndGoesBackInWithNoCopy) {
  Card c = card();
  ASSERT_TRUE(c.engine);
  const std::vector<float> x = test_support::small_graph_input(kRows, 1.5f);
  DeviceIo io;
  io.keep_outputs_on = {c.device.get()};
  uint64_t down = c.driver->bytes_to_host;
  auto host = c.engine->run({{"x", host_input(x)}}, io);
  ASSERT_TRUE(host.ok()) << host.status().message();
  EXPECT_TRUE(host->empty());
  EXPECT_EQ(c.driver->bytes_to_host - down, 0u);  // y not downloaded
  ASSERT_EQ(io.outputs.count("y"), 1u);
  const DeviceTensor y = io.outputs.at("y");
  EXPECT_EQ(y.device, c.device.get());
  EXPECT_NE(y.buffer->device_address(), 0u);
  const std::vector<float> y1 = read_back(*c.device, y);
  EXPECT_LT(test_support::small_graph_error(x, y1.data(), kRows), 1e-5);

  // y in as x: no upload, no download, and a buffer of its own for the new output.
  DeviceIo again;
  again.inputs["x"] = y;
  again.keep_outputs_on = {c.device.get()};
  const uint64_t up = c.driver->bytes_to_device;
  down = c.driver->bytes_to_host;  // read_back copied y1
  auto none = c.engine->run({}, again);
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(c.driver->bytes_to_device - up, 0u);  // x not uploaded
  EXPECT_EQ(c.driver->bytes_to_host - down, 0u);
  const DeviceTensor y2 = again.outputs.at("y");
  EXPECT_NE(y2.buffer, y.buffer);
  EXPECT_LT(test_support::small_graph_error(y1, read_back(*c.device, y2).data(), kRows), 1e-5);
  EXPECT_EQ(read_back(*c.device, y), y1);  // the first output is left as it was

  // A plain run after them still answers from the engine's own buffers.
  auto plain = c.engine->run({{"x", host_input(x)}});
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_LT(test_support::small_graph_error(x, plain->at("y").data<float>(), kRows), 1e-5);
}

TEST(DeviceIo, AnotherLibrarysMemoryIsUsedInPlace) {
  Card c = card();
  ASSERT_TRUE(c.engine);
  const std::vector<float> x = test_support::small_graph_input(kRows, -0.5f);
  const uint64_t bytes = x.size() * sizeof(float);
  auto theirs = c.device->allocate(bytes);  // as PyTorch's allocator would have
  ASSERT_TRUE(theirs.ok());
  ASSERT_TRUE(c.device->write(**theirs, 0, x.data(), bytes).ok());
  ASSERT_TRUE(c.device->synchronize().ok());
  auto adopted = c.device->adopt((*theirs)->device_address(), bytes, *theirs);
  ASSERT_TRUE(adopted.ok()) << adopted.status().message();
  auto queue = c.device->native_queue();
  ASSERT_TRUE(queue.ok());
  EXPECT_NE(*queue, 0u);

  DeviceIo io;
  io.inputs["x"] = {c.device.get(), *adopted, TensorDesc::contiguous(DType::f32, {kRows, kWidth})};
  const uint64_t up = c.driver->bytes_to_device;
  auto out = c.engine->run({}, io);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(c.driver->bytes_to_device - up, 0u);
  EXPECT_LT(test_support::small_graph_error(x, out->at("y").data<float>(), kRows), 1e-5);
}

TEST(DeviceIo, AnOutputLentToAnotherStreamIsNotReusedUntilItsWorkIsDone) {
  Card c = card();
  ASSERT_TRUE(c.engine);
  DeviceTensor y = run_kept(c, 0.25f);
  ASSERT_TRUE(y.buffer);
  const std::vector<float> y1 = read_back(*c.device, y);
  const uint64_t address = y.buffer->device_address();

  // A consumer (PyTorch after __dlpack__(stream=theirs)) queues a read of y on its stream, then
  // frees y before that read has run: the fake driver runs a stream's work when it is synced.
  Result<Stream> theirs = c.driver->stream_create();
  ASSERT_TRUE(theirs.ok());
  ASSERT_TRUE(c.device->lend(*y.buffer, reinterpret_cast<uintptr_t>(*theirs)).ok());
  std::vector<float> seen(y1.size(), -1.0f);
  ASSERT_TRUE(c.driver
                  ->copy_to_host(seen.data(), reinterpret_cast<void*>(address),
                                 seen.size() * sizeof(float), *theirs)
                  .ok());
  c.device->empty_cache();             // no other cached block to hand out: y's would be the next
  ASSERT_TRUE(c.driver->use(3).ok());  // the releasing thread's current device (PyTorch's)
  y = {};
  EXPECT_EQ(c.device->held_back(), 1u);
  EXPECT_EQ(c.driver->current_device(), 3);  // put back after the event was recorded

  // The next run's output gets other memory, and the consumer's read sees y as it was.
  DeviceTensor y2 = run_kept(c, -1.0f);
  ASSERT_TRUE(y2.buffer);
  EXPECT_NE(y2.buffer->device_address(), address);
  ASSERT_TRUE(c.driver->stream_sync(*theirs).ok());
  EXPECT_EQ(seen, y1);

  // Once the consumer's work has run, the memory comes back to the allocator.
  DeviceTensor y3 = run_kept(c, 0.5f);
  EXPECT_EQ(c.device->held_back(), 0u);
  EXPECT_EQ(y3.buffer->device_address(), address);
  c.driver->stream_destroy(*theirs);

  // A stream 0, or a buffer of another device, is refused.
  EXPECT_EQ(c.device->lend(*y3.buffer, 0).code(), Code::invalid_argument);
  Card other = card();
  auto foreign = other.device->allocate(64);
  ASSERT_TRUE(foreign.ok());
  EXPECT_EQ(c.device->lend(**foreign, 1).code(), Code::invalid_argument);
}

TEST(DeviceIo, OutOfMemoryWaitsForTheStreamALentOutputWasFreedOnAndThenReusesIt) {
  Card c = card();
  ASSERT_TRUE(c.engine);
  DeviceTensor y = run_kept(c, 0.25f);
  ASSERT_TRUE(y.buffer);
  const std::vector<float> y1 = read_back(*c.device, y);
  const uint64_t address = y.buffer->device_address();

  // As above: a consumer's read of y is queued on its stream when y is freed.
  Result<Stream> theirs = c.driver->stream_create();
  ASSERT_TRUE(theirs.ok());
  ASSERT_TRUE(c.device->lend(*y.buffer, reinterpret_cast<uintptr_t>(*theirs)).ok());
  std::vector<float> seen(y1.size(), -1.0f);
  ASSERT_TRUE(c.driver
                  ->copy_to_host(seen.data(), reinterpret_cast<void*>(address),
                                 seen.size() * sizeof(float), *theirs)
                  .ok());
  c.device->empty_cache();
  // The card is full: what it holds now (y included) is all it has.
  Result<MemoryInfo> info = c.driver->memory_info();
  ASSERT_TRUE(info.ok());
  c.driver->capacity -= info->free;
  y = {};
  EXPECT_EQ(c.device->held_back(), 1u);
  EXPECT_GT(c.driver->pending(), 0u);  // the consumer's read has not run

  // The next output runs out of memory, waits for the consumer's stream, and then gets y's block:
  // the read ran first and saw y as it was.
  const int allocs = c.driver->device_allocs;
  const std::vector<float> x2 = test_support::small_graph_input(kRows, -1.0f);
  DeviceTensor y2 = run_kept(c, -1.0f);
  ASSERT_TRUE(y2.buffer);
  EXPECT_EQ(c.device->held_back(), 0u);
  EXPECT_EQ(c.driver->device_allocs, allocs);  // no new memory: there is none
  EXPECT_EQ(y2.buffer->device_address(), address);
  ASSERT_TRUE(c.driver->stream_sync(*theirs).ok());
  EXPECT_EQ(seen, y1);
  EXPECT_LT(test_support::small_graph_error(x2, read_back(*c.device, y2).data(), kRows), 1e-5);

  // Where waiting does not free enough, out of memory is the answer, naming the device; the
  // memory waited for is back in the allocator.
  ASSERT_TRUE(c.device->lend(*y2.buffer, reinterpret_cast<uintptr_t>(*theirs)).ok());
  ASSERT_TRUE(c.driver
                  ->copy_to_host(seen.data(), reinterpret_cast<void*>(address),
                                 seen.size() * sizeof(float), *theirs)
                  .ok());
  y2 = {};
  EXPECT_EQ(c.device->held_back(), 1u);
  auto big = c.device->allocate(c.driver->capacity);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), Code::out_of_memory);
  EXPECT_NE(big.status().message().find("cuda:0"), std::string::npos) << big.status().message();
  EXPECT_EQ(c.device->held_back(), 0u);
  c.driver->stream_destroy(*theirs);
}

TEST(DeviceIo, AFailedRunLeavesNoWorkQueuedOnTheCallersMemory) {
  Card c = card();
  ASSERT_TRUE(c.engine);
  const std::vector<float> x = test_support::small_graph_input(kRows, 0.75f);
  const uint64_t bytes = x.size() * sizeof(float);
  auto theirs = c.device->allocate(bytes);
  ASSERT_TRUE(theirs.ok());
  ASSERT_TRUE(c.device->write(**theirs, 0, x.data(), bytes).ok());
  ASSERT_TRUE(c.device->synchronize().ok());
  auto adopted = c.device->adopt((*theirs)->device_address(), bytes, *theirs);
  ASSERT_TRUE(adopted.ok());
  DeviceIo io;
  io.inputs["x"] = {c.device.get(), *adopted, TensorDesc::contiguous(DType::f32, {kRows, kWidth})};
  // The first kernel, reading x, is queued; the next one's launch fails.
  c.driver->fail_next_launch = Status(Code::internal, "injected launch failure");
  c.driver->launches_before_failure = 1;
  auto out = c.engine->run({}, io);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(c.driver->pending(), 0u);  // the caller may free x now
}

TEST(DeviceIo, ATensorOnAnotherDeviceIsRefusedNamingTheInputAndBothDevices) {
  Card a = card(0), b = card(1);
  ASSERT_TRUE(a.engine && b.engine);
  auto buf = b.device->allocate(kRows * kWidth * sizeof(float));
  ASSERT_TRUE(buf.ok());
  DeviceIo io;
  io.inputs["x"] = {b.device.get(), *buf, TensorDesc::contiguous(DType::f32, {kRows, kWidth})};
  auto out = a.engine->run({}, io);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), Code::invalid_argument);
  EXPECT_NE(out.status().message().find("'x'"), std::string::npos) << out.status().message();
  EXPECT_NE(out.status().message().find("cuda:0"), std::string::npos) << out.status().message();
  EXPECT_NE(out.status().message().find("cuda:1"), std::string::npos) << out.status().message();

  io.inputs["x"].device = a.device.get();  // claimed to be a's: a does not own the buffer
  out = a.engine->run({}, io);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("does not own"), std::string::npos)
      << out.status().message();

  io.inputs["x"].desc = TensorDesc::contiguous(DType::f16, {kRows, kWidth});
  out = a.engine->run({{"x", HostTensor()}}, io);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("given once"), std::string::npos) << out.status().message();
  EXPECT_TRUE(io.outputs.empty());
}

}  // namespace
}  // namespace duet::cuda
