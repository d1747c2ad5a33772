// Mat-vecs that read the same activations (a decode step's q, k and v; gate and up) run as one
// group on a CUDA device (DeviceOptions::group_matvecs): the activations quantized once, one
// mat-vec launch per block format over the members' output rows. Checked on the fake driver
// (kernels on the emulator) against the float64 reference, outputs poisoned and guarded, for
// every block format, 2 and 3 members of different N (tails shorter than a block's rows).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "check/check.h"
#include "device.h"
#include "fake_driver.h"
#include "reference/reference.h"

namespace duet::cuda {
namespace {

using namespace duet::cuda::testing;

constexpr uint64_t kGuard = 256;  // bytes of poison each side of an output

struct Member {
  OpDesc op;
  KernelChoice choice;
  HostTensor w;
  std::shared_ptr<Buffer> wbuf, out;
  std::vector<double> ref;
};

struct Group {
  std::shared_ptr<FakeDriver> driver;
  std::unique_ptr<CudaDevice> device;
  HostTensor a;
  std::shared_ptr<Buffer> abuf;
  std::vector<Member> members;
};

// Members [M, K] x [N_i, K]^T of the given formats, sharing one activation tensor.
Group make_group(int64_t M, int64_t K, const std::vector<std::pair<DType, int64_t>>& shapes,
                 DeviceOptions options = {}) {
  Group g;
  g.driver = std::make_shared<FakeDriver>(std::vector<DeviceProps>{a100()});
  g.device = make_device(g.driver, a100(), caps_from_props(a100()),
                         parse_build_archs("75;80", "80"), options);
  OpAttrs tb;
  tb.transpose_b = true;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto [f, N] = shapes[i];
    check::Case c;
    c.name = "group/" + std::string(dtype_name(f)) + "/" + std::to_string(i) + "/" +
             std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K);
    c.kind = OpKind::matmul;
    c.attrs = tb;
    c.inputs = {TensorDesc::contiguous(DType::f32, {M, K}), TensorDesc::contiguous(f, {N, K})};
    c.fills = {check::Fill::unit, check::Fill::blocks};
    Member m;
    m.op = *check::case_op(c);
    m.op.name = "mv" + std::to_string(i);
    std::vector<HostTensor> in = check::case_inputs(c);
    if (i == 0) g.a = in[0];
    m.w = in[1];
    m.ref = *reference::evaluate(m.op, std::vector<HostTensor>{g.a, m.w});
    for (const KernelChoice& k : g.device->choices(m.op))
      if (k.ok && k.tier == Tier::int_dot) m.choice = k;
    g.members.push_back(std::move(m));
  }
  return g;
}

// Uploads, poisons, runs the members one after the other (with a copy to the device after the
// first when `split`) and checks each against the reference.
void run_and_check(Group& g, const std::string& what, bool split = false) {
  Device& d = *g.device;
  g.abuf = *d.allocate(g.a.storage_bytes());
  ASSERT_TRUE(d.write(*g.abuf, 0, g.a.storage(), g.a.storage_bytes()).ok());
  for (Member& m : g.members) {
    ASSERT_TRUE(m.choice.ok) << what << ": no int_dot choice for " << describe(m.op);
    m.wbuf = *d.allocate(m.w.storage_bytes());
    ASSERT_TRUE(d.write(*m.wbuf, 0, m.w.storage(), m.w.storage_bytes()).ok());
    const uint64_t n = static_cast<uint64_t>(m.op.output.nbytes()) + 2 * kGuard;
    m.out = *d.allocate(n);
    std::vector<uint8_t> poison(n, 0xFF);  // NaN in f32, and the guards' pattern
    ASSERT_TRUE(d.write(*m.out, 0, poison.data(), n).ok());
  }
  for (Member& m : g.members) {
    const TensorRef in[2] = {{m.op.inputs[0], g.abuf.get()}, {m.op.inputs[1], m.wbuf.get()}};
    TensorDesc od = m.op.output;
    od.offset = static_cast<int64_t>(kGuard / 4);
    ASSERT_TRUE(d.execute({m.op, m.choice}, in, {od, m.out.get()}).ok()) << what;
    if (split && &m == &g.members[0])
      ASSERT_TRUE(d.write(*g.abuf, 0, g.a.storage(), g.a.storage_bytes()).ok());
  }
  ASSERT_TRUE(d.synchronize().ok()) << what;
  for (Member& m : g.members) {
    const uint64_t bytes = static_cast<uint64_t>(m.op.output.nbytes());
    std::vector<uint8_t> got(bytes + 2 * kGuard);
    ASSERT_TRUE(d.read(*m.out, 0, got.data(), got.size()).ok());
    for (uint64_t i = 0; i < kGuard; ++i) {
      ASSERT_EQ(got[i], 0xFF) << what << " " << m.op.name << ": a write before the output";
      ASSERT_EQ(got[kGuard + bytes + i], 0xFF) << what << " " << m.op.name << ": after it";
    }
    std::vector<double> out(static_cast<size_t>(m.op.output.numel()));
    for (size_t i = 0; i < out.size(); ++i) {
      float v;
      std::memcpy(&v, got.data() + kGuard + 4 * i, 4);
      out[i] = v;
    }
    const check::Metrics mt = check::compare(out, m.ref, false);
    EXPECT_TRUE(check::passes(mt, check::tolerance(m.op, m.choice.precision)))
        << what << " " << m.op.name << " (" << describe(m.op) << "): nmse " << mt.nmse
        << ", max_rel " << mt.max_rel << ", unwritten or NaN " << mt.nan;
  }
}

int64_t k_for(DType f) {
  return dtype_block_elems(f) >= 256 ? 256 : 64;
}

// Every block format: three members of one row of A (4 weight rows a block: N 13, 6 and 8) and
// two of three rows (2 a block: N 7 and 4), each group one q8_act and one mat-vec launch.
TEST(CudaMatvecGroup, EveryFormatMatchesTheReferenceInOneLaunch) {
  for (DType f : kQuantizedDTypes) {
    for (const auto& [M, ns] :
         std::vector<std::pair<int64_t, std::vector<int64_t>>>{{1, {13, 6, 8}}, {3, {7, 4}}}) {
      std::vector<std::pair<DType, int64_t>> shapes;
      for (int64_t n : ns) shapes.emplace_back(f, n);
      Group g = make_group(M, k_for(f), shapes);
      const std::string what = std::string(dtype_name(f)) + " M" + std::to_string(M);
      run_and_check(g, what);
      ASSERT_EQ(g.driver->group_launches, std::vector<size_t>{ns.size()}) << what;
    }
  }
}

// Members of different formats share the quantized activations; those of one format share a
// launch (q4_0, q6_k, q4_0: one group, whose q4_0 members run together). A copy in between, or
// the switch turned off, leaves them alone; kernel timing still gives a span per op.
TEST(CudaMatvecGroup, FormatsSplitTheLaunchAndOtherOpsSplitTheGroup) {
  {
    Group g = make_group(1, 256, {{DType::q4_0, 9}, {DType::q6_k, 5}, {DType::q4_0, 3}});
    run_and_check(g, "mixed formats");
    EXPECT_EQ(g.driver->group_launches, std::vector<size_t>{3});
  }
  {
    Group g = make_group(1, 64, {{DType::q5_0, 5}, {DType::q5_0, 3}});
    run_and_check(g, "a copy between", true);
    EXPECT_TRUE(g.driver->group_launches.empty());
  }
  {
    DeviceOptions off;
    off.group_matvecs = false;
    Group g = make_group(1, 64, {{DType::q8_0, 5}, {DType::q8_0, 3}}, off);
    run_and_check(g, "grouping off");
    EXPECT_TRUE(g.driver->group_launches.empty());
  }
  {
    Group g = make_group(1, 64, {{DType::q4_1, 5}, {DType::q4_1, 3}});
    ASSERT_TRUE(g.device->begin_kernel_timing().ok());
    run_and_check(g, "timed");
    auto spans = g.device->end_kernel_timing();
    ASSERT_TRUE(spans.ok()) << spans.status().message();
    EXPECT_EQ(spans->size(), 2u) << "a span per execute";
    EXPECT_EQ(g.driver->group_launches, std::vector<size_t>{2});
  }
}

}  // namespace
}  // namespace duet::cuda
