#include <gtest/gtest.h>

#include "check/check.h"
#include "duet/backends.h"
#include "reference/reference.h"

namespace duet {
namespace {

Device& cpu() {
  static Registry reg = open_registry();
  return *reg.find("cpu:0");
}

TensorDesc F(std::initializer_list<int64_t> s) {
  return TensorDesc::contiguous(DType::f32, s);
}

TEST(CpuDevice, OffersSimdAndReferenceTiersForEveryOp) {
  auto op = make_op(OpKind::attention, {}, {F({1, 2, 3, 8}), F({1, 1, 5, 8}), F({1, 1, 5, 8})});
  ASSERT_TRUE(op.ok());
  auto choices = cpu().choices(*op);
  ASSERT_EQ(choices.size(), 2u);
  EXPECT_EQ(choices[0].tier, Tier::simd);
  EXPECT_TRUE(choices[0].ok);
  EXPECT_EQ(choices[1].precision, Precision::f64);
  EXPECT_FALSE(cpu().supports(*op, Precision::bf16).ok());
}

TEST(CpuDevice, ExecuteRefusesAShapeThatIsNotThePlannedOne) {
  auto op = make_op(OpKind::relu, {}, {F({4})});
  auto in = *cpu().allocate(16);
  auto out = *cpu().allocate(16);
  TensorRef x{F({2}), in.get()};
  TensorRef y{F({4}), out.get()};
  Status s =
      cpu().execute(PlannedOp{*op, *cpu().supports(*op, Precision::f32)}, std::span(&x, 1), y);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("tensor 'x' on cpu:0: expected f32[4], got f32[2]"), std::string::npos)
      << s.message();
}

TEST(CpuDevice, ExecuteRefusesAViewPastItsBuffer) {
  auto op = make_op(OpKind::relu, {}, {F({4})});
  auto in = *cpu().allocate(8);
  auto out = *cpu().allocate(16);
  TensorRef x{F({4}), in.get()};
  TensorRef y{F({4}), out.get()};
  Status s =
      cpu().execute(PlannedOp{*op, *cpu().supports(*op, Precision::f32)}, std::span(&x, 1), y);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("inside its buffer of 8 bytes"), std::string::npos) << s.message();
}

TEST(CpuDevice, EmbeddingIdOutOfRangeIsAnErrorNamingTheId) {
  auto op = make_op(OpKind::embedding, {}, {F({4, 3}), TensorDesc::contiguous(DType::i32, {2})},
                    {"tok_emb", "tokens"}, "embed");
  ASSERT_TRUE(op.ok());
  auto table = *cpu().allocate(48);
  auto ids = *cpu().allocate(8);
  auto out = *cpu().allocate(24);
  const int32_t bad[2] = {1, 4};
  ASSERT_TRUE(cpu().write(*ids, 0, bad, 8).ok());
  TensorRef in[2] = {{op->inputs[0], table.get()}, {op->inputs[1], ids.get()}};
  Status s = cpu().execute(PlannedOp{*op, *cpu().supports(*op, Precision::f32)}, in,
                           {op->output, out.get()});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "embedding 'embed': tensor 'tokens' on cpu:0: expected ids in [0, 4), got id 4 at "
            "position 1");
}

TEST(CpuDevice, ReadOutsideABufferIsAnError) {
  auto b = *cpu().allocate(4);
  char dst[8];
  EXPECT_FALSE(cpu().read(*b, 0, dst, 8).ok());
}

// Larger than the case set: the blocked paths with many tiles and threads.
TEST(CpuDevice, LargeMatmulAndAttentionMatchTheReference) {
  for (auto [kind, ins] : std::vector<std::pair<OpKind, std::vector<TensorDesc>>>{
           {OpKind::matmul, {F({300, 200}), F({200, 170})}},
           {OpKind::attention, {F({1, 4, 130, 64}), F({1, 2, 300, 64}), F({1, 2, 300, 64})}}}) {
    check::Case c;
    c.name = std::string("large/") + std::string(op_name(kind));
    c.kind = kind;
    c.attrs.causal = true;
    c.inputs = ins;
    c.fills.assign(ins.size(), check::Fill::unit);
    auto op = check::case_op(c);
    ASSERT_TRUE(op.ok());
    auto inputs = check::case_inputs(c);
    auto ref = reference::evaluate(*op, inputs);
    auto o = check::run_case(cpu(), *cpu().supports(*op, Precision::f32), *op, inputs, *ref);
    EXPECT_TRUE(o.passed) << c.name << ": " << o.message;
  }
}

}  // namespace
}  // namespace duet
