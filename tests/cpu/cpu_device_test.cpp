#include <gtest/gtest.h>

#include "check/check.h"
#include "cpu_backend.h"
#include "device/contract.h"
#include "duet/backends.h"
#include "reference/reference.h"

namespace duet {
namespace {

using duet::testing::DeviceContract;

Device& cpu() {
  static Registry reg = open_registry();
  return *reg.find("cpu:0");
}

Result<std::vector<std::shared_ptr<Device>>> open_cpu() {
  DUET_ASSIGN_OR_RETURN(BackendOpenResult r, cpu::factory().open({}));
  std::vector<std::shared_ptr<Device>> d;
  for (auto& x : r.devices) d.push_back(std::move(x));
  return d;
}

INSTANTIATE_TEST_SUITE_P(Cpu, DeviceContract,
                         ::testing::Values(duet::testing::ContractTarget{"cpu", open_cpu}),
                         duet::testing::contract_name);

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
