// The decode fusions of the Vulkan device (docs/vulkan.md, "Decode fusions"): mat-vecs of one
// activation tensor grouped into one dispatch (vulkan.group_matvecs) and int_dot matmuls reading
// one quantize_q8 output (vulkan.share_q8). Each checked against the float64 reference, against
// the same ops with the fusion off (the same bits: the fused kernels keep the arithmetic), and by
// the dispatches recorded, on this machine's device with the validation layer on.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "vulkan_test_util.h"

namespace duet::vulkan::testing {
namespace {

OpAttrs transposed_b() {
  OpAttrs tb;
  tb.transpose_b = true;
  return tb;
}

// Matmuls of one activation tensor a [M, K] by weights [N_i, K] (format `w`, activations `t`),
// executed one after the other on the device, as a decode step's q, k and v are.
struct Outputs {
  std::vector<std::vector<double>> outputs;
  uint64_t dispatches = 0, barriers = 0;
};

class DecodeFusions : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = open_vulkan({}, cache_);
    if (!r.ok()) GTEST_SKIP() << "no Vulkan device: " << r.status().message();
    devices_ = std::move(r->devices);
  }
  Device& dev() { return *devices_[0]; }

  // The cases of the matmuls (inputs drawn from their names; all read the first case's a).
  std::vector<check::Case> cases(DType t, DType w, int64_t M, int64_t K,
                                 const std::vector<int64_t>& ns) {
    std::vector<check::Case> out;
    for (size_t i = 0; i < ns.size(); ++i)
      out.push_back(make_case("fusion/" + std::to_string(i) + "." + std::string(dtype_name(w)),
                              OpKind::matmul, {dense(t, {M, K}), dense(w, {ns[i], K})},
                              transposed_b(), {check::Fill::unit, check::Fill::blocks}));
    return out;
  }

  // Executes the cases' matmuls on `tier` (a second activation tensor for the cases listed in
  // `own_a`), then synchronizes; every output poisoned first and read back whole. With
  // `write_between`, a rewrites a with its own values between the first and second matmul.
  Outputs run(const std::vector<check::Case>& cs, Tier tier, const std::vector<size_t>& own_a = {},
              bool write_between = false) {
    Outputs r;
    std::vector<HostTensor> a0 = check::case_inputs(cs[0]);
    std::vector<HostTensor> a1 = check::case_inputs(cs.back(), 1);
    auto upload = [&](const HostTensor& h) {
      auto b = dev().allocate(h.storage_bytes());
      EXPECT_TRUE(b.ok());
      EXPECT_TRUE(dev().write(**b, 0, h.storage(), h.storage_bytes()).ok());
      return *b;
    };
    std::shared_ptr<Buffer> a_buf = upload(a0[0]), a1_buf = upload(a1[0]);
    std::vector<std::shared_ptr<Buffer>> keep;
    std::vector<PlannedOp> ops;
    std::vector<std::array<TensorRef, 2>> ins;
    std::vector<TensorRef> outs;
    std::vector<HostTensor> ws;
    for (size_t i = 0; i < cs.size(); ++i) {
      auto op = check::case_op(cs[i]);
      EXPECT_TRUE(op.ok());
      const KernelChoice k = choice_of(dev(), cs[i], tier);
      EXPECT_TRUE(k.ok) << k.reason;
      if (!op.ok() || !k.ok) return r;
      ops.push_back({*op, k});
      ws.push_back(check::case_inputs(cs[i])[1]);
      keep.push_back(upload(ws.back()));
      const bool own = std::find(own_a.begin(), own_a.end(), i) != own_a.end();
      ins.push_back({TensorRef{a0[0].desc(), own ? a1_buf.get() : a_buf.get()},
                     TensorRef{ws.back().desc(), keep.back().get()}});
      HostTensor poison = HostTensor::empty(op->output);
      poison.fill_bytes(0xff);  // NaN in every float dtype
      keep.push_back(upload(poison));
      outs.push_back({op->output, keep.back().get()});
    }
    EXPECT_TRUE(dev().synchronize().ok());
    Recorder& rec = vk(dev()).recorder();
    const uint64_t d0 = rec.dispatches, b0 = rec.barriers;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (write_between && i == 1) {
        EXPECT_TRUE(dev().write(*a_buf, 0, a0[0].storage(), a0[0].storage_bytes()).ok());
      }
      Status s = dev().execute(ops[i], ins[i], outs[i]);
      EXPECT_TRUE(s.ok()) << s.message();
    }
    Status s = dev().synchronize();
    EXPECT_TRUE(s.ok()) << s.message();
    r.dispatches = rec.dispatches - d0;
    r.barriers = rec.barriers - b0;
    for (size_t i = 0; i < ops.size(); ++i) {
      HostTensor y = HostTensor::empty(ops[i].op.output);
      EXPECT_TRUE(dev().read(*outs[i].buffer, 0, y.storage(), y.storage_bytes()).ok());
      r.outputs.push_back(y.to_doubles());
      // Against the float64 reference, within the tolerance of the precision used.
      const bool own = std::find(own_a.begin(), own_a.end(), i) != own_a.end();
      std::vector<HostTensor> in = {own ? a1[0] : a0[0], ws[i]};
      auto ref = reference::evaluate(ops[i].op, in);
      EXPECT_TRUE(ref.ok());
      if (!ref.ok()) continue;
      const check::Metrics m = check::compare(r.outputs.back(), *ref, false);
      const check::Tolerance tol = check::tolerance(ops[i].op, ops[i].choice.precision);
      EXPECT_TRUE(check::passes(m, tol))
          << cs[i].name << ": nmse " << m.nmse << ", max_rel " << m.max_rel << ", " << m.nan
          << " NaN, tolerance " << tol.str();
    }
    return r;
  }

  // Runs the cases with the fusion switch `flag` on and off: the same bits either way.
  std::pair<Outputs, Outputs> on_and_off(bool DeviceOptions::*flag,
                                         const std::vector<check::Case>& cs, Tier tier) {
    VulkanDevice& v = vk(dev());
    v.options().*flag = true;
    Outputs on = run(cs, tier);
    v.options().*flag = false;
    Outputs off = run(cs, tier);
    v.options().*flag = true;
    EXPECT_EQ(on.outputs, off.outputs);
    return {on, off};
  }

  // add(a, b) = s, then rmsnorm(s, w) = y (rmsnorm(a, w) with `other`, which cannot fold the
  // add; y written over a with `over_a`, as the executor reuses a dead input's memory): outputs s
  // and y, checked against the float64 reference.
  Outputs add_norm(DType t, int64_t rows, int64_t n, bool other = false, bool over_a = false) {
    Outputs r;
    const check::Case add_case = make_case("fusion/add." + std::string(dtype_name(t)), OpKind::add,
                                           {dense(t, {rows, n}), dense(t, {rows, n})});
    OpAttrs eps;
    eps.eps = 1e-5f;
    const check::Case norm_case =
        make_case("fusion/rmsnorm." + std::string(dtype_name(t)), OpKind::rmsnorm,
                  {dense(t, {rows, n}), dense(t, {n})}, eps);
    auto add_op = check::case_op(add_case);
    auto norm_op = check::case_op(norm_case);
    EXPECT_TRUE(add_op.ok() && norm_op.ok());
    if (!add_op.ok() || !norm_op.ok()) return r;
    const KernelChoice ka = choice_of(dev(), add_case, Tier::generic);
    const KernelChoice kn = choice_of(dev(), norm_case, Tier::generic);
    EXPECT_TRUE(ka.ok && kn.ok) << ka.reason << kn.reason;
    std::vector<HostTensor> ab = check::case_inputs(add_case);
    std::vector<HostTensor> xw = check::case_inputs(norm_case);
    auto upload = [&](const HostTensor& h) {
      auto b = dev().allocate(h.storage_bytes());
      EXPECT_TRUE(b.ok());
      EXPECT_TRUE(dev().write(**b, 0, h.storage(), h.storage_bytes()).ok());
      return *b;
    };
    HostTensor poison = HostTensor::empty(add_op->output);
    poison.fill_bytes(0xff);
    auto a = upload(ab[0]), b = upload(ab[1]), x = upload(xw[0]), w = upload(xw[1]);
    auto sb = upload(poison), yb = upload(poison);
    const TensorRef s{add_op->output, sb.get()}, y{norm_op->output, over_a ? a.get() : yb.get()};
    EXPECT_TRUE(dev().synchronize().ok());
    Recorder& rec = vk(dev()).recorder();
    const uint64_t d0 = rec.dispatches;
    const std::array<TensorRef, 2> add_in = {TensorRef{ab[0].desc(), a.get()},
                                             TensorRef{ab[1].desc(), b.get()}};
    const std::array<TensorRef, 2> norm_in = {other ? TensorRef{xw[0].desc(), x.get()} : s,
                                              TensorRef{xw[1].desc(), w.get()}};
    Status st = dev().execute({*add_op, ka}, add_in, s);
    EXPECT_TRUE(st.ok()) << st.message();
    st = dev().execute({*norm_op, kn}, norm_in, y);
    EXPECT_TRUE(st.ok()) << st.message();
    st = dev().synchronize();
    EXPECT_TRUE(st.ok()) << st.message();
    r.dispatches = rec.dispatches - d0;
    // The reference: the add, then the norm of the add's reference rounded to the dtype.
    auto ref_s = reference::evaluate(*add_op, ab);
    EXPECT_TRUE(ref_s.ok());
    if (!ref_s.ok()) return r;
    HostTensor s_host = HostTensor::empty(add_op->output);
    s_host.from_doubles(*ref_s);
    std::vector<HostTensor> norm_ref_in = {other ? xw[0] : s_host, xw[1]};
    auto ref_y = reference::evaluate(*norm_op, norm_ref_in);
    EXPECT_TRUE(ref_y.ok());
    if (!ref_y.ok()) return r;
    const std::array<std::pair<const TensorRef*, const OpDesc*>, 2> outs = {
        std::pair{&s, &*add_op}, std::pair{&y, &*norm_op}};
    const std::array<const std::vector<double>*, 2> refs = {&*ref_s, &*ref_y};
    for (size_t i = 0; i < 2; ++i) {
      HostTensor h = HostTensor::empty(outs[i].first->desc);
      EXPECT_TRUE(dev().read(*outs[i].first->buffer, 0, h.storage(), h.storage_bytes()).ok());
      r.outputs.push_back(h.to_doubles());
      const check::Metrics m = check::compare(r.outputs.back(), *refs[i], false);
      const check::Tolerance tol =
          check::tolerance(*outs[i].second, i == 0 ? ka.precision : kn.precision);
      EXPECT_TRUE(check::passes(m, tol))
          << outs[i].second->name << " " << dtype_name(t) << ": nmse " << m.nmse << ", max_rel "
          << m.max_rel << ", " << m.nan << " NaN, tolerance " << tol.str();
    }
    return r;
  }

  // rope(x, pos) = y; K's cache row at pos = y (write_slice in place); V's = vx: outputs y, the K
  // cache and the V cache; the status of the synchronize in `status`.
  Outputs rope_write(int32_t position, Status* status = nullptr) {
    const DType cache = DType::f32;
    Outputs r;
    const int64_t H = 2, D = 64, cap = 16;
    const TensorDesc pos = dense(DType::i32, {1});
    OpAttrs ra;
    ra.rope_mode = RopeMode::gptj;
    ra.rope_dims = 48;  // the last 16 dims pass through
    check::Case rc = make_case("fusion/rope", OpKind::rope, {dense(DType::f32, {1, H, 1, D}), pos},
                               ra, {check::Fill::unit, check::Fill::scalar});
    rc.scalar = position;
    OpAttrs wa;
    wa.axis = 2;
    check::Case kc = make_case("fusion/k_write", OpKind::write_slice,
                               {dense(cache, {1, H, cap, D}), dense(cache, {1, H, 1, D}), pos}, wa,
                               {check::Fill::unit, check::Fill::unit, check::Fill::scalar});
    kc.scalar = position;
    check::Case vc =
        make_case("fusion/v_write", OpKind::write_slice,
                  {dense(cache, {1, H, cap, D}), check::strided_view(cache, {1, H, 1, D}), pos}, wa,
                  {check::Fill::unit, check::Fill::unit, check::Fill::scalar});
    vc.scalar = position;
    std::vector<OpDesc> ops;
    std::vector<KernelChoice> ks;
    for (const check::Case* c : {&rc, &kc, &vc}) {
      auto op = check::case_op(*c);
      EXPECT_TRUE(op.ok()) << c->name;
      if (!op.ok()) return r;
      ops.push_back(*op);
      ks.push_back(choice_of(dev(), *c, Tier::generic));
      EXPECT_TRUE(ks.back().ok) << ks.back().reason;
    }
    std::vector<HostTensor> ri = check::case_inputs(rc), ki = check::case_inputs(kc),
                            vi = check::case_inputs(vc);
    auto upload = [&](const HostTensor& h) {
      auto b = dev().allocate(std::max<uint64_t>(h.storage_bytes(), 4));
      EXPECT_TRUE(b.ok());
      EXPECT_TRUE(dev().write(**b, 0, h.storage(), h.storage_bytes()).ok());
      return *b;
    };
    HostTensor poison = HostTensor::empty(ops[0].output);
    poison.fill_bytes(0xff);
    auto x = upload(ri[0]), p = upload(ri[1]), y = upload(poison), kcache = upload(ki[0]),
         vcache = upload(vi[0]), vx = upload(vi[1]);
    const TensorRef pr{ri[1].desc(), p.get()}, yr{ops[0].output, y.get()};
    const TensorRef kr{ki[0].desc(), kcache.get()}, vr{vi[0].desc(), vcache.get()};
    EXPECT_TRUE(dev().synchronize().ok());
    Recorder& rec = vk(dev()).recorder();
    const uint64_t d0 = rec.dispatches;
    const std::array<TensorRef, 2> rope_in = {TensorRef{ri[0].desc(), x.get()}, pr};
    const std::array<TensorRef, 3> k_in = {kr, yr, pr};
    const std::array<TensorRef, 3> v_in = {vr, TensorRef{vi[1].desc(), vx.get()}, pr};
    const size_t kw = 1;
    EXPECT_TRUE(dev().execute({ops[0], ks[0]}, rope_in, yr).ok());
    EXPECT_TRUE(dev().execute({ops[kw], ks[kw]}, k_in, kr).ok());
    EXPECT_TRUE(dev().execute({ops[kw + 1], ks[kw + 1]}, v_in, vr).ok());
    Status st = dev().synchronize();
    if (status) *status = st;
    if (!st.ok()) return r;
    r.dispatches = rec.dispatches - d0;
    std::vector<HostTensor> got;
    for (const TensorRef* t : {&yr, &kr, &vr}) {
      HostTensor h = HostTensor::empty(t->desc);
      EXPECT_TRUE(dev().read(*t->buffer, 0, h.storage(), h.storage_bytes()).ok());
      r.outputs.push_back(h.to_doubles());
      got.push_back(std::move(h));
    }
    // y against the reference within rope's tolerance; the caches exactly: the writes of y as
    // the device computed it, and of V.
    auto ry = reference::evaluate(ops[0], ri);
    EXPECT_TRUE(ry.ok());
    if (ry.ok()) {
      const check::Metrics m = check::compare(r.outputs[0], *ry, false);
      EXPECT_TRUE(check::passes(m, check::tolerance(ops[0], ks[0].precision)))
          << "rope: nmse " << m.nmse << ", " << m.nan << " NaN";
    }
    std::vector<HostTensor> kin = {ki[0], got[kw - 1], ri[1]}, vin = {vi[0], vi[1], ri[1]};
    auto rk = reference::evaluate(ops[kw], kin);
    auto rv = reference::evaluate(ops[kw + 1], vin);
    EXPECT_TRUE(rk.ok() && rv.ok());
    if (rk.ok()) {
      EXPECT_EQ(r.outputs[kw], *rk);
    }
    if (rv.ok()) {
      EXPECT_EQ(r.outputs[kw + 1], *rv);
    }
    return r;
  }

  // K's and V's rows (f32, V's a strided view) cast to `cache` and written into caches of it at
  // `position`: outputs the two casts and the two caches, checked exactly against the reference.
  Outputs cast_writes(DType cache, int32_t position, Status* status = nullptr) {
    Outputs r;
    const int64_t H = 2, D = 32, cap = 16;
    const TensorDesc pos = dense(DType::i32, {1});
    OpAttrs ca;
    ca.to = cache;
    OpAttrs wa;
    wa.axis = 2;
    std::vector<OpDesc> ops;
    std::vector<KernelChoice> ks;
    std::vector<HostTensor> x, caches;
    HostTensor p;
    for (int i = 0; i < 2; ++i) {
      const std::string n = i == 0 ? "k" : "v";
      const check::Case cc = make_case("fusion/" + n + "_cast", OpKind::cast,
                                       {i == 0 ? dense(DType::f32, {1, H, 1, D})
                                               : check::strided_view(DType::f32, {1, H, 1, D})},
                                       ca);
      check::Case wc = make_case("fusion/" + n + "_write", OpKind::write_slice,
                                 {dense(cache, {1, H, cap, D}), dense(cache, {1, H, 1, D}), pos},
                                 wa, {check::Fill::unit, check::Fill::unit, check::Fill::scalar});
      wc.scalar = position;
      for (const check::Case* c : std::initializer_list<const check::Case*>{&cc, &wc}) {
        auto op = check::case_op(*c);
        EXPECT_TRUE(op.ok()) << c->name;
        if (!op.ok()) return r;
        ops.push_back(*op);
        ks.push_back(choice_of(dev(), *c, Tier::generic));
        EXPECT_TRUE(ks.back().ok) << ks.back().reason;
      }
      x.push_back(check::case_inputs(cc)[0]);
      std::vector<HostTensor> wi = check::case_inputs(wc);
      caches.push_back(wi[0]);
      p = wi[2];
    }
    auto upload = [&](const HostTensor& h) {
      auto b = dev().allocate(std::max<uint64_t>(h.storage_bytes(), 4));
      EXPECT_TRUE(b.ok());
      EXPECT_TRUE(dev().write(**b, 0, h.storage(), h.storage_bytes()).ok());
      return *b;
    };
    std::vector<std::shared_ptr<Buffer>> keep;
    const auto pb = upload(p);
    const TensorRef pr{p.desc(), pb.get()};
    std::vector<TensorRef> outs;
    std::vector<std::pair<size_t, std::vector<TensorRef>>> calls;
    for (size_t i = 0; i < 2; ++i) {
      HostTensor poison = HostTensor::empty(ops[2 * i].output);
      poison.fill_bytes(0xff);
      keep.push_back(upload(x[i]));
      const TensorRef xr{x[i].desc(), keep.back().get()};
      keep.push_back(upload(poison));
      const TensorRef cr{ops[2 * i].output, keep.back().get()};
      keep.push_back(upload(caches[i]));
      const TensorRef kr{caches[i].desc(), keep.back().get()};
      calls.push_back({2 * i, {xr, cr}});
      calls.push_back({2 * i + 1, {kr, cr, pr, kr}});
      outs.push_back(cr);
      outs.push_back(kr);
    }
    EXPECT_TRUE(dev().synchronize().ok());
    Recorder& rec = vk(dev()).recorder();
    const uint64_t d0 = rec.dispatches;
    for (const auto& [k, refs] : calls) {
      const std::vector<TensorRef> in(refs.begin(), refs.end() - 1);
      EXPECT_TRUE(dev().execute({ops[k], ks[k]}, in, refs.back()).ok());
    }
    Status st = dev().synchronize();
    if (status) *status = st;
    if (!st.ok()) return r;
    r.dispatches = rec.dispatches - d0;
    for (size_t i = 0; i < outs.size(); ++i) {
      HostTensor h = HostTensor::empty(outs[i].desc);
      EXPECT_TRUE(dev().read(*outs[i].buffer, 0, h.storage(), h.storage_bytes()).ok());
      r.outputs.push_back(h.to_doubles());
    }
    for (size_t i = 0; i < 2; ++i) {
      std::vector<HostTensor> cin = {x[i]};
      auto rc = reference::evaluate(ops[2 * i], cin);
      EXPECT_TRUE(rc.ok());
      if (!rc.ok()) continue;
      EXPECT_EQ(r.outputs[2 * i], *rc);
      HostTensor c = HostTensor::empty(ops[2 * i].output);
      c.from_doubles(*rc);
      std::vector<HostTensor> win = {caches[i], c, p};
      auto rw = reference::evaluate(ops[2 * i + 1], win);
      EXPECT_TRUE(rw.ok());
      if (rw.ok()) {
        EXPECT_EQ(r.outputs[2 * i + 1], *rw);
      }
    }
    return r;
  }

  TempDir cache_;
  std::vector<std::unique_ptr<Device>> devices_;
};

// A decode step's k rope and the K and V cache writes after it: one dispatch, the same bits as
// the three ops apart.
TEST_F(DecodeFusions, RopeWritesItsRowsIntoTheKvCache) {
  VulkanDevice& v = vk(dev());
  const uint64_t fused = v.rope_writes;
  v.options().fuse_rope_write = true;
  Outputs on = rope_write(9);
  v.options().fuse_rope_write = false;
  Outputs off = rope_write(9);
  v.options().fuse_rope_write = true;
  EXPECT_EQ(on.dispatches, 1u);
  EXPECT_EQ(off.dispatches, 3u);
  EXPECT_EQ(on.outputs, off.outputs);
  EXPECT_EQ(v.rope_writes, fused + 1);
}

// An f16 or bf16 cache: the planner casts K's and V's rows to its dtype before each write; each
// cast and its write are one dispatch (V's rows a strided view, as a decode step's are).
TEST_F(DecodeFusions, CastAndCacheWriteRunAsOneDispatchForAHalfPrecisionCache) {
  VulkanDevice& v = vk(dev());
  for (DType cache : {DType::f16, DType::bf16}) {
    const uint64_t fused = v.cast_writes;
    v.options().fuse_rope_write = true;
    Outputs on = cast_writes(cache, 9);
    v.options().fuse_rope_write = false;
    Outputs off = cast_writes(cache, 9);
    v.options().fuse_rope_write = true;
    EXPECT_EQ(on.dispatches, 2u) << dtype_name(cache);
    EXPECT_EQ(off.dispatches, 4u) << dtype_name(cache);
    EXPECT_EQ(on.outputs, off.outputs) << dtype_name(cache);
    EXPECT_EQ(v.cast_writes, fused + 2);
  }
  // A bad offset: reported by the write, the casts' outputs written all the same.
  Status s;
  cast_writes(DType::f16, 16, &s);
  EXPECT_NE(s.message().find("offset 16"), std::string::npos) << s.message();
}

// A position past the cache: the fused dispatch reports each write's bad offset as the write
// alone would, naming the write.
TEST_F(DecodeFusions, FusedRopeWriteReportsAnOffsetPastTheCache) {
  for (bool fuse : {true, false}) {
    vk(dev()).options().fuse_rope_write = fuse;
    Status s;
    rope_write(16, &s);
    EXPECT_FALSE(s.ok()) << fuse;
    EXPECT_NE(s.message().find("fusion/k_write"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("offset 16"), std::string::npos) << s.message();
  }
  vk(dev()).options().fuse_rope_write = true;
}

// A decode step's residual add and the rmsnorm of its sum, in the kernel this device picks
// (lavapipe: one invocation per row through texel views) and posing as a GPU (a workgroup per
// row): one dispatch, the sum and the norm written, the same bits as the two ops apart.
TEST_F(DecodeFusions, ResidualAddRunsInsideTheRmsnormOfItsSum) {
  const DeviceCaps real = dev().caps();
  for (bool gpu : {false, true}) {
    DeviceCaps c = real;
    if (gpu) c.type = DeviceType::discrete_gpu;
    vk(dev()).override_caps(c);
    for (DType t : {DType::f32, DType::f16}) {
      VulkanDevice& v = vk(dev());
      const uint64_t fused = v.fused_adds;
      v.options().fuse_add_norm = true;
      Outputs on = add_norm(t, 3, 264);
      v.options().fuse_add_norm = false;
      Outputs off = add_norm(t, 3, 264);
      v.options().fuse_add_norm = true;
      EXPECT_EQ(on.dispatches, 1u) << dtype_name(t) << (gpu ? " as a GPU" : "");
      EXPECT_EQ(off.dispatches, 2u) << dtype_name(t);
      EXPECT_EQ(on.outputs, off.outputs) << dtype_name(t) << (gpu ? " as a GPU" : "");
      EXPECT_EQ(v.fused_adds, fused + 1);
    }
  }
  vk(dev()).override_caps(real);
}

TEST_F(DecodeFusions, FoldedAddWritesTheNormOverItsOwnInput) {
  VulkanDevice& v = vk(dev());
  const DeviceCaps real = dev().caps();
  for (bool gpu : {false, true}) {
    DeviceCaps c = real;
    if (gpu) c.type = DeviceType::discrete_gpu;
    v.override_caps(c);
    v.options().fuse_add_norm = true;
    Outputs on = add_norm(DType::f32, 4, 520, false, true);
    v.options().fuse_add_norm = false;
    Outputs off = add_norm(DType::f32, 4, 520, false, true);
    v.options().fuse_add_norm = true;
    EXPECT_EQ(on.dispatches, 1u) << (gpu ? "as a GPU" : "");
    EXPECT_EQ(on.outputs, off.outputs) << (gpu ? "as a GPU" : "");
  }
  v.override_caps(real);
}

TEST_F(DecodeFusions, AddBeforeAnotherNormRunsAlone) {
  Outputs r = add_norm(DType::f32, 2, 64, true);
  EXPECT_EQ(r.dispatches, 2u);
}

TEST_F(DecodeFusions, QkvMatvecsOfOneActivationRunAsOneDispatch) {
  // q, k and v of a small GQA layer: 3 rows (3 of an MR of 4), a 4-bit and an 8-bit format.
  for (DType w : {DType::q4_0, DType::q8_0}) {
    const uint64_t groups = vk(dev()).groups;
    auto [on, off] = on_and_off(&DeviceOptions::group_matvecs,
                                cases(DType::f32, w, 3, 256, {96, 40, 40}), Tier::matvec);
    EXPECT_EQ(on.dispatches, 1u) << dtype_name(w);
    EXPECT_EQ(off.dispatches, 3u) << dtype_name(w);
    EXPECT_EQ(vk(dev()).groups, groups + 1);
  }
}

// With this device posing as a GPU: workgroups of up to 128 invocations, four weight rows each
// (the launch shape a GPU runs), member boundaries inside a workgroup's rows.
TEST_F(DecodeFusions, QkvMatvecsRunAsOneDispatchInTheGpuLaunchShape) {
  const DeviceCaps real = dev().caps();
  if (!real.subgroup_arithmetic) GTEST_SKIP() << "no subgroup arithmetic";
  DeviceCaps c = real;
  c.type = DeviceType::discrete_gpu;
  vk(dev()).override_caps(c);
  auto [on, off] = on_and_off(&DeviceOptions::group_matvecs,
                              cases(DType::f32, DType::q4_0, 1, 1024, {130, 66, 34}), Tier::matvec);
  EXPECT_EQ(on.dispatches, 1u);
  EXPECT_EQ(off.dispatches, 3u);
  vk(dev()).override_caps(real);
}

TEST_F(DecodeFusions, GateAndUpMatvecsRunAsOneDispatchInEveryActivationDtype) {
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    auto [on, off] = on_and_off(&DeviceOptions::group_matvecs,
                                cases(t, DType::q4_k, 1, 256, {72, 72}), Tier::matvec);
    EXPECT_EQ(on.dispatches, 1u) << dtype_name(t);
    EXPECT_EQ(off.dispatches, 2u) << dtype_name(t);
  }
}

TEST_F(DecodeFusions, GroupedMatvecsSumInSharedMemoryWithoutSubgroupArithmetic) {
  const DeviceCaps real = dev().caps();
  DeviceCaps c = real;
  c.subgroup_arithmetic = false;
  vk(dev()).override_caps(c);
  const auto cs = cases(DType::f32, DType::q4_0, 2, 128, {33, 20, 7});
  auto [on, off] = on_and_off(&DeviceOptions::group_matvecs, cs, Tier::matvec);
  EXPECT_EQ(on.dispatches, 1u);
  run(cs, Tier::matvec);
  EXPECT_EQ(vk(dev()).recorder().recent.back().first, "matvec_group_smem_f32_q4_0");
  vk(dev()).override_caps(real);
}

TEST_F(DecodeFusions, MatvecsOfDifferentActivationsRunApart) {
  // The second reads other activations: it cannot join the first; the third joins the second.
  Outputs r = run(cases(DType::f32, DType::q4_0, 1, 128, {40, 24, 24}), Tier::matvec, {1, 2});
  EXPECT_EQ(r.dispatches, 2u);
  // A fourth mat-vec of the first three's activations starts a group of its own (three at most).
  Outputs four = run(cases(DType::f32, DType::q4_0, 1, 128, {8, 16, 24, 32}), Tier::matvec);
  EXPECT_EQ(four.dispatches, 2u);
}

TEST_F(DecodeFusions, IntDotMatmulsShareOneQuantizeOfTheirActivations) {
  const uint64_t shared = vk(dev()).shared_q8;
  auto [on, off] = on_and_off(&DeviceOptions::share_q8,
                              cases(DType::f32, DType::q4_0, 1, 256, {96, 40, 40}), Tier::int_dot);
  EXPECT_EQ(on.dispatches, 4u);  // one quantize_q8, three matmuls
  EXPECT_EQ(off.dispatches, 6u);
  EXPECT_LT(on.barriers, off.barriers);
  EXPECT_EQ(vk(dev()).shared_q8, shared + 2);
}

TEST_F(DecodeFusions, IntDotMatmulsQuantizeAgainAfterTheActivationsChange) {
  // Activations written between the first and second matmul, and others for the third: each
  // matmul quantizes its own.
  Outputs r = run(cases(DType::f32, DType::q8_0, 2, 128, {24, 24, 24}), Tier::int_dot, {2}, true);
  EXPECT_EQ(r.dispatches, 6u);
}

}  // namespace
}  // namespace duet::vulkan::testing
