// The checker must catch what it exists to catch: unwritten elements, writes outside the
// output, small numeric errors beyond the tolerance, wrong infinities. A device that corrupts
// the CPU backend's results in each of these ways must fail.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "check/check.h"
#include "duet/backends.h"
#include "duet/half.h"
#include "reference/reference.h"

namespace duet {
namespace {

enum class Fault { none, skip_last, write_past_end, nudge, flip_inf, same_for_any_poison };

class FaultyDevice final : public Device {
 public:
  FaultyDevice(Device& inner, Fault f) : inner_(inner), fault_(f) {}
  const std::string& id() const override { return id_; }
  const DeviceCaps& caps() const override { return inner_.caps(); }
  const BackendRules& rules() const override { return inner_.rules(); }
  Result<std::shared_ptr<Buffer>> allocate(uint64_t n) override { return inner_.allocate(n); }
  bool owns(const Buffer& b) const override { return inner_.owns(b); }
  Status synchronize() override { return inner_.synchronize(); }

 protected:
  Status write_checked(Buffer& b, uint64_t o, const void* s, uint64_t n) override {
    return inner_.write(b, o, s, n);
  }
  Status read_checked(Buffer& b, uint64_t o, void* d, uint64_t n) override {
    return inner_.read(b, o, d, n);
  }
  Status execute_checked(const PlannedOp& p, std::span<const TensorRef> in,
                         const TensorRef& out) override {
    const TensorDesc& d = out.desc;
    auto* base = static_cast<std::byte*>(out.buffer->host_ptr()) +
                 d.offset * static_cast<int64_t>(dtype_size(d.dtype));
    const int64_t n = d.numel();
    const size_t es = dtype_size(d.dtype);
    std::vector<std::byte> last(es);
    if (fault_ == Fault::skip_last)
      std::memcpy(last.data(), base + (n - 1) * static_cast<int64_t>(es), es);
    DUET_TRY(inner_.execute(p, in, out));
    switch (fault_) {
      case Fault::skip_last:
        std::memcpy(base + (n - 1) * static_cast<int64_t>(es), last.data(), es);
        break;
      case Fault::write_past_end:
        std::memset(base + n * static_cast<int64_t>(es), 0, 1);
        break;
      case Fault::nudge:
        store_from_double(base, d.dtype, n / 2, load_as_double(base, d.dtype, n / 2) * 1.05 + 0.01);
        break;
      case Fault::flip_inf:
        store_from_double(base, d.dtype, 0, -INFINITY);
        break;
      default:
        break;
    }
    return {};
  }

 private:
  Device& inner_;
  Fault fault_;
  std::string id_ = "faulty:0";
};

check::Outcome run(Fault f, OpKind kind, std::vector<TensorDesc> in, OpAttrs a = {}) {
  static Registry reg = open_registry();
  FaultyDevice dev(*reg.find("cpu:0"), f);
  check::Case c;
  c.name = "faulty";
  c.kind = kind;
  c.attrs = a;
  c.inputs = std::move(in);
  c.fills.assign(c.inputs.size(), check::Fill::unit);
  auto op = check::case_op(c);
  EXPECT_TRUE(op.ok());
  auto inputs = check::case_inputs(c);
  auto ref = reference::evaluate(*op, inputs);
  auto choice = dev.supports(*op, Precision::f32);
  EXPECT_TRUE(choice.ok());
  return check::run_case(dev, *choice, *op, inputs, *ref);
}

TensorDesc F(std::initializer_list<int64_t> s) {
  return TensorDesc::contiguous(DType::f32, s);
}

TEST(Checker, PassesACorrectDevice) {
  EXPECT_TRUE(run(Fault::none, OpKind::matmul, {F({5, 7}), F({7, 3})}).passed);
}

TEST(Checker, CatchesAnUnwrittenElement) {
  auto o = run(Fault::skip_last, OpKind::matmul, {F({5, 7}), F({7, 3})});
  EXPECT_FALSE(o.passed);
  EXPECT_EQ(o.metrics.nan, 1);
}

TEST(Checker, CatchesAWriteOutsideTheOutput) {
  auto o = run(Fault::write_past_end, OpKind::silu, {F({3, 5})});
  EXPECT_FALSE(o.passed);
  EXPECT_NE(o.message.find("outside the output"), std::string::npos) << o.message;
}

TEST(Checker, CatchesOneElementOffByFivePercent) {
  auto o = run(Fault::nudge, OpKind::matmul, {F({17, 33}), F({33, 19})});
  EXPECT_FALSE(o.passed) << "nmse " << o.metrics.nmse;
}

TEST(Checker, CatchesAWrongInfinity) {
  EXPECT_FALSE(run(Fault::flip_inf, OpKind::relu, {F({4})}).passed);
}

TEST(Checker, IntegerOutputsAreCheckedForUnwrittenElements) {
  OpAttrs a;
  a.to = DType::i8;
  auto o = run(Fault::skip_last, OpKind::cast, {F({9})}, a);
  EXPECT_FALSE(o.passed);
  EXPECT_NE(o.message.find("not written"), std::string::npos) << o.message;
}

TEST(Tolerance, DependsOnThePrecisionUsed) {
  auto op = make_op(
      OpKind::matmul, {},
      {TensorDesc::contiguous(DType::f16, {4, 4}), TensorDesc::contiguous(DType::f16, {4, 4})});
  ASSERT_TRUE(op.ok());
  auto f32 = check::tolerance(*op, Precision::f32), f16 = check::tolerance(*op, Precision::f16),
       bf16 = check::tolerance(*op, Precision::bf16);
  EXPECT_LE(f32.nmse, f16.nmse);
  EXPECT_LT(f16.nmse, bf16.nmse);
  EXPECT_LE(bf16.nmse, 5e-4) << "never looser than the field's usual bound for matmul";
  auto add =
      make_op(OpKind::add, {},
              {TensorDesc::contiguous(DType::f32, {4}), TensorDesc::contiguous(DType::f32, {4})});
  EXPECT_LE(check::tolerance(*add, Precision::f32).nmse, 1e-7);
}

}  // namespace
}  // namespace duet
