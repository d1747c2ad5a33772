// The conformance suite, written once and instantiated for every device and kernel tier the
// registry finds. It is built twice: for this machine's devices (duet_conformance_tests) and,
// where the CUDA tests are built, for emulated CUDA devices (duet_conformance_emulated_tests,
// DUET_TEST_EMULATED_CUDA: the CUDA backend over a driver whose kernels run on the host emulator,
// tests/cuda/emulated.h, through the CUDA rules as a GPU), so that a test opens only the devices
// of its set. Only choices that can run a case are instantiated: the device accepts them and
// they read the case's input dtypes. Refusals and their reasons are tested with each backend's
// rules, not here, so a skip in this suite means something unexpected.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include "check/check.h"
#include "cuda_cases.h"
#include "duet/backends.h"
#include "reference/reference.h"
#include "support/child_lines.h"
#include "support/random_tensor.h"
#if DUET_TEST_EMULATED_CUDA
#include "duet/kernels/kernel.h"
#include "duet/kernels/launch.h"
#include "duet/kernels/select.h"
#include "emulated.h"
#endif

namespace duet {
namespace {

using conformance::is_cuda_case;

#if DUET_TEST_EMULATED_CUDA
// The emulator runs kernels about 10^4 times slower than a GPU, so each emulated card runs the
// tiers it is here to show rather than every choice: the A100 every sm_80 tier and the generic
// one, the T4 the sm_75 tiers at Turing's 64 KiB of shared memory, the GTX 1060 dp4a from a
// build with an sm_61 image, the Orin Nano the tensor-core tiers on 8 SMs (the A100's 108
// and the T4's 40 split small problems into one key tile per split; 8 SMs run the multi-tile
// cases unsplit, through the double- and single-buffered K/V pipelines), and two H100s the wgmma
// tier from a build with an sm_90a image. The GTX 1060 and Orin run the CUDA cases only. The
// integer tiers run the small cases made for them: the generic tier runs the conformance set of
// every block format already.
struct EmulatedCard {
  const char* card;
  std::set<Tier> tiers;
  bool cuda_cases_only;
  // Cases to leave out on this card (each case runs on the card that shows most with it).
  bool (*skip)(const std::string& name) = nullptr;
};
const EmulatedCard kEmulatedCards[] = {
    {"a100",
     {Tier::flash, Tier::pipelined, Tier::tiled, Tier::generic, Tier::int8_mma, Tier::int_dot},
     false},
    {"t4", {Tier::tiled, Tier::int8_mma}, false},
    {"gtx1060", {Tier::int_dot}, true},
    {"jetson-orin-nano", {Tier::flash, Tier::pipelined, Tier::tiled}, true},
    // Hopper, from a build with an sm_90a image: the wgmma tier. The 132-SM record splits small
    // cases' keys (decode, split-KV); with 4 SMs they run unsplit, so the stage ring wraps.
    {"h100",
     {Tier::wgmma},
     false,
     [](const std::string& n) { return is_cuda_case(n) && n.find("decode.splits") == n.npos; }},
    {"h100-4sm",
     {Tier::wgmma},
     true,
     [](const std::string& n) { return n.find("decode.splits") != n.npos; }},
};

// The card a device emulates ("emu-t4:0").
const EmulatedCard& emulated(const Device& d) {
  for (const EmulatedCard& c : kEmulatedCards)
    if (d.id() == "emu-" + std::string(c.card) + ":0") return c;
  ADD_FAILURE() << d.id() << " is no emulated card of this suite";
  return kEmulatedCards[0];
}

Registry& registry() {
  static Registry r = [] {
    BackendOptions options;
    std::string cards;
    for (const EmulatedCard& c : kEmulatedCards)
      cards += (cards.empty() ? "" : ",") + std::string(c.card);
    options.values[cuda::testing::kEmulateOption] = cards;
    return Registry::open({cuda::testing::emulated_factory()}, options);
  }();
  return r;
}
#else
Registry& registry() {
  static Registry r = open_registry();
  return r;
}
#endif

// The conformance set, and the CUDA kernels' cases (cuda_cases.h).
const std::vector<check::Case>& all_cases() {
  static const std::vector<check::Case> c = [] {
    std::vector<check::Case> v = check::cases(false);
    conformance::add_cuda_cases(v);
    return v;
  }();
  return c;
}

// Whether the device runs the case on the choice (which it accepts and which reads the case's
// dtypes): the CUDA cases on CUDA devices; on an emulated card, what it is here to show.
bool runs(const Device& d, const check::Case& c, const KernelChoice& k) {
  const bool cuda_case = is_cuda_case(c.name);
  if (cuda_case && d.caps().backend != BackendKind::cuda) return false;
#if DUET_TEST_EMULATED_CUDA
  const EmulatedCard& e = emulated(d);
  if (!e.tiers.count(k.tier) || (e.cuda_cases_only && !cuda_case)) return false;
  if (e.skip && e.skip(c.name)) return false;
  // The wgmma tier's own cases are too long for the other tiers' emulated time budget.
  if (!e.tiers.count(Tier::wgmma) && c.name.find("/wgmma.") != std::string::npos) return false;
  const bool qcase = c.name.rfind("kernels/q", 0) == 0,
             qint = c.name.rfind("kernels/qint/", 0) == 0;
  const bool int_tier = k.tier == Tier::int_dot || k.tier == Tier::int8_mma;
  // The large tile case is the mma tiles' (the mat-vec would take it 17 times over); the
  // mat-vec takes the decode cases, and on the GTX 1060 the prefill cases (more than 8 rows:
  // blocks along M) of a format per kind of scaling, the kernel being the same code for all.
  if (c.name.find("/tiles.") != std::string::npos && k.tier != Tier::int8_mma) return false;
  if (k.tier == Tier::int_dot && c.name.find("/prefill.") != std::string::npos &&
      (d.id() == "emu-a100:0" ||
       (c.name.find("/q4_0/") == std::string::npos && c.name.find("/q4_k/") == std::string::npos &&
        c.name.find("/q6_k/") == std::string::npos)))
    return false;
  return int_tier ? qcase : !qint;
#else
  (void)k;
  return true;
#endif
}

struct Param {
  std::string device;
  size_t case_index;
  Tier tier;
  Precision precision;
  size_t index = 0;  // in the whole list: the test's name, the same in every batch
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
        if (k.ok && k.tier != Tier::reference && k.reads_as_given(*op) &&
            runs(*d, all_cases()[i], k))
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

// The cases of one kernel family (device, tier, precision, op, dtype and block format) share
// their pipelines and launch setup: a batch process (duet_test BATCH) takes whole families, so
// that each family's pipelines are made in one process rather than in every batch, as gtest's
// round-robin sharding did (two thirds of a Vulkan batch's time was lavapipe making pipelines).
std::string family(const Param& p) {
  const std::string& name = all_cases()[p.case_index].name;
  const size_t op_end = name.find('/'), dtype_end = name.find('/', op_end + 1);
  std::string f = p.device + " " + std::string(tier_name(p.tier)) + " " +
                  std::string(precision_name(p.precision)) + " " + name.substr(0, dtype_end);
  for (const DType q : kQuantizedDTypes)
    if (name.find("." + std::string(dtype_name(q)) + ".") != std::string::npos)
      f += " " + std::string(dtype_name(q));
  return f;
}

// The batch `index` of `count` (DUET_TEST_BATCH=index/count, set by ctest for each batch): whole
// families, the largest first, each to the batch with the least work so far (a case on a
// non-CPU device counted as three: pipelines, emulation), in the list's order within a batch.
std::vector<Param> batch_of(const std::vector<Param>& all, int index, int count) {
  std::map<std::string, std::vector<size_t>> families;
  for (size_t i = 0; i < all.size(); ++i) families[family(all[i])].push_back(i);
  std::vector<const std::vector<size_t>*> order;
  for (const auto& [name, members] : families) order.push_back(&members);
  const auto work = [&](const std::vector<size_t>* m) {
    return m->size() * (all[m->front()].device.rfind("cpu", 0) == 0 ? 1 : 3);
  };
  std::stable_sort(order.begin(), order.end(), [&](auto* a, auto* b) { return work(a) > work(b); });
  std::vector<size_t> load(static_cast<size_t>(count), 0);
  std::vector<bool> mine(all.size(), false);
  for (const auto* m : order) {
    const size_t b = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[b] += work(m);
    if (b == static_cast<size_t>(index))
      for (size_t i : *m) mine[i] = true;
  }
  std::vector<Param> out;
  for (size_t i = 0; i < all.size(); ++i)
    if (mine[i]) out.push_back(all[i]);
  return out;
}

const std::vector<Param>& params() {
  static const std::vector<Param> ps = [] {
    if (std::getenv(kListEnv)) {  // the child: no teardown, no leak check, nothing but the list
      for (const Param& p : params_here()) std::printf("%s\n", line(p).c_str());
      std::fflush(stdout);
      std::_Exit(0);
    }
    std::vector<Param> out;
    if (!GTEST_FLAG_GET(list_tests)) {
      out = params_here();
    } else {
      for (const std::string& l : list_in_child().lines)
        if (auto p = from_line(l)) out.push_back(*p);
    }
    for (size_t i = 0; i < out.size(); ++i) out[i].index = i;
    int index = 0, count = 0;
    if (const char* b = std::getenv("DUET_TEST_BATCH");
        b && std::sscanf(b, "%d/%d", &index, &count) == 2 && count > 0 && index >= 0 &&
        index < count)
      out = batch_of(out, index, count);
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
  return s + "_" + std::to_string(p.index);
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
  EXPECT_TRUE(o.passed) << c.name << " on " << p.device << "/" << p.tier << " ("
                        << choice.launch.str() << "): " << o.message << " (nmse " << o.metrics.nmse
                        << ", tolerance " << o.tol.str() << ")";
}

#if DUET_TEST_EMULATED_CUDA
INSTANTIATE_TEST_SUITE_P(EmulatedCuda, Conformance, testing::ValuesIn(params()), param_name);
#else
INSTANTIATE_TEST_SUITE_P(AllDevices, Conformance, testing::ValuesIn(params()), param_name);
#endif

#if DUET_TEST_EMULATED_CUDA
#define DUET_LISTING_SUITE EmulatedCudaListing
#else
#define DUET_LISTING_SUITE ConformanceListing
#endif
// The list ctest ran comes from a child process; it must be the list this process registers.
TEST(DUET_LISTING_SUITE, OpensTheDevicesInAChildProcess) {
  test_support::ChildLines c = list_in_child();
  ASSERT_TRUE(c.failure.empty()) << "listing the devices' kernels in a child process: "
                                 << c.failure;
  std::vector<std::string> here;
  for (const Param& p : params()) here.push_back(line(p));
  EXPECT_EQ(c.lines, here);
}

#if !DUET_TEST_EMULATED_CUDA
// The case set is checked once, with the machine's devices (the emulated cards run what they are
// here to show, above).
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
      // A mask's -inf entries are the keys it hides, not a constant fill: its other values are.
      std::vector<double> finite;
      for (double x : v)
        if (std::isfinite(x)) finite.push_back(x);
      // Comparisons draw from a few values on purpose (ties), still at random.
      const bool steps = op_input_range(c.kind, 0) == InputRange::steps;
      if (finite.size() > 4 && !steps) {
        EXPECT_NE(finite[0], finite[1]) << c.name;
      }
      if (finite.size() > 4 && steps)
        EXPECT_FALSE(std::all_of(finite.begin(), finite.end(), [&](double x) {
          return x == finite[0];
        })) << c.name;
    }
  }
}

#endif  // !DUET_TEST_EMULATED_CUDA

#if DUET_TEST_EMULATED_CUDA
// The instantiated kernel variants (tier, precision, head dim / B layout) the cases reach on the
// emulated cards: every one the planner can choose must run here at least once.
TEST(EmulatedCuda, EveryTensorCoreVariantIsExercised) {
  std::set<std::string> seen;
  for (const Param& p : params()) {
    Device* d = registry().find(p.device);
    auto op = check::case_op(all_cases()[p.case_index]);
    for (const KernelChoice& k : d->choices(*op))
      if (k.tier == p.tier && k.precision == p.precision) seen.insert(k.launch.variant_name());
  }
  std::vector<std::string> want;
  for (int hd : kernels::kAttentionHeadDims) {
    want.push_back("flash_attention_f16_hd" + std::to_string(hd));
    want.push_back("flash_attention_bf16_hd" + std::to_string(hd));
    want.push_back("tiled_attention_f16_hd" + std::to_string(hd));
  }
  for (const char* g : {"generic_attention_flash", "generic_attention_decode"}) want.push_back(g);
  for (int hd : {64, 128}) {
    want.push_back("wgmma_attention_f16_hd" + std::to_string(hd));
    want.push_back("wgmma_attention_bf16_hd" + std::to_string(hd));
  }
  for (const char* b : {"_bn", "_bk"}) {
    want.push_back(std::string("pipelined_matmul_f16") + b);
    want.push_back(std::string("pipelined_matmul_bf16") + b);
    want.push_back(std::string("tiled_matmul_f16") + b);
  }
  for (const char* q : {"int_dot_qmatvec", "int8_mma_qmatmul_m16n8k32", "int8_mma_qmatmul_m8n8k16",
                        "generic_matvec"})
    want.push_back(q);
  for (const std::string& w : want) EXPECT_TRUE(seen.count(w)) << w << " is never run";
}

// Each integer tier runs every block format on the emulator.
TEST(EmulatedCuda, TheIntegerTiersRunEveryBlockFormat) {
  std::map<std::pair<std::string, Tier>, std::set<DType>> seen;
  for (const Param& p : params()) {
    if (p.tier != Tier::int_dot && p.tier != Tier::int8_mma) continue;
    auto op = check::case_op(all_cases()[p.case_index]);
    seen[{p.device, p.tier}].insert(op->inputs[1].dtype);
  }
  for (const auto& [device, tier] :
       {std::pair{"emu-gtx1060:0", Tier::int_dot}, std::pair{"emu-t4:0", Tier::int8_mma},
        std::pair{"emu-a100:0", Tier::int8_mma}, std::pair{"emu-a100:0", Tier::int_dot}}) {
    const std::set<DType>& formats = seen[{device, tier}];
    for (DType q : kQuantizedDTypes)
      EXPECT_TRUE(formats.count(q)) << device << " " << tier << " " << dtype_name(q);
  }
}

// ---- hand-made inputs

constexpr auto& fill = testing_support::random_tensor;

// A mask whose row 3 is entirely -inf: that query sees nothing and its output is 0.
TEST(EmulatedCuda, AFullyMaskedRowGivesZerosOnEveryTier) {
  Device* d = registry().find("emu-a100:0");
  ASSERT_NE(d, nullptr);
  const int64_t Lq = 9, Lk = 70;
  for (DType t : {DType::f16, DType::bf16}) {
    std::vector<HostTensor> in = {fill(t, {1, 2, Lq, 64}, 1), fill(t, {1, 2, Lk, 64}, 2),
                                  fill(t, {1, 2, Lk, 64}, 3), fill(DType::f32, {Lq, Lk}, 4)};
    std::vector<double> m = in[3].to_doubles();
    for (int64_t j = 0; j < Lk; ++j) {
      m[static_cast<size_t>(3 * Lk + j)] = -std::numeric_limits<double>::infinity();
      if (j % 5 == 0) m[static_cast<size_t>(5 * Lk + j)] = -std::numeric_limits<double>::infinity();
    }
    in[3].from_doubles(m);
    std::vector<TensorDesc> descs;
    for (const HostTensor& h : in) descs.push_back(h.desc());
    auto op = make_op(OpKind::attention, {}, descs);
    ASSERT_TRUE(op.ok()) << op.status().message();
    auto ref = reference::evaluate(*op, in);
    ASSERT_TRUE(ref.ok());
    int ran = 0;
    for (const KernelChoice& k : d->choices(*op)) {
      if (!k.ok || k.input_dtypes[0] != t) continue;
      const check::Outcome o = check::run_case(*d, k, *op, in, *ref);
      EXPECT_TRUE(o.passed) << k.tier << " " << dtype_name(t) << ": " << o.message;
      ++ran;
    }
    EXPECT_GE(ran, 2) << "flash and generic (and tiled for f16) should all run";
  }
}

// The mat-vec that quantizes its own activations (decode: one launch a matmul) gives the bits of
// the separate quantizing launch, on both instances, for contiguous f32 and f16 rows (16-byte
// loads) and a transposed A (one value at a time), with a row holding an infinity.
// A block of A holding an infinity gets a NaN scale: its row of C is NaN (as the float64
// reference's is), the others finite; the same through A as f16 and A transposed.
TEST(EmulatedCuda, TheMatVecMakesARowOfAnInfiniteActivationNan) {
  OpAttrs tb;
  tb.transpose_b = true;
  for (const char* dev : {"emu-a100:0", "emu-gtx1060:0"}) {
    Device* d = registry().find(dev);
    ASSERT_NE(d, nullptr) << dev;
    for (DType q : {DType::q4_0, DType::q4_k}) {
      for (int variant = 0; variant < 3; ++variant) {
        const DType t = variant == 1 ? DType::f16 : DType::f32;
        const int64_t M = 3, N = 17, K = 512;
        HostTensor a = fill(t, {M, K}, 7);
        if (variant == 2) {  // A transposed: a_k is M
          HostTensor at = fill(t, {K, M}, 7);
          auto v = at.view(check::transposed_view(t, {M, K}));
          ASSERT_TRUE(v.ok()) << v.status().message();
          a = *v;
        }
        std::vector<double> av = a.to_doubles();
        av[static_cast<size_t>(K + 40)] = std::numeric_limits<double>::infinity();
        a.from_doubles(av);
        HostTensor w = fill(q, {N, K}, 8);
        auto op = make_op(OpKind::matmul, tb, {a.desc(), w.desc()});
        ASSERT_TRUE(op.ok()) << op.status().message();
        KernelChoice k;
        for (const KernelChoice& c : d->choices(*op))
          if (c.tier == Tier::int_dot) k = c;
        ASSERT_TRUE(k.ok) << dev << ": " << k.reason;
        auto ab = d->allocate(a.storage_bytes());
        auto wb = d->allocate(w.storage_bytes());
        auto ob = d->allocate(static_cast<uint64_t>(op->output.nbytes()));
        ASSERT_TRUE(ab.ok() && wb.ok() && ob.ok());
        ASSERT_TRUE(d->write(**ab, 0, a.storage(), a.storage_bytes()).ok());
        ASSERT_TRUE(d->write(**wb, 0, w.storage(), w.storage_bytes()).ok());
        std::vector<TensorRef> refs = {{a.desc(), ab->get()}, {w.desc(), wb->get()}};
        Status s = d->execute(PlannedOp{*op, k}, refs, TensorRef{op->output, ob->get()});
        ASSERT_TRUE(s.ok()) << s.message();
        std::vector<std::byte> o(static_cast<size_t>(op->output.nbytes()));
        ASSERT_TRUE(d->read(**ob, 0, o.data(), o.size()).ok());
        // C has A's dtype: read back through it.
        auto c = HostTensor::borrow(op->output, o.data(), o.size());
        ASSERT_TRUE(c.ok()) << c.status().message();
        const std::vector<double> cv = c->to_doubles();
        EXPECT_TRUE(std::isnan(cv[N])) << dev << " " << dtype_name(q) << " variant " << variant;
        EXPECT_TRUE(std::isfinite(cv[0]) && std::isfinite(cv[2 * N]))
            << dev << " " << dtype_name(q) << " variant " << variant;
      }
    }
  }
}

// The mat-vec's instance follows A's rows (1, 2, 4 or 8 a block; 4 weight rows a block for one,
// else 2), and A is quantized by a launch of its own into the workspace.
TEST(EmulatedCuda, TheMatVecInstanceFollowsTheActivationRows) {
  OpAttrs tb;
  tb.transpose_b = true;
  Device* d = registry().find("emu-a100:0");
  ASSERT_NE(d, nullptr);
  for (int64_t M : {1, 2, 3, 8, 9}) {
    auto op = make_op(OpKind::matmul, tb,
                      {TensorDesc::contiguous(DType::f32, {M, 4096}),
                       TensorDesc::contiguous(DType::q4_0, {64, 4096})});
    ASSERT_TRUE(op.ok());
    bool seen = false;
    for (const KernelChoice& k : d->choices(*op)) {
      if (k.tier != Tier::int_dot) continue;
      seen = true;
      EXPECT_EQ(k.launch.tile_n, M == 1 ? 4 : 2) << M;
      EXPECT_EQ(k.launch.block_threads, 128) << M;
      EXPECT_EQ(kernels::workspace_bytes(k.tier, *op, k.launch),
                static_cast<uint64_t>(M) * 4096 / 32 * 48)
          << M;
    }
    EXPECT_TRUE(seen) << M;
  }
}

TEST(EmulatedCuda, AnIdOutOfRangeIsReportedWithItsPosition) {
  Device* d = registry().find("emu-a100:0");
  ASSERT_NE(d, nullptr);
  HostTensor table = fill(DType::f32, {10, 8}, 1);
  HostTensor ids = HostTensor::empty(DType::i32, std::vector<int64_t>{5});
  ids.from_doubles(std::vector<double>{1, 2, 12, 3, -1});
  auto op = make_op(OpKind::embedding, {}, {table.desc(), ids.desc()}, {"table", "tokens"});
  ASSERT_TRUE(op.ok());
  const KernelChoice k = d->choices(*op).front();
  ASSERT_TRUE(k.ok) << k.reason;
  auto tb = d->allocate(table.storage_bytes());
  auto ib = d->allocate(ids.storage_bytes());
  auto ob = d->allocate(static_cast<uint64_t>(op->output.nbytes()));
  ASSERT_TRUE(d->write(**tb, 0, table.storage(), table.storage_bytes()).ok());
  ASSERT_TRUE(d->write(**ib, 0, ids.storage(), ids.storage_bytes()).ok());
  std::vector<TensorRef> refs = {{table.desc(), tb->get()}, {ids.desc(), ib->get()}};
  Status s = d->execute(PlannedOp{*op, k}, refs, TensorRef{op->output, ob->get()});
  if (s.ok()) s = d->synchronize();  // a GPU finds it when the kernel has run
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("tensor 'tokens'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("got id 12 at position 2"), std::string::npos) << s.message();
}

#endif  // DUET_TEST_EMULATED_CUDA

}  // namespace
}  // namespace duet
