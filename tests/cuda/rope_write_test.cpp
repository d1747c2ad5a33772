// A rope whose output goes into a KV cache, and the V write after it, run as one kernel on a
// CUDA device (DeviceOptions::fuse_rope_write). Checked on the fake driver (kernels on the
// emulator): the rope's output poisoned and guarded against the float64 reference, the caches
// (random before) against the reference write of the rope's output and of V, the same bits as the
// three ops launched apart, and a position outside the cache reported by the write that it breaks.
#include <gtest/gtest.h>

#include <cstring>

#include "check/check.h"
#include "device.h"
#include "fake_driver.h"
#include "reference/reference.h"

namespace duet::cuda {
namespace {

using namespace duet::cuda::testing;

constexpr uint64_t kRopeGuard = 256;  // bytes of poison each side of the rope's output
constexpr int64_t kRopeCap = 9;       // cache rows

struct RopeRun {
  Status status;
  std::vector<std::vector<uint8_t>> bytes;  // the rope's output (guards included), K, V caches
  std::vector<size_t> fused;                // the fake driver's rope_writes
};

HostTensor read_rope_tensor(Device& d, Buffer& b, const TensorDesc& desc, uint64_t at) {
  HostTensor t = HostTensor::empty(desc);
  EXPECT_TRUE(d.read(b, at, t.storage(), t.storage_bytes()).ok());
  return t;
}

// rope(x [1, 2, L, 16], pos) with 8 of 16 dims rotated, then its output written into an f16 K
// cache [1, 2, kRopeCap, 16] at pos, then V (a strided view) into an f16 V cache.
RopeRun run_rope(int64_t L, int pos, RopeMode mode, DeviceOptions options,
                 const std::string& what) {
  RopeRun r;
  auto driver = std::make_shared<FakeDriver>(std::vector<DeviceProps>{a100()});
  auto dev = make_device(driver, a100(), caps_from_props(a100()), parse_build_archs("75;80", "80"),
                         options);
  Device& d = *dev;
  const TensorDesc pd = TensorDesc::contiguous(DType::i32, {1});
  check::Case rc;
  rc.name = "rope_write/rope/" + std::to_string(L);
  rc.kind = OpKind::rope;
  rc.attrs.rope_mode = mode;
  rc.attrs.rope_dims = 8;
  rc.inputs = {TensorDesc::contiguous(DType::f32, {1, 2, L, 16}), pd};
  rc.fills = {check::Fill::unit, check::Fill::scalar};
  rc.scalar = pos;
  OpDesc rope = *check::case_op(rc);
  rope.name = "rope";
  auto write_case = [&](const std::string& name, const TensorDesc& x) {
    check::Case c;
    c.name = "rope_write/" + name + "/" + std::to_string(L);
    c.kind = OpKind::write_slice;
    c.attrs.axis = 2;
    c.inputs = {TensorDesc::contiguous(DType::f16, {1, 2, kRopeCap, 16}), x, pd};
    c.fills = {check::Fill::unit, check::Fill::unit, check::Fill::scalar};
    c.scalar = pos;
    return c;
  };
  const check::Case kc = write_case("k", rope.output);
  const check::Case vc = write_case("v", check::strided_view(DType::f32, {1, 2, L, 16}));
  OpDesc kw = *check::case_op(kc), vw = *check::case_op(vc);
  kw.name = "k_write";
  vw.name = "v_write";
  const std::vector<HostTensor> rin = check::case_inputs(rc), kin = check::case_inputs(kc),
                                vin = check::case_inputs(vc);

  auto upload = [&](const HostTensor& t) {
    auto b = *d.allocate(t.storage_bytes());
    EXPECT_TRUE(d.write(*b, 0, t.storage(), t.storage_bytes()).ok());
    return b;
  };
  auto xb = upload(rin[0]), posb = upload(rin[1]), kcb = upload(kin[0]), vb = upload(vin[1]),
       vcb = upload(vin[0]);
  const uint64_t rbytes = static_cast<uint64_t>(rope.output.nbytes()) + 2 * kRopeGuard;
  auto rb = *d.allocate(rbytes);
  std::vector<uint8_t> poison(rbytes, 0xFF);  // NaN in f32, and the guards' pattern
  EXPECT_TRUE(d.write(*rb, 0, poison.data(), rbytes).ok());
  TensorDesc rout = rope.output;
  rout.offset = static_cast<int64_t>(kRopeGuard / 4);

  auto choice = [&](const OpDesc& op) {
    for (const KernelChoice& k : d.choices(op))
      if (k.ok && k.tier == Tier::generic) return k;
    return KernelChoice{};
  };
  const KernelChoice rch = choice(rope);
  EXPECT_NE(rch.reason.find("cuda.fuse_rope_write"), std::string::npos) << rch.reason;
  const TensorRef ri[2] = {{rope.inputs[0], xb.get()}, {pd, posb.get()}};
  const TensorRef ki[3] = {{kw.inputs[0], kcb.get()}, {rout, rb.get()}, {pd, posb.get()}};
  const TensorRef vi[3] = {{vw.inputs[0], vcb.get()}, {vw.inputs[1], vb.get()}, {pd, posb.get()}};
  EXPECT_TRUE(d.execute({rope, rch}, ri, {rout, rb.get()}).ok()) << what;
  EXPECT_TRUE(d.execute({kw, choice(kw)}, ki, {kw.inputs[0], kcb.get()}).ok()) << what;
  EXPECT_TRUE(d.execute({vw, choice(vw)}, vi, {vw.inputs[0], vcb.get()}).ok()) << what;
  r.status = d.synchronize();
  r.fused = driver->rope_writes;
  if (!r.status.ok()) return r;

  // The rope's output: every element written, nothing outside it.
  std::vector<uint8_t> got(rbytes);
  EXPECT_TRUE(d.read(*rb, 0, got.data(), rbytes).ok());
  for (uint64_t i = 0; i < kRopeGuard; ++i) {
    EXPECT_EQ(got[i], 0xFF) << what << ": a write before the rope's output";
    EXPECT_EQ(got[rbytes - kRopeGuard + i], 0xFF) << what << ": after it";
  }
  const HostTensor rt = read_rope_tensor(d, *rb, rope.output, kRopeGuard);
  const check::Metrics rm = check::compare(rt.to_doubles(), *reference::evaluate(rope, rin), false);
  EXPECT_TRUE(check::passes(rm, check::tolerance(rope, rch.precision)))
      << what << " rope: nmse " << rm.nmse << ", unwritten or NaN " << rm.nan;
  r.bytes.push_back(std::move(got));
  // The caches: the slot holds the rope's output (as computed) and V, every other row as before.
  for (int c = 0; c < 2; ++c) {
    const OpDesc& op = c == 0 ? kw : vw;
    const HostTensor cache = read_rope_tensor(d, c == 0 ? *kcb : *vcb, op.output, 0);
    std::vector<HostTensor> in = c == 0 ? kin : vin;
    if (c == 0) in[1] = rt;
    const check::Metrics m =
        check::compare(cache.to_doubles(), *reference::evaluate(op, in), false);
    EXPECT_TRUE(check::passes(m, check::tolerance(op, Precision::f32)))
        << what << " " << op.name << ": nmse " << m.nmse << ", max_rel " << m.max_rel;
    std::vector<uint8_t> b(cache.storage_bytes());
    std::memcpy(b.data(), cache.storage(), b.size());
    r.bytes.push_back(std::move(b));
  }
  return r;
}

// Decode (one row) and three rows, both rope modes: one kernel for the three ops, the same bits
// as the three launched apart (the fusion off).
TEST(CudaRopeWrite, ARopeWritesItsCacheRowsAndVsInOneKernel) {
  DeviceOptions off;
  off.fuse_rope_write = false;
  for (const auto& [L, pos, mode] : std::vector<std::tuple<int64_t, int, RopeMode>>{
           {1, 7, RopeMode::neox}, {3, 2, RopeMode::gptj}}) {
    const std::string what = "L" + std::to_string(L) + " pos " + std::to_string(pos);
    const RopeRun fused = run_rope(L, pos, mode, {}, what + " fused");
    const RopeRun apart = run_rope(L, pos, mode, off, what + " apart");
    ASSERT_TRUE(fused.status.ok()) << fused.status.message();
    ASSERT_TRUE(apart.status.ok()) << apart.status.message();
    EXPECT_EQ(fused.fused, std::vector<size_t>{3}) << what;
    EXPECT_TRUE(apart.fused.empty()) << what;
    EXPECT_EQ(fused.bytes, apart.bytes) << what << ": the fused run gives other bits";
  }
}

// A position past the cache: the K write reports it (not the rope), fused as apart.
TEST(CudaRopeWrite, APositionPastTheCacheIsTheWritesError) {
  DeviceOptions off;
  off.fuse_rope_write = false;
  const RopeRun fused = run_rope(2, kRopeCap - 1, RopeMode::neox, {}, "fused");
  const RopeRun apart = run_rope(2, kRopeCap - 1, RopeMode::neox, off, "apart");
  ASSERT_FALSE(fused.status.ok());
  EXPECT_NE(fused.status.message().find("k_write"), std::string::npos) << fused.status.message();
  EXPECT_EQ(fused.status.message(), apart.status.message());
}

}  // namespace
}  // namespace duet::cuda
