#include "duet/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace duet::llm {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Larger value first, then the lower id: one order whatever the container's history.
bool better(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

}  // namespace

SamplerOptions SamplerOptions::greedy() {
  SamplerOptions o;
  o.temperature = 0;
  o.top_k = 0;
  o.top_p = 1;
  o.min_p = 0;
  o.repeat_penalty = 1;
  return o;
}

Status SamplerOptions::check() const {
  auto bad = [](const std::string& what, const std::string& expected, double got) {
    return Status(Code::invalid_argument,
                  "sampling: " + what + ": expected " + expected + ", got " + std::to_string(got));
  };
  if (!(temperature >= 0) || !std::isfinite(temperature))
    return bad("temperature", "a number >= 0", temperature);
  if (top_k < 0) return bad("top_k", "a count >= 0 (0: off)", top_k);
  if (!(top_p > 0 && top_p <= 1)) return bad("top_p", "a number in (0, 1] (1: off)", top_p);
  if (!(min_p >= 0 && min_p <= 1)) return bad("min_p", "a number in [0, 1] (0: off)", min_p);
  if (!(repeat_penalty > 0) || !std::isfinite(repeat_penalty))
    return bad("repeat_penalty", "a number > 0 (1: off)", repeat_penalty);
  if (repeat_last_n < 0) return bad("repeat_last_n", "a count >= 0", repeat_last_n);
  return {};
}

Sampler::Sampler(SamplerOptions opts) : opts_(opts), rng_(opts.seed) {}

void Sampler::reset() {
  recent_.clear();
  rng_.seed(opts_.seed);
}

void Sampler::accept(int32_t token) {
  if (opts_.repeat_last_n <= 0) return;
  recent_.push_back(token);
  while (recent_.size() > static_cast<size_t>(opts_.repeat_last_n)) recent_.pop_front();
}

int32_t Sampler::sample(std::span<const float> logits) {
  const size_t n = logits.size();
  if (n == 0) return 0;
  // The penalised logits, apart: the row itself is not copied.
  std::vector<std::pair<int32_t, float>> penalised;
  if (opts_.repeat_penalty != 1.0f) {
    for (int32_t id : recent_) {
      if (id < 0 || static_cast<size_t>(id) >= n) continue;
      if (std::any_of(penalised.begin(), penalised.end(), [&](auto& p) { return p.first == id; }))
        continue;
      const float v = logits[static_cast<size_t>(id)];
      penalised.emplace_back(id, v > 0 ? v / opts_.repeat_penalty : v * opts_.repeat_penalty);
    }
    std::sort(penalised.begin(), penalised.end());
  }
  size_t next_penalised = 0;
  auto value = [&](size_t i) {
    float v = logits[i];
    if (next_penalised < penalised.size() &&
        penalised[next_penalised].first == static_cast<int32_t>(i))
      v = penalised[next_penalised++].second;
    return std::isnan(v) ? kNegInf : v;
  };

  if (opts_.temperature == 0) {
    size_t best = 0;
    float best_v = kNegInf;
    for (size_t i = 0; i < n; ++i) {
      const float v = value(i);
      if (v > best_v) best = i, best_v = v;
    }
    return static_cast<int32_t>(best);
  }

  // Top-k in one pass (a heap whose top is the worst kept), else every token.
  cand_.clear();
  const size_t k = opts_.top_k > 0 ? std::min(n, static_cast<size_t>(opts_.top_k)) : n;
  if (k < n) {
    cand_.reserve(k);
    for (size_t i = 0; i < n; ++i) {
      std::pair<float, int32_t> c{value(i), static_cast<int32_t>(i)};
      if (cand_.size() < k) {
        cand_.push_back(c);
        std::push_heap(cand_.begin(), cand_.end(), better);
      } else if (better(c, cand_.front())) {
        std::pop_heap(cand_.begin(), cand_.end(), better);
        cand_.back() = c;
        std::push_heap(cand_.begin(), cand_.end(), better);
      }
    }
  } else {
    cand_.reserve(n);
    for (size_t i = 0; i < n; ++i) cand_.emplace_back(value(i), static_cast<int32_t>(i));
  }
  float top = kNegInf;
  for (const auto& c : cand_) top = std::max(top, c.first);
  if (top == kNegInf) return 0;

  if (opts_.top_p < 1.0f) {
    double total = 0;
    for (const auto& c : cand_) total += std::exp(static_cast<double>(c.first - top));
    const double want = opts_.top_p * total;
    // Sort as little as will do: the best 64, 256, ... until their sum reaches p.
    for (size_t m = std::min<size_t>(64, cand_.size());; m = std::min(cand_.size(), m * 4)) {
      std::partial_sort(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(m), cand_.end(),
                        better);
      double sum = 0;
      size_t cut = 0;
      while (cut < m && sum < want) sum += std::exp(static_cast<double>(cand_[cut++].first - top));
      if (sum >= want || m == cand_.size()) {
        cand_.resize(std::max<size_t>(cut, 1));
        break;
      }
    }
  }
  if (opts_.min_p > 0.0f) {
    const float floor = top + std::log(opts_.min_p);
    std::erase_if(cand_, [&](const auto& c) { return c.first < floor; });
  }
  // Draw from softmax(logits / temperature) over what is left.
  std::vector<double>& w = weights_;
  w.resize(cand_.size());
  double sum = 0;
  for (size_t i = 0; i < cand_.size(); ++i)
    sum += w[i] = std::exp(static_cast<double>(cand_[i].first - top) / opts_.temperature);
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * sum;
  double acc = 0;
  for (size_t i = 0; i < cand_.size(); ++i) {
    acc += w[i];
    if (u < acc) return cand_[i].second;
  }
  return cand_.back().second;
}

}  // namespace duet::llm
