// The CPU backend's blocked matmul and flash-style attention on every ISA path this machine
// runs (forced through DUET_CPU_ISA), against the float64 reference: the conformance cases,
// then larger and odd shapes that reach the blocking edges, split-K and the decode path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "check/check.h"
#include "duet/backends.h"
#include "duet/half.h"
#include "kernels/isa.h"
#include "reference/reference.h"

namespace duet::cpu::kernels {
// Names the ISA in gtest's messages.
inline void PrintTo(Isa isa, std::ostream* os) {
  *os << isa_name(isa);
}
}  // namespace duet::cpu::kernels

namespace duet {
namespace {

using cpu::kernels::Isa;

Device& cpu_device() {
  static Registry reg = open_registry();
  return *reg.find("cpu:0");
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> v;
  for (Isa i : {Isa::generic, Isa::avx2, Isa::avx512, Isa::avx512bf16, Isa::neon})
    if (cpu::kernels::isa_supported(i)) v.push_back(i);
  return v;
}

// Sets DUET_CPU_ISA for the test's lifetime.
class ForcedIsa {
 public:
  explicit ForcedIsa(Isa isa) {
    if (const char* old = std::getenv("DUET_CPU_ISA")) old_ = old;
    setenv("DUET_CPU_ISA", std::string(cpu::kernels::isa_name(isa)).c_str(), 1);
  }
  ~ForcedIsa() {
    if (old_)
      setenv("DUET_CPU_ISA", old_->c_str(), 1);
    else
      unsetenv("DUET_CPU_ISA");
  }
  ForcedIsa(const ForcedIsa&) = delete;
  ForcedIsa& operator=(const ForcedIsa&) = delete;

 private:
  std::optional<std::string> old_;
};

using Shape = std::vector<int64_t>;

TensorDesc dense(DType t, const Shape& s) {
  return TensorDesc::contiguous(t, s);
}
TensorDesc transposed(DType t, Shape s) {
  return check::transposed_view(t, std::move(s));
}
TensorDesc strided(DType t, Shape s) {
  return check::strided_view(t, std::move(s));
}

// The CPU's "simd" choice at `precision`, as its rules list it. A bf16 choice the CPU refuses
// (no AVX512-BF16) is taken as usable here, so that its kernels run on every machine: they then
// compute in f32. (A device never runs a choice its rules refuse.)
KernelChoice simd_choice(const OpDesc& op, Precision precision) {
  for (KernelChoice k : cpu_device().choices(op))
    if (k.tier == Tier::simd && k.precision == precision) {
      k.ok = true;
      return k;
    }
  ADD_FAILURE() << "no simd " << precision_name(precision) << " choice for " << op.name;
  return {};
}

// Runs one case on the CPU "simd" tier and compares it with the reference.
void expect_matches_reference(const check::Case& c, Precision precision = Precision::f32) {
  SCOPED_TRACE(c.name);
  auto op = check::case_op(c);
  ASSERT_TRUE(op.ok()) << op.status().message();
  auto inputs = check::case_inputs(c);
  auto ref = reference::evaluate(*op, inputs);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  check::Outcome o = check::run_case(cpu_device(), simd_choice(*op, precision), *op, inputs, *ref);
  EXPECT_TRUE(o.passed) << c.name << " [" << cpu::kernels::isa_name(cpu::kernels::active_isa())
                        << "]: " << o.message << " (nmse " << o.metrics.nmse << ")";
}

check::Case make_case(std::string name, OpKind kind, std::vector<TensorDesc> in, OpAttrs attrs = {},
                      std::vector<check::Fill> fills = {}) {
  check::Case c;
  c.name = std::move(name);
  c.kind = kind;
  c.attrs = std::move(attrs);
  if (fills.empty()) fills.assign(in.size(), check::Fill::unit);
  c.inputs = std::move(in);
  c.fills = std::move(fills);
  return c;
}

class CpuKernels : public testing::TestWithParam<Isa> {
 protected:
  void SetUp() override { forced_.emplace(GetParam()); }
  void TearDown() override { forced_.reset(); }
  std::optional<ForcedIsa> forced_;
};

TEST_P(CpuKernels, ForcingAnIsaSelectsIt) {
  EXPECT_EQ(cpu::kernels::active_isa(), GetParam());
}

TEST_P(CpuKernels, ConformanceCasesOfTheOpsWithVectorKernelsPass) {
  for (const check::Case& c : check::cases(false))
    if (c.kind == OpKind::matmul || c.kind == OpKind::attention || c.kind == OpKind::exp ||
        c.kind == OpKind::silu || c.kind == OpKind::silu_mul || c.kind == OpKind::gelu ||
        c.kind == OpKind::softmax || c.kind == OpKind::sigmoid || c.kind == OpKind::tanh ||
        c.kind == OpKind::erf || c.kind == OpKind::sqrt || c.kind == OpKind::pow)
      expect_matches_reference(c);
}

TEST_P(CpuKernels, MatmulOddShapesMatchTheReference) {
  struct M {
    int64_t m, n, k;
  };
  // Sizes around the tile (mr up to 12, nr up to 32) and block edges (kc 256): 1, 3, 17, 257,
  // 1000, never the full cross product (the reference is plain float64 loops).
  const M ms[] = {{1, 1, 1},     {1, 1000, 257}, {3, 17, 1000},   {17, 257, 3},
                  {257, 3, 17},  {1000, 17, 3},  {257, 257, 257}, {1000, 3, 1},
                  {3, 1000, 17}, {17, 1, 1000},  {1000, 257, 17}};
  for (const M& m : ms) {
    const std::string dims =
        std::to_string(m.m) + "x" + std::to_string(m.n) + "x" + std::to_string(m.k);
    expect_matches_reference(
        make_case("mm/" + dims, OpKind::matmul,
                  {dense(DType::f32, {m.m, m.k}), dense(DType::f32, {m.k, m.n})}));
  }
}

TEST_P(CpuKernels, MatmulTransposesViewsAndHalfTypesMatchTheReference) {
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    const std::string ts(dtype_name(t));
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        OpAttrs a;
        a.transpose_a = ta;
        a.transpose_b = tb;
        const int64_t M = 67, N = 45, K = 300;
        Shape as = ta ? Shape{K, M} : Shape{M, K}, bs = tb ? Shape{N, K} : Shape{K, N};
        expect_matches_reference(
            make_case("mm/" + ts + "/t" + std::to_string(ta) + std::to_string(tb), OpKind::matmul,
                      {dense(t, as), dense(t, bs)}, a));
      }
    // Non-contiguous views: a transposed view for a, an every-other-element view for b.
    expect_matches_reference(make_case("mm/" + ts + "/views", OpKind::matmul,
                                       {transposed(t, {130, 70}), strided(t, {70, 33})}));
    // Transposed flags on top of transposed views (the two cancel into plain strides).
    OpAttrs both;
    both.transpose_a = both.transpose_b = true;
    expect_matches_reference(make_case("mm/" + ts + "/views.tt", OpKind::matmul,
                                       {transposed(t, {29, 131}), strided(t, {40, 29})}, both));
  }
}

TEST_P(CpuKernels, MatmulWithFewRowsReadsBInPlaceAndMatchesTheReference) {
  // M <= 8 takes the no-packing path: rows of B (axpy form) or rows of B^T (gemv).
  for (int64_t m : {1, 2, 3, 4, 5}) {
    for (bool tb : {false, true}) {
      OpAttrs a;
      a.transpose_b = tb;
      const int64_t N = 300, K = 77;
      expect_matches_reference(make_case(
          "mm/skinny.m" + std::to_string(m) + (tb ? ".tb" : ""), OpKind::matmul,
          {dense(DType::f32, {2, m, K}), dense(DType::f32, tb ? Shape{N, K} : Shape{K, N})}, a));
    }
  }
  // A as a transposed view is gathered; B with strided columns is packed instead.
  expect_matches_reference(
      make_case("mm/skinny.a_view", OpKind::matmul,
                {transposed(DType::f32, {2, 40}), dense(DType::f32, {40, 9})}));
  expect_matches_reference(make_case("mm/skinny.b_view", OpKind::matmul,
                                     {dense(DType::f32, {1, 40}), strided(DType::f32, {40, 9})}));
}

TEST_P(CpuKernels, MatmulWithFewRowsWidensHalfWeightsAndMatchesTheReference) {
  // M <= 8: f16 and bf16 weights are read in place, stored [N, K] (gemv, every row count the
  // kernels take and the padded ones) or [K, N] (skinny: rows past 4 in a second pass); K with
  // a vector tail; a transposed-view activation.
  for (DType t : {DType::f16, DType::bf16})
    for (int64_t m : {1, 2, 3, 5, 8})
      for (bool tb : {false, true}) {
        OpAttrs a;
        a.transpose_b = tb;
        const int64_t N = 67, K = 333;
        expect_matches_reference(make_case(
            "mm/decode." + std::string(dtype_name(t)) + ".m" + std::to_string(m) +
                (tb ? ".tb" : ""),
            OpKind::matmul, {dense(t, {m, K}), dense(t, tb ? Shape{N, K} : Shape{K, N})}, a));
      }
  OpAttrs tb;
  tb.transpose_b = true;
  expect_matches_reference(
      make_case("mm/decode.mixed", OpKind::matmul,
                {transposed(DType::f16, {3, 130}), dense(DType::f16, {41, 130})}, tb));
}

TEST_P(CpuKernels, MatmulInBf16MatchesTheReferenceAtBf16Tolerance) {
  // The vdpbf16ps path where the ISA has it (k blocks of 1024 pairs, odd depths padded, every
  // input dtype rounded while packing), f32 elsewhere; shapes cross the 14 x 32 tile and the k
  // blocks, and M <= 8 (f32 compute) is covered too.
  struct M {
    int64_t m, n, k;
  };
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    for (const M& m : {M{15, 33, 1}, M{29, 65, 301}, M{100, 70, 2049}, M{8, 40, 77}})
      for (bool tb : {false, true}) {
        OpAttrs a;
        a.transpose_b = tb;
        const std::string dims =
            std::to_string(m.m) + "x" + std::to_string(m.n) + "x" + std::to_string(m.k);
        expect_matches_reference(
            make_case("mm/bf16dot." + std::string(dtype_name(t)) + "." + dims + (tb ? ".tb" : ""),
                      OpKind::matmul,
                      {dense(t, {m.m, m.k}), dense(t, tb ? Shape{m.n, m.k} : Shape{m.k, m.n})}, a),
            Precision::bf16);
      }
  expect_matches_reference(
      make_case("mm/bf16dot.views", OpKind::matmul,
                {transposed(DType::f16, {130, 70}), strided(DType::f16, {70, 33})}),
      Precision::bf16);
}

// With vdpbf16ps the product is that of the inputs rounded to bf16 (to nearest even), up to f32
// accumulation and the output's rounding: NMSE about 1e-12, where a truncating or misordered
// pack gives about 1e-6.
TEST_P(CpuKernels, MatmulInBf16RoundsItsInputsToNearestEven) {
  if (GetParam() != Isa::avx512bf16) GTEST_SKIP() << "no bf16 dot products on this ISA";
  for (DType t : {DType::f32, DType::f16}) {
    OpAttrs a;
    a.transpose_b = true;
    auto c = make_case("mm/bf16round." + std::string(dtype_name(t)), OpKind::matmul,
                       {dense(t, {37, 301}), dense(t, {45, 301})}, a);
    auto op = check::case_op(c);
    ASSERT_TRUE(op.ok());
    auto inputs = check::case_inputs(c);
    std::vector<HostTensor> rounded;
    for (const HostTensor& x : inputs) {
      std::vector<double> v = x.to_doubles();
      for (double& e : v) e = bf16_to_f32(f32_to_bf16(static_cast<float>(e)));
      HostTensor r = HostTensor::empty(DType::f32, x.desc().dims());
      r.from_doubles(v);
      rounded.push_back(std::move(r));
    }
    OpDesc rop = *op;
    for (TensorDesc& d : rop.inputs) d = TensorDesc::contiguous(DType::f32, d.dims());
    auto want = reference::evaluate(rop, rounded);
    ASSERT_TRUE(want.ok()) << want.status().message();
    // Run the op with its own inputs and compare with the rounded inputs' product.
    check::Outcome o =
        check::run_case(cpu_device(), simd_choice(*op, Precision::bf16), *op, inputs, *want);
    EXPECT_LT(o.metrics.nmse, 1e-9) << dtype_name(t) << ": " << o.message;
  }
}

TEST_P(CpuKernels, MatmulBatchBroadcastingMatchesTheReference) {
  const DType t = DType::f32;
  // Batched a with a shared b (packed once), b batched with a shared a, both broadcasting.
  expect_matches_reference(make_case("mm/batch.shared_b", OpKind::matmul,
                                     {dense(t, {3, 2, 40, 50}), dense(t, {50, 70})}));
  expect_matches_reference(
      make_case("mm/batch.shared_a", OpKind::matmul, {dense(t, {40, 50}), dense(t, {4, 50, 33})}));
  expect_matches_reference(make_case("mm/batch.both", OpKind::matmul,
                                     {dense(t, {2, 1, 13, 19}), dense(t, {1, 3, 19, 300})}));
  expect_matches_reference(
      make_case("mm/batch.many_small", OpKind::matmul,
                {dense(DType::bf16, {64, 5, 7}), dense(DType::bf16, {64, 7, 3})}));
}

struct Attn {
  int64_t B, Hq, Hkv, Lq, Lk, D;
  bool causal, mask;
  const char* tag;
};

void attention_case(const Attn& a, DType t) {
  OpAttrs at;
  at.causal = a.causal;
  std::vector<TensorDesc> in = {dense(t, {a.B, a.Hq, a.Lq, a.D}), dense(t, {a.B, a.Hkv, a.Lk, a.D}),
                                dense(t, {a.B, a.Hkv, a.Lk, a.D})};
  std::vector<check::Fill> f(3, check::Fill::unit);
  if (a.mask) {
    in.push_back(dense(DType::f32, {a.B, 1, a.Lq, a.Lk}));
    f.push_back(check::Fill::mask);
  }
  expect_matches_reference(
      make_case(std::string("attn/") + std::string(dtype_name(t)) + "/" + a.tag, OpKind::attention,
                in, at, f));
}

TEST_P(CpuKernels, AttentionPrefillShapesMatchTheReference) {
  const Attn as[] = {
      {1, 4, 4, 300, 300, 64, true, false, "causal.300"},
      {2, 8, 2, 130, 200, 80, true, true, "gqa.causal.mask.lq<lk"},
      {1, 2, 1, 250, 90, 32, true, false, "causal.lq>lk"},
      {1, 3, 3, 97, 97, 128, false, true, "mask.d128"},
      {1, 1, 1, 40, 2000, 64, true, false, "split_k.prefill"},  // one row block: keys split
      {1, 2, 2, 33, 1000, 17, false, false, "odd_d"},
  };
  for (const Attn& a : as) attention_case(a, DType::f32);
  attention_case(as[1], DType::f16);
  attention_case(as[4], DType::bf16);
}

TEST_P(CpuKernels, AttentionDecodeShapesMatchTheReference) {
  const Attn as[] = {
      {1, 8, 1, 1, 4100, 128, false, false, "mqa.decode.4100"},   // split-K
      {1, 4, 4, 1, 4097, 64, true, false, "decode.causal.4097"},  // split-K, causal
      {2, 4, 2, 2, 3000, 64, true, true, "decode2.causal.mask"},  // Lq = 2 against a cache
      {1, 2, 2, 1, 5, 48, false, false, "decode.short"},
      {1, 4, 4, 1, 700, 128, false, false, "mha.decode.d128"},  // one row per kv head
      {1, 4, 2, 1, 600, 200, true, false, "gqa2.decode.d200"},  // two rows, 128 + 64 + tail
  };
  for (const Attn& a : as) attention_case(a, DType::f32);
  attention_case(as[0], DType::bf16);
  attention_case(as[2], DType::f16);
  attention_case(as[4], DType::f16);
  attention_case(as[5], DType::bf16);
}

TEST_P(CpuKernels, AttentionStridedInputsMatchTheReference) {
  const DType t = DType::f32;
  // q as a transposed view (rows strided), k and v with every other element.
  OpAttrs at;
  at.causal = true;
  expect_matches_reference(make_case(
      "attn/views", OpKind::attention,
      {transposed(t, {1, 4, 50, 32}), strided(t, {1, 2, 60, 32}), strided(t, {1, 2, 60, 32})}, at));
  expect_matches_reference(
      make_case("attn/views.decode", OpKind::attention,
                {strided(DType::f16, {1, 4, 1, 32}), strided(DType::f16, {1, 1, 1500, 32}),
                 transposed(DType::f16, {1, 1, 1500, 32})}));
}

TEST_P(CpuKernels, AttentionRowsThatSeeNoKeyAreZero) {
  // Lq > Lk, causal: the first Lq - Lk queries see nothing; a mask row of -inf too.
  const DType t = DType::f32;
  OpAttrs at;
  at.causal = true;
  auto c = make_case(
      "attn/empty_rows", OpKind::attention,
      {dense(t, {1, 2, 150, 16}), dense(t, {1, 2, 20, 16}), dense(t, {1, 2, 20, 16})}, at);
  auto op = check::case_op(c);
  ASSERT_TRUE(op.ok());
  auto inputs = check::case_inputs(c);
  auto ref = reference::evaluate(*op, inputs);
  ASSERT_TRUE(ref.ok());
  for (int64_t i = 0; i < 130 * 16; ++i) ASSERT_EQ((*ref)[static_cast<size_t>(i)], 0.0);
  expect_matches_reference(c);
  // A mask of shape [Lq, 1] repeats one value over all keys: its -inf rows mask whole rows, on
  // the prefill path and on the decode path (Lq = 2 rows of a group of 2).
  for (auto [hq, lq, lk] : {std::tuple<int64_t, int64_t, int64_t>{2, 64, 300}, {2, 2, 3000}}) {
    auto m =
        make_case("attn/masked_rows." + std::to_string(lq), OpKind::attention,
                  {dense(t, {1, hq, lq, 32}), dense(t, {1, 1, lk, 32}), dense(t, {1, 1, lk, 32}),
                   dense(DType::f32, {lq, 1})},
                  {}, {check::Fill::unit, check::Fill::unit, check::Fill::unit, check::Fill::mask});
    expect_matches_reference(m);
  }
}

// gelu in both forms against the double formulas: relative 1e-6 (1e-5 on the negative side,
// where f32 rounding of the exponent's argument is amplified), absolute 1e-30 (the forms are 0
// below x = -10 and -13), NaN stays NaN, +inf stays +inf.
TEST_P(CpuKernels, GeluMatchesTheDoubleFormulasOverTheWholeRange) {
  const cpu::kernels::Kernels& kt = cpu::kernels::active_kernels();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {-inf,  -1e30f, -100.0f, -12.0f,
                          -9.5f, 0.0f,   1e-20f,  -1e-20f,
                          30.0f, 1e30f,  inf,     std::numeric_limits<float>::quiet_NaN()};
  for (int i = 0; i < 2001; ++i) x.push_back(-12.0f + 0.012f * static_cast<float>(i) + 1e-4f);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> yt(x.size()), ye(x.size());
  kt.gelu_tanh(x.data(), yt.data(), n);
  kt.gelu_erf(x.data(), ye.data(), n);
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(yt[i]) && std::isnan(ye[i]));
      continue;
    }
    if (v == inf) {
      EXPECT_EQ(yt[i], inf);
      EXPECT_EQ(ye[i], inf);
      continue;
    }
    const double c = std::sqrt(2.0 / 3.14159265358979323846);
    // 0.5 v (1 + tanh(u)) as v / (1 + exp(-2u)), which does not cancel for negative v.
    const double wt = v == -inf ? 0.0 : v / (1.0 + std::exp(-2.0 * c * (v + 0.044715 * v * v * v)));
    const double we = v == -inf ? 0.0 : 0.5 * v * std::erfc(-v / std::sqrt(2.0));
    const double rel = v < 0.0 ? 1e-5 : 1e-6;
    EXPECT_NEAR(yt[i], wt, rel * std::abs(wt) + 1e-30) << "gelu_tanh(" << x[i] << ")";
    EXPECT_NEAR(ye[i], we, rel * std::abs(we) + 1e-30) << "gelu_erf(" << x[i] << ")";
  }
}

// The vector exp and silu against std::exp in double, over every range the polynomial meets and
// past it: -inf, underflow, the 88 boundary, overflow to +inf, NaN, and ragged lengths, in place
// and not.
TEST_P(CpuKernels, ExpAndSiluMatchTheLibraryOverTheWholeRange) {
  const cpu::kernels::Kernels& kt = cpu::kernels::active_kernels();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {-inf,    -200.0f,
                          -103.5f, -87.9f,
                          -87.0f,  -20.25f,
                          -1.0f,   -1e-8f,
                          0.0f,    1e-8f,
                          0.5f,    1.0f,
                          10.75f,  60.0f,
                          87.99f,  88.0f,
                          88.5f,   88.72f,
                          88.8f,   100.0f,
                          inf,     std::numeric_limits<float>::quiet_NaN()};
  for (int i = 0; i < 1000; ++i) x.push_back(-90.0f + 0.18f * static_cast<float>(i) + 0.0137f);
  for (size_t n : {size_t{1}, size_t{7}, size_t{17}, x.size()}) {
    std::vector<float> y(n, -1.0f), z(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n));
    const float sum = kt.exp(x.data(), y.data(), static_cast<int64_t>(n));
    kt.exp(z.data(), z.data(), static_cast<int64_t>(n));  // in place
    double want_sum = 0;
    for (size_t i = 0; i < n; ++i) {
      const double want = std::exp(static_cast<double>(x[i]));
      want_sum += static_cast<float>(want);
      if (std::isnan(x[i])) {
        EXPECT_TRUE(std::isnan(y[i]) && std::isnan(z[i])) << "exp(NaN)";
      } else if (want > std::numeric_limits<float>::max()) {
        EXPECT_EQ(y[i], inf) << "exp(" << x[i] << ")";
        EXPECT_EQ(z[i], inf) << "exp(" << x[i] << ") in place";
      } else {
        // About 1 ulp; below exp(-87), near the smallest normal float, it flushes to zero.
        EXPECT_NEAR(y[i], want, 4e-7 * want + 1.7e-38) << "exp(" << x[i] << ")";
        EXPECT_EQ(z[i], y[i]) << "exp(" << x[i] << ") in place";
      }
    }
    if (std::isnan(want_sum)) {
      EXPECT_TRUE(std::isnan(sum)) << n << " values";
    } else if (want_sum > std::numeric_limits<float>::max()) {
      EXPECT_EQ(sum, inf) << n << " values";
    } else {
      EXPECT_NEAR(sum, want_sum, 1e-6 * want_sum) << n << " values";
    }
    std::vector<float> s(n, -1.0f);
    kt.silu(x.data(), s.data(), static_cast<int64_t>(n));
    for (size_t i = 0; i < n; ++i) {
      const double v = x[i];
      if (std::isnan(x[i])) {
        EXPECT_TRUE(std::isnan(s[i])) << "silu(NaN)";
        continue;
      }
      const double want = v == -inf ? 0.0 : v == inf ? inf : v / (1.0 + std::exp(-v));
      if (std::isinf(want)) {
        EXPECT_EQ(s[i], want);
      } else {
        // Flushed to 0 below x = -88, where |silu| < 6e-37.
        EXPECT_NEAR(s[i], want, 5e-7 * std::abs(want) + 6e-37) << "silu(" << x[i] << ")";
      }
    }
  }
}

// sigmoid, tanh, erf and sqrt against the library in double over their whole range: both sides
// of the polynomial thresholds (tanh 0.625, erf 0.5), tiny and huge arguments, infinities, NaN,
// ragged lengths. tanh and erf hold their relative precision near 0, where a 1 - ... form cannot.
TEST_P(CpuKernels, SigmoidTanhErfSqrtMatchTheLibraryOverTheWholeRange) {
  const cpu::kernels::Kernels& kt = cpu::kernels::active_kernels();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {-inf,
                          -1e30f,
                          -100.0f,
                          -88.5f,
                          -9.0f,
                          -0.625f,
                          -0.5f,
                          -1e-6f,
                          -1e-30f,
                          0.0f,
                          1e-30f,
                          1e-6f,
                          0.4999f,
                          0.5f,
                          0.5001f,
                          0.6249f,
                          0.625f,
                          0.6251f,
                          9.0f,
                          30.0f,
                          1e30f,
                          inf,
                          std::numeric_limits<float>::quiet_NaN()};
  for (int i = 0; i < 1201; ++i) x.push_back(-6.0f + 0.01f * static_cast<float>(i) + 1e-4f);
  for (size_t n : {size_t{1}, size_t{13}, x.size()}) {
    std::vector<float> sg(n), th(n), ef(n), sq(n);
    kt.sigmoid(x.data(), sg.data(), static_cast<int64_t>(n));
    kt.tanh(x.data(), th.data(), static_cast<int64_t>(n));
    kt.erf(x.data(), ef.data(), static_cast<int64_t>(n));
    kt.sqrt(x.data(), sq.data(), static_cast<int64_t>(n));
    for (size_t i = 0; i < n; ++i) {
      const double v = x[i];
      if (std::isnan(v)) {
        EXPECT_TRUE(std::isnan(sg[i]) && std::isnan(th[i]) && std::isnan(ef[i]) &&
                    std::isnan(sq[i]));
        continue;
      }
      const double wsg = 1.0 / (1.0 + std::exp(-v)), wth = std::tanh(v), wef = std::erf(v);
      // Below -88 sigmoid is under 7e-39 and may flush.
      EXPECT_NEAR(sg[i], wsg, 4e-7 * wsg + 7e-39) << "sigmoid(" << x[i] << ")";
      EXPECT_NEAR(th[i], wth, 4e-7 * std::abs(wth) + 1e-45) << "tanh(" << x[i] << ")";
      EXPECT_NEAR(ef[i], wef, 5e-7 * std::abs(wef) + 1e-45) << "erf(" << x[i] << ")";
      if (v < 0)
        EXPECT_TRUE(std::isnan(sq[i])) << "sqrt(" << x[i] << ")";
      else
        EXPECT_EQ(sq[i], static_cast<float>(std::sqrt(v))) << "sqrt(" << x[i] << ")";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryIsaThisCpuRuns, CpuKernels, testing::ValuesIn(supported_isas()),
                         [](const testing::TestParamInfo<Isa>& p) {
                           return std::string(cpu::kernels::isa_name(p.param));
                         });

}  // namespace
}  // namespace duet
