// The conformance suite, written once and instantiated for every device and kernel tier the
// registry finds. Only choices that can run a case are instantiated: the device accepts them
// and they read the case's input dtypes. Refusals and their reasons are tested with each
// backend's rules, not here, so a skip in this suite means something unexpected.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

#include "check/check.h"
#include "duet/backends.h"
#include "reference/reference.h"
#include "support/child_lines.h"

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

// Every runnable choice of every device in this process's registry.
std::vector<Param> params_here() {
  std::vector<Param> out;
  for (Device* d : registry().devices())
    for (size_t i = 0; i < all_cases().size(); ++i) {
      auto op = check::case_op(all_cases()[i]);
      if (!op.ok()) continue;  // reported by CaseSet.IsValidAndCoversEveryOp
      for (const KernelChoice& k : d->choices(*op))
        if (k.ok && k.tier != Tier::reference && k.reads_as_given(*op))
          out.push_back({d->id(), i, k.tier, k.precision});
    }
  return out;
}

// The child's lines carry a prefix: gtest_main prints to standard output too.
constexpr std::string_view kLinePrefix = "conformance-param ";

std::string line(const Param& p) {
  return std::string(kLinePrefix) + p.device + " " + std::to_string(p.case_index) + " " +
         std::string(tier_name(p.tier)) + " " + std::string(precision_name(p.precision));
}

std::optional<Param> from_line(const std::string& l) {
  if (l.rfind(kLinePrefix, 0) != 0) return std::nullopt;
  std::istringstream in(l.substr(kLinePrefix.size()));
  Param p;
  std::string tier, precision;
  if (!(in >> p.device >> p.case_index >> tier >> precision)) return std::nullopt;
  auto t = parse_tier(tier);
  auto pr = parse_precision(precision);
  if (!t || !pr || p.case_index >= all_cases().size()) return std::nullopt;
  p.tier = *t;
  p.precision = *pr;
  return p;
}

// ctest lists this binary's tests by running it with --gtest_list_tests, and which conformance
// tests exist depends on the devices. So that a misbehaving device (a driver that crashes, hangs
// or leaks at exit) cannot abort the listing of every test, the listing process opens no device:
// it runs this binary again with kListEnv set, as a child that opens the devices, prints the
// parameters and leaves at once. Whatever the child does, the listing goes on; a child that
// failed is reported by ConformanceListing.OpensTheDevicesInAChildProcess, with the reason. When
// a test runs, its own process opens the devices as before.
constexpr const char* kListEnv = "DUET_CONFORMANCE_LIST_DEVICES";
constexpr int kListTimeoutS = 90;  // under ctest's discovery timeout (120 s)

// The parameter lines of the child's output, or why there are none.
test_support::ChildLines list_in_child() {
  test_support::ChildLines c =
      test_support::run_self(std::string(kListEnv) + "=1", {"--gtest_list_tests"}, kListTimeoutS);
  std::vector<std::string> kept;
  for (const std::string& l : c.lines)
    if (l.rfind(kLinePrefix, 0) == 0) {
      if (!from_line(l) && c.failure.empty()) c.failure = "printed a malformed line: " + l;
      kept.push_back(l);
    }
  c.lines = std::move(kept);
  return c;
}

const std::vector<Param>& params() {
  static const std::vector<Param> ps = [] {
    if (std::getenv(kListEnv)) {  // the child: no teardown, no leak check, nothing but the list
      for (const Param& p : params_here()) std::printf("%s\n", line(p).c_str());
      std::fflush(stdout);
      std::_Exit(0);
    }
    if (!GTEST_FLAG_GET(list_tests)) return params_here();
    std::vector<Param> out;
    for (const std::string& l : list_in_child().lines)
      if (auto p = from_line(l)) out.push_back(*p);
    return out;
  }();
  return ps;
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

// The list ctest ran comes from a child process; it must be the list this process registers.
TEST(ConformanceListing, OpensTheDevicesInAChildProcess) {
  test_support::ChildLines c = list_in_child();
  ASSERT_TRUE(c.failure.empty()) << "listing the devices' kernels in a child process: "
                                 << c.failure;
  std::vector<std::string> here;
  for (const Param& p : params()) here.push_back(line(p));
  EXPECT_EQ(c.lines, here);
}

// The filter above must not hide a backend that stopped accepting work: every device runs every
// op kind of the case set through at least one of its kernels.
TEST(CaseSet, EveryDeviceRunsEveryOpKind) {
  const std::vector<Param>& ps = params();
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
