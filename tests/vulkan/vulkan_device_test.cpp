// The Vulkan device on whatever the machine has (lavapipe in CI): the device contract for every
// device, discovery and the no-loader path, capabilities, memory, batching and barriers,
// validation, the staging path, and launch shapes derived from small limits.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "device/contract.h"
#include "duet/backends.h"
#include "duet/engine.h"
#include "duet/graph.h"
#include "duet/half.h"
#include "vulkan_test_util.h"

namespace duet::vulkan::testing {
namespace {

// Every Vulkan device the machine has, under the device contract (tests/device/contract.h).
Result<std::vector<std::shared_ptr<Device>>> open_every_vulkan_device() {
  static TempDir cache;
  DUET_ASSIGN_OR_RETURN(BackendOpenResult r, open_vulkan({}, cache));
  std::vector<std::shared_ptr<Device>> d;
  for (auto& x : r.devices) d.push_back(std::move(x));
  return d;
}

using duet::testing::DeviceContract;
INSTANTIATE_TEST_SUITE_P(Vulkan, DeviceContract,
                         ::testing::Values(duet::testing::ContractTarget{"vulkan",
                                                                         open_every_vulkan_device}),
                         duet::testing::contract_name);

class VulkanDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = open_vulkan({}, cache_);
    if (!r.ok()) GTEST_SKIP() << "no Vulkan device: " << r.status().message();
    opened_ = std::move(*r);
  }
  Device& dev() { return *opened_.devices[0]; }
  TempDir cache_;
  BackendOpenResult opened_;
};

TEST(VulkanBackend, WithoutALoaderTheFactorySaysWhy) {
  BackendOptions o;
  o.values["vulkan.loader"] = "libvulkan-absent.so.1";
  auto r = factory().open(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::unsupported);
  EXPECT_NE(r.status().message().find("no Vulkan loader: cannot open libvulkan-absent.so.1"),
            std::string::npos)
      << r.status().message();
}

TEST(VulkanBackend, WithoutALoaderTheRegistryStillOpensTheCpu) {
  BackendOptions o;
  o.values["vulkan.loader"] = "libvulkan-absent.so.1";
  Registry reg = open_registry(o);
  EXPECT_NE(reg.find("cpu:0"), nullptr);
  EXPECT_EQ(reg.find("vulkan:0"), nullptr);
  bool reported = false;
  for (const BackendReport& b : reg.backends())
    if (b.backend == "vulkan") {
      EXPECT_FALSE(b.available);
      reported = b.reason.find("no Vulkan loader") != std::string::npos;
    }
  EXPECT_TRUE(reported);
}

TEST_F(VulkanDeviceTest, ReportsItsCapabilities) {
  const DeviceCaps& c = dev().caps();
  EXPECT_EQ(c.backend, BackendKind::vulkan);
  EXPECT_EQ(dev().id(), "vulkan:0");
  EXPECT_FALSE(c.name.empty());
  EXPECT_NE(c.vendor_id, 0u);
  EXPECT_FALSE(c.driver_name.empty());
  EXPECT_FALSE(c.api_version.empty());
  EXPECT_TRUE(c.uuid.has_value());
  EXPECT_GE(c.subgroup_size, 1);
  EXPECT_GT(c.shared_mem_per_block, 0u);
  EXPECT_GT(c.max_threads_per_block, 0u);
  EXPECT_GT(c.max_grid_dims[0], 0u);
  EXPECT_GT(c.max_buffer_range, 0u);
  EXPECT_GT(c.memory_bytes, 0u);
  for (const char* k : {"memory_heaps", "cooperative_matrix", "subgroup_size_range",
                        "shader_float16", "integer_dot_product", "pipeline_cache"})
    EXPECT_TRUE(c.extra.count(k)) << k;
  // Matrix units and tensor_cores agree.
  EXPECT_EQ(c.tensor_cores, !c.matrix_units.empty());
}

TEST_F(VulkanDeviceTest, RefusesAnAllocationPastTheDriverLimit) {
  const uint64_t limit =
      dev().caps().max_allocation ? dev().caps().max_allocation : dev().caps().memory_bytes;
  auto b = dev().allocate(limit + 1);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Code::out_of_memory);
  EXPECT_NE(b.status().message().find("vulkan:0"), std::string::npos);
}

TEST_F(VulkanDeviceTest, SmallBuffersShareMemoryBlocks) {
  std::vector<std::shared_ptr<Buffer>> bufs;
  for (int i = 0; i < 64; ++i) bufs.push_back(*dev().allocate(1000));
  EXPECT_EQ(vk(dev()).core().allocator->block_count(), 1u);
}

// Relu chain y_i = relu(y_{i-1}) (dependent) or relu of one input into separate outputs.
struct Chain {
  std::vector<std::shared_ptr<Buffer>> bufs;
  OpDesc op;
  KernelChoice k;
};

Chain make_chain(Device& d, int n) {
  Chain c;
  c.op = *make_op(OpKind::relu, {}, {dense(DType::f32, {256})});
  c.k = *d.supports(c.op, Precision::f32);
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) x[static_cast<size_t>(i)] = (i % 2 ? 1.0f : -1.0f) * (i + 1);
  for (int i = 0; i <= n; ++i) {
    c.bufs.push_back(*d.allocate(1024));
    EXPECT_TRUE(d.write(*c.bufs.back(), 0, x.data(), 1024).ok());
  }
  return c;
}

TEST_F(VulkanDeviceTest, BatchesDependentOpsIntoOneSubmissionWithABarrierBetweenEach) {
  Chain c = make_chain(dev(), 8);
  Recorder& rec = vk(dev()).recorder();
  ASSERT_TRUE(dev().synchronize().ok());
  const uint64_t s0 = rec.submissions, b0 = rec.barriers;
  for (int i = 0; i < 8; ++i) {
    TensorRef in{c.op.inputs[0], c.bufs[static_cast<size_t>(i)].get()};
    TensorRef out{c.op.output, c.bufs[static_cast<size_t>(i + 1)].get()};
    ASSERT_TRUE(dev().execute({c.op, c.k}, std::span(&in, 1), out).ok());
  }
  EXPECT_EQ(rec.submissions, s0) << "execute() must only record";
  ASSERT_TRUE(dev().synchronize().ok());
  EXPECT_EQ(rec.submissions, s0 + 1);
  EXPECT_EQ(rec.barriers, b0 + 7);
  std::vector<float> y(256);
  ASSERT_TRUE(dev().read(*c.bufs[8], 0, y.data(), 1024).ok());
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 2.0f);
}

// Kernel timing with device timestamps (vkCmdWriteTimestamp around each op): the batching and
// barriers of an untimed run, spans that run forward, batches submitted early when the query
// pool is full, an op cut by a submission continued in the next one, and a plain refusal where
// the queue family has no timestamps. The validation layer watches all of it.
TEST_F(VulkanDeviceTest, KernelTimingKeepsTheBatchingAndFollowsOpsAcrossSubmissions) {
  VulkanDevice& v = vk(dev());
  Recorder& rec = v.recorder();
  // 1030 dependent relus: the descriptor pool (1024 sets per batch) fills in the 1025th.
  constexpr int n = 1030;
  Chain c = make_chain(dev(), n);
  auto run = [&](int ops) {
    for (int i = 0; i < ops; ++i) {
      TensorRef in{c.op.inputs[0], c.bufs[static_cast<size_t>(i)].get()};
      TensorRef out{c.op.output, c.bufs[static_cast<size_t>(i + 1)].get()};
      ASSERT_TRUE(dev().execute({c.op, c.k}, std::span(&in, 1), out).ok());
    }
  };
  auto expect_forward = [](const std::vector<KernelSpan>& spans) {
    for (size_t i = 0; i < spans.size(); ++i) {
      ASSERT_LE(spans[i].start, spans[i].end) << i;
      ASSERT_GE(spans[i].seconds, 0.0) << i;
      ASSERT_LE(spans[i].seconds, spans[i].end - spans[i].start + 1e-9) << i;
      if (i) {
        ASSERT_LE(spans[i - 1].end, spans[i].start) << i;
      }
    }
  };
  ASSERT_TRUE(dev().synchronize().ok());
  uint64_t s0 = rec.submissions, b0 = rec.barriers;
  ASSERT_TRUE(dev().begin_kernel_timing().ok());
  run(8);
  EXPECT_EQ(rec.submissions, s0) << "timed ops are only recorded too";
  auto spans = dev().end_kernel_timing();
  ASSERT_TRUE(spans.ok()) << spans.status().message();
  EXPECT_EQ(rec.submissions, s0 + 1);
  EXPECT_EQ(rec.barriers, b0 + 7);
  ASSERT_EQ(spans->size(), 8u);
  expect_forward(*spans);

  // Room for 3 ops per batch, and a counter of 40 valid bits: 3 submissions.
  v.set_timing_queries(4);
  v.set_timestamp_bits(40);
  s0 = rec.submissions;
  ASSERT_TRUE(dev().begin_kernel_timing().ok());
  run(8);
  spans = dev().end_kernel_timing();
  ASSERT_TRUE(spans.ok()) << spans.status().message();
  EXPECT_EQ(rec.submissions, s0 + 3);
  ASSERT_EQ(spans->size(), 8u);
  expect_forward(*spans);
  v.set_timing_queries(4096);
  v.set_timestamp_bits(v.core().info.timestamp_bits);

  s0 = rec.submissions;
  ASSERT_TRUE(dev().begin_kernel_timing().ok());
  run(n);
  spans = dev().end_kernel_timing();
  ASSERT_TRUE(spans.ok()) << spans.status().message();
  EXPECT_EQ(rec.submissions, s0 + 2);
  ASSERT_EQ(spans->size(), static_cast<size_t>(n));
  expect_forward(*spans);
  std::vector<float> y(256);
  ASSERT_TRUE(dev().read(*c.bufs[n], 0, y.data(), 1024).ok());
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 2.0f);

  v.set_timestamp_bits(0);
  const Status refused = dev().begin_kernel_timing();
  v.set_timestamp_bits(v.core().info.timestamp_bits);
  EXPECT_EQ(refused.code(), Code::unsupported);
  EXPECT_NE(refused.message().find("vulkan:0"), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find("timestampValidBits 0"), std::string::npos) << refused.message();
  EXPECT_FALSE(dev().end_kernel_timing().ok());
}

// A profiled run through the engine: a plain run is one submission, even with an input uploaded
// after kernels were recorded; every kernel step timed on the device in that one submission, no
// more kernel time than the run's wall time, the plain run's outputs; and on a device without
// timestamps, an error that says so before anything runs.
TEST_F(VulkanDeviceTest, AProfiledRunTimesEveryKernelInThePlainRunsSubmission) {
  GraphBuilder b("profiled");
  ValueId x = b.input("x", DType::f32, {8, 64});
  ValueId w = b.input("w", DType::f32, {64, 64});
  ValueId bias = b.input("bias", DType::f32, {8, 64});  // uploaded after kernels were recorded
  ValueId h = b.silu(b.matmul(x, w, false, "xw"), "h");
  b.output(b.add(b.add(b.matmul(h, w, false, "hw"), x), bias, "y"));
  auto g = b.build();
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto e = Engine::create(std::move(*g), {&dev()});
  ASSERT_TRUE(e.ok()) << e.status().message();
  std::map<std::string, HostTensor> in;
  for (auto [name, rows] : {std::pair{"x", 8}, std::pair{"w", 64}, std::pair{"bias", 8}}) {
    HostTensor t = HostTensor::empty(DType::f32, std::vector<int64_t>{rows, 64});
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] = 0.125f * std::cos(0.37f * static_cast<float>(i) + 0.1f);
    in[name] = t;
  }
  Recorder& rec = vk(dev()).recorder();
  uint64_t s0 = rec.submissions;
  const uint64_t u0 = rec.updates;
  auto plain = (*e)->run(in);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  const uint64_t per_run = rec.submissions - s0;
  // An input uploaded after kernels were recorded (into memory they used) goes into the command
  // stream after them instead of waiting for them: one submission per run, the output's read.
  EXPECT_EQ(per_run, 1u);
  EXPECT_GE(rec.updates - u0, 1u);
  {  // y = silu(x w) w + x + bias, in double
    const float* X = in["x"].data<float>();
    const float* W = in["w"].data<float>();
    const float* B = in["bias"].data<float>();
    const float* Y = plain->at("y").data<float>();
    for (int r = 0; r < 8; ++r) {
      double hrow[64];
      for (int c = 0; c < 64; ++c) {
        double a = 0;
        for (int k = 0; k < 64; ++k) a += double(X[r * 64 + k]) * double(W[k * 64 + c]);
        hrow[c] = a / (1 + std::exp(-a));
      }
      for (int c = 0; c < 64; ++c) {
        double a = double(X[r * 64 + c]) + double(B[r * 64 + c]);
        for (int k = 0; k < 64; ++k) a += hrow[k] * double(W[k * 64 + c]);
        ASSERT_NEAR(Y[r * 64 + c], a, 1e-4) << r << "," << c;
      }
    }
  }
  s0 = rec.submissions;
  RunProfile p;
  auto profiled = (*e)->run_profiled(in, p);
  ASSERT_TRUE(profiled.ok()) << profiled.status().message();
  EXPECT_EQ(rec.submissions - s0, per_run);
  for (int64_t i = 0; i < 8 * 64; ++i)
    ASSERT_EQ(profiled->at("y").data<float>()[i], plain->at("y").data<float>()[i]) << i;
  std::vector<int> kernels;
  const Plan& plan = (*e)->plan();
  for (size_t i = 0; i < plan.steps.size(); ++i)
    if (!plan.steps[i].once && plan.steps[i].kind == StepKind::kernel)
      kernels.push_back(static_cast<int>(i));
  ASSERT_EQ(p.steps.size(), kernels.size());
  for (size_t i = 0; i < p.steps.size(); ++i) {
    EXPECT_EQ(p.steps[i].step, kernels[i]);
    EXPECT_GT(p.steps[i].device_seconds, 0.0) << plan.steps[size_t(kernels[i])].name;
    EXPECT_GT(p.steps[i].host_seconds, 0.0);
    if (i) {
      EXPECT_LE(p.steps[i - 1].end, p.steps[i].start);
    }
  }
  EXPECT_GT(p.wall_seconds, 0.0);
  // The device's clock and the host's may differ in rate by a little.
  EXPECT_LE(p.kernel_seconds(), p.wall_seconds * 1.01 + 1e-5);

  vk(dev()).set_timestamp_bits(0);
  RunProfile none;
  auto refused = (*e)->run_profiled(in, none);
  vk(dev()).set_timestamp_bits(vk(dev()).core().info.timestamp_bits);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::unsupported);
  EXPECT_NE(refused.status().message().find("timestampValidBits"), std::string::npos)
      << refused.status().message();
  EXPECT_TRUE(none.steps.empty());
  EXPECT_TRUE((*e)->run(in).ok());
}

TEST_F(VulkanDeviceTest, IndependentOpsNeedNoBarrier) {
  Chain c = make_chain(dev(), 8);
  Recorder& rec = vk(dev()).recorder();
  ASSERT_TRUE(dev().synchronize().ok());
  const uint64_t b0 = rec.barriers;
  for (int i = 1; i <= 8; ++i) {
    TensorRef in{c.op.inputs[0], c.bufs[0].get()};
    TensorRef out{c.op.output, c.bufs[static_cast<size_t>(i)].get()};
    ASSERT_TRUE(dev().execute({c.op, c.k}, std::span(&in, 1), out).ok());
  }
  ASSERT_TRUE(dev().synchronize().ok());
  EXPECT_EQ(rec.barriers, b0);
}

// Element-wise shaders are specialized with the tensors that are dense (their index needs no
// division); a broadcast or transposed operand keeps the general path, and both are correct.
TEST_F(VulkanDeviceTest, DenseTensorsAreSpecializedAndViewsKeepTheGeneralPath) {
  const TensorDesc transposed = *transpose(dense(DType::f32, {7, 5}), 0, 1);  // [5, 7] view
  struct Want {
    check::Case c;
    uint32_t mask;  // bit 0 output, 1 a, 2 b
  };
  for (const Want& w : {Want{make_case("dense/add", OpKind::add,
                                       {dense(DType::f32, {5, 7}), dense(DType::f32, {5, 7})}),
                             0b111u},
                        Want{make_case("dense/add.broadcast", OpKind::add,
                                       {dense(DType::f32, {5, 7}), dense(DType::f32, {1, 7})}),
                             0b011u},
                        Want{make_case("dense/add.transposed", OpKind::add,
                                       {transposed, dense(DType::f32, {5, 7})}),
                             0b101u}}) {
    check::Outcome o = run_on(dev(), w.c);
    EXPECT_TRUE(o.passed) << w.c.name << ": " << o.message;
    const Recorder& rec = vk(dev()).recorder();
    ASSERT_FALSE(rec.recent.empty());
    EXPECT_EQ(rec.recent.back().first, "eltwise_f32") << w.c.name;
    EXPECT_EQ(rec.last_dense, std::optional<uint32_t>(w.mask)) << w.c.name;
  }
}

// On a CPU device, dense element-wise and row ops whose tensors start on 16 bytes and hold whole
// texels run through texel views (eltwise_vec: one texel per invocation; softmax_vec, norm_vec:
// one row per invocation); the packing of 16-bit results is exact. A broadcast operand or a mask
// keeps the general kernel.
TEST_F(VulkanDeviceTest, DenseAlignedOpsTakeTheVectorKernelsOnACpuDevice) {
  if (dev().caps().type != DeviceType::cpu || vk(dev()).max_texels() == 0)
    GTEST_SKIP() << "the vector kernels are for CPU devices with texel buffers";
  OpAttrs gelu, scaled;
  gelu.gelu_approx = GeluApprox::tanh;
  scaled.scale = 0.7f;
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    struct Want {
      check::Case c;
      std::string shader;  // without the dtype
    };
    for (const Want& w : {
             Want{make_case("vec/mul", OpKind::mul, {dense(t, {6, 40}), dense(t, {6, 40})}),
                  "eltwise_vec_"},
             Want{make_case("vec/gelu", OpKind::gelu, {dense(t, {3, 64})}, gelu), "eltwise_vec_"},
             Want{make_case("vec/add.broadcast", OpKind::add, {dense(t, {6, 40}), dense(t, {40})}),
                  "eltwise_"},
             Want{make_case("vec/softmax", OpKind::softmax, {dense(t, {2, 5, 48})}, scaled),
                  "softmax_vec_"},
             Want{make_case("vec/softmax.mask", OpKind::softmax,
                            {dense(t, {5, 48}), dense(DType::f32, {5, 48})}),
                  "softmax_"},
             Want{make_case("vec/rmsnorm", OpKind::rmsnorm, {dense(t, {7, 64}), dense(t, {64})}),
                  "norm_vec_"},
             Want{make_case("vec/layernorm", OpKind::layernorm,
                            {dense(t, {7, 64}), dense(t, {64}), dense(t, {64})}),
                  "norm_vec_"},
         }) {
      check::Outcome o = run_on(dev(), w.c);
      EXPECT_TRUE(o.passed) << w.c.name << " " << dtype_name(t) << ": " << o.message;
      EXPECT_EQ(vk(dev()).recorder().recent.back().first, w.shader + std::string(dtype_name(t)))
          << w.c.name;
    }
  }
}

// Casts between the float types give the bits the core's conversions give (round to nearest
// even, subnormals, infinities; NaN stays NaN), over every 16-bit pattern and over f32 values
// that sit on, beside and between the 16-bit types' rounding boundaries: through the 8-wide
// texel kernel (dense, aligned) and through the general one (a view one element in).
TEST_F(VulkanDeviceTest, FloatCastsAreExactOverEvery16BitPattern) {
  constexpr int64_t n = 65536;
  const auto is_nan = [](DType t, uint32_t bits) {
    return t == DType::f32   ? std::isnan(bits_float(bits))
           : t == DType::f16 ? (bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0
                             : (bits & 0x7f80u) == 0x7f80u && (bits & 0x7fu) != 0;
  };
  const auto to_f32 = [](DType t, uint32_t bits) {
    return t == DType::f32   ? bits_float(bits)
           : t == DType::f16 ? f16_to_f32(static_cast<uint16_t>(bits))
                             : bf16_to_f32(static_cast<uint16_t>(bits));
  };
  const auto from_f32 = [](DType t, float f) -> uint32_t {
    return t == DType::f32 ? float_bits(f) : t == DType::f16 ? f32_to_f16(f) : f32_to_bf16(f);
  };
  for (DType s : {DType::f16, DType::bf16, DType::f32}) {
    // Source bits: every 16-bit pattern; for f32, patterns around the 16-bit rounding points.
    std::vector<uint32_t> src(n);
    uint32_t lcg = 12345;
    for (int64_t i = 0; i < n; ++i) {
      lcg = lcg * 1664525u + 1013904223u;
      const uint32_t h = static_cast<uint32_t>(i);
      src[static_cast<size_t>(i)] =
          s != DType::f32 ? h
          : i % 4 == 0    ? float_bits(f16_to_f32(static_cast<uint16_t>(h))) + 0x1000u  // f16 tie
          : i % 4 == 1    ? (h << 16) | 0x8000u                                         // bf16 tie
          : i % 4 == 2    ? (h << 16) | (lcg >> 16)
                          : float_bits(f16_to_f32(static_cast<uint16_t>(h))) + (lcg >> 20) - 2048;
    }
    const uint64_t sb = static_cast<uint64_t>(dtype_size(s));
    std::vector<std::byte> raw(static_cast<size_t>(n * static_cast<int64_t>(sb)));
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(raw.data() + i * static_cast<int64_t>(sb), &src[static_cast<size_t>(i)], sb);
    auto in = dev().allocate(raw.size());
    ASSERT_TRUE(in.ok());
    ASSERT_TRUE(dev().write(**in, 0, raw.data(), raw.size()).ok());
    for (DType d : {DType::f32, DType::f16, DType::bf16}) {
      for (int64_t skip : {int64_t{0}, int64_t{1}}) {
        TensorDesc sd = dense(s, {n});
        sd.offset = skip;
        sd.shape[0] = n - skip;
        OpAttrs at;
        at.to = d;
        auto op = make_op(OpKind::cast, at, {sd});
        ASSERT_TRUE(op.ok()) << op.status().message();
        KernelChoice k;
        for (const KernelChoice& c : dev().choices(*op))
          if (c.ok && c.reads_as_given(*op)) k = c;
        ASSERT_TRUE(k.ok);
        const uint64_t db = static_cast<uint64_t>(dtype_size(d));
        auto out = dev().allocate(static_cast<uint64_t>(n) * db);
        ASSERT_TRUE(out.ok());
        TensorRef ir{sd, in->get()}, orf{op->output, out->get()};
        ASSERT_TRUE(dev().execute({*op, k}, std::span(&ir, 1), orf).ok());
        std::vector<std::byte> got(static_cast<size_t>((n - skip) * static_cast<int64_t>(db)));
        ASSERT_TRUE(dev().read(**out, 0, got.data(), got.size()).ok());
        const std::string shader = vk(dev()).recorder().recent.back().first;
        if (skip == 0 && dev().caps().type == DeviceType::cpu && vk(dev()).max_texels() > 0) {
          EXPECT_EQ(shader,
                    "convert_vec_" + std::string(dtype_name(s)) + "_" + std::string(dtype_name(d)));
        }
        int bad = 0;
        for (int64_t i = 0; i < n - skip && bad < 5; ++i) {
          const uint32_t x = src[static_cast<size_t>(i + skip)];
          uint32_t y = 0;
          std::memcpy(&y, got.data() + i * static_cast<int64_t>(db), db);
          const uint32_t want = s == d ? x : from_f32(d, to_f32(s, x));
          const bool ok = is_nan(s, x) ? is_nan(d, y) : y == want;
          if (!ok) {
            ++bad;
            ADD_FAILURE() << shader << ": " << dtype_name(s) << " 0x" << std::hex << x << " -> "
                          << dtype_name(d) << " gave 0x" << y << ", want 0x" << want << std::dec;
          }
        }
      }
    }
  }
}

TEST_F(VulkanDeviceTest, AValidationMessageFailsTheNextCall) {
  if (dev().caps().extra.at("validation") != "on")
    GTEST_SKIP() << "validation layer off (set DUET_VULKAN_VALIDATION=1)";
  // A dispatch larger than maxComputeWorkGroupCount is invalid usage the layer reports.
  Dispatch d;
  d.shader = "eltwise_f32";
  d.spec = {64, 8};
  auto buf = *dev().allocate(256);
  auto* b = static_cast<VkBuf*>(buf.get());
  d.bind[1] = {b->vk(), b->base(), 256, true};
  d.bind[2] = {b->vk(), b->base(), 256, false};
  d.groups = {dev().caps().max_grid_dims[0] + 1, 1, 1};
  // Its pipeline made first: a dispatch whose pipeline is still being made reaches the command
  // buffer (and the layer) at the submission, and its message fails the synchronize instead.
  ASSERT_TRUE(vk(dev()).pipelines().get(d.shader, d.spec).ok());
  ASSERT_TRUE(vk(dev()).recorder().record(d).ok());
  Chain c = make_chain(dev(), 1);
  TensorRef in{c.op.inputs[0], c.bufs[0].get()};
  Status s = dev().execute({c.op, c.k}, std::span(&in, 1), {c.op.output, c.bufs[1].get()});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("Vulkan validation"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("groupCountX"), std::string::npos) << s.message();
  (void)vk(dev()).recorder().flush();
  (void)vk(dev()).core().instance->take_messages();
}

TEST(VulkanStaging, DeviceLocalMemoryWithStagingCopiesGivesTheSameResults) {
  TempDir cache;
  BackendOptions o;
  o.values["vulkan.force_staging"] = "1";
  auto r = open_vulkan(o, cache);
  if (!r.ok()) GTEST_SKIP() << r.status().message();
  Device& d = *r->devices[0];
  EXPECT_EQ(d.caps().extra.at("memory_path"), "device-local memory with staging copies");
  for (const check::Case& c :
       {make_case("staging/matmul", OpKind::matmul,
                  {dense(DType::f32, {33, 70}), dense(DType::f32, {70, 19})}),
        make_case("staging/softmax", OpKind::softmax, {dense(DType::f16, {5, 129})})}) {
    check::Outcome o2 = run_on(d, c);
    EXPECT_TRUE(o2.passed) << c.name << ": " << o2.message;
  }
}

// Reads through a copy into host-cached memory (what a resizable-BAR GPU gets, whose mapped
// memory the host does not cache), forced on lavapipe: op results, a read of a few bytes at an
// odd offset, a read larger than the readback buffer, and a read of work still recorded.
TEST(VulkanCopiedReads, ReadsThroughAHostCachedCopyGiveTheSameBytes) {
  TempDir cache;
  BackendOptions o;
  o.values["vulkan.copied_reads"] = "1";
  auto r = open_vulkan(o, cache);
  if (!r.ok()) GTEST_SKIP() << r.status().message();
  Device& d = *r->devices[0];
  EXPECT_NE(d.caps().extra.at("memory_path").find("reads copied into host-cached memory"),
            std::string::npos)
      << d.caps().extra.at("memory_path");
  const uint64_t copies0 = vk(d).recorder().copies;
  for (const check::Case& c :
       {make_case("copied/matmul", OpKind::matmul,
                  {dense(DType::f32, {33, 70}), dense(DType::f32, {70, 19})}),
        make_case("copied/softmax", OpKind::softmax, {dense(DType::f16, {5, 129})})}) {
    check::Outcome o2 = run_on(d, c);
    EXPECT_TRUE(o2.passed) << c.name << ": " << o2.message;
  }
  EXPECT_GT(vk(d).recorder().copies, copies0);
  // 9 MiB: two pieces of the 8 MiB readback buffer; bytes 5..11 alone.
  const uint64_t n = 9ull << 20;
  std::vector<uint8_t> host(n), back(n, 0);
  for (uint64_t i = 0; i < n; ++i) host[i] = static_cast<uint8_t>(i * 2654435761u >> 24);
  auto buf = d.allocate(n);
  ASSERT_TRUE(buf.ok()) << buf.status().message();
  ASSERT_TRUE(d.write(**buf, 0, host.data(), n).ok());
  ASSERT_TRUE(d.read(**buf, 0, back.data(), n).ok());
  EXPECT_TRUE(back == host);
  uint8_t few[7] = {};
  ASSERT_TRUE(d.read(**buf, 5, few, sizeof few).ok());
  EXPECT_TRUE(std::equal(few, few + 7, host.begin() + 5));
}

// A recording is one command buffer: each replay one submission, whatever it holds, reading
// what its buffers hold then; an id out of range in a replay is named at the next synchronize,
// once, and a good replay after it is good.
TEST(VulkanRecordings, AReplayIsOneSubmissionAndReportsItsErrorsAtSynchronize) {
  TempDir cache;
  auto r = open_vulkan({}, cache);
  if (!r.ok()) GTEST_SKIP() << r.status().message();
  Device& d = *r->devices[0];
  const OpDesc op = *make_op(
      OpKind::embedding, {},
      {TensorDesc::contiguous(DType::f32, {4, 3}), TensorDesc::contiguous(DType::i32, {2})},
      {"table", "tokens"}, "embed");
  const KernelChoice k = *d.supports(op, Precision::f32);
  auto table = *d.allocate(48), ids = *d.allocate(8), y = *d.allocate(24);
  const std::vector<float> values = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  ASSERT_TRUE(d.write(*table, 0, values.data(), 48).ok());
  const TensorRef in[2] = {{op.inputs[0], table.get()}, {op.inputs[1], ids.get()}};
  const TensorRef out{op.output, y.get()};
  ASSERT_TRUE(d.begin_recording().ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(d.execute({op, k}, in, out).ok());
  auto id = d.end_recording();
  ASSERT_TRUE(id.ok()) << id.status().message();
  Recorder& rec = vk(d).recorder();
  const uint64_t submissions = rec.submissions, dispatches = rec.dispatches;
  for (int32_t first : {3, 1}) {
    const int32_t tokens[2] = {first, 0};
    ASSERT_TRUE(d.write(*ids, 0, tokens, sizeof tokens).ok());
    ASSERT_TRUE(d.replay(*id).ok());
    ASSERT_TRUE(d.synchronize().ok());
    std::vector<float> got(6, -1.0f);
    ASSERT_TRUE(d.read(*y, 0, got.data(), 24).ok());
    EXPECT_EQ(got[0], values[static_cast<size_t>(first) * 3]);
    EXPECT_EQ(got[3], 1.0f);
  }
  EXPECT_EQ(rec.submissions - submissions, 2u) << "one submission a replay";
  EXPECT_EQ(rec.dispatches, dispatches) << "replays record nothing";
  const int32_t bad[2] = {0, 9}, good[2] = {0, 0};
  ASSERT_TRUE(d.write(*ids, 0, bad, sizeof bad).ok());
  ASSERT_TRUE(d.replay(*id).ok());
  Status s = d.synchronize();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("embedding 'embed'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("id 9"), std::string::npos) << s.message();
  EXPECT_TRUE(d.synchronize().ok()) << "reported once";
  ASSERT_TRUE(d.write(*ids, 0, good, sizeof good).ok());
  ASSERT_TRUE(d.replay(*id).ok());
  EXPECT_TRUE(d.synchronize().ok());
  d.release_recording(*id);
  EXPECT_FALSE(d.replay(*id).ok());
  // Refused while timing kernels, with the reason.
  if (d.begin_kernel_timing().ok()) {
    Status t = d.begin_recording();
    EXPECT_EQ(t.code(), Code::unsupported);
    EXPECT_NE(t.message().find("kernel timing"), std::string::npos) << t.message();
    ASSERT_TRUE(d.end_kernel_timing().ok());
  }
}

// The executor records a run's kernels at the second plain run and replays them after: the same
// results as step by step.
TEST(VulkanRecordings, TheExecutorReplaysRecordedRunsWithTheSameResults) {
  TempDir cache;
  auto r = open_vulkan({}, cache);
  if (!r.ok()) GTEST_SKIP() << r.status().message();
  GraphBuilder b("recorded");
  ValueId x = b.input("x", DType::f32, {4, 33});
  ValueId y = b.input("y", DType::f32, {4, 33});
  b.output(b.relu(b.mul(b.add(x, y, "sum"), y, "prod"), "out"));
  Graph g = *b.build();
  auto e = Engine::create(g, {r->devices[0].get()}, Policy{});
  ASSERT_TRUE(e.ok()) << e.status().message();
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
  }
  EXPECT_EQ((*e)->recording_summary(), "vulkan:0: 3 of 3 kernels in 1 recording");
}

TEST(VulkanLimits, TinySharedMemoryGivesSmallerTilesAndCorrectResults) {
  TempDir cache;
  auto r = open_vulkan({}, cache);
  if (!r.ok()) GTEST_SKIP() << r.status().message();
  Device& d = *r->devices[0];
  DeviceCaps small = d.caps();
  small.shared_mem_per_block = 4096;
  small.max_threads_per_block = 64;
  vk(d).override_caps(small);
  OpAttrs causal;
  causal.causal = true;
  const check::Case cases[] = {
      make_case("tiny/matmul", OpKind::matmul,
                {dense(DType::f32, {67, 130}), dense(DType::f32, {130, 97})}),
      make_case("tiny/matmul.f16", OpKind::matmul,
                {dense(DType::f16, {2, 33, 17}), dense(DType::f16, {17, 45})}),
      make_case("tiny/attention.gqa.causal", OpKind::attention,
                {dense(DType::f32, {1, 4, 33, 64}), dense(DType::f32, {1, 2, 33, 64}),
                 dense(DType::f32, {1, 2, 33, 64})},
                causal),
      make_case("tiny/attention.hd128.decode", OpKind::attention,
                {dense(DType::f16, {1, 8, 1, 128}), dense(DType::f16, {1, 2, 300, 128}),
                 dense(DType::f16, {1, 2, 300, 128})},
                causal),
      make_case("tiny/softmax", OpKind::softmax, {dense(DType::f32, {3, 1000})}),
      make_case("tiny/layernorm", OpKind::layernorm, {dense(DType::f32, {3, 700})}),
  };
  // Every kernel tier the limits leave (on lavapipe: "subgroup" and the shared-memory ones).
  for (const check::Case& c : cases) {
    auto op = check::case_op(c);
    ASSERT_TRUE(op.ok()) << op.status().message();
    for (const KernelChoice& k : d.choices(*op)) {
      if (!k.ok || k.input_dtypes[0] != c.inputs[0].dtype) continue;
      check::Outcome o = run_with(d, c, k);
      EXPECT_TRUE(o.passed) << c.name << " (" << k.tier << "): " << o.message;
      EXPECT_LE(k.launch.shared_bytes, 4096u) << c.name << ": " << k.launch.str();
      EXPECT_LE(k.launch.block_threads, 64) << c.name;
    }
  }
  // The same matmul on the real limits takes a larger shared-memory tile.
  auto op = check::case_op(cases[0]);
  DeviceCaps real = vk(d).core().info.caps;
  auto tiled = [&](const DeviceCaps& caps) {
    for (const KernelChoice& k : rules().choices(caps, *op))
      if (k.tier == Tier::shared_memory && k.precision == Precision::f32) return k.launch;
    return LaunchConfig{};
  };
  EXPECT_GT(tiled(real).tile_m * tiled(real).tile_n, tiled(small).tile_m * tiled(small).tile_n);
}

TEST(VulkanRules, CooperativeMatrixIsRefusedWithAReason) {
  DeviceCaps c;
  c.backend = BackendKind::vulkan;
  c.shared_mem_per_block = 32768;
  c.max_threads_per_block = 1024;
  c.fp16_storage = c.bf16_storage = true;
  auto op =
      *make_op(OpKind::matmul, {}, {dense(DType::f16, {64, 64}), dense(DType::f16, {64, 64})});
  auto ch = rules().choices(c, op);
  ASSERT_EQ(ch[0].tier, Tier::coopmat);
  EXPECT_FALSE(ch[0].ok);
  EXPECT_NE(ch[0].reason.find("VK_KHR_cooperative_matrix"), std::string::npos);
  EXPECT_TRUE(ch[1].ok) << ch[1].reason;
  EXPECT_EQ(ch[1].tier, Tier::shared_memory);
  // A device with only NVIDIA's older extension is told which one the kernels use.
  c.matrix_units.push_back({std::string(kCoopMatNvApi), 16, 16, 16, DType::f16, DType::f32});
  ch = rules().choices(c, op);
  EXPECT_FALSE(ch[0].ok);
  EXPECT_NE(ch[0].reason.find("VK_NV_cooperative_matrix (16x16x16 f16+f32)"), std::string::npos)
      << ch[0].reason;
  EXPECT_NE(ch[0].reason.find("use VK_KHR_cooperative_matrix"), std::string::npos) << ch[0].reason;
}

TEST(VulkanRules, NoSixteenBitStorageRefusesHalfPrecisionWithAReason) {
  DeviceCaps c;
  c.backend = BackendKind::vulkan;
  c.shared_mem_per_block = 16384;
  c.max_threads_per_block = 256;
  auto op = *make_op(OpKind::softmax, {}, {dense(DType::f16, {4, 64})});
  for (const KernelChoice& k : rules().choices(c, op)) {
    if (k.precision == Precision::f32) {
      EXPECT_TRUE(k.ok);
    } else {
      EXPECT_FALSE(k.ok);
      EXPECT_NE(k.reason.find("storageBuffer16BitAccess"), std::string::npos);
    }
  }
}

TEST(VulkanRules, DecodeAttentionSplitsTheKeys) {
  DeviceCaps c;
  c.backend = BackendKind::vulkan;
  c.shared_mem_per_block = 32768;
  c.max_threads_per_block = 1024;
  c.subgroup_size = 32;
  auto op = *make_op(OpKind::attention, {},
                     {dense(DType::f32, {1, 64, 1, 64}), dense(DType::f32, {1, 8, 7680, 64}),
                      dense(DType::f32, {1, 8, 7680, 64})});
  KernelChoice k = rules().choices(c, op)[0];
  ASSERT_TRUE(k.ok) << k.reason;
  EXPECT_GT(k.launch.splits, 1) << k.launch.str();
  EXPECT_EQ(k.launch.variant_name(), "flash_splitk");
}

TEST(VulkanDevices, EveryVulkanDeviceRunsTheSameCase) {
  TempDir cache;
  auto r = open_vulkan({}, cache);
  if (!r.ok()) GTEST_SKIP() << r.status().message();
  for (size_t i = 0; i < r->devices.size(); ++i) {
    Device& d = *r->devices[i];
    EXPECT_EQ(d.id(), "vulkan:" + std::to_string(i));
    check::Outcome o =
        run_on(d, make_case("multi/matmul", OpKind::matmul,
                            {dense(DType::f32, {17, 33}), dense(DType::f32, {33, 9})}));
    EXPECT_TRUE(o.passed) << d.id() << ": " << o.message;
  }
  if (r->devices.size() < 2) GTEST_SKIP() << "only one Vulkan device on this machine";
}

}  // namespace
}  // namespace duet::vulkan::testing
