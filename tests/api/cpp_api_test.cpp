// The C++ API through libduet.so, as a C++ program embedding duet uses it: a graph built in code,
// an engine on this machine's devices, per-step timing.
#include <gtest/gtest.h>

#include <cmath>

#include "duet/backends.h"
#include "duet/engine.h"

namespace {

duet::HostTensor filled(duet::DType t, std::initializer_list<int64_t> shape, float base) {
  duet::HostTensor x = duet::HostTensor::empty(duet::TensorDesc::contiguous(t, shape));
  std::vector<double> v(static_cast<size_t>(x.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(base + 0.1 * static_cast<double>(i));
  x.from_doubles(v);
  return x;
}

// An engine on every device of a registry of the test's own (kept alive by the engine), closed
// when the engine is destroyed. (open_engine's process-wide registry lives until exit, where
// the Khronos validation layers, already finalized, leak what they allocated.)
duet::Result<std::unique_ptr<duet::Engine>> engine_for(duet::Graph g) {
  auto reg = std::make_shared<duet::Registry>(duet::open_registry());
  return duet::Engine::create(std::move(g), reg->devices(), {}, reg);
}

duet::Result<duet::Graph> mlp() {
  duet::GraphBuilder b("mlp");
  duet::ValueId x = b.input("x", duet::DType::f32, {4, 16});
  duet::ValueId w = b.input("w", duet::DType::f32, {16, 16});
  b.output(b.silu(b.matmul(x, w, false, "xw"), "y"));
  return b.build();
}

TEST(CppApi, AGraphBuiltInCodeRunsThroughTheSharedLibrary) {
  auto g = mlp();
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto engine = engine_for(std::move(*g));
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  const duet::HostTensor x = filled(duet::DType::f32, {4, 16}, 0),
                         w = filled(duet::DType::f32, {16, 16}, 1);
  auto out = (*engine)->run({{"x", x}, {"w", w}});
  ASSERT_TRUE(out.ok()) << out.status().message();
  const float* y = out->at("y").data<float>();
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 16; ++c) {
      double acc = 0;
      for (int k = 0; k < 16; ++k)
        acc += double(x.data<float>()[r * 16 + k]) * double(w.data<float>()[k * 16 + c]);
      EXPECT_NEAR(y[r * 16 + c], acc / (1 + std::exp(-acc)), 1e-5) << r << "," << c;
    }
}

TEST(CppApi, RunTimedTimesEveryStepThatRanAndReturnsTheSameOutputs) {
  auto g = mlp();
  ASSERT_TRUE(g.ok());
  auto engine = engine_for(std::move(*g));
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  const std::map<std::string, duet::HostTensor> in = {{"x", filled(duet::DType::f32, {4, 16}, 2)},
                                                      {"w", filled(duet::DType::f32, {16, 16}, 3)}};
  std::vector<duet::StepTime> times;
  auto timed = (*engine)->run_timed(in, times);
  ASSERT_TRUE(timed.ok()) << timed.status().message();
  auto plain = (*engine)->run(in);
  ASSERT_TRUE(plain.ok());
  for (int i = 0; i < 64; ++i)
    EXPECT_EQ(timed->at("y").data<float>()[i], plain->at("y").data<float>()[i]) << i;

  const duet::Plan& plan = (*engine)->plan();
  size_t expected = 0;
  for (const duet::PlanStep& s : plan.steps) expected += !s.once && s.kind != duet::StepKind::view;
  ASSERT_EQ(times.size(), expected);
  int previous = -1;
  for (const duet::StepTime& t : times) {
    EXPECT_GT(t.step, previous);  // in plan order
    previous = t.step;
    EXPECT_GT(t.seconds, 0.0) << plan.steps[size_t(t.step)].name;
    EXPECT_LT(t.seconds, 60.0);
  }
}

TEST(CppApi, RunTimedOfABadInputIsAnErrorNamingIt) {
  auto g = mlp();
  ASSERT_TRUE(g.ok());
  auto engine = engine_for(std::move(*g));
  ASSERT_TRUE(engine.ok());
  std::vector<duet::StepTime> times;
  auto out = (*engine)->run_timed({{"x", filled(duet::DType::f32, {4, 16}, 0)}}, times);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("'w'"), std::string::npos) << out.status().message();
}

}  // namespace
