// The Hopper attention kernel (wgmma tier) under the emulator, beyond the shared case set: the
// kernel with a deliberate fault (a missing mbarrier wait, a stage released early, a missing
// async-proxy fence, a wrong swizzle) must fail, so the tests of the good kernel can fail.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "device/attention_wgmma.h"
#include "duet/kernels/launch.h"
#include "emu/run_kernel.h"
#include "host/launch_plan.h"
#include "reference/reference.h"

namespace duet::kernels {
namespace {

using dev::WgFault;

HostTensor fill(DType t, std::vector<int64_t> shape, uint64_t seed) {
  HostTensor h = HostTensor::empty(t, shape);
  std::vector<double> v(static_cast<size_t>(h.numel()));
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (double& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = (static_cast<double>(s >> 11) / 9007199254740992.0 - 0.5) * 2.0;
  }
  h.from_doubles(v);
  return h;
}

// Causal, GQA 2:1, 5 key tiles of 128 (more than the 4 stages of head dim 64), unsplit.
struct Fixture {
  std::vector<HostTensor> in;
  OpDesc op;
  std::vector<double> ref;
  Fixture() {
    in = {fill(DType::f16, {1, 2, 70, 64}, 1), fill(DType::f16, {1, 1, 600, 64}, 2),
          fill(DType::f16, {1, 1, 600, 64}, 3)};
    std::vector<TensorDesc> d;
    for (const HostTensor& h : in) d.push_back(h.desc());
    OpAttrs a;
    a.causal = true;
    op = *make_op(OpKind::attention, a, d);
    ref = *reference::evaluate(op, in);
  }
};

// Runs the attention with kernel instance `F`; the status, and the output as doubles.
template <WgFault F>
Status run_with(Fixture& f, std::vector<double>* out) {
  HostTensor o = HostTensor::empty(f.op.output);
  std::memset(o.storage(), 0xff, o.storage_bytes());
  std::vector<View> views;
  for (HostTensor& h : f.in) views.push_back(make_view(h.desc(), h.storage()));
  Launch l;
  l.config.block_threads = dev::WgShape<64>::kThreads;
  l.config.stages = dev::WgShape<64>::kStages;
  l.config.splits = 1;
  l.sm = 90;
  auto calls = detail::plan(Tier::wgmma, f.op, views, make_view(o.desc(), o.storage()), l, "emu");
  if (!calls.ok()) return calls.status();
  for (const detail::Call& c : *calls) {
    if (c.kernel != detail::Kernel::attention_wgmma) return Status(Code::internal, "other call");
    dev::WgAttnParams p = std::get<dev::WgAttnParams>(c.params);
    std::memcpy(p.k_map.bytes, &p.k_desc, sizeof p.k_desc);
    std::memcpy(p.v_map.bytes, &p.v_desc, sizeof p.v_desc);
    DUET_TRY(emu_impl::run_kernel(c, &dev::attention_wgmma<dev::F16, 64, F>, p));
  }
  *out = o.to_doubles();
  return {};
}

double max_error(const std::vector<double>& a, const std::vector<double>& b) {
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i)
    e = std::isnan(a[i]) ? INFINITY : std::max(e, std::abs(a[i] - b[i]));
  return e;
}

TEST(WgmmaAttention, TheGoodKernelMatchesTheReference) {
  Fixture f;
  std::vector<double> out;
  Status s = run_with<WgFault::none>(f, &out);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_LT(max_error(out, f.ref), 0.01);
}

template <WgFault F>
void expect_caught(const char* what) {
  Fixture f;
  std::vector<double> out;
  Status s = run_with<F>(f, &out);
  if (s.ok())
    EXPECT_GT(max_error(out, f.ref), 0.01) << what << " went unnoticed";
  else
    SUCCEED() << what << ": " << s.message();
}

TEST(WgmmaAttention, AConsumerThatSkipsTheFullBarrierIsCaught) {
  expect_caught<WgFault::skip_full_wait>("reading V before its TMA landed");
}
TEST(WgmmaAttention, AProducerThatSkipsTheEmptyBarrierIsCaught) {
  expect_caught<WgFault::skip_empty_wait>("refilling a stage still being read");
}
TEST(WgmmaAttention, AConsumerReleasingAStageBeforeItsWgmmaLandedIsCaught) {
  expect_caught<WgFault::early_release>("releasing a stage before wgmma.wait_group");
}
TEST(WgmmaAttention, QStoresWithoutTheProxyFenceAreCaught) {
  expect_caught<WgFault::no_proxy_fence>("Q stored without fence.proxy.async");
}
TEST(WgmmaAttention, AWrongSwizzleOfQIsCaught) {
  expect_caught<WgFault::wrong_swizzle>("Q stored unswizzled");
}
TEST(WgmmaAttention, RescalingOBeforeThePvProductLandedIsCaught) {
  expect_caught<WgFault::early_rescale>("O rescaled while P V was in flight");
}

}  // namespace
}  // namespace duet::kernels
