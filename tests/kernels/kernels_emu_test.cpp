// Every tier's CUDA kernels, run by the host emulator on the capability records of real GPUs,
// against the float64 reference with the tolerance of the precision used (tools/check). The case
// set is the conformance set plus shapes that stress the tensor-core kernels: several tiles with
// ragged ends, causal skipping, GQA packing, split-KV decode, every head dim, strided views.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "check/check.h"
#include "duet/half.h"
#include "duet/kernels/kernel.h"
#include "duet/kernels/launch.h"
#include "emu_device.h"
#include "reference/reference.h"

namespace duet::kernels {
namespace {

using testing::make_emu_device;

struct Target {
  std::unique_ptr<Device> device;
  std::set<Tier> tiers;    // the tiers exercised on it
  bool kernel_cases_only;  // only the "kernels/" cases, not the conformance set
  // Cases to leave out on this device (each case runs on the device that shows most with it).
  bool (*skip)(const std::string& name) = nullptr;
};

// sm_80 runs every tier; sm_75 shows the tiled tier at Turing's 64 KiB of shared memory. With
// 108 and 40 SMs both split small problems into one key tile per split, so an 8-SM device runs
// the multi-tile cases unsplit: the double-buffered (flash) and single-buffered (tiled) K/V
// pipelines over several tiles.
std::vector<Target>& targets() {
  static std::vector<Target> t = [] {
    std::vector<Target> v;
    v.push_back(
        {make_emu_device("emu-a100", testing::profile("a100")),
         {Tier::flash, Tier::pipelined, Tier::tiled, Tier::generic, Tier::int8_mma, Tier::int_dot},
         false});
    v.push_back(
        {make_emu_device("emu-t4", testing::profile("t4")), {Tier::tiled, Tier::int8_mma}, false});
    // Pascal, from a build that has an sm_61 image (a CUDA 12 toolkit's): the dp4a tier.
    v.push_back(
        {make_emu_device("emu-gtx1060", testing::profile("gtx1060"), BuildArchs{{61, 75, 80}, 80}),
         {Tier::int_dot},
         true});
    v.push_back({make_emu_device("emu-orin", testing::profile("jetson-orin-nano")),
                 {Tier::flash, Tier::pipelined, Tier::tiled},
                 true});
    // Hopper, from a build with an sm_90a image: the wgmma tier. The 132-SM record splits small
    // cases' keys (decode, split-KV); with 4 SMs they run unsplit, so the stage ring wraps.
    BuildArchs hopper = testing::full_build();
    hopper.arch_specific = {90};
    v.push_back({make_emu_device("emu-h100", testing::profile("h100"), hopper),
                 {Tier::wgmma},
                 false,
                 [](const std::string& n) {
                   return n.rfind("kernels/", 0) == 0 && n.find("decode.splits") == n.npos;
                 }});
    DeviceCaps four = testing::profile("h100");
    four.compute_units = 4;
    v.push_back({make_emu_device("emu-h100-4sm", four, hopper),
                 {Tier::wgmma},
                 true,
                 [](const std::string& n) { return n.find("decode.splits") != n.npos; }});
    return v;
  }();
  return t;
}

Device* find_device(const std::string& id) {
  for (Target& t : targets())
    if (t.device->id() == id) return t.device.get();
  return nullptr;
}

check::Case make_case(std::string name, OpKind k, OpAttrs a, std::vector<TensorDesc> in,
                      std::vector<check::Fill> fills) {
  check::Case c;
  c.name = std::move(name);
  c.kind = k;
  c.attrs = std::move(a);
  c.inputs = std::move(in);
  c.fills = std::move(fills);
  return c;
}

TensorDesc dense(DType t, std::initializer_list<int64_t> s) {
  return TensorDesc::contiguous(t, s);
}

// Shapes for the tensor-core kernels beyond the conformance set.
void kernel_cases(std::vector<check::Case>& out) {
  using check::Fill;
  const std::vector<Fill> qkv = {Fill::unit, Fill::unit, Fill::unit};
  const std::vector<Fill> qkvm = {Fill::unit, Fill::unit, Fill::unit, Fill::mask};
  for (DType t : {DType::f16, DType::bf16}) {
    const std::string ts = std::string(dtype_name(t));
    OpAttrs causal;
    causal.causal = true;
    // Several row blocks and key tiles, ragged at both ends, GQA 2:1, causal skipping.
    out.push_back(make_case(
        "kernels/attention/" + ts + "/multitile.causal.gqa", OpKind::attention, causal,
        {dense(t, {1, 4, 200, 64}), dense(t, {1, 2, 200, 64}), dense(t, {1, 2, 200, 64})}, qkv));
    // Head dim 256 (key tile 32), non-causal and causal with Lq < Lk.
    out.push_back(make_case(
        "kernels/attention/" + ts + "/hd256", OpKind::attention, {},
        {dense(t, {1, 2, 33, 256}), dense(t, {1, 2, 70, 256}), dense(t, {1, 2, 70, 256})}, qkv));
    out.push_back(make_case("kernels/attention/" + ts + "/hd256.causal.mask", OpKind::attention,
                            causal,
                            {dense(t, {1, 2, 20, 256}), dense(t, {1, 2, 70, 256}),
                             dense(t, {1, 2, 70, 256}), dense(DType::f32, {20, 70})},
                            qkvm));
    // Decode against a long cache: GQA packing and split-KV with the combine kernel.
    out.push_back(make_case(
        "kernels/attention/" + ts + "/hd128.decode.splits", OpKind::attention, {},
        {dense(t, {2, 8, 1, 128}), dense(t, {2, 2, 700, 128}), dense(t, {2, 2, 700, 128})}, qkv));
    // Chunked decode: a few queries at the end of a causal cache, with a mask.
    out.push_back(make_case("kernels/attention/" + ts + "/hd80.chunk.causal.mask",
                            OpKind::attention, causal,
                            {dense(t, {1, 2, 5, 80}), dense(t, {1, 1, 300, 80}),
                             dense(t, {1, 1, 300, 80}), dense(t, {1, 1, 5, 300})},
                            qkvm));
    // More queries than keys: the first 50 see no key and must be 0.
    out.push_back(make_case(
        "kernels/attention/" + ts + "/hd96.causal.lq>lk", OpKind::attention, causal,
        {dense(t, {1, 2, 70, 96}), dense(t, {1, 2, 20, 96}), dense(t, {1, 2, 20, 96})}, qkv));
    // The wgmma tier's edges (run on the emulated H100s only): more key tiles of 128 than
    // stages, ragged ends, GQA 2:1 with a block whose second warpgroup has 4 rows, causal with
    // Lq < Lk and Lq > Lk, a mask, GQA 4:1 at head dim 128.
    out.push_back(make_case(
        "kernels/attention/" + ts + "/wgmma.hd64.causal.gqa", OpKind::attention, causal,
        {dense(t, {1, 2, 130, 64}), dense(t, {1, 1, 700, 64}), dense(t, {1, 1, 700, 64})}, qkv));
    out.push_back(make_case("kernels/attention/" + ts + "/wgmma.hd128.mask.gqa4", OpKind::attention,
                            {},
                            {dense(t, {1, 4, 20, 128}), dense(t, {1, 1, 390, 128}),
                             dense(t, {1, 1, 390, 128}), dense(DType::f32, {20, 390})},
                            qkvm));
    out.push_back(make_case(
        "kernels/attention/" + ts + "/wgmma.hd64.causal.lq>lk", OpKind::attention, causal,
        {dense(t, {2, 2, 150, 64}), dense(t, {2, 2, 40, 64}), dense(t, {2, 2, 40, 64})}, qkv));
    // q, k, v as views of a [B, L, H, D] layout (seq stride H * D).
    const int order[4] = {0, 2, 1, 3};
    out.push_back(make_case(
        "kernels/attention/" + ts + "/blhd.views", OpKind::attention, {},
        {*permute(dense(t, {2, 40, 4, 64}), order), *permute(dense(t, {2, 50, 4, 64}), order),
         *permute(dense(t, {2, 50, 4, 64}), order)},
        qkv));

    // Matmuls: several block tiles with ragged edges, aligned (vector) and element-wise loads.
    out.push_back(make_case("kernels/matmul/" + ts + "/130x72x200", OpKind::matmul, {},
                            {dense(t, {130, 72}), dense(t, {72, 200})}, {Fill::unit, Fill::unit}));
    OpAttrs tb;
    tb.transpose_b = true;
    out.push_back(make_case("kernels/matmul/" + ts + "/3x70x64.tb.batch", OpKind::matmul, tb,
                            {dense(t, {3, 70, 64}), dense(t, {96, 64})}, {Fill::unit, Fill::unit}));
    out.push_back(make_case("kernels/matmul/" + ts + "/17x520x24.longk", OpKind::matmul, {},
                            {dense(t, {17, 520}), dense(t, {520, 24})}, {Fill::unit, Fill::unit}));
    OpAttrs ta;
    ta.transpose_a = true;
    out.push_back(make_case("kernels/matmul/" + ts + "/ta.tb.40x64x33", OpKind::matmul,
                            [] {
                              OpAttrs a;
                              a.transpose_a = a.transpose_b = true;
                              return a;
                            }(),
                            {dense(t, {64, 40}), dense(t, {33, 64})}, {Fill::unit, Fill::unit}));
  }
  // The generic mat-vec (decode shapes, B [N, K]): a ragged K (element loads at the end), a
  // batch over a broadcast weight, more rows than one block of 8 warps owns, and a K longer than
  // one shared-memory chunk of A.
  {
    OpAttrs tb;
    tb.transpose_b = true;
    const std::vector<Fill> uu = {Fill::unit, Fill::unit};
    out.push_back(make_case("kernels/matvec/f16/1x1000x37", OpKind::matmul, tb,
                            {dense(DType::f16, {1, 1000}), dense(DType::f16, {37, 1000})}, uu));
    out.push_back(make_case("kernels/matvec/f16/2x1001x13.unaligned", OpKind::matmul, tb,
                            {dense(DType::f16, {2, 1001}), dense(DType::f16, {13, 1001})}, uu));
    out.push_back(make_case("kernels/matvec/bf16/2x3x256x300.batch", OpKind::matmul, tb,
                            {dense(DType::bf16, {2, 3, 256}), dense(DType::bf16, {300, 256})}, uu));
    out.push_back(make_case("kernels/matvec/f32/8x9000x5.chunks", OpKind::matmul, tb,
                            {dense(DType::f32, {8, 9000}), dense(DType::f32, {5, 9000})}, uu));
  }
  // Block-quantized weights (generic tier): K of more groups of 32 than a warp has lanes, rows of
  // A past one block of kQRows, batch dims broadcast over the weight, a bf16 activation.
  OpAttrs tb;
  tb.transpose_b = true;
  out.push_back(make_case("kernels/qmatmul/q4_k/9x2304x37", OpKind::matmul, tb,
                          {dense(DType::f16, {9, 2304}), dense(DType::q4_k, {37, 2304})},
                          {Fill::unit, Fill::blocks}));
  out.push_back(make_case("kernels/qmatmul/q8_0/batch.2x3x1088x6", OpKind::matmul, tb,
                          {dense(DType::bf16, {2, 3, 1088}), dense(DType::q8_0, {6, 1088})},
                          {Fill::unit, Fill::blocks}));
  // The integer tiers, every format once, small: a decode batch (dp4a) and a prefill tile with
  // ragged edges over several K chunks (int8 mma: 20 x 70 against 64 x 64 blocks).
  for (DType q : kQuantizedDTypes) {
    const std::string qs(dtype_name(q));
    const int64_t k = dtype_block_elems(q) == 32 ? 320 : 512;
    out.push_back(make_case("kernels/qint/" + qs + "/decode.5x" + std::to_string(k) + "x9",
                            OpKind::matmul, tb, {dense(DType::f32, {5, k}), dense(q, {9, k})},
                            {Fill::unit, Fill::blocks}));
    out.push_back(make_case("kernels/qint/" + qs + "/prefill.20x" + std::to_string(k) + "x70",
                            OpKind::matmul, tb, {dense(DType::f16, {20, k}), dense(q, {70, k})},
                            {Fill::unit, Fill::blocks}));
  }
  // Several tiles of 128 rows of A by 128 weight rows, ragged, and a decode batch whose
  // activations take several shared-memory chunks: a format per kind of scaling.
  for (DType q : {DType::q4_0, DType::q6_k}) {
    const std::string qs(dtype_name(q));
    out.push_back(make_case("kernels/qint/" + qs + "/tiles.130x512x140", OpKind::matmul, tb,
                            {dense(DType::f32, {130, 512}), dense(q, {140, 512})},
                            {Fill::unit, Fill::blocks}));
  }
  out.push_back(make_case("kernels/qint/q4_0/decode.8x8192x3.chunks", OpKind::matmul, tb,
                          {dense(DType::f32, {8, 8192}), dense(DType::q4_0, {3, 8192})},
                          {Fill::unit, Fill::blocks}));
}

const std::vector<check::Case>& all_cases() {
  static const std::vector<check::Case> c = [] {
    std::vector<check::Case> v = check::cases(false);
    kernel_cases(v);
    return v;
  }();
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
  for (Target& t : targets())
    for (size_t i = 0; i < all_cases().size(); ++i) {
      if (t.kernel_cases_only && all_cases()[i].name.rfind("kernels/", 0) != 0) continue;
      if (t.skip && t.skip(all_cases()[i].name)) continue;
      auto op = check::case_op(all_cases()[i]);
      if (!op.ok()) continue;
      // The wgmma tier's own cases are too long for the other tiers' emulated time budget.
      const bool wgmma_target = t.tiers.count(Tier::wgmma) > 0;
      if (!wgmma_target && all_cases()[i].name.find("/wgmma.") != std::string::npos) continue;
      // The integer tiers run the small cases made for them (the generic tier already runs the
      // conformance set of every format, so emulated time stays low).
      const std::string& name = all_cases()[i].name;
      const bool qcase = name.rfind("kernels/q", 0) == 0,
                 qint = name.rfind("kernels/qint/", 0) == 0;
      // The large tile case is the mma tiles' (the mat-vec would take it 17 times over); the
      // A100's cp.async mat-vec takes the decode cases (the GTX 1060's synchronous one the
      // prefill cases too).
      const bool tiles_only = name.find("/tiles.") != std::string::npos;
      const bool skip_mv_prefill =
          t.device->id() == "emu-a100" && name.find("/prefill.") != std::string::npos;
      for (const KernelChoice& k : t.device->choices(*op)) {
        const bool int_tier = k.tier == Tier::int_dot || k.tier == Tier::int8_mma;
        // A kernel that reads other dtypes would need casts first: not the kernel's business.
        if (t.tiers.count(k.tier) && k.ok && k.reads_as_given(*op) && (int_tier ? qcase : !qint) &&
            (!tiles_only || k.tier == Tier::int8_mma) &&
            !(skip_mv_prefill && k.tier == Tier::int_dot))
          out.push_back({t.device->id(), i, k.tier, k.precision});
      }
    }
  return out;
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const Param& p = info.param;
  std::string s = p.device + "_" + std::string(tier_name(p.tier)) + "_" +
                  std::string(precision_name(p.precision)) + "_" + all_cases()[p.case_index].name;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s + "_" + std::to_string(info.index);
}

class EmulatedKernel : public ::testing::TestWithParam<Param> {};

TEST_P(EmulatedKernel, MatchesTheFloat64Reference) {
  const Param& p = GetParam();
  const check::Case& c = all_cases()[p.case_index];
  Device* d = find_device(p.device);
  ASSERT_NE(d, nullptr);
  auto op = check::case_op(c);
  ASSERT_TRUE(op.ok()) << op.status().message();
  KernelChoice choice;
  for (const KernelChoice& k : d->choices(*op))
    if (k.tier == p.tier && k.precision == p.precision) choice = k;
  ASSERT_TRUE(choice.ok) << choice.reason;
  const std::vector<HostTensor> inputs = check::case_inputs(c);
  auto ref = reference::evaluate(*op, inputs);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  const check::Outcome o = check::run_case(*d, choice, *op, inputs, *ref);
  ASSERT_FALSE(o.skipped) << o.message;
  EXPECT_TRUE(o.passed) << c.name << " on " << p.device << "/" << p.tier << " ("
                        << choice.launch.str() << "): " << o.message << " (nmse " << o.metrics.nmse
                        << ", tolerance " << o.tol.str() << ")";
}

INSTANTIATE_TEST_SUITE_P(AllTiers, EmulatedKernel, ::testing::ValuesIn(params()), param_name);

// The instantiated kernel variants (tier, precision, head dim / B layout) the cases reach: every
// one the planner can choose must run here at least once.
TEST(EmulatedKernel, EveryTensorCoreVariantIsExercised) {
  std::set<std::string> seen;
  for (const Param& p : params()) {
    Device* d = find_device(p.device);
    auto op = check::case_op(all_cases()[p.case_index]);
    for (const KernelChoice& k : d->choices(*op))
      if (k.tier == p.tier && k.precision == p.precision) seen.insert(k.launch.variant_name());
  }
  std::vector<std::string> want;
  for (int hd : kAttentionHeadDims) {
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
  for (const char* q : {"int_dot_qmatvec_sync", "int_dot_qmatvec_cp_async",
                        "int_dot_qmatvec_sync_fused_act", "int_dot_qmatvec_cp_async_fused_act",
                        "int8_mma_qmatmul_m16n8k32", "int8_mma_qmatmul_m8n8k16", "generic_matvec"})
    want.push_back(q);
  for (const std::string& w : want) EXPECT_TRUE(seen.count(w)) << w << " is never run";
}

// Each integer tier runs every block format on the emulator.
TEST(EmulatedKernel, TheIntegerTiersRunEveryBlockFormat) {
  std::map<std::pair<std::string, Tier>, std::set<DType>> seen;
  for (const Param& p : params()) {
    if (p.tier != Tier::int_dot && p.tier != Tier::int8_mma) continue;
    auto op = check::case_op(all_cases()[p.case_index]);
    seen[{p.device, p.tier}].insert(op->inputs[1].dtype);
  }
  for (const auto& [device, tier] :
       {std::pair{"emu-gtx1060", Tier::int_dot}, std::pair{"emu-t4", Tier::int8_mma},
        std::pair{"emu-a100", Tier::int8_mma}, std::pair{"emu-a100", Tier::int_dot}}) {
    const std::set<DType>& formats = seen[{device, tier}];
    for (DType q : kQuantizedDTypes)
      EXPECT_TRUE(formats.count(q)) << device << " " << tier << " " << dtype_name(q);
  }
}

// ---- hand-made inputs

HostTensor fill(DType t, std::initializer_list<int64_t> shape, uint64_t seed) {
  HostTensor h = HostTensor::empty(t, std::vector<int64_t>(shape));
  std::vector<double> v(static_cast<size_t>(h.numel()));
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (double& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = (static_cast<double>(s >> 11) / 9007199254740992.0 - 0.5) * 2.0;
    if (std::abs(x) < 0.05) x = 0.05;
  }
  h.from_doubles(v);
  return h;
}

// A mask whose row 3 is entirely -inf: that query sees nothing and its output is 0.
TEST(EmulatedAttention, AFullyMaskedRowGivesZerosOnEveryTier) {
  Device* d = find_device("emu-a100");
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

TEST(EmulatedAttention, FlashOnTuringIsRefusedAtLaunchWithTheReason) {
  auto op = make_op(OpKind::attention, {},
                    {dense(DType::f16, {1, 1, 16, 64}), dense(DType::f16, {1, 1, 16, 64}),
                     dense(DType::f16, {1, 1, 16, 64})});
  ASSERT_TRUE(op.ok());
  std::vector<HostTensor> in = {fill(DType::f16, {1, 1, 16, 64}, 1),
                                fill(DType::f16, {1, 1, 16, 64}, 2),
                                fill(DType::f16, {1, 1, 16, 64}, 3)};
  HostTensor out = HostTensor::empty(op->output);
  std::vector<View> views;
  for (HostTensor& h : in) views.push_back(make_view(h.desc(), h.storage()));
  Launch l;
  l.config.block_threads = 32;
  l.config.stages = 1;
  l.sm = 75;
  Status s = emu::launch(Tier::flash, *op, views, make_view(out.desc(), out.storage()), l);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("flash kernels need sm_80, the device is sm_75"), std::string::npos)
      << s.message();
}

// The mat-vec that quantizes its own activations (decode: one launch a matmul) gives the bits of
// the separate quantizing launch, on both instances, for contiguous f32 and f16 rows (16-byte
// loads) and a transposed A (one value at a time), with a row holding an infinity.
TEST(EmulatedQuantizedMatvec, QuantizingInTheKernelGivesTheBitsOfTheSeparateLaunch) {
  OpAttrs tb;
  tb.transpose_b = true;
  for (const char* dev : {"emu-a100", "emu-gtx1060"}) {
    Device* d = find_device(dev);
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
        KernelChoice fused;
        for (const KernelChoice& k : d->choices(*op))
          if (k.tier == Tier::int_dot) fused = k;
        ASSERT_TRUE(fused.ok) << dev << ": " << fused.reason;
        const Kernel* kv = fused.launch.variant_as<Kernel>();
        ASSERT_TRUE(kv && kv->fused_act) << fused.launch.variant_name();
        KernelChoice separate = fused;
        Kernel two = *kv;
        two.fused_act = false;
        separate.launch.set_variant(two);
        std::vector<std::vector<std::byte>> outs;
        for (const KernelChoice& k : {fused, separate}) {
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
          outs.push_back(std::move(o));
        }
        EXPECT_EQ(std::memcmp(outs[0].data(), outs[1].data(), outs[0].size()), 0)
            << dev << " " << dtype_name(q) << " A " << dtype_name(t) << " variant " << variant;
        // C has A's dtype: read back through it.
        auto c = HostTensor::borrow(op->output, outs[0].data(), outs[0].size());
        ASSERT_TRUE(c.ok()) << c.status().message();
        const std::vector<double> cv = c->to_doubles();
        EXPECT_TRUE(std::isnan(cv[N])) << "row 1 holds an infinity: its block's scale is NaN";
        EXPECT_TRUE(std::isfinite(cv[0]) && std::isfinite(cv[2 * N]));
      }
    }
  }
}

// Past a few rows every block would quantize A again: one launch does it once.
TEST(EmulatedQuantizedMatvec, LargerBatchesQuantizeTheActivationsInALaunchOfTheirOwn) {
  OpAttrs tb;
  tb.transpose_b = true;
  Device* d = find_device("emu-a100");
  for (int64_t M : {1, 4, 8}) {
    auto op = make_op(OpKind::matmul, tb,
                      {TensorDesc::contiguous(DType::f32, {M, 4096}),
                       TensorDesc::contiguous(DType::q4_0, {64, 4096})});
    ASSERT_TRUE(op.ok());
    for (const KernelChoice& k : d->choices(*op)) {
      if (k.tier != Tier::int_dot) continue;
      const Kernel* kv = k.launch.variant_as<Kernel>();
      ASSERT_TRUE(kv);
      EXPECT_EQ(kv->fused_act, M <= 4) << M << ": " << k.launch.variant_name();
      EXPECT_EQ(workspace_bytes(k.tier, *op, k.launch) == 0, M <= 4) << M;
    }
  }
}

TEST(EmulatedEmbedding, AnIdOutOfRangeIsReportedWithItsPosition) {
  Device* d = find_device("emu-a100");
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
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("tensor 'tokens'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("got id 12 at position 2"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace duet::kernels
