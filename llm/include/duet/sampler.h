// Choosing the next token from a row of logits. In this order, as llama.cpp's default chain:
//
//   repetition penalty  logits of the ids among the last `repeat_last_n` ones: divided by
//                       `repeat_penalty` where positive, multiplied where negative
//   greedy              temperature 0: the largest logit (the lowest id on a tie); nothing below
//   top-k               the k largest logits (0: all)
//   top-p               the smallest set of the most likely whose probability reaches p (1: all)
//   min-p               those at least min_p times as likely as the most likely (0: all)
//   temperature         what is left, softmax(logits / temperature), drawn from with the seed
//
// Same seed, same logits: same choices (the generator is the sampler's own, not the C library's;
// draws are 53-bit doubles from a 64-bit Mersenne Twister).
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "duet/export.h"
#include "duet/status.h"

namespace duet::llm {

struct DUET_API SamplerOptions {
  float temperature = 0.8f;     // 0: greedy
  int32_t top_k = 40;           // 0: off
  float top_p = 0.95f;          // 1: off
  float min_p = 0.05f;          // 0: off
  float repeat_penalty = 1.0f;  // 1: off
  int32_t repeat_last_n = 64;   // how many of the latest tokens the penalty looks at
  uint64_t seed = 0;

  // The options as greedy decoding (temperature 0, everything else off).
  static SamplerOptions greedy();
  // An error naming the first option out of range (negative temperature, top_p outside (0, 1],
  // min_p outside [0, 1], a penalty <= 0, a negative count).
  Status check() const;
};

class DUET_API Sampler {
 public:
  explicit Sampler(SamplerOptions opts = {});
  const SamplerOptions& options() const { return opts_; }

  // The next token from `logits` (one row of the vocabulary's size). NaN logits count as -inf;
  // when every logit is -inf or NaN, token 0. Does not record the choice.
  int32_t sample(std::span<const float> logits);
  // Records a token the penalty should see (prompt tokens and the chosen ones).
  void accept(int32_t token);
  // Forgets the tokens seen and restarts the generator from the seed.
  void reset();

 private:
  SamplerOptions opts_;
  std::mt19937_64 rng_;
  std::deque<int32_t> recent_;
  std::vector<std::pair<float, int32_t>> cand_;  // scratch
  std::vector<double> weights_;
};

}  // namespace duet::llm
