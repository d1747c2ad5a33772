// CUDA tests that need a GPU (label gpu). Where no CUDA device opens they skip with the reason.
// The conformance suite already runs every default case on every CUDA device and choice; these
// add big shapes, tier-against-tier agreement, memory behaviour and copies.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "check/check.h"
#include "device.h"
#include "duet/backends.h"
#include "duet/engine.h"
#include "reference/reference.h"

namespace duet::cuda {
namespace {

Registry& registry() {
  static Registry r = open_registry();
  return r;
}

std::string no_device_reason() {
  for (const BackendReport& b : registry().backends())
    if (b.backend == "cuda") return b.available ? "no usable CUDA device" : b.reason;
  return "the CUDA backend is not in this build";
}

std::vector<CudaDevice*> devices() {
  std::vector<CudaDevice*> v;
  for (Device* d : registry().devices())
    if (auto* c = dynamic_cast<CudaDevice*>(d)) v.push_back(c);
  return v;
}

// Devices that have a kernel image in this build (the others refuse everything, by design).
std::vector<CudaDevice*> runnable() {
  std::vector<CudaDevice*> v;
  for (CudaDevice* d : devices())
    if (d->caps().extra.at("kernel_image").rfind("none", 0) != 0) v.push_back(d);
  return v;
}

#define REQUIRE_CUDA_DEVICE() \
  if (runnable().empty()) GTEST_SKIP() << "no CUDA device: " << no_device_reason()

// Runs one choice and returns the output as doubles.
Result<std::vector<double>> run(Device& d, const KernelChoice& k, const OpDesc& op,
                                const std::vector<HostTensor>& inputs) {
  std::vector<std::shared_ptr<Buffer>> bufs;
  std::vector<TensorRef> refs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    DUET_ASSIGN_OR_RETURN(auto b, d.allocate(inputs[i].storage_bytes()));
    DUET_TRY(d.write(*b, 0, inputs[i].storage(), inputs[i].storage_bytes()));
    refs.push_back({op.inputs[i], b.get()});
    bufs.push_back(b);
  }
  DUET_ASSIGN_OR_RETURN(auto out, d.allocate(static_cast<uint64_t>(op.output.nbytes())));
  DUET_TRY(d.execute({op, k}, refs, {op.output, out.get()}));
  HostTensor host = HostTensor::empty(op.output);
  DUET_TRY(d.read(*out, 0, host.storage(), host.storage_bytes()));
  return host.to_doubles();
}

TEST(CudaGpu, EveryDeviceReportsItsCapabilitiesAndKernelImage) {
  if (devices().empty()) GTEST_SKIP() << "no CUDA device: " << no_device_reason();
  for (CudaDevice* d : devices()) {
    const DeviceCaps& c = d->caps();
    EXPECT_GT(c.compute_units, 0) << d->id();
    EXPECT_GT(c.memory_bytes, 0u) << d->id();
    EXPECT_GE(c.shared_mem_per_block_optin, c.shared_mem_per_block) << d->id();
    EXPECT_EQ(c.subgroup_size, 32) << d->id();
    EXPECT_GT(c.peak_gflops_f32, 0) << d->id();
    EXPECT_TRUE(c.uuid.has_value()) << d->id();
    EXPECT_FALSE(c.pci_bus_id.empty()) << d->id();
    EXPECT_NE(c.device_id, 0u) << d->id();
    EXPECT_TRUE(c.extra.count("kernel_image")) << d->id();
    EXPECT_TRUE(c.extra.count("cublas")) << d->id();
  }
}

TEST(CudaGpu, AllocatorReusesFreedBlocks) {
  REQUIRE_CUDA_DEVICE();
  CudaDevice* d = runnable()[0];
  d->empty_cache();
  const AllocatorStats before = d->memory_stats();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(d->allocate(48ull << 20).ok());
  const AllocatorStats after = d->memory_stats();
  EXPECT_LE(after.driver_allocs - before.driver_allocs, 1u) << after.str();
  EXPECT_GE(after.cache_hits - before.cache_hits, 19u) << after.str();
}

TEST(CudaGpu, OutOfMemoryIsAnErrorAndTheDeviceKeepsWorking) {
  REQUIRE_CUDA_DEVICE();
  CudaDevice* d = runnable()[0];
  auto b = d->allocate(d->caps().memory_bytes * 2);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Code::out_of_memory);
  EXPECT_NE(b.status().message().find(d->id()), std::string::npos) << b.status().message();
  auto small = d->allocate(1 << 20);
  EXPECT_TRUE(small.ok()) << small.status().message();
  EXPECT_TRUE(d->lost_reason().empty());
}

TEST(CudaGpu, LargeCopiesRoundTripAtOddOffsets) {
  REQUIRE_CUDA_DEVICE();
  CudaDevice* d = runnable()[0];
  const size_t n = (192u << 20) + 12345;
  std::vector<uint8_t> data(n);
  std::mt19937 rng(5);
  for (auto& x : data) x = static_cast<uint8_t>(rng());
  auto buf = d->allocate(n + 1000);
  ASSERT_TRUE(buf.ok());
  ASSERT_TRUE(d->write(**buf, 777, data.data(), n).ok());
  std::vector<uint8_t> back(n);
  ASSERT_TRUE(d->read(**buf, 777, back.data(), n).ok());
  EXPECT_TRUE(back == data);
}

// The full case set (large shapes, every head dim) on every usable choice of every device.
TEST(CudaGpu, FullCaseSetMatchesTheReference) {
  REQUIRE_CUDA_DEVICE();
  int ran = 0;
  for (CudaDevice* d : runnable())
    for (const check::Case& c : check::cases(true)) {
      if (!c.full_only) continue;
      auto op = check::case_op(c);
      ASSERT_TRUE(op.ok());
      std::vector<HostTensor> in = check::case_inputs(c);
      auto ref = reference::evaluate(*op, in);
      ASSERT_TRUE(ref.ok());
      for (const KernelChoice& k : d->choices(*op)) {
        if (!k.ok) continue;
        check::Outcome o = check::run_case(*d, k, *op, in, *ref);
        if (o.skipped) continue;
        ++ran;
        EXPECT_TRUE(o.passed) << d->id() << " " << k.tier << " " << c.name << ": " << o.message;
      }
    }
  if (ran == 0) GTEST_SKIP() << "no usable CUDA kernel choice for the full case set";
}

// Flash and tiled attention (and cuBLASLt matmul) against the generic kernel at the same
// precision: the fast tiers must agree with the simple one, not only with the reference.
TEST(CudaGpu, FastTiersAgreeWithTheGenericKernel) {
  REQUIRE_CUDA_DEVICE();
  int compared = 0;
  for (CudaDevice* d : runnable())
    for (const check::Case& c : check::cases(true)) {
      if (c.kind != OpKind::attention && c.kind != OpKind::matmul) continue;
      auto op = check::case_op(c);
      ASSERT_TRUE(op.ok());
      std::vector<KernelChoice> choices = d->choices(*op);
      std::vector<HostTensor> in = check::case_inputs(c);
      for (const KernelChoice& generic : choices) {
        if (generic.tier != Tier::generic || !generic.ok) continue;
        auto base = run(*d, generic, *op, in);
        ASSERT_TRUE(base.ok()) << base.status().message();
        for (const KernelChoice& fast : choices) {
          if (fast.tier == Tier::generic || !fast.ok || fast.precision != generic.precision ||
              fast.input_dtypes != generic.input_dtypes)
            continue;
          auto got = run(*d, fast, *op, in);
          ASSERT_TRUE(got.ok()) << got.status().message();
          check::Metrics m = check::compare(*got, *base, false);
          check::Tolerance tol = check::tolerance(*op, fast.precision);
          ++compared;
          EXPECT_TRUE(check::passes(m, tol))
              << d->id() << " " << fast.tier << " vs generic on " << c.name << ": nmse " << m.nmse
              << ", tolerance " << tol.str();
        }
      }
    }
  if (compared == 0) GTEST_SKIP() << "no device offers a fast tier next to the generic one";
}

// Kernel timing with CUDA events: a large matmul between two small ops takes most of the time,
// and the spans follow one another.
TEST(CudaGpu, KernelTimingGivesEachOpItsTimeOnTheDevice) {
  REQUIRE_CUDA_DEVICE();
  for (CudaDevice* d : runnable()) {
    SCOPED_TRACE(d->id());
    const OpDesc small = *make_op(OpKind::relu, {}, {TensorDesc::contiguous(DType::f32, {256})});
    const OpDesc big = *make_op(OpKind::matmul, {},
                                {TensorDesc::contiguous(DType::f32, {2048, 2048}),
                                 TensorDesc::contiguous(DType::f32, {2048, 2048})});
    auto ks = d->supports(small, Precision::f32), kb = d->supports(big, Precision::f32);
    if (!ks.ok() || !kb.ok()) continue;
    auto a = *d->allocate(2048 * 2048 * 4), b = *d->allocate(2048 * 2048 * 4),
         c = *d->allocate(2048 * 2048 * 4);
    const TensorRef s_in{small.inputs[0], a.get()}, s_out{small.output, c.get()};
    const TensorRef m_in[2] = {{big.inputs[0], a.get()}, {big.inputs[1], b.get()}};
    // Once untimed first: loading the kernels' modules is the host's, before the stream runs.
    ASSERT_TRUE(d->execute({small, *ks}, std::span(&s_in, 1), s_out).ok());
    ASSERT_TRUE(d->execute({big, *kb}, m_in, {big.output, c.get()}).ok());
    ASSERT_TRUE(d->synchronize().ok());
    ASSERT_TRUE(d->begin_kernel_timing().ok());
    ASSERT_TRUE(d->execute({small, *ks}, std::span(&s_in, 1), s_out).ok());
    ASSERT_TRUE(d->execute({big, *kb}, m_in, {big.output, c.get()}).ok());
    ASSERT_TRUE(d->execute({small, *ks}, std::span(&s_in, 1), s_out).ok());
    auto spans = d->end_kernel_timing();
    ASSERT_TRUE(spans.ok()) << spans.status().message();
    ASSERT_EQ(spans->size(), 3u);
    EXPECT_GT((*spans)[1].seconds, (*spans)[0].seconds);
    EXPECT_GT((*spans)[1].seconds, (*spans)[2].seconds);
    EXPECT_LE((*spans)[0].end, (*spans)[1].start);
    EXPECT_LE((*spans)[1].end, (*spans)[2].start);
  }
}

TEST(CudaGpu, WorkOnSeveralDevicesStaysOnEach) {
  REQUIRE_CUDA_DEVICE();
  std::vector<CudaDevice*> ds = runnable();
  if (ds.size() < 2) GTEST_SKIP() << "one CUDA device only";
  std::vector<uint8_t> pattern(1 << 20);
  std::vector<std::shared_ptr<Buffer>> bufs;
  for (size_t i = 0; i < ds.size(); ++i) {
    std::memset(pattern.data(), static_cast<int>(i + 1), pattern.size());
    bufs.push_back(*ds[i]->allocate(pattern.size()));
    ASSERT_TRUE(ds[i]->write(*bufs.back(), 0, pattern.data(), pattern.size()).ok());
  }
  for (size_t i = 0; i < ds.size(); ++i) {
    std::vector<uint8_t> back(pattern.size());
    ASSERT_TRUE(ds[i]->read(*bufs[i], 0, back.data(), back.size()).ok());
    EXPECT_EQ(back[12345], static_cast<uint8_t>(i + 1)) << ds[i]->id();
    EXPECT_EQ(ds[(i + 1) % ds.size()]->read(*bufs[i], 0, back.data(), 16).code(),
              Code::invalid_argument)
        << "a buffer is only valid on its own device";
  }
}

// Recordings are CUDA graphs on a GPU: an engine's plain runs replay them from the third run on,
// with the results of runs made step by step (DUET_CUDA_GRAPHS=0 in effect: timed runs), and a
// data error in a replayed run is reported.
TEST(CudaGpu, ReplayedGraphsGiveTheResultsOfStepByStepRuns) {
  REQUIRE_CUDA_DEVICE();
  GraphBuilder b("recorded");
  ValueId ids = b.input("ids", DType::i32, {8});
  ValueId table = b.input("table", DType::f32, {64, 256});
  ValueId w = b.input("w", DType::f32, {256, 256});
  ValueId h = b.matmul(b.embedding(table, ids, "embed"), w, false, "proj");
  b.output(b.softmax(b.silu(h, "act"), "out"));
  Graph g = *b.build();
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  HostTensor tab = HostTensor::empty(DType::f32, std::vector<int64_t>{64, 256});
  HostTensor wt = HostTensor::empty(DType::f32, std::vector<int64_t>{256, 256});
  for (int64_t i = 0; i < tab.numel(); ++i) tab.data<float>()[i] = u(rng);
  for (int64_t i = 0; i < wt.numel(); ++i) wt.data<float>()[i] = u(rng) * 0.1f;
  for (CudaDevice* d : runnable()) {
    SCOPED_TRACE(d->id());
    auto e = Engine::create(g, {d}, Policy{});
    ASSERT_TRUE(e.ok()) << e.status().message();
    for (int run = 0; run < 5; ++run) {
      HostTensor t = HostTensor::empty(DType::i32, std::vector<int64_t>{8});
      for (int i = 0; i < 8; ++i) t.data<int32_t>()[i] = (run * 7 + i * 5) % 64;
      const std::map<std::string, HostTensor> in = {{"ids", t}, {"table", tab}, {"w", wt}};
      auto plain = (*e)->run(in);
      std::vector<StepTime> times;
      auto stepwise = (*e)->run_timed(in, times);
      ASSERT_TRUE(plain.ok() && stepwise.ok())
          << (plain.ok() ? stepwise.status() : plain.status()).message();
      const HostTensor &x = plain->at("out"), &y = stepwise->at("out");
      ASSERT_EQ(0, std::memcmp(x.data<float>(), y.data<float>(), 8 * 256 * 4)) << "run " << run;
    }
    EXPECT_NE((*e)->recording_summary(), "") << "nothing was recorded";
    HostTensor bad = HostTensor::empty(DType::i32, std::vector<int64_t>{8});
    for (int i = 0; i < 8; ++i) bad.data<int32_t>()[i] = i == 5 ? 64 : i;
    auto r = (*e)->run({{"ids", bad}, {"table", tab}, {"w", wt}});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("id 64"), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace duet::cuda
