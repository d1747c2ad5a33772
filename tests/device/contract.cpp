#include "device/contract.h"

#include <cstdint>
#include <cstring>
#include <limits>

#include "duet/host_tensor.h"

namespace duet::testing {

void DeviceContract::SetUp() {
  auto d = GetParam().open();
  if (!d.ok()) GTEST_SKIP() << GetParam().name << ": " << d.status().message();
  if (d->empty()) GTEST_SKIP() << GetParam().name << ": no device";
  devices_ = std::move(*d);
}

std::string contract_name(const ::testing::TestParamInfo<ContractTarget>& info) {
  return info.param.name;
}

namespace {

TensorDesc f32(std::initializer_list<int64_t> shape) {
  return TensorDesc::contiguous(DType::f32, shape);
}

// Memory no device owns: every device must refuse it.
class ForeignBuffer final : public Buffer {
 public:
  uint64_t size() const override { return sizeof bytes_; }
  void* host_ptr() override { return bytes_; }

 private:
  alignas(64) unsigned char bytes_[4096] = {};
};

constexpr float kPoison = -7777.0f;

// A planned op's buffers on `d`, inputs filled with `in`, the output poisoned.
struct Bound {
  std::vector<std::shared_ptr<Buffer>> buffers;
  std::vector<TensorRef> inputs;
  TensorRef output;

  std::vector<float> output_values(Device& d) const {
    std::vector<float> y(static_cast<size_t>(output.desc.numel()));
    EXPECT_TRUE(d.read(*output.buffer, 0, y.data(), y.size() * sizeof(float)).ok());
    return y;
  }
};

Bound bind(Device& d, const OpDesc& op, const std::vector<std::vector<float>>& in) {
  Bound b;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const TensorDesc& t = op.inputs[i];
    const uint64_t n = static_cast<uint64_t>(dtype_bytes(t.dtype, t.storage_extent()));
    b.buffers.push_back(*d.allocate(n));
    EXPECT_TRUE(d.write(*b.buffers.back(), 0, in[i].data(), n).ok());
    b.inputs.push_back({t, b.buffers.back().get()});
  }
  const std::vector<float> poison(static_cast<size_t>(op.output.numel()), kPoison);
  b.buffers.push_back(*d.allocate(static_cast<uint64_t>(op.output.nbytes())));
  EXPECT_TRUE(d.write(*b.buffers.back(), 0, poison.data(), poison.size() * sizeof(float)).ok());
  b.output = {op.output, b.buffers.back().get()};
  return b;
}

std::vector<float> ramp(size_t n, float from) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = from + static_cast<float>(i);
  return v;
}

#define EXPECT_HAS(status, text) \
  EXPECT_NE((status).message().find(text), std::string::npos) << (status).message()

TEST_P(DeviceContract, CopiesStayInsideTheirBuffer) {
  for (const auto& dev : devices_) {
    Device& d = *dev;
    SCOPED_TRACE(d.id());
    auto b = *d.allocate(64);
    const std::vector<float> x = ramp(4, 1.0f);
    ASSERT_TRUE(d.write(*b, 8, x.data(), 16).ok());
    std::vector<float> y(4);
    ASSERT_TRUE(d.read(*b, 8, y.data(), 16).ok());
    EXPECT_EQ(y, x);
    char scratch[16] = {};
    for (uint64_t offset : {uint64_t{56}, uint64_t{65}, std::numeric_limits<uint64_t>::max() - 4}) {
      Status w = d.write(*b, offset, scratch, 16);
      EXPECT_EQ(w.code(), Code::invalid_argument) << offset;
      EXPECT_HAS(w, d.id());
      EXPECT_HAS(w, "inside its buffer of 64 bytes");
      EXPECT_EQ(d.read(*b, offset, scratch, 16).code(), Code::invalid_argument) << offset;
    }
    ForeignBuffer foreign;
    Status s = d.write(foreign, 0, scratch, 16);
    EXPECT_EQ(s.code(), Code::invalid_argument);
    EXPECT_HAS(s, "a buffer of " + d.id());
    EXPECT_EQ(d.read(foreign, 0, scratch, 16).code(), Code::invalid_argument);
  }
}

TEST_P(DeviceContract, ExecuteChecksEveryArgumentBeforeAnyWork) {
  const OpDesc op = *make_op(OpKind::add, {}, {f32({4, 33}), f32({4, 33})}, {"x", "y"}, "residual");
  for (const auto& dev : devices_) {
    Device& d = *dev;
    SCOPED_TRACE(d.id());
    auto choice = d.supports(op, Precision::f32);
    ASSERT_TRUE(choice.ok()) << choice.status().message();
    const PlannedOp p{op, *choice};
    Bound a = bind(d, op, {ramp(132, 0.0f), ramp(132, 1.0f)});

    Status s = d.execute(p, std::span(a.inputs).first(1), a.output);
    EXPECT_EQ(s.code(), Code::invalid_argument);
    EXPECT_HAS(s, "add 'residual'");
    EXPECT_HAS(s, "expected 2 inputs");

    std::vector<TensorRef> wrong = a.inputs;
    wrong[1].desc = f32({33, 4});
    s = d.execute(p, wrong, a.output);
    EXPECT_EQ(s.code(), Code::invalid_argument);
    EXPECT_HAS(s, "tensor 'y' on " + d.id() + ": expected f32[4,33], got f32[33,4]");

    wrong = a.inputs;
    wrong[0].desc.offset = 10;  // reaches past its buffer
    s = d.execute(p, wrong, a.output);
    EXPECT_EQ(s.code(), Code::invalid_argument);
    EXPECT_HAS(s, "tensor 'x'");
    EXPECT_HAS(s, "inside its buffer of 528 bytes");

    wrong = a.inputs;
    wrong[0].buffer = nullptr;
    s = d.execute(p, wrong, a.output);
    EXPECT_EQ(s.code(), Code::invalid_argument);
    EXPECT_HAS(s, "tensor 'x'");

    ForeignBuffer foreign;
    s = d.execute(p, a.inputs, {op.output, &foreign});
    EXPECT_EQ(s.code(), Code::invalid_argument);
    EXPECT_HAS(s, "tensor 'output'");
    EXPECT_HAS(s, "a buffer of " + d.id());

    KernelChoice reads_f16 = *choice;
    reads_f16.input_dtypes = {DType::f16, DType::f16};
    s = d.execute({op, reads_f16}, a.inputs, a.output);
    EXPECT_EQ(s.code(), Code::invalid_argument);
    EXPECT_HAS(s, "tensor 'x'");
    EXPECT_HAS(s, "expected f16");

    KernelChoice writes_f16 = *choice;
    writes_f16.output_dtype = DType::f16;
    s = d.execute({op, writes_f16}, a.inputs, a.output);
    EXPECT_EQ(s.code(), Code::invalid_argument);
    EXPECT_HAS(s, "tensor 'output'");

    ASSERT_TRUE(d.synchronize().ok());
    for (float v : a.output_values(d)) ASSERT_EQ(v, kPoison) << "a refused op ran";
  }
}

// A device either borrows host memory (its kernels read it in place: the CPU) or says it cannot;
// a borrowed buffer is read by kernels and never written, by a copy or as an output.
TEST_P(DeviceContract, ABorrowedHostTensorIsReadInPlaceOrRefusedWithAReason) {
  const OpDesc op = *make_op(OpKind::add, {}, {f32({4, 33}), f32({4, 33})}, {"x", "y"}, "residual");
  HostTensor host = HostTensor::empty(f32({4, 33}));
  const std::vector<float> x = ramp(132, 0.5f);
  std::memcpy(host.data<float>(), x.data(), x.size() * sizeof(float));
  for (const auto& dev : devices_) {
    Device& d = *dev;
    SCOPED_TRACE(d.id());
    auto borrowed = d.borrow(host);
    if (!borrowed.ok()) {
      EXPECT_EQ(borrowed.status().code(), Code::unsupported);
      EXPECT_HAS(borrowed.status(), d.id());
      continue;
    }
    EXPECT_TRUE(d.caps().reads_host_memory);
    Buffer& b = **borrowed;
    EXPECT_TRUE(b.read_only());
    EXPECT_EQ(b.host_ptr(), host.storage()) << "borrowed, not copied";
    std::vector<float> y(132);
    ASSERT_TRUE(d.read(b, 0, y.data(), y.size() * sizeof(float)).ok());
    EXPECT_EQ(y, x);
    Status w = d.write(b, 0, y.data(), 16);
    EXPECT_EQ(w.code(), Code::invalid_argument);
    EXPECT_HAS(w, "read-only");

    auto choice = d.supports(op, Precision::f32);
    ASSERT_TRUE(choice.ok()) << choice.status().message();
    Bound a = bind(d, op, {ramp(132, 0.0f), ramp(132, 1.0f)});
    Status s = d.execute({op, *choice}, a.inputs, {op.output, &b});
    EXPECT_EQ(s.code(), Code::invalid_argument);
    EXPECT_HAS(s, "read-only");
    const std::vector<TensorRef> ins = {{op.inputs[0], &b}, a.inputs[1]};
    ASSERT_TRUE(d.execute({op, *choice}, ins, a.output).ok());
    ASSERT_TRUE(d.synchronize().ok());
    const std::vector<float> sum = a.output_values(d), one = ramp(132, 1.0f);
    for (size_t i = 0; i < sum.size(); ++i) ASSERT_EQ(sum[i], x[i] + one[i]) << i;
    ASSERT_TRUE(d.read(b, 0, y.data(), y.size() * sizeof(float)).ok());
    EXPECT_EQ(y, x) << "the host's memory is unchanged";
  }
}

TEST_P(DeviceContract, RefusedChoicesAndViewsNeverRun) {
  const OpDesc op = *make_op(OpKind::relu, {}, {f32({4, 33})}, {}, "act");
  const OpDesc view = *make_op(OpKind::transpose, {}, {f32({4, 33})});
  for (const auto& dev : devices_) {
    Device& d = *dev;
    SCOPED_TRACE(d.id());
    KernelChoice refused = *d.supports(op, Precision::f32);
    refused.ok = false;
    refused.reason = "this kernel needs a unicorn";
    Bound a = bind(d, op, {ramp(132, -60.0f)});
    Status s = d.execute({op, refused}, a.inputs, a.output);
    EXPECT_EQ(s.code(), Code::unsupported);
    EXPECT_HAS(s, "relu 'act'");
    EXPECT_HAS(s, "this kernel needs a unicorn");

    KernelChoice any = *d.supports(op, Precision::f32);
    Bound v = bind(d, view, {ramp(132, 0.0f)});
    s = d.execute({view, any}, v.inputs, v.output);
    EXPECT_EQ(s.code(), Code::unsupported);
    EXPECT_HAS(s, "views are resolved by the executor");

    ASSERT_TRUE(d.synchronize().ok());
    for (float y : a.output_values(d)) ASSERT_EQ(y, kPoison) << "a refused choice ran";
  }
}

// A bad id is data, known only when the kernel runs: the error comes from execute or from the
// synchronize after it, names the op, the tensor and the id, comes once, and leaves the device
// usable.
TEST_P(DeviceContract, AnEmbeddingIdOutOfRangeNamesTheOpTensorAndId) {
  const OpDesc op =
      *make_op(OpKind::embedding, {}, {f32({4, 3}), TensorDesc::contiguous(DType::i32, {2})},
               {"tok_emb", "tokens"}, "embed");
  for (const auto& dev : devices_) {
    Device& d = *dev;
    SCOPED_TRACE(d.id());
    auto choice = d.supports(op, Precision::f32);
    ASSERT_TRUE(choice.ok()) << choice.status().message();
    Bound a = bind(d, op, {ramp(12, 1.0f), {0.0f, 0.0f}});
    const int32_t ids[2] = {1, 4};
    ASSERT_TRUE(d.write(*a.inputs[1].buffer, 0, ids, sizeof ids).ok());
    Status s = d.execute({op, *choice}, a.inputs, a.output);
    if (s.ok()) s = d.synchronize();
    ASSERT_FALSE(s.ok());
    EXPECT_HAS(s, "embedding 'embed'");
    EXPECT_HAS(s, "tensor 'tokens'");
    EXPECT_HAS(s, "id 4");
    EXPECT_TRUE(d.synchronize().ok()) << "the error is reported once";

    const int32_t good[2] = {3, 0};
    ASSERT_TRUE(d.write(*a.inputs[1].buffer, 0, good, sizeof good).ok());
    ASSERT_TRUE(d.execute({op, *choice}, a.inputs, a.output).ok());
    ASSERT_TRUE(d.synchronize().ok());
    EXPECT_EQ(a.output_values(d), (std::vector<float>{10, 11, 12, 1, 2, 3}));
  }
}

TEST_P(DeviceContract, AReadWaitsForTheWorkRecordedBeforeIt) {
  const OpDesc op = *make_op(OpKind::add, {}, {f32({256}), f32({256})});
  for (const auto& dev : devices_) {
    Device& d = *dev;
    SCOPED_TRACE(d.id());
    Bound a = bind(d, op, {ramp(256, 0.0f), ramp(256, 1.0f)});
    ASSERT_TRUE(d.execute({op, *d.supports(op, Precision::f32)}, a.inputs, a.output).ok());
    std::vector<float> y(256);
    ASSERT_TRUE(d.read(*a.output.buffer, 0, y.data(), 1024).ok());  // no synchronize()
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], 2.0f * static_cast<float>(i) + 1.0f) << i;
  }
}

// Kernel timing (Device::begin_kernel_timing): a device either times every execute() of the
// session, in order, on a clock that runs forward, or says plainly that it cannot; either way the
// results are those of an untimed run.
TEST_P(DeviceContract, KernelTimingTimesEveryExecuteInOrderOrSaysItCannot) {
  const OpDesc op = *make_op(OpKind::add, {}, {f32({4096}), f32({4096})});
  for (const auto& dev : devices_) {
    Device& d = *dev;
    SCOPED_TRACE(d.id());
    const auto never = d.end_kernel_timing();  // no session begun
    ASSERT_FALSE(never.ok());
    EXPECT_HAS(never.status(), d.id());
    Bound a = bind(d, op, {ramp(4096, 0.0f), ramp(4096, 1.0f)});
    // The second op reads the first's output, the third writes over the second's input.
    const KernelChoice k = *d.supports(op, Precision::f32);
    const std::vector<TensorRef> in2 = {a.output, a.inputs[1]};
    const Status begun = d.begin_kernel_timing();
    if (!begun.ok()) {
      EXPECT_EQ(begun.code(), Code::unsupported) << begun.message();
      EXPECT_HAS(begun, d.id());
      EXPECT_HAS(begun, "not supported");
    }
    ASSERT_TRUE(d.execute({op, k}, a.inputs, a.output).ok());
    ASSERT_TRUE(d.execute({op, k}, in2, a.inputs[0]).ok());
    ASSERT_TRUE(d.execute({op, k}, a.inputs, a.output).ok());
    if (!begun.ok()) {
      EXPECT_FALSE(d.end_kernel_timing().ok());
      ASSERT_TRUE(d.synchronize().ok());
    } else {
      auto spans = d.end_kernel_timing();
      ASSERT_TRUE(spans.ok()) << spans.status().message();
      ASSERT_EQ(spans->size(), 3u);
      double sum = 0;
      for (size_t i = 0; i < spans->size(); ++i) {
        const KernelSpan& s = (*spans)[i];
        EXPECT_GE(s.start, 0.0) << i;
        EXPECT_LE(s.start, s.end) << i;
        EXPECT_GE(s.seconds, 0.0) << i;
        EXPECT_LE(s.seconds, s.end - s.start + 1e-9) << i;
        if (i > 0) {
          EXPECT_LE((*spans)[i - 1].end, s.start) << i;
        }
        sum += s.seconds;
      }
      EXPECT_GT(sum, 0.0);
      EXPECT_LT(sum, 60.0);
      EXPECT_FALSE(d.end_kernel_timing().ok()) << "the session has ended";
    }
    // x = 2i + 1, then x + (i + 1) = 3i + 2, then (3i + 2) + (i + 1) = 4i + 3.
    const std::vector<float> y = a.output_values(d);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], 4.0f * static_cast<float>(i) + 3.0f) << i;
  }
}

// Recordings (Device::begin_recording): a device either records the execute() calls, runs none
// of them until replayed, and replays them reading what their buffers hold at that time, as often
// as asked, or says plainly that it cannot record.
TEST_P(DeviceContract, RecordingsReplayWhatWasRecordedOrTheDeviceSaysItCannot) {
  const OpDesc op = *make_op(OpKind::add, {}, {f32({256}), f32({256})});
  for (const auto& dev : devices_) {
    Device& d = *dev;
    SCOPED_TRACE(d.id());
    EXPECT_FALSE(d.end_recording().ok()) << "nothing was begun";
    EXPECT_FALSE(d.replay(987654).ok());
    Bound a = bind(d, op, {ramp(256, 0.0f), ramp(256, 1.0f)});
    const KernelChoice k = *d.supports(op, Precision::f32);
    const Status begun = d.begin_recording();
    if (!begun.ok()) {
      EXPECT_EQ(begun.code(), Code::unsupported) << begun.message();
      EXPECT_HAS(begun, d.id());
      EXPECT_HAS(begun, "not supported");
      continue;
    }
    // y = a + b, then a = y + b (the second reads the first's output).
    const std::vector<TensorRef> second = {a.output, a.inputs[1]};
    ASSERT_TRUE(d.execute({op, k}, a.inputs, a.output).ok());
    ASSERT_TRUE(d.execute({op, k}, second, a.inputs[0]).ok());
    auto id = d.end_recording();
    ASSERT_TRUE(id.ok()) << id.status().message();
    ASSERT_TRUE(d.synchronize().ok());
    EXPECT_EQ(a.output_values(d)[5], kPoison) << "recorded work runs only when replayed";
    const std::vector<float> a10 = ramp(256, 10.0f);
    ASSERT_TRUE(d.write(*a.inputs[0].buffer, 0, a10.data(), 1024).ok());
    for (int replay = 0; replay < 2; ++replay) {
      ASSERT_TRUE(d.replay(*id).ok());
      ASSERT_TRUE(d.synchronize().ok());
      // a = 10 + i: y = 2i + 11, a = 3i + 12; again: y = 4i + 13, a = 5i + 14.
      const std::vector<float> y = a.output_values(d);
      const float m = replay == 0 ? 2.0f : 4.0f, c = replay == 0 ? 11.0f : 13.0f;
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_EQ(y[i], m * static_cast<float>(i) + c) << "replay " << replay << ", " << i;
    }
    d.release_recording(*id);
    EXPECT_FALSE(d.replay(*id).ok()) << "a released recording is gone";
  }
}

}  // namespace
}  // namespace duet::testing
