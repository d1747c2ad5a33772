// The CUDA device's host logic on a fake driver: the device contract, staged copies, tier
// plumbing, cuBLASLt execution, out of memory, lost devices.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "check/check.h"
#include "cpu/cpu_backend.h"
#include "device.h"
#include "device/contract.h"
#include "duet/engine.h"
#include "duet/graph.h"
#include "emulated.h"
#include "fake_driver.h"
#include "reference/reference.h"

namespace duet::cuda {
namespace {

using namespace duet::cuda::testing;

struct Rig {
  std::shared_ptr<FakeDriver> driver;
  std::unique_ptr<CudaDevice> device;
};

Rig rig(DeviceProps props = t4(), BuildArchs archs = parse_build_archs("75;80", "80"),
        DeviceOptions options = {}) {
  Rig r;
  r.driver = std::make_shared<FakeDriver>(std::vector<DeviceProps>{props});
  DeviceCaps caps = caps_from_props(props);
  caps.gemm_library = r.driver->blas;
  caps.gemm_library_loaded = true;
  r.device = make_device(r.driver, props, caps, archs, options);
  return r;
}

// The device contract (tests/device/contract.h) on the emulated CUDA devices (the fake driver,
// kernels run by the emulator): a Turing and an Ampere card, so that both kernel families answer.
Result<std::vector<std::shared_ptr<Device>>> open_fake_driver_device() {
  std::vector<std::shared_ptr<Device>> v;
  for (const char* card : {"t4", "a100"}) v.push_back(open_emulated(card));
  return v;
}

using duet::testing::DeviceContract;
INSTANTIATE_TEST_SUITE_P(CudaFakeDriver, DeviceContract,
                         ::testing::Values(duet::testing::ContractTarget{"cuda_fake_driver",
                                                                         open_fake_driver_device}),
                         duet::testing::contract_name);

std::vector<uint8_t> random_bytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

OpDesc add_op(DType t = DType::f32) {
  auto x = TensorDesc::contiguous(t, {4, 33});
  return *make_op(OpKind::add, {}, {x, x}, {"x", "y"}, "residual");
}

// A kernel variant of the test's own: the device hands it to the kernels as it is.
struct TestKernel {
  std::string name() const { return "test"; }
  bool operator==(const TestKernel&) const = default;
};

KernelChoice usable(Tier tier, const OpDesc& op) {
  KernelChoice c;
  c.tier = tier;
  c.ok = true;
  c.precision = precision_of(op.output.dtype);
  for (const auto& t : op.inputs) c.input_dtypes.push_back(t.dtype);
  c.output_dtype = op.output.dtype;
  c.launch.block_threads = 128;
  c.launch.tile_m = 64;
  c.launch.set_variant(TestKernel{});
  return c;
}

struct Args {
  std::vector<std::shared_ptr<Buffer>> buffers;
  std::vector<TensorRef> inputs;
  TensorRef output;
};

Args buffers_for(Device& d, const OpDesc& op) {
  Args a;
  for (const TensorDesc& t : op.inputs) {
    a.buffers.push_back(
        *d.allocate(static_cast<uint64_t>(dtype_bytes(t.dtype, t.storage_extent()))));
    a.inputs.push_back({t, a.buffers.back().get()});
  }
  a.buffers.push_back(*d.allocate(static_cast<uint64_t>(op.output.nbytes())));
  a.output = {op.output, a.buffers.back().get()};
  return a;
}

TEST(CudaDevice, WriteThenReadRoundTripsThroughTheStagingSlots) {
  DeviceOptions o;
  o.staging_slot_bytes = 64 * 1024;
  o.staging_slots = 3;
  Rig r = rig(t4(), parse_build_archs("75", ""), o);
  const size_t n = 1000 * 1000 + 17;
  auto buf = r.device->allocate(n + 4096);
  ASSERT_TRUE(buf.ok());
  const std::vector<uint8_t> data = random_bytes(n, 1);
  ASSERT_TRUE(r.device->write(**buf, 123, data.data(), n).ok());
  EXPECT_GT(r.driver->pending(), 0u) << "writes are queued, not waited for";
  std::vector<uint8_t> back(n);
  ASSERT_TRUE(r.device->read(**buf, 123, back.data(), n).ok());
  EXPECT_EQ(back, data);
  // Partial reads at odd offsets, after more writes queued behind them.
  const std::vector<uint8_t> more = random_bytes(200000, 2);
  ASSERT_TRUE(r.device->write(**buf, 5000, more.data(), more.size()).ok());
  std::vector<uint8_t> part(70001);
  ASSERT_TRUE(r.device->read(**buf, 5000 + 999, part.data(), part.size()).ok());
  EXPECT_EQ(0, std::memcmp(part.data(), more.data() + 999, part.size()));
  EXPECT_EQ(r.driver->pinned_allocs, 3);
}

// Kernel timing: a timing event after each op on the stream, nothing waited for until the
// session ends; the spans follow one another; a second session reuses the events.
TEST(CudaDevice, KernelTimingRecordsAnEventAfterEveryOpAndWaitsOnlyAtTheEnd) {
  Rig r = rig(a100());
  const OpDesc op = *make_op(
      OpKind::add, {},
      {TensorDesc::contiguous(DType::f32, {256}), TensorDesc::contiguous(DType::f32, {256})});
  const KernelChoice k = *r.device->supports(op, Precision::f32);
  Args a = buffers_for(*r.device, op);
  for (int session = 0; session < 2; ++session) {
    ASSERT_TRUE(r.device->begin_kernel_timing().ok());
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(r.device->execute({op, k}, a.inputs, a.output).ok());
    EXPECT_GT(r.driver->pending(), 0u) << "timed ops are queued, not waited for";
    auto spans = r.device->end_kernel_timing();
    ASSERT_TRUE(spans.ok()) << spans.status().message();
    EXPECT_EQ(r.driver->pending(), 0u);
    ASSERT_EQ(spans->size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_LE((*spans)[i].start, (*spans)[i].end);
      EXPECT_NEAR((*spans)[i].seconds, (*spans)[i].end - (*spans)[i].start, 1e-12);
      if (i) {
        EXPECT_EQ((*spans)[i - 1].end, (*spans)[i].start);
      }
    }
  }
  EXPECT_FALSE(r.device->end_kernel_timing().ok());
}

// Programmatic dependent launch: asked for (cuda.programmatic_launch, DUET_CUDA_PDL), the
// device's kernel launches carry it on sm_90+ only; off by default. The results are the same
// (the emulator runs one kernel at a time, and every kernel waits for its predecessor first).
TEST(CudaDevice, ProgrammaticLaunchIsAskedForOnHopperOnlyWhenTurnedOn) {
  const OpDesc op = *make_op(
      OpKind::add, {},
      {TensorDesc::contiguous(DType::f32, {300}), TensorDesc::contiguous(DType::f32, {300})});
  auto launched = [&](DeviceProps props, bool on) {
    DeviceOptions o;
    o.programmatic_launch = on;
    Rig r = rig(props, parse_build_archs("75;80", "80"), o);
    const KernelChoice k = *r.device->supports(op, Precision::f32);
    Args a = buffers_for(*r.device, op);
    std::mt19937 rng(on ? 4 : 5);
    std::uniform_real_distribution<float> u(0.05f, 1.0f);
    std::vector<float> x(300), y(300), out(300, -7.0f);
    for (size_t i = 0; i < 300; ++i) x[i] = u(rng), y[i] = -u(rng);
    EXPECT_TRUE(r.device->write(*a.buffers[0], 0, x.data(), 1200).ok());
    EXPECT_TRUE(r.device->write(*a.buffers[1], 0, y.data(), 1200).ok());
    EXPECT_TRUE(r.device->execute({op, k}, a.inputs, a.output).ok());
    EXPECT_TRUE(r.device->synchronize().ok());
    EXPECT_EQ(r.driver->launches.size(), 1u);
    EXPECT_TRUE(r.device->read(*a.buffers[2], 0, out.data(), 1200).ok());
    for (size_t i = 0; i < 300; ++i) EXPECT_EQ(out[i], x[i] + y[i]) << i;
    return !r.driver->launches.empty() && r.driver->launches[0].programmatic;
  };
  EXPECT_TRUE(launched(h100(), true));
  EXPECT_FALSE(launched(h100(), false)) << "off unless asked for";
  EXPECT_FALSE(launched(a100(), true)) << "sm_80 has no programmatic dependent launch";
  EXPECT_FALSE(DeviceOptions{}.programmatic_launch);
}

TEST(CudaDevice, CopiesStillWorkWhenPinnedMemoryIsRefused) {
  Rig r = rig();
  r.driver->pinned_works = false;
  auto buf = r.device->allocate(1 << 20);
  const std::vector<uint8_t> data = random_bytes(1 << 20, 3);
  ASSERT_TRUE(r.device->write(**buf, 0, data.data(), data.size()).ok());
  std::vector<uint8_t> back(data.size());
  ASSERT_TRUE(r.device->read(**buf, 0, back.data(), back.size()).ok());
  EXPECT_EQ(back, data);
}

// Buffers of two CUDA devices have one type: ownership is checked by device, not by type.
TEST(CudaDevice, ABufferOfAnotherCudaDeviceIsRefused) {
  Rig r = rig();
  Rig other = rig();
  auto foreign = *other.device->allocate(100);
  uint8_t bytes[16] = {};
  Status s = r.device->read(*foreign, 0, bytes, 10);
  EXPECT_EQ(s.code(), Code::invalid_argument);
  EXPECT_NE(s.message().find("a buffer of another device"), std::string::npos) << s.message();
}

TEST(CudaDevice, OutOfMemoryNamesTheSizeAndTheDevice) {
  Rig r = rig();
  r.driver->capacity = 64ull << 20;
  auto keep = r.device->allocate(40ull << 20);
  ASSERT_TRUE(keep.ok());
  auto b = r.device->allocate(30ull << 20);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Code::out_of_memory);
  const std::string& m = b.status().message();
  EXPECT_NE(m.find("cuda:0"), std::string::npos) << m;
  EXPECT_NE(m.find("30.0 MiB"), std::string::npos) << m;
  EXPECT_NE(m.find("free of 64.0 MiB"), std::string::npos) << m;
  EXPECT_TRUE(r.device->allocate(1 << 20).ok()) << "the device still works";
}

TEST(CudaDevice, BuffersReuseCachedBlocks) {
  Rig r = rig();
  for (int i = 0; i < 10; ++i) {
    auto b = r.device->allocate(3 << 20);
    ASSERT_TRUE(b.ok());
  }
  EXPECT_EQ(r.driver->device_allocs, 1);
  EXPECT_EQ(r.device->memory_stats().cache_hits, 9u);
  r.device->empty_cache();
  EXPECT_EQ(r.driver->device_frees, 1);
}

TEST(CudaDevice, ExecutePassesTheTierLaunchConfigAndArchitectureToTheKernel) {
  Rig r = rig(a100());
  r.driver->emulate_kernels = false;
  const OpDesc op = add_op();
  Args a = buffers_for(*r.device, op);
  for (Tier tier : {Tier::generic, Tier::tiled, Tier::flash}) {
    KernelChoice c = usable(tier, op);
    ASSERT_TRUE(r.device->execute({op, c}, a.inputs, a.output).ok());
    const FakeDriver::LaunchRecord& l = r.driver->launches.back();
    EXPECT_EQ(l.tier, tier);
    EXPECT_EQ(l.op, OpKind::add);
    EXPECT_EQ(l.config, c.launch);
    EXPECT_EQ(l.sm, 80);
    EXPECT_NE(l.stream, nullptr);
  }
  EXPECT_EQ(r.device->execute({op, usable(Tier::simd, op)}, a.inputs, a.output).code(),
            Code::invalid_argument);
  EXPECT_TRUE(r.device->synchronize().ok());
}

TEST(CudaDevice, DeviceWithoutKernelImageRefusesToExecute) {
  Rig r = rig(rtx3090(), parse_build_archs("75", ""));
  const OpDesc op = add_op();
  Args a = buffers_for(*r.device, op);
  Status s = r.device->execute({op, usable(Tier::generic, op)}, a.inputs, a.output);
  EXPECT_EQ(s.code(), Code::unsupported);
  EXPECT_NE(s.message().find("no kernel image for sm_86"), std::string::npos) << s.message();
  for (const KernelChoice& c : r.device->choices(op)) EXPECT_FALSE(c.ok) << c.tier;
}

TEST(CudaDevice, StickyErrorMarksTheDeviceLostAndLaterWorkFailsCleanly) {
  Rig r = rig();
  r.driver->emulate_kernels = false;
  const OpDesc op = add_op();
  Args a = buffers_for(*r.device, op);
  ASSERT_TRUE(r.device->execute({op, usable(Tier::generic, op)}, a.inputs, a.output).ok());
  r.driver->fail_next_sync = Status(
      Code::device_lost, "an illegal memory access was encountered (cudaErrorIllegalAddress)");
  Status s = r.device->synchronize();
  EXPECT_EQ(s.code(), Code::device_lost);
  EXPECT_NE(r.device->lost_reason().find("illegal memory access"), std::string::npos);

  uint8_t bytes[16] = {};
  for (Status later :
       {r.device->synchronize(), r.device->allocate(64).status(),
        r.device->write(*a.buffers[0], 0, bytes, 16), r.device->read(*a.buffers[0], 0, bytes, 16),
        r.device->execute({op, usable(Tier::generic, op)}, a.inputs, a.output)}) {
    EXPECT_EQ(later.code(), Code::device_lost) << later.message();
    EXPECT_NE(later.message().find("cuda:0"), std::string::npos) << later.message();
    EXPECT_NE(later.message().find("illegal memory access"), std::string::npos) << later.message();
  }
  a.buffers.clear();  // releasing buffers of a lost device is safe
}

TEST(CudaDevice, LaunchErrorsNameTheOpAndTierWithoutLosingTheDevice) {
  Rig r = rig();
  const OpDesc op = add_op();
  Args a = buffers_for(*r.device, op);
  r.driver->fail_next_launch =
      Status(Code::internal, "too many resources requested for launch (fake)");
  Status s = r.device->execute({op, usable(Tier::tiled, op)}, a.inputs, a.output);
  EXPECT_EQ(s.code(), Code::internal);
  EXPECT_NE(s.message().find("add 'residual'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("tiled kernel"), std::string::npos) << s.message();
  EXPECT_TRUE(r.device->lost_reason().empty());
  EXPECT_TRUE(r.device->allocate(64).ok());
}

TEST(CudaDevice, ALaunchThatLosesTheDeviceMarksItLost) {
  Rig r = rig();
  const OpDesc op = add_op();
  Args a = buffers_for(*r.device, op);
  r.driver->fail_next_launch = Status(Code::device_lost, "unspecified launch failure (fake)");
  EXPECT_EQ(r.device->execute({op, usable(Tier::generic, op)}, a.inputs, a.output).code(),
            Code::device_lost);
  EXPECT_EQ(r.device->synchronize().code(), Code::device_lost);
}

// The whole path (allocate, staged upload, execute, download) through the check runner, with
// the GEMM run by the fake exactly as cuBLASLt defines it.
TEST(CudaDevice, CublasMatmulPassesEveryPlannableCase) {
  Rig r = rig(a100());
  int ran = 0;
  for (const check::Case& c : check::cases(false)) {
    if (c.kind != OpKind::matmul) continue;
    auto op = check::case_op(c);
    ASSERT_TRUE(op.ok());
    for (const KernelChoice& k : r.device->choices(*op)) {
      if (k.tier != Tier::cublas || !k.ok) continue;
      std::vector<HostTensor> in = check::case_inputs(c);
      auto ref = reference::evaluate(*op, in);
      ASSERT_TRUE(ref.ok());
      check::Outcome o = check::run_case(*r.device, k, *op, in, *ref);
      if (o.skipped) continue;
      ++ran;
      EXPECT_TRUE(o.passed) << c.name << ": " << o.message;
    }
  }
  EXPECT_GT(ran, 0);
  ASSERT_FALSE(r.driver->gemm_workspaces.empty());
  EXPECT_EQ(r.driver->gemm_workspaces[0], 4ull << 20) << "cuBLASLt gets its workspace";
}

// A block-quantized weight through cuBLASLt: K in chunks, each dequantized into a tile of the
// workspace no larger than the bound (never the whole weight), the GEMMs accumulating in f32;
// f32, f16 and bf16 activations (copied to the GEMM's type where needed) against the reference.
TEST(CudaDevice, QuantizedMatmulThroughCublasDequantizesBoundedChunks) {
  DeviceOptions o;
  o.dequant_tile_bytes = 48 * 512 * 2;  // 48 weight rows x 512 of K in f16
  Rig r = rig(a100(), parse_build_archs("75;80", "80"), o);
  OpAttrs tb;
  tb.transpose_b = true;
  for (DType x : {DType::f16, DType::bf16, DType::f32}) {
    check::Case c;
    c.name = "dequant cublas " + std::string(dtype_name(x));
    c.kind = OpKind::matmul;
    c.attrs = tb;
    c.inputs = {TensorDesc::contiguous(x, {2, 3, 1536}),
                TensorDesc::contiguous(DType::q4_k, {48, 1536})};
    c.fills = {check::Fill::unit, check::Fill::blocks};
    auto op = check::case_op(c);
    ASSERT_TRUE(op.ok()) << op.status().message();
    KernelChoice k;
    for (const KernelChoice& e : r.device->choices(*op))
      if (e.tier == Tier::cublas) k = e;
    ASSERT_TRUE(k.ok) << k.reason;
    EXPECT_NE(k.reason.find("the weight stays q4_k"), std::string::npos) << k.reason;
    r.driver->gemms.clear();
    std::vector<HostTensor> in = check::case_inputs(c);
    auto ref = reference::evaluate(*op, in);
    ASSERT_TRUE(ref.ok());
    const check::Outcome out = check::run_case(*r.device, k, *op, in, *ref);
    ASSERT_FALSE(out.skipped) << out.message;
    EXPECT_TRUE(out.passed) << c.name << ": " << out.message;
    ASSERT_EQ(r.driver->gemms.size(), 3u) << c.name;
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(r.driver->gemms[i].k, 512) << c.name;
      EXPECT_EQ(r.driver->gemms[i].accumulate, i > 0) << c.name;
      EXPECT_EQ(r.driver->gemms[i].d_type, DType::f32) << c.name;
    }
  }
}

TEST(CudaDevice, WorkspaceOutOfMemoryNamesTheOpAndTensor) {
  Rig r = rig(a100());
  r.driver->capacity = 1ull << 20;  // less than cuBLASLt's 4 MiB workspace
  const OpDesc op = *make_op(
      OpKind::matmul, {},
      {TensorDesc::contiguous(DType::f16, {8, 16}), TensorDesc::contiguous(DType::f16, {16, 8})},
      {"x", "w"}, "proj");
  Args a = buffers_for(*r.device, op);
  KernelChoice c = r.device->choices(op)[1];  // cublas f16
  ASSERT_EQ(c.tier, Tier::cublas);
  ASSERT_TRUE(c.ok) << c.reason;
  Status s = r.device->execute({op, c}, a.inputs, a.output);
  EXPECT_EQ(s.code(), Code::out_of_memory);
  EXPECT_NE(s.message().find("matmul 'proj': tensor 'workspace' on cuda:0"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("4.0 MiB"), std::string::npos) << s.message();
}

// The integer tiers' plumbing (a workspace of quantized activations) on the conformance set's
// matmuls of two formats, run on the kernels' host emulator through this device. Every other
// tier of an A100 runs the whole conformance set through the same device code in
// duet_conformance_emulated_tests (emu-a100), and the integer kernels every format in the
// kernels' own emulated tests.
TEST(CudaDevice, EmulatedKernelsMatchTheReference) {
  Rig r = rig(a100());
  int ran = 0;
  for (const check::Case& c : check::cases(false)) {
    if (c.name.find("q4_0") == std::string::npos && c.name.find("q6_k") == std::string::npos)
      continue;
    auto op = check::case_op(c);
    ASSERT_TRUE(op.ok());
    for (const KernelChoice& k : r.device->choices(*op)) {
      if (!k.ok || (k.tier != Tier::int_dot && k.tier != Tier::int8_mma)) continue;
      std::vector<HostTensor> in = check::case_inputs(c);
      auto ref = reference::evaluate(*op, in);
      ASSERT_TRUE(ref.ok());
      check::Outcome o = check::run_case(*r.device, k, *op, in, *ref);
      if (o.skipped) continue;
      ++ran;
      EXPECT_TRUE(o.passed) << c.name << " " << k.tier << ": " << o.message;
    }
  }
  if (ran == 0) GTEST_SKIP() << "the kernels' selection offers no usable CUDA kernel yet";
}

// Ops that check run-time values (cache positions, lengths, ids) take their error words from one
// block per batch: no copy back per op (into pageable memory, which waits for the GPU), one at
// synchronize; the op with a bad value is named, and the next batch starts clean. Without pinned
// memory, each op's word is copied back as before.
TEST(CudaDevice, RunTimeValueChecksAreCopiedBackOncePerBatch) {
  for (bool pinned : {true, false}) {
    Rig r = rig(a100());
    r.driver->pinned_works = pinned;
    OpAttrs w;
    w.axis = 0;
    const TensorDesc cache = TensorDesc::contiguous(DType::f32, {8, 4});
    const TensorDesc row = TensorDesc::contiguous(DType::f32, {1, 4});
    const TensorDesc pos = TensorDesc::contiguous(DType::i32, {1});
    auto make = [&](const std::string& name) {
      return *make_op(OpKind::write_slice, w, {cache, row, pos}, {"cache", "row", "pos"}, name);
    };
    std::vector<OpDesc> ops;
    for (int i = 0; i < 5; ++i) ops.push_back(make("k_write." + std::to_string(i)));
    KernelChoice k;
    for (const KernelChoice& c : r.device->choices(ops[0]))
      if (c.ok && c.tier == Tier::generic) k = c;
    ASSERT_TRUE(k.ok);
    Args a = buffers_for(*r.device, ops[0]);
    auto bad = *r.device->allocate(4);
    for (int batch = 0; batch < 2; ++batch) {
      const int32_t good_pos = 3, bad_pos = 8;
      ASSERT_TRUE(r.device->write(*a.buffers[2], 0, &good_pos, 4).ok());
      ASSERT_TRUE(r.device->write(*bad, 0, &bad_pos, 4).ok());
      ASSERT_TRUE(r.device->synchronize().ok());
      const size_t copies = r.driver->copies_to_host;
      for (int i = 0; i < 5; ++i) {
        std::vector<TensorRef> in = a.inputs;
        if (batch == 0 && i == 2) in[2] = {pos, bad.get()};
        ASSERT_TRUE(r.device->execute({ops[static_cast<size_t>(i)], k}, in, a.output).ok());
      }
      EXPECT_EQ(r.driver->copies_to_host - copies, pinned ? 0u : 5u) << "before synchronize";
      const Status s = r.device->synchronize();
      EXPECT_EQ(r.driver->copies_to_host - copies, pinned ? 1u : 5u);
      if (batch == 0) {
        ASSERT_FALSE(s.ok()) << "pinned " << pinned;
        EXPECT_NE(s.message().find("k_write.2"), std::string::npos) << s.message();
        EXPECT_NE(s.message().find("offset 8"), std::string::npos) << s.message();
      } else {
        EXPECT_TRUE(s.ok()) << "pinned " << pinned << ": " << s.message();
      }
    }
  }
}

TEST(CudaDevice, BuffersMayOutliveTheirDevice) {
  Rig r = rig();
  auto b = *r.device->allocate(1 << 20);
  const std::vector<uint8_t> data = random_bytes(1 << 20, 9);
  ASSERT_TRUE(r.device->write(*b, 0, data.data(), data.size()).ok());
  r.device.reset();
  b.reset();
  EXPECT_EQ(r.driver->device_frees, r.driver->device_allocs);
}

// Recordings are CUDA graphs: a replay launches no kernel of its own (the graph does), reads the
// buffers as they are when it runs, and reports a data error of a recorded op at synchronize.
TEST(CudaDevice, ARecordingIsAGraphThatReplaysWithoutLaunchingAgain) {
  Rig r = rig(a100());
  const OpDesc op = *make_op(
      OpKind::embedding, {},
      {TensorDesc::contiguous(DType::f32, {4, 3}), TensorDesc::contiguous(DType::i32, {2})},
      {"table", "tokens"}, "embed");
  const KernelChoice k = *r.device->supports(op, Precision::f32);
  Args a = buffers_for(*r.device, op);
  const std::vector<float> table = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  ASSERT_TRUE(r.device->write(*a.inputs[0].buffer, 0, table.data(), 48).ok());
  const int32_t zeros[2] = {0, 0};
  ASSERT_TRUE(r.device->write(*a.inputs[1].buffer, 0, zeros, sizeof zeros).ok());
  // Once plainly first: the workspace the error bytes go through is allocated (a recording may
  // not allocate).
  ASSERT_TRUE(r.device->execute({op, k}, a.inputs, a.output).ok());
  ASSERT_TRUE(r.device->synchronize().ok());
  ASSERT_TRUE(r.device->begin_recording().ok());
  ASSERT_TRUE(r.device->execute({op, k}, a.inputs, a.output).ok());
  auto id = r.device->end_recording();
  ASSERT_TRUE(id.ok()) << id.status().message();
  const size_t launched = r.driver->launches.size();
  for (int32_t first : {3, 1}) {
    const int32_t ids[2] = {first, 0};
    ASSERT_TRUE(r.device->write(*a.inputs[1].buffer, 0, ids, sizeof ids).ok());
    ASSERT_TRUE(r.device->replay(*id).ok());
    ASSERT_TRUE(r.device->synchronize().ok());
    std::vector<float> y(6);
    ASSERT_TRUE(r.device->read(*a.output.buffer, 0, y.data(), 24).ok());
    EXPECT_EQ(y[0], table[static_cast<size_t>(first) * 3]);
    EXPECT_EQ(y[3], 1.0f);
  }
  EXPECT_EQ(r.driver->launches.size(), launched) << "replays launch the graph, not the kernels";
  EXPECT_EQ(r.driver->graphs_launched, 2);
  // An id out of range in a replay: the op, the tensor and the id, at synchronize, once.
  const int32_t bad[2] = {0, 9};
  ASSERT_TRUE(r.device->write(*a.inputs[1].buffer, 0, bad, sizeof bad).ok());
  ASSERT_TRUE(r.device->replay(*id).ok());
  Status s = r.device->synchronize();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("embedding 'embed'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("id 9"), std::string::npos) << s.message();
  EXPECT_TRUE(r.device->synchronize().ok());
  // The error word is reset inside the recording: a good replay after a bad one is good.
  ASSERT_TRUE(r.device->write(*a.inputs[1].buffer, 0, zeros, sizeof zeros).ok());
  ASSERT_TRUE(r.device->replay(*id).ok());
  EXPECT_TRUE(r.device->synchronize().ok());
  r.device->release_recording(*id);
  EXPECT_EQ(r.driver->graphs_alive, 0);
}

// A recording's ops that check run-time values write one block of error words, which each replay
// copies back in one copy at its end (not a reset and a copy per op: five of each a layer of a
// decode step) and presets again: the op with a bad value is named, and a good replay after it is
// good.
TEST(CudaDevice, ARecordingCopiesItsErrorWordsBackInOneCopy) {
  Rig r = rig(a100());
  OpAttrs w;
  w.axis = 0;
  const TensorDesc cache = TensorDesc::contiguous(DType::f32, {8, 4});
  const TensorDesc row = TensorDesc::contiguous(DType::f32, {1, 4});
  const TensorDesc pos = TensorDesc::contiguous(DType::i32, {1});
  std::vector<OpDesc> ops;
  for (int i = 0; i < 5; ++i)
    ops.push_back(*make_op(OpKind::write_slice, w, {cache, row, pos}, {"cache", "row", "pos"},
                           "k_write." + std::to_string(i)));
  KernelChoice k;
  for (const KernelChoice& c : r.device->choices(ops[0]))
    if (c.ok && c.tier == Tier::generic) k = c;
  ASSERT_TRUE(k.ok);
  Args a = buffers_for(*r.device, ops[0]);
  auto other = *r.device->allocate(4);
  const int32_t good = 3, bad = 8;
  ASSERT_TRUE(r.device->write(*a.buffers[2], 0, &good, 4).ok());
  ASSERT_TRUE(r.device->write(*other, 0, &good, 4).ok());
  ASSERT_TRUE(r.device->execute({ops[0], k}, a.inputs, a.output).ok());  // the workspace
  ASSERT_TRUE(r.device->synchronize().ok());
  const size_t copies = r.driver->copies_to_host;
  ASSERT_TRUE(r.device->begin_recording().ok());
  for (int i = 0; i < 5; ++i) {
    std::vector<TensorRef> in = a.inputs;
    if (i == 2) in[2] = {pos, other.get()};
    ASSERT_TRUE(r.device->execute({ops[static_cast<size_t>(i)], k}, in, a.output).ok());
  }
  auto id = r.device->end_recording();
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_EQ(r.driver->copies_to_host - copies, 1u) << "one copy back for the five ops";
  for (int32_t p : {bad, good}) {
    ASSERT_TRUE(r.device->write(*other, 0, &p, 4).ok());
    ASSERT_TRUE(r.device->replay(*id).ok());
    const Status s = r.device->synchronize();
    if (p == bad) {
      ASSERT_FALSE(s.ok());
      EXPECT_NE(s.message().find("k_write.2"), std::string::npos) << s.message();
      EXPECT_NE(s.message().find("offset 8"), std::string::npos) << s.message();
    } else {
      EXPECT_TRUE(s.ok()) << s.message();
    }
  }
  r.device->release_recording(*id);
  EXPECT_EQ(r.driver->graphs_alive, 0);
}

TEST(CudaDevice, RecordingIsRefusedWithTheReasonWhenItCannotBeMade) {
  {
    Rig r = rig(a100());
    r.driver->graphs_work = false;
    Status s = r.device->begin_recording();
    EXPECT_EQ(s.code(), Code::unsupported);
    EXPECT_NE(s.message().find("not supported"), std::string::npos) << s.message();
  }
  {
    DeviceOptions o;
    o.graphs = false;
    Rig r = rig(a100(), parse_build_archs("75;80", "80"), o);
    Status s = r.device->begin_recording();
    EXPECT_NE(s.message().find("DUET_CUDA_GRAPHS=0"), std::string::npos) << s.message();
  }
  {
    Rig r = rig(a100());
    ASSERT_TRUE(r.device->begin_kernel_timing().ok());
    Status s = r.device->begin_recording();
    EXPECT_NE(s.message().find("kernel timing is on"), std::string::npos) << s.message();
    ASSERT_TRUE(r.device->end_kernel_timing().ok());
  }
  {
    // A workspace that would have to grow while recording: the recording fails, nothing ran.
    Rig r = rig(a100());
    auto x = TensorDesc::contiguous(DType::f32, {64, 64});
    const OpDesc op = *make_op(OpKind::matmul, {}, {x, x}, {"a", "b"}, "proj");
    KernelChoice c = usable(Tier::cublas, op);
    Args a = buffers_for(*r.device, op);
    ASSERT_TRUE(r.device->begin_recording().ok());
    Status s = r.device->execute({op, c}, a.inputs, a.output);
    EXPECT_EQ(s.code(), Code::unsupported);
    EXPECT_NE(s.message().find("workspace would have to grow"), std::string::npos) << s.message();
    EXPECT_FALSE(r.device->end_recording().ok());
    EXPECT_EQ(r.driver->graphs_alive, 0);
    EXPECT_TRUE(r.device->execute({op, c}, a.inputs, a.output).ok()) << "and runs plainly after";
    EXPECT_TRUE(r.device->synchronize().ok());
  }
}

// The executor records each device's run of kernels at the second plain run and replays it from
// then on: the same results as step by step, no kernel launched again, and step by step again
// when the device cannot record or the run is timed.
TEST(CudaDevice, TheExecutorReplaysRecordedRunsWithTheSameResults) {
  GraphBuilder b("recorded");
  ValueId x = b.input("x", DType::f32, {4, 33});
  ValueId y = b.input("y", DType::f32, {4, 33});
  b.output(b.relu(b.mul(b.add(x, y, "sum"), y, "prod"), "out"));
  Graph g = *b.build();
  for (bool graphs : {true, false}) {
    SCOPED_TRACE(graphs ? "graphs" : "no graphs");
    Rig r = rig(a100());
    r.driver->graphs_work = graphs;
    auto e = Engine::create(g, {r.device.get()}, Policy{});
    ASSERT_TRUE(e.ok()) << e.status().message();
    size_t launched = 0;
    for (int run = 0; run < 4; ++run) {
      HostTensor xs = HostTensor::empty(DType::f32, std::vector<int64_t>{4, 33});
      HostTensor ys = HostTensor::empty(DType::f32, std::vector<int64_t>{4, 33});
      for (int i = 0; i < 132; ++i) {
        xs.data<float>()[i] = static_cast<float>(i % 7 - 3 + run);
        ys.data<float>()[i] = static_cast<float>(i % 5 - 2);
      }
      auto out = (*e)->run({{"x", xs}, {"y", ys}});
      ASSERT_TRUE(out.ok()) << out.status().message();
      for (int i = 0; i < 132; ++i) {
        const float want =
            std::max(0.0f, (xs.data<float>()[i] + ys.data<float>()[i]) * ys.data<float>()[i]);
        ASSERT_EQ(out->at("out").data<float>()[i], want) << "run " << run << ", " << i;
      }
      if (run == 2) launched = r.driver->launches.size();
    }
    if (graphs) {
      EXPECT_EQ(r.driver->launches.size(), launched) << "the fourth run launched kernels";
      EXPECT_EQ(r.driver->graphs_launched, 3);  // recorded at the second run, replayed after
      EXPECT_EQ((*e)->recording_summary(), "cuda:0: 3 of 3 kernels in 1 recording");
    } else {
      EXPECT_EQ(r.driver->launches.size(), launched + 3);
      EXPECT_EQ((*e)->recording_summary(), "");
    }
    // Timed runs go step by step.
    const size_t before = r.driver->launches.size();
    std::vector<StepTime> times;
    HostTensor zeros = HostTensor::empty(DType::f32, std::vector<int64_t>{4, 33});
    zeros.fill_bytes(0);
    ASSERT_TRUE((*e)->run_timed({{"x", zeros}, {"y", zeros}}, times).ok());
    EXPECT_EQ(r.driver->launches.size(), before + 3);
    e->reset();
    EXPECT_EQ(r.driver->graphs_alive, 0) << "the executor releases its recordings";
  }
}

}  // namespace
}  // namespace duet::cuda
