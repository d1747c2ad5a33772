// Text in, text out: a Llama-architecture GGUF model (duet/llama.h) with its tokenizer
// (duet/tokenizer.h) and a sampler (duet/sampler.h), generating a token at a time.
//
//   auto g = duet::llm::Generator::open("model.gguf", {});
//   auto ids = (*g)->tokenize("The capital of France is");
//   (*g)->feed(*ids);
//   duet::llm::GenerateOptions opts;
//   opts.max_tokens = 32;
//   (*g)->generate(opts, [](int32_t, std::string_view text) {
//     std::fwrite(text.data(), 1, text.size(), stdout);
//     return true;  // false stops
//   });
//
// The context is every token fed or generated since open() or reset(), up to context() tokens.
// The last token generated is "pending": it enters the cache with the next feed(), step() or
// generate() (a generation that ends does not run a step whose logits nobody reads).
//
// Thread safety: every method may be called from any thread; calls on one Generator take turns.
// A callback must not call its own Generator (that is an error, not a deadlock).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "duet/export.h"
#include "duet/llama.h"
#include "duet/registry.h"
#include "duet/sampler.h"
#include "duet/tokenizer.h"

namespace duet::llm {

// The context length when the file's llama.context_length is larger (or absent).
inline constexpr int64_t kDefaultContextCap = 4096;

struct DUET_API ModelOptions {
  // Device ids ("cuda:0", "cpu:0,vulkan:0" as a list); empty: every device of this machine.
  std::vector<std::string> devices;
  // The registry the devices come from; null: the process's (shared_registry()).
  std::shared_ptr<Registry> registry;
  // A policy string (docs/planner.md); absent: the DUET_POLICY environment variable.
  std::optional<std::string> policy;
  // The KV cache's capacity in tokens; 0: the file's llama.context_length, at most
  // kDefaultContextCap.
  int64_t context = 0;
  // The KV cache's dtype (f32 or f16); absent: f16 where every device has an f16 attention
  // kernel, else f32 (explain() says which and why).
  std::optional<DType> cache_dtype;
  // Prompts run in chunks of at most this many tokens (a run's activations grow with its rows).
  int64_t prefill_chunk = 512;
  // Set: the decoder runs through what this makes, given the devices and policy above, instead
  // of an engine on them (duet-llama --distributed: the graph split over MPI ranks). The cache
  // dtype is then f32 unless cache_dtype says otherwise (every part must build the same graph).
  std::function<Result<std::unique_ptr<llama::Runner>>(
      const GgufFile& file, const llama::Config& cfg, const llama::BuildOptions& opts,
      const std::vector<Device*>& devices, const Policy& policy)>
      runner;
};

enum class StopReason { length, end_token, stop_string, callback, context_full };
DUET_API std::string_view stop_reason_name(StopReason r);

struct DUET_API GenerateOptions {
  int32_t max_tokens = 128;       // at least 1
  SamplerOptions sampling;        // seed included
  std::vector<std::string> stop;  // stop strings: generation ends before the first one
  bool stop_at_end = true;        // end at the tokenizer's end tokens (EOS, end of turn)
};

struct DUET_API GenerateResult {
  std::vector<int32_t> tokens;  // every token generated, the one that stopped it included
  std::string text;             // the text given to the callback, all of it
  StopReason reason = StopReason::length;
};

// Each token as it is made, with the text it completes: "" while it ends inside a UTF-8
// character or may begin a stop string (that text comes with a later token). Returning false
// stops the generation.
using TokenCallback = std::function<bool(int32_t token, std::string_view text)>;

struct DUET_API Timings {
  int64_t prompt_tokens = 0;  // tokens fed (prompts, and pending tokens fed by a step)
  double prompt_seconds = 0;  // runs that fed more than one token
  int64_t decode_tokens = 0;  // one-token runs
  double decode_seconds = 0;
  // Of those, the runs after the first two on their plan: the steady state, without the run
  // that re-planned for one row and the one that recorded it (CUDA graphs).
  int64_t steady_tokens = 0;
  double steady_seconds = 0;
  double sample_seconds = 0;  // choosing tokens from logits
  int64_t runs = 0;           // engine runs
};

class DUET_API Generator {
 public:
  // Reads the model and its tokenizer, opens the devices and plans the decoder. A file whose
  // tokenizer is missing or not usable opens anyway (ids only): notes() says what is missing.
  static Result<std::unique_ptr<Generator>> open(const std::string& path, ModelOptions opts = {});
  ~Generator();

  const llama::Config& config() const;
  int64_t context() const;   // the cache's capacity in tokens
  int64_t position() const;  // tokens in the context (the pending one included)
  DType cache_dtype() const;
  // The tokenizer, or null when the file has none usable.
  const Tokenizer* tokenizer() const;
  // What the user should know: a missing tokenizer, weights dequantized at load time. One line
  // each.
  std::vector<std::string> notes() const;
  // The plan of a decode step in words, after the cache's dtype and why.
  std::string explain() const;

  // The tokenizer's encode and decode; Code::unsupported when the file has no tokenizer.
  Result<std::vector<int32_t>> tokenize(std::string_view text, EncodeOptions opts = {}) const;
  Result<std::string> detokenize(std::span<const int32_t> ids) const;

  // Appends tokens to the context and runs them (in chunks of prefill_chunk). Errors: an empty
  // list, an id outside the vocabulary, more tokens than the context has room for.
  Status feed(std::span<const int32_t> ids);
  // The next token, chosen by `sampler` from the logits after everything fed; it is pending
  // (fed by the next call). The sampler records it.
  Result<int32_t> step(Sampler& sampler);
  // Tokens until a stop: max_tokens, an end token, a stop string, the callback, a full context.
  // Needs something fed first.
  Result<GenerateResult> generate(const GenerateOptions& opts, const TokenCallback& cb = {});
  // Empties the context (the cache is zeroed).
  Status reset();

  Timings timings() const;
  void reset_timings();
  // The decoder itself (plans, engine, the --timing measurements).
  llama::Model& model();

  struct State;

 private:
  explicit Generator(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace duet::llm
