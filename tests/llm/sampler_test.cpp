// Sampling: each stage of the chain on small rows whose answer is known.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "duet/sampler.h"

namespace {

using duet::llm::Sampler;
using duet::llm::SamplerOptions;

std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

SamplerOptions plain(float temperature, uint64_t seed = 7) {
  SamplerOptions o = SamplerOptions::greedy();
  o.temperature = temperature;
  o.seed = seed;
  return o;
}

std::vector<int> histogram(Sampler& s, const std::vector<float>& l, int draws) {
  std::vector<int> h(l.size(), 0);
  for (int i = 0; i < draws; ++i) ++h[static_cast<size_t>(s.sample(l))];
  return h;
}

TEST(Sampler, GreedyIsTheLargestLogitAndTheLowestIdOnATie) {
  Sampler s(SamplerOptions::greedy());
  EXPECT_EQ(s.sample(std::vector<float>{0.1f, 3.0f, -2.0f, 3.0f}), 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(s.sample(std::vector<float>{nan, -1.0f, nan}), 1);
  const float inf = std::numeric_limits<float>::infinity();
  Sampler t(plain(1.0f));
  EXPECT_EQ(t.sample(std::vector<float>{-inf, -inf}), 0);
}

TEST(Sampler, DrawsFollowTheSoftmax) {
  Sampler s(plain(1.0f));
  const auto h = histogram(s, logits_of({0.5, 0.3, 0.2}), 20000);
  EXPECT_NEAR(h[0] / 20000.0, 0.5, 0.02);
  EXPECT_NEAR(h[1] / 20000.0, 0.3, 0.02);
  EXPECT_NEAR(h[2] / 20000.0, 0.2, 0.02);
  // Temperature 0.5 squares the odds: 25 : 9 : 4.
  Sampler cold(plain(0.5f));
  const auto c = histogram(cold, logits_of({0.5, 0.3, 0.2}), 20000);
  EXPECT_NEAR(c[0] / 20000.0, 25.0 / 38.0, 0.02);
}

TEST(Sampler, TopKTopPAndMinPKeepWhatTheySay) {
  const auto l = logits_of({0.05, 0.5, 0.15, 0.3});
  SamplerOptions k = plain(1.0f);
  k.top_k = 2;
  Sampler sk(k);
  auto h = histogram(sk, l, 4000);
  EXPECT_EQ(h[0] + h[2], 0);
  EXPECT_GT(h[1], 0);
  EXPECT_GT(h[3], 0);
  SamplerOptions p = plain(1.0f);
  p.top_p = 0.75f;  // 0.5 + 0.3 reach it
  Sampler sp(p);
  h = histogram(sp, l, 4000);
  EXPECT_EQ(h[0] + h[2], 0);
  EXPECT_NEAR(h[1] / 4000.0, 0.5 / 0.8, 0.03);
  SamplerOptions m = plain(1.0f);
  m.min_p = 0.5f;  // at least 0.25
  Sampler sm(m);
  h = histogram(sm, l, 4000);
  EXPECT_EQ(h[0] + h[2], 0);
  EXPECT_GT(h[3], 0);
  // Top-p over a large row sorts only what it needs; the answer is the same as a full sort's.
  std::vector<float> big(50000, 0.0f);
  big[123] = 12.0f;
  big[4567] = 11.5f;
  SamplerOptions bp = plain(1.0f);
  bp.top_p = 0.5f;  // 123 alone has 0.52
  Sampler sb(bp);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(sb.sample(big), 123);
}

TEST(Sampler, TopKOfOneIsGreedyAtAnyTemperature) {
  SamplerOptions o = plain(5.0f);
  o.top_k = 1;
  Sampler s(o);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(s.sample(logits_of({0.2, 0.3, 0.25, 0.25})), 1);
}

TEST(Sampler, TheSameSeedDrawsTheSameTokens) {
  const auto l = logits_of({0.1, 0.2, 0.3, 0.15, 0.25});
  SamplerOptions o;
  o.seed = 42;
  Sampler a(o), b(o);
  std::vector<int32_t> x, y;
  for (int i = 0; i < 64; ++i) x.push_back(a.sample(l));
  for (int i = 0; i < 64; ++i) y.push_back(b.sample(l));
  EXPECT_EQ(x, y);
  a.reset();
  std::vector<int32_t> z;
  for (int i = 0; i < 64; ++i) z.push_back(a.sample(l));
  EXPECT_EQ(x, z);
  o.seed = 43;
  Sampler c(o);
  std::vector<int32_t> w;
  for (int i = 0; i < 64; ++i) w.push_back(c.sample(l));
  EXPECT_NE(x, w);
}

TEST(Sampler, RepetitionPenaltyLowersRecentTokens) {
  SamplerOptions o = SamplerOptions::greedy();
  o.repeat_penalty = 2.0f;
  o.repeat_last_n = 2;
  Sampler s(o);
  const std::vector<float> l = {1.0f, 3.0f, 2.0f, -1.0f};
  EXPECT_EQ(s.sample(l), 1);
  s.accept(1);  // 3 / 2 = 1.5 < 2
  EXPECT_EQ(s.sample(l), 2);
  s.accept(2);
  s.accept(0);  // only the last two count: 1 is forgotten
  EXPECT_EQ(s.sample(l), 1);
  // A negative logit is multiplied: further down.
  const std::vector<float> neg = {-1.0f, -1.5f};
  s.accept(0);
  EXPECT_EQ(s.sample(neg), 1);
}

TEST(Sampler, OptionsOutOfRangeAreErrorsNamingThem) {
  auto message = [](auto set) {
    SamplerOptions o;
    set(o);
    return o.check().message();
  };
  EXPECT_NE(message([](SamplerOptions& o) { o.temperature = -1; }).find("temperature"),
            std::string::npos);
  EXPECT_NE(message([](SamplerOptions& o) { o.top_p = 0; }).find("top_p"), std::string::npos);
  EXPECT_NE(message([](SamplerOptions& o) { o.min_p = 2; }).find("min_p"), std::string::npos);
  EXPECT_NE(message([](SamplerOptions& o) { o.top_k = -3; }).find("top_k"), std::string::npos);
  EXPECT_NE(message([](SamplerOptions& o) { o.repeat_penalty = 0; }).find("repeat_penalty"),
            std::string::npos);
  EXPECT_TRUE(SamplerOptions().check().ok());
}

}  // namespace
