// An rmsnorm followed by int_dot mat-vecs of its output quantizes their activations in its own
// kernel on a CUDA device (DeviceOptions::fuse_norm_quant): no q8_act launch. Checked on the fake
// driver (kernels on the emulator) against the float64 reference, norm and mat-vec outputs
// poisoned and guarded, and bit for bit against the same ops with the fusion off. A residual add
// before the norm (its sum the norm's input) runs in the norm's kernel too
// (DeviceOptions::fuse_add_norm). A silu_mul before an int_dot mat-vec quantizes its activations
// likewise (DeviceOptions::fuse_silu_quant).
#include <gtest/gtest.h>

#include <cstring>

#include "check/check.h"
#include "device.h"
#include "duet/kernels/launch.h"
#include "fake_driver.h"
#include "reference/reference.h"

namespace duet::cuda {
namespace {

using namespace duet::cuda::testing;

constexpr uint64_t kNormGuard = 256;  // bytes of poison each side of an output

std::shared_ptr<Buffer> upload(Device& d, const HostTensor& t) {
  auto b = *d.allocate(t.storage_bytes());
  EXPECT_TRUE(d.write(*b, 0, t.storage(), t.storage_bytes()).ok());
  return b;
}

// An output's buffer between guards: all 0xFF (NaN in f32, and the guards' pattern).
std::shared_ptr<Buffer> poisoned(Device& d, const TensorDesc& t) {
  const uint64_t n = static_cast<uint64_t>(t.nbytes()) + 2 * kNormGuard;
  auto b = *d.allocate(n);
  std::vector<uint8_t> poison(n, 0xFF);
  EXPECT_TRUE(d.write(*b, 0, poison.data(), n).ok());
  return b;
}

// The tensor placed after the front guard of a poisoned() buffer (f32 elements).
TensorDesc guarded(TensorDesc t) {
  t.offset = static_cast<int64_t>(kNormGuard / 4);
  return t;
}

// An f32 output read back with its guards: the guards untouched, every element within the
// tolerance of `ref` at precision p (unwritten elements are NaN and fail). Returns the bytes.
std::vector<uint8_t> read_checked(Device& d, const std::shared_ptr<Buffer>& b, const OpDesc& op,
                                  const std::vector<double>& ref, Precision p,
                                  const std::string& what) {
  const uint64_t bytes = static_cast<uint64_t>(op.output.nbytes());
  std::vector<uint8_t> got(bytes + 2 * kNormGuard);
  EXPECT_TRUE(d.read(*b, 0, got.data(), got.size()).ok());
  for (uint64_t i = 0; i < kNormGuard; ++i) {
    EXPECT_EQ(got[i], 0xFF) << what << " " << op.name << ": a write before the output";
    EXPECT_EQ(got[kNormGuard + bytes + i], 0xFF) << what << " " << op.name << ": after it";
  }
  std::vector<double> out(static_cast<size_t>(op.output.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    float v;
    std::memcpy(&v, got.data() + kNormGuard + 4 * i, 4);
    out[i] = v;
  }
  const check::Metrics mt = check::compare(out, ref, false);
  EXPECT_TRUE(check::passes(mt, check::tolerance(op, p)))
      << what << " " << op.name << " (" << describe(op) << "): nmse " << mt.nmse << ", max_rel "
      << mt.max_rel << ", unwritten or NaN " << mt.nan;
  return got;
}

struct NormRun {
  std::vector<std::vector<uint8_t>> outputs;  // the add's, the norm's, then each mat-vec's
                                              // (guards included)
  int fused = 0;                              // launch_group calls with the norm
  int fused_adds = 0;                         // ... and with the add
  size_t groups = 0;
};

// rmsnorm(x [M, K], w [K]) then mat-vecs of its output by weights of the given formats and N,
// each output between guards of NaN. `other` makes the first mat-vec read another tensor;
// `residual` makes x the sum of an add (x = a + b) run just before the norm.
NormRun run_norm(int64_t M, int64_t K, const std::vector<std::pair<DType, int64_t>>& shapes,
                 DeviceOptions options, const std::string& what, bool other = false,
                 bool residual = false) {
  NormRun r;
  auto driver = std::make_shared<FakeDriver>(std::vector<DeviceProps>{a100()});
  auto dev = make_device(driver, a100(), caps_from_props(a100()), parse_build_archs("75;80", "80"),
                         options);
  Device& d = *dev;
  check::Case nc;
  nc.name = "fused_norm/" + std::to_string(M) + "x" + std::to_string(K);
  nc.kind = OpKind::rmsnorm;
  nc.attrs.eps = 1e-5f;
  nc.inputs = {TensorDesc::contiguous(DType::f32, {M, K}), TensorDesc::contiguous(DType::f32, {K})};
  nc.fills = {check::Fill::unit, check::Fill::positive};
  OpDesc norm = *check::case_op(nc);
  norm.name = "norm";
  std::vector<HostTensor> nin = check::case_inputs(nc);
  // The residual add: a + b = x, whose f32 sum is the norm's reference input.
  check::Case ac;
  ac.name = "fused_add/" + std::to_string(M) + "x" + std::to_string(K);
  ac.kind = OpKind::add;
  ac.inputs = {nc.inputs[0], nc.inputs[0]};
  ac.fills = {check::Fill::unit, check::Fill::unit};
  OpDesc add = *check::case_op(ac);
  add.name = "residual";
  const std::vector<HostTensor> ain = check::case_inputs(ac);
  const std::vector<double> aref = *reference::evaluate(add, ain);
  if (residual) nin[0].from_doubles(aref);  // rounded to f32, as the device's sum
  const std::vector<double> nref = *reference::evaluate(norm, nin);
  // The mat-vecs' reference reads the reference norm rounded to f32.
  HostTensor h = HostTensor::empty(norm.output);
  h.from_doubles(nref);  // rounded to f32

  auto xb = residual ? poisoned(d, add.output) : upload(d, nin[0]), wb = upload(d, nin[1]),
       hb = poisoned(d, norm.output);
  auto ab = upload(d, ain[0]), bb = upload(d, ain[1]);
  auto other_b = upload(d, h);  // the reference norm's values, elsewhere
  KernelChoice nchoice;
  for (const KernelChoice& k : d.choices(norm))
    if (k.ok && k.tier == Tier::generic) nchoice = k;
  EXPECT_NE(nchoice.reason.find("cuda.fuse_norm_quant"), std::string::npos) << nchoice.reason;

  struct Mv {
    OpDesc op;
    KernelChoice choice;
    std::shared_ptr<Buffer> w, out;
    std::vector<double> ref;
  };
  std::vector<Mv> mvs;
  OpAttrs tb;
  tb.transpose_b = true;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto [f, N] = shapes[i];
    check::Case c;
    c.name = "fused_norm/" + std::string(dtype_name(f)) + "/" + std::to_string(i);
    c.kind = OpKind::matmul;
    c.attrs = tb;
    c.inputs = {TensorDesc::contiguous(DType::f32, {M, K}), TensorDesc::contiguous(f, {N, K})};
    c.fills = {check::Fill::unit, check::Fill::blocks};
    Mv m;
    m.op = *check::case_op(c);
    m.op.name = "mv" + std::to_string(i);
    const HostTensor w = check::case_inputs(c)[1];
    m.ref = *reference::evaluate(m.op, std::vector<HostTensor>{h, w});
    for (const KernelChoice& k : d.choices(m.op))
      if (k.ok && k.tier == Tier::int_dot) m.choice = k;
    EXPECT_TRUE(m.choice.ok) << what << ": no int_dot choice";
    m.w = upload(d, w);
    m.out = poisoned(d, m.op.output);
    mvs.push_back(std::move(m));
  }

  if (residual) {
    KernelChoice achoice;
    for (const KernelChoice& k : d.choices(add))
      if (k.ok && k.tier == Tier::generic) achoice = k;
    const TensorRef arefs[2] = {{add.inputs[0], ab.get()}, {add.inputs[1], bb.get()}};
    EXPECT_TRUE(d.execute({add, achoice}, arefs, {guarded(add.output), xb.get()}).ok()) << what;
  }
  const TensorRef nrefs[2] = {{residual ? guarded(norm.inputs[0]) : norm.inputs[0], xb.get()},
                              {norm.inputs[1], wb.get()}};
  EXPECT_TRUE(d.execute({norm, nchoice}, nrefs, {guarded(norm.output), hb.get()}).ok()) << what;
  for (Mv& m : mvs) {
    const bool elsewhere = other && &m == &mvs[0];
    const TensorRef in[2] = {{elsewhere ? m.op.inputs[0] : guarded(m.op.inputs[0]),
                              elsewhere ? other_b.get() : hb.get()},
                             {m.op.inputs[1], m.w.get()}};
    EXPECT_TRUE(d.execute({m.op, m.choice}, in, {guarded(m.op.output), m.out.get()}).ok()) << what;
  }
  EXPECT_TRUE(d.synchronize().ok()) << what;

  auto read_check = [&](const std::shared_ptr<Buffer>& b, const OpDesc& op,
                        const std::vector<double>& ref,
                        Precision p) { r.outputs.push_back(read_checked(d, b, op, ref, p, what)); };
  if (residual) read_check(xb, add, aref, Precision::f32);
  read_check(hb, norm, nref, nchoice.precision);
  for (Mv& m : mvs) read_check(m.out, m.op, m.ref, m.choice.precision);
  r.fused = driver->fused_norms;
  r.fused_adds = driver->fused_adds;
  r.groups = driver->group_launches.size();
  return r;
}

// Three mat-vecs of two formats after the norm, for one decode row and three: one launch_group
// with the norm in it, every output written and within tolerance, and the same bits as the
// norm, q8_act and mat-vecs launched apart (the fusion off).
TEST(CudaNormQuant, AnRmsnormQuantizesItsMatvecsActivationsInItsKernel) {
  const std::vector<std::pair<DType, int64_t>> shapes = {
      {DType::q4_0, 13}, {DType::q6_k, 6}, {DType::q4_0, 8}};
  for (int64_t M : {1, 3}) {
    const std::string what = "M" + std::to_string(M);
    DeviceOptions off;
    off.fuse_norm_quant = false;
    const NormRun fused = run_norm(M, 256, shapes, {}, what + " fused");
    const NormRun apart = run_norm(M, 256, shapes, off, what + " apart");
    EXPECT_EQ(fused.fused, 1) << what;
    EXPECT_EQ(apart.fused, 0) << what;
    EXPECT_EQ(fused.groups, 1u) << what;
    EXPECT_EQ(fused.outputs, apart.outputs) << what << ": the fused run gives other bits";
  }
}

// Without grouping, the norm still quantizes the first mat-vec's activations; a mat-vec of
// another tensor after the norm leaves it alone.
TEST(CudaNormQuant, FusesWithoutGroupingAndNotForOtherActivations) {
  DeviceOptions nogroup;
  nogroup.group_matvecs = false;
  const NormRun one = run_norm(1, 64, {{DType::q8_0, 5}, {DType::q8_0, 3}}, nogroup, "no grouping");
  EXPECT_EQ(one.fused, 1);
  EXPECT_EQ(one.groups, 1u) << "the norm and the first mat-vec";
  const NormRun other = run_norm(1, 64, {{DType::q8_0, 5}}, {}, "another tensor", true);
  EXPECT_EQ(other.fused, 0);
}

// The residual add before the norm runs in the norm's kernel (one launch fewer), the sum still
// written, with the same bits as the add, the norm and the mat-vecs launched apart; without the
// norm fusion, or without a mat-vec of the norm's output after it, the add runs alone.
TEST(CudaNormQuant, AResidualAddRunsInTheNormsKernel) {
  const std::vector<std::pair<DType, int64_t>> shapes = {{DType::q4_0, 13}, {DType::q6_k, 6}};
  for (int64_t M : {1, 3}) {
    const std::string what = "M" + std::to_string(M);
    DeviceOptions no_add, off;
    no_add.fuse_add_norm = false;
    off.fuse_norm_quant = false;
    const NormRun fused = run_norm(M, 256, shapes, {}, what + " fused", false, true);
    const NormRun norm_only = run_norm(M, 256, shapes, no_add, what + " add apart", false, true);
    const NormRun apart = run_norm(M, 256, shapes, off, what + " apart", false, true);
    EXPECT_EQ(fused.fused_adds, 1) << what;
    EXPECT_EQ(fused.fused, 1) << what;
    EXPECT_EQ(norm_only.fused_adds, 0) << what;
    EXPECT_EQ(norm_only.fused, 1) << what;
    EXPECT_EQ(apart.fused_adds, 0) << what;
    EXPECT_EQ(fused.outputs, apart.outputs) << what << ": the fused run gives other bits";
    EXPECT_EQ(norm_only.outputs, apart.outputs) << what;
  }
  // A mat-vec of another tensor after the norm: neither the norm nor the add fuses.
  const NormRun other = run_norm(1, 64, {{DType::q8_0, 5}}, {}, "another tensor", true, true);
  EXPECT_EQ(other.fused, 0);
  EXPECT_EQ(other.fused_adds, 0);
}

// silu_mul(g, u) [M, K] then an int_dot mat-vec of its output (a decode step's ffn_down): the
// silu_mul quantizes the mat-vec's activations in its own kernel (DeviceOptions::fuse_silu_quant,
// one q8_act launch fewer), both outputs within tolerance of the float64 reference, unwritten
// bytes of either caught by NaN guards, and the same bits as with the fusion off.
struct SiluRun {
  std::vector<std::vector<uint8_t>> outputs;  // silu_mul's, the mat-vec's (guards included)
  int fused = 0;
  uint64_t kernels = 0;
};

SiluRun run_silu(int64_t M, int64_t K, int64_t N, DeviceOptions options, const std::string& what) {
  SiluRun r;
  auto driver = std::make_shared<FakeDriver>(std::vector<DeviceProps>{a100()});
  auto dev = make_device(driver, a100(), caps_from_props(a100()), parse_build_archs("75;80", "80"),
                         options);
  Device& d = *dev;
  check::Case sc;
  sc.name = "fused_silu/" + std::to_string(M) + "x" + std::to_string(K);
  sc.kind = OpKind::silu_mul;
  sc.inputs = {TensorDesc::contiguous(DType::f32, {M, K}),
               TensorDesc::contiguous(DType::f32, {M, K})};
  sc.fills = {check::Fill::unit, check::Fill::unit};
  OpDesc silu = *check::case_op(sc);
  silu.name = "silu";
  const std::vector<HostTensor> sin = check::case_inputs(sc);
  const std::vector<double> sref = *reference::evaluate(silu, sin);
  HostTensor h = HostTensor::empty(silu.output);
  h.from_doubles(sref);  // the mat-vec's reference reads it rounded to f32
  check::Case c;
  c.name = "fused_silu/q4_0";
  c.kind = OpKind::matmul;
  c.attrs.transpose_b = true;
  c.inputs = {TensorDesc::contiguous(DType::f32, {M, K}),
              TensorDesc::contiguous(DType::q4_0, {N, K})};
  c.fills = {check::Fill::unit, check::Fill::blocks};
  OpDesc mv = *check::case_op(c);
  mv.name = "down";
  const HostTensor w = check::case_inputs(c)[1];
  const std::vector<double> mref = *reference::evaluate(mv, std::vector<HostTensor>{h, w});

  auto gb = upload(d, sin[0]), ub = upload(d, sin[1]), wb = upload(d, w);
  auto hb = poisoned(d, silu.output), ob = poisoned(d, mv.output);
  KernelChoice schoice, mchoice;
  for (const KernelChoice& k : d.choices(silu))
    if (k.ok && k.tier == Tier::generic) schoice = k;
  for (const KernelChoice& k : d.choices(mv))
    if (k.ok && k.tier == Tier::int_dot) mchoice = k;
  EXPECT_NE(schoice.reason.find("cuda.fuse_silu_quant"), std::string::npos) << schoice.reason;
  EXPECT_TRUE(mchoice.ok) << what << ": no int_dot choice";
  const uint64_t before = kernels::emu::kernels_run();
  const TensorRef srefs[2] = {{silu.inputs[0], gb.get()}, {silu.inputs[1], ub.get()}};
  EXPECT_TRUE(d.execute({silu, schoice}, srefs, {guarded(silu.output), hb.get()}).ok()) << what;
  const TensorRef mrefs[2] = {{guarded(mv.inputs[0]), hb.get()}, {mv.inputs[1], wb.get()}};
  EXPECT_TRUE(d.execute({mv, mchoice}, mrefs, {guarded(mv.output), ob.get()}).ok()) << what;
  EXPECT_TRUE(d.synchronize().ok()) << what;
  r.kernels = kernels::emu::kernels_run() - before;

  auto read_check = [&](const std::shared_ptr<Buffer>& b, const OpDesc& op,
                        const std::vector<double>& ref,
                        Precision p) { r.outputs.push_back(read_checked(d, b, op, ref, p, what)); };
  read_check(hb, silu, sref, schoice.precision);
  read_check(ob, mv, mref, mchoice.precision);
  r.fused = driver->fused_silus;
  return r;
}

TEST(CudaNormQuant, ASiluMulQuantizesTheDownProjectionsActivationsInItsKernel) {
  for (int64_t M : {1, 3}) {
    const std::string what = "M" + std::to_string(M);
    DeviceOptions off;
    off.fuse_silu_quant = false;
    const SiluRun fused = run_silu(M, 384, 40, {}, what + " fused");
    const SiluRun apart = run_silu(M, 384, 40, off, what + " apart");
    EXPECT_EQ(fused.fused, 1) << what;
    EXPECT_EQ(apart.fused, 0) << what;
    EXPECT_EQ(fused.kernels + 1, apart.kernels) << what << ": the q8_act launch saved";
    EXPECT_EQ(fused.outputs, apart.outputs) << what << ": the fused run gives other bits";
  }
}

}  // namespace
}  // namespace duet::cuda
