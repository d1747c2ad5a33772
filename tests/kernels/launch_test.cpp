// What a launch checks before any kernel runs (host/plan.cpp), seen through the emulator's
// launch: the architecture the tier's kernels need (duet/kernels/arch.h).
#include <gtest/gtest.h>

#include <cmath>

#include "duet/host_tensor.h"
#include "duet/kernels/launch.h"
#include "support/random_tensor.h"

namespace duet::kernels {
namespace {

TensorDesc dense(DType t, std::initializer_list<int64_t> s) {
  return TensorDesc::contiguous(t, s);
}

constexpr auto& fill = testing_support::random_tensor;

// A tier's launch on an architecture without its instructions fails before any kernel runs.
TEST(EmulatedLaunch, FlashOnTuringIsRefusedWithTheReason) {
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

}  // namespace
}  // namespace duet::kernels
