// The conformance suite, written once and instantiated for every device and kernel tier the
// registry finds. Only choices that can run a case are instantiated: the device accepts them
// and they read the case's input dtypes. Refusals and their reasons are tested with each
// backend's rules, not here, so a skip in this suite means something unexpected.
#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "check/check.h"
#include "duet/backends.h"
#include "reference/reference.h"

namespace duet {
namespace {

Registry& registry() {
  static Registry r = open_registry();
  return r;
}

const std::vector<check::Case>& all_cases() {
  static const std::vector<check::Case> c = check::cases(false);
  return c;
}

struct Param {
  std::string device;
  size_t case_index;
  Tier tier;
  Precision precision;
};

// Printed by gtest beside each test instead of the parameter's bytes.
void PrintTo(const Param& p, std::ostream* os) {
  *os << p.device << " " << p.tier << " " << precision_name(p.precision) << " "
      << all_cases()[p.case_index].name;
}

std::vector<Param> params() {
  std::vector<Param> out;
  for (Device* d : registry().devices())
    for (size_t i = 0; i < all_cases().size(); ++i) {
      auto op = check::case_op(all_cases()[i]);
      if (!op.ok()) continue;  // reported by CaseSetIsValid
      for (const KernelChoice& k : d->choices(*op))
        if (k.ok && k.tier != Tier::reference && k.reads_as_given(*op))
          out.push_back({d->id(), i, k.tier, k.precision});
    }
  return out;
}

std::string param_name(const testing::TestParamInfo<Param>& info) {
  const Param& p = info.param;
  std::string s = p.device + "_" + std::string(tier_name(p.tier)) + "_" +
                  std::string(precision_name(p.precision)) + "_" + all_cases()[p.case_index].name;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s + "_" + std::to_string(info.index);
}

class Conformance : public testing::TestWithParam<Param> {};

TEST_P(Conformance, MatchesTheFloat64Reference) {
  const Param& p = GetParam();
  const check::Case& c = all_cases()[p.case_index];
  Device* d = registry().find(p.device);
  ASSERT_NE(d, nullptr);
  auto op = check::case_op(c);
  ASSERT_TRUE(op.ok()) << op.status().message();
  KernelChoice choice;
  for (const KernelChoice& k : d->choices(*op))
    if (k.tier == p.tier && k.precision == p.precision) choice = k;
  // Instantiated only for accepted choices: a refusal now is a change in the backend's answer.
  ASSERT_TRUE(choice.ok) << p.device << " " << p.tier << ": " << choice.reason;
  std::vector<HostTensor> inputs = check::case_inputs(c);
  auto ref = reference::evaluate(*op, inputs);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  check::Outcome o = check::run_case(*d, choice, *op, inputs, *ref);
  ASSERT_FALSE(o.skipped) << o.message;
  EXPECT_TRUE(o.passed) << c.name << " on " << p.device << "/" << p.tier << ": " << o.message
                        << " (nmse " << o.metrics.nmse << ", tolerance " << o.tol.str() << ")";
}

INSTANTIATE_TEST_SUITE_P(AllDevices, Conformance, testing::ValuesIn(params()), param_name);

// The filter above must not hide a backend that stopped accepting work: every device runs every
// op kind of the case set through at least one of its kernels.
TEST(CaseSet, EveryDeviceRunsEveryOpKind) {
  const std::vector<Param> ps = params();
  for (Device* d : registry().devices()) {
    std::set<OpKind> run;
    for (const Param& p : ps)
      if (p.device == d->id()) run.insert(all_cases()[p.case_index].kind);
    for (const check::Case& c : all_cases())
      EXPECT_TRUE(run.count(c.kind)) << d->id() << " runs no " << op_name(c.kind) << " case";
  }
}

TEST(CaseSet, IsValidAndCoversEveryOp) {
  std::set<OpKind> seen;
  std::set<std::string> names;
  for (const check::Case& c : all_cases()) {
    auto op = check::case_op(c);
    EXPECT_TRUE(op.ok()) << c.name << ": " << op.status().message();
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate case name " << c.name;
    seen.insert(c.kind);
  }
  for (int k = 0; k < kNumOpKinds; ++k)
    if (!is_view(static_cast<OpKind>(k))) {
      EXPECT_TRUE(seen.count(static_cast<OpKind>(k))) << op_name(static_cast<OpKind>(k));
    }
}

TEST(CaseSet, TheFullSetIsValidToo) {
  for (const check::Case& c : check::cases(true)) {
    auto op = check::case_op(c);
    EXPECT_TRUE(op.ok()) << c.name << ": " << op.status().message();
  }
}

TEST(CaseSet, InputsAreRandomAndNeverZero) {
  for (const check::Case& c : all_cases()) {
    for (const HostTensor& t : check::case_inputs(c)) {
      if (!is_float(t.dtype())) continue;
      std::vector<double> v = t.to_doubles();
      for (double x : v) ASSERT_NE(x, 0.0) << c.name;
      if (v.size() > 4) {
        EXPECT_NE(v[0], v[1]) << c.name;
      }
    }
  }
}

}  // namespace
}  // namespace duet
