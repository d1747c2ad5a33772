#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "duet/builtin_engine.h"
#include "duet/llm.h"
#include "duet/planner.h"

namespace duet::llm {
namespace {

using clock = std::chrono::steady_clock;

double since(clock::time_point t0) {
  return std::chrono::duration<double>(clock::now() - t0).count();
}

Status err(Code c, const std::string& what) {
  return Status(c, "generate: " + what);
}

// Where the decoder's attention would run with an f16 cache, and at what precision: f16 is the
// default when every attention step of that plan computes in f16.
struct CacheChoice {
  DType dtype = DType::f32;
  std::string reason;
};

Result<CacheChoice> choose_cache(const GgufFile& file, const llama::Config& cfg,
                                 llama::BuildOptions opts, std::span<Device* const> devices,
                                 const Policy& policy) {
  opts.cache_dtype = DType::f16;
  DUET_ASSIGN_OR_RETURN(Graph g, llama::build_graph(file, cfg, opts, 1));
  auto plan = make_plan(g, plan_devices(devices), policy);
  if (!plan.ok())
    return CacheChoice{DType::f32,
                       "f32: no plan with an f16 cache (" + plan.status().message() + ")"};
  std::string where;
  for (int64_t l = 0; l < cfg.layers; ++l) {
    const std::string name = "blk." + std::to_string(l) + ".attention";
    const PlanStep* s = plan->step(name);
    if (!s) return CacheChoice{DType::f32, "f32: the plan has no step '" + name + "'"};
    const std::string dev = plan->devices[static_cast<size_t>(s->device)].id;
    const std::string how = std::string(tier_name(s->op.choice.tier)) + " tier, " +
                            std::string(precision_name(s->op.choice.precision));
    if (s->op.choice.precision != Precision::f16)
      return CacheChoice{DType::f32, "f32: attention of layer " + std::to_string(l) + " on " + dev +
                                         " computes in " +
                                         std::string(precision_name(s->op.choice.precision)) +
                                         " with an f16 cache (" + how + ")"};
    if (where.find(dev) == std::string::npos)
      where += (where.empty() ? "" : ", ") + dev + " (" + how + ")";
  }
  return CacheChoice{DType::f16, "f16: every layer's attention computes in f16 on " + where};
}

}  // namespace

std::string_view stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::length:
      return "length";
    case StopReason::end_token:
      return "end_token";
    case StopReason::stop_string:
      return "stop_string";
    case StopReason::callback:
      return "callback";
    case StopReason::context_full:
      return "context_full";
  }
  return "unknown";
}

struct Generator::State {
  mutable std::mutex m;
  // The thread inside generate() (its callback must not call back in).
  std::atomic<std::thread::id> busy{};
  std::shared_ptr<Registry> registry;
  std::unique_ptr<llama::Model> model;
  std::optional<Tokenizer> tok;
  std::vector<std::string> notes;
  std::string no_tokenizer;  // why there is no tokenizer
  std::string cache_reason;
  std::vector<int32_t> history;  // every token of the context, the pending one last
  bool pending = false;          // history.back() has not been run yet
  HostTensor logits;             // after the last run: [1, vocab]
  Timings t;
  int runs_on_plan = 0;  // runs since the engine last planned

  // Runs `ids` (after the pending token) and keeps the last logits.
  Status run(std::span<const int32_t> ids) {
    std::vector<int32_t> all;
    if (pending) all.push_back(history.back());
    all.insert(all.end(), ids.begin(), ids.end());
    if (all.empty()) return err(Code::invalid_argument, "nothing to feed: an empty token list");
    if (model->position() + static_cast<int64_t>(all.size()) > model->options().max_context)
      return err(Code::invalid_argument,
                 "the context holds " + std::to_string(model->options().max_context) +
                     " tokens: " + std::to_string(model->position()) + " are used and " +
                     std::to_string(all.size()) + " more do not fit");
    const int plans = model->plans_made();
    const auto t0 = clock::now();
    DUET_ASSIGN_OR_RETURN(HostTensor out, model->forward(all));
    const double s = since(t0);
    runs_on_plan = model->plans_made() == plans ? runs_on_plan + 1 : 1;
    const int64_t n = static_cast<int64_t>(all.size());
    const int64_t chunk = model->options().prefill_chunk;
    t.runs += chunk > 0 ? (n + chunk - 1) / chunk : 1;
    if (n == 1) {
      t.decode_tokens += 1;
      t.decode_seconds += s;
      if (runs_on_plan > 2) {
        t.steady_tokens += 1;
        t.steady_seconds += s;
      }
    } else {
      t.prompt_tokens += n;
      t.prompt_seconds += s;
    }
    logits = std::move(out);
    history.insert(history.end(), ids.begin(), ids.end());
    pending = false;
    return {};
  }

  // The next token from the current logits (running the pending token first).
  Result<int32_t> next(Sampler& sampler) {
    if (pending) DUET_TRY(run({}));
    if (!logits.defined())
      return err(Code::invalid_argument, "nothing fed yet: feed a prompt first");
    const auto t0 = clock::now();
    const int64_t vocab = logits.desc().dim(-1);
    const float* row = logits.data<float>() + (logits.desc().numel() - vocab);
    const int32_t id = sampler.sample(std::span<const float>(row, static_cast<size_t>(vocab)));
    t.sample_seconds += since(t0);
    sampler.accept(id);
    history.push_back(id);
    pending = true;
    return id;
  }
};

Generator::Generator(std::unique_ptr<State> s) : s_(std::move(s)) {}
Generator::~Generator() = default;

Result<std::unique_ptr<Generator>> Generator::open(const std::string& path, ModelOptions opts) {
  auto s = std::make_unique<State>();
  s->registry = opts.registry ? opts.registry : shared_registry();
  std::vector<Device*> devices;
  if (opts.devices.empty()) {
    devices = s->registry->devices();
  } else {
    for (const std::string& id : opts.devices) {
      Device* d = s->registry->find(id);
      if (!d) {
        std::string have;
        for (Device* x : s->registry->devices()) have += (have.empty() ? "" : ", ") + x->id();
        return err(Code::not_found, "no device '" + id + "' on this machine (it has: " +
                                        (have.empty() ? "none" : have) + ")");
      }
      devices.push_back(d);
    }
  }
  if (devices.empty()) return err(Code::not_found, "no device to run on");
  Policy policy;
  if (opts.policy) {
    DUET_ASSIGN_OR_RETURN(policy, parse_policy(*opts.policy, {}, "policy"));
  } else {
    DUET_ASSIGN_OR_RETURN(policy, policy_from_env());
  }
  if (opts.context < 0)
    return err(Code::invalid_argument,
               "context: expected a token count >= 0 (0: the file's), got " +
                   std::to_string(opts.context));
  if (opts.prefill_chunk < 1)
    return err(Code::invalid_argument, "prefill_chunk: expected a row count >= 1, got " +
                                           std::to_string(opts.prefill_chunk));
  if (opts.cache_dtype && *opts.cache_dtype != DType::f32 && *opts.cache_dtype != DType::f16 &&
      *opts.cache_dtype != DType::bf16)
    return err(Code::invalid_argument, "cache dtype: expected f32, f16 or bf16, got " +
                                           std::string(dtype_name(*opts.cache_dtype)));

  DUET_ASSIGN_OR_RETURN(GgufFile file, read_gguf(path));
  DUET_ASSIGN_OR_RETURN(llama::Config cfg, llama::read_config(file));
  auto tok = Tokenizer::from_gguf(file);
  if (!tok.ok()) {
    s->no_tokenizer = tok.status().message();
  } else if (tok->size() > cfg.vocab) {
    s->no_tokenizer = "its " + std::to_string(tok->size()) + " tokens are more than the " +
                      std::to_string(cfg.vocab) + " rows of token_embd.weight";
  } else {
    s->tok = std::move(*tok);
  }
  if (!s->tok)
    s->notes.push_back("no usable tokenizer, so prompts and output are token ids: " +
                       s->no_tokenizer);

  llama::BuildOptions b;
  b.max_context = opts.context > 0 ? opts.context
                                   : std::min(cfg.context > 0 ? cfg.context : kDefaultContextCap,
                                              kDefaultContextCap);
  b.prefill_chunk = opts.prefill_chunk;
  if (opts.cache_dtype) {
    b.cache_dtype = *opts.cache_dtype;
    s->cache_reason = std::string(dtype_name(b.cache_dtype)) + ": asked for";
  } else if (opts.runner) {
    b.cache_dtype = DType::f32;
    s->cache_reason = "f32: the default where the decoder runs elsewhere (its parts may differ)";
  } else {
    DUET_ASSIGN_OR_RETURN(CacheChoice c, choose_cache(file, cfg, b, devices, policy));
    b.cache_dtype = c.dtype;
    s->cache_reason = c.reason;
  }
  if (opts.runner) {
    auto make = [&](const GgufFile& f, const llama::Config& c, const llama::BuildOptions& o) {
      return opts.runner(f, c, o, devices, policy);
    };
    DUET_ASSIGN_OR_RETURN(s->model, llama::Model::open(std::move(file), make, b));
  } else {
    DUET_ASSIGN_OR_RETURN(s->model, llama::Model::open(std::move(file), devices, b, policy));
  }
  if (s->model->dequantized())
    s->notes.push_back("weights dequantized to f32 at load time: " + s->model->note());
  return std::unique_ptr<Generator>(new Generator(std::move(s)));
}

// Every public call takes the lock, refusing a call from inside its own generate()'s callback.
#define DUET_GENERATOR_LOCK(fn)                                              \
  if (s_->busy == std::this_thread::get_id())                                \
    return err(Code::invalid_argument, fn ": called from its own callback"); \
  std::lock_guard<std::mutex> lock(s_->m)

const llama::Config& Generator::config() const {
  return s_->model->config();
}
int64_t Generator::context() const {
  return s_->model->options().max_context;
}
int64_t Generator::position() const {
  std::lock_guard<std::mutex> lock(s_->m);
  return static_cast<int64_t>(s_->history.size());
}
DType Generator::cache_dtype() const {
  return s_->model->options().cache_dtype;
}
const Tokenizer* Generator::tokenizer() const {
  return s_->tok ? &*s_->tok : nullptr;
}
std::vector<std::string> Generator::notes() const {
  return s_->notes;
}
llama::Model& Generator::model() {
  return *s_->model;
}

std::string Generator::explain() const {
  std::lock_guard<std::mutex> lock(s_->m);
  return "KV cache: " + s_->cache_reason + "\n" + s_->model->runner().explain();
}

Result<std::vector<int32_t>> Generator::tokenize(std::string_view text, EncodeOptions opts) const {
  if (!s_->tok)
    return err(Code::unsupported, "the model has no usable tokenizer: " + s_->no_tokenizer);
  return s_->tok->encode(text, opts);
}

Result<std::string> Generator::detokenize(std::span<const int32_t> ids) const {
  if (!s_->tok)
    return err(Code::unsupported, "the model has no usable tokenizer: " + s_->no_tokenizer);
  for (int32_t id : ids)
    if (id < 0 || id >= s_->tok->size())
      return err(Code::invalid_argument, "detokenize: expected ids in [0, " +
                                             std::to_string(s_->tok->size()) + "), got " +
                                             std::to_string(id));
  return s_->tok->decode(ids);
}

Status Generator::feed(std::span<const int32_t> ids) {
  DUET_GENERATOR_LOCK("feed");
  if (ids.empty())
    return err(Code::invalid_argument, "feed: expected at least one token, got none");
  return s_->run(ids);
}

Result<int32_t> Generator::step(Sampler& sampler) {
  DUET_GENERATOR_LOCK("step");
  return s_->next(sampler);
}

Status Generator::reset() {
  DUET_GENERATOR_LOCK("reset");
  s_->history.clear();
  s_->pending = false;
  s_->logits = HostTensor();
  return s_->model->reset();
}

Timings Generator::timings() const {
  std::lock_guard<std::mutex> lock(s_->m);
  return s_->t;
}

void Generator::reset_timings() {
  std::lock_guard<std::mutex> lock(s_->m);
  s_->t = {};
}

Result<GenerateResult> Generator::generate(const GenerateOptions& opts, const TokenCallback& cb) {
  DUET_GENERATOR_LOCK("generate");
  State& s = *s_;
  if (opts.max_tokens < 1)
    return err(Code::invalid_argument,
               "max_tokens: expected at least 1, got " + std::to_string(opts.max_tokens));
  DUET_TRY(opts.sampling.check());
  for (const std::string& stop : opts.stop) {
    if (stop.empty()) return err(Code::invalid_argument, "a stop string is empty");
    if (valid_utf8(stop) != stop)
      return err(Code::invalid_argument,
                 "the stop string \"" + valid_utf8(stop) + "\" is not valid UTF-8");
  }
  if (!s.logits.defined() && !s.pending)
    return err(Code::invalid_argument, "nothing fed yet: feed a prompt first");
  Sampler sampler(opts.sampling);
  // The penalty sees the context's latest tokens.
  const size_t seen =
      std::min<size_t>(s.history.size(), static_cast<size_t>(opts.sampling.repeat_last_n));
  for (size_t i = s.history.size() - seen; i < s.history.size(); ++i) sampler.accept(s.history[i]);

  GenerateResult r;
  Utf8Stream utf8;
  std::string held;  // text that may begin a stop string
  size_t longest_stop = 0;
  for (const std::string& stop : opts.stop) longest_stop = std::max(longest_stop, stop.size());
  s.busy = std::this_thread::get_id();
  struct Clear {
    std::atomic<std::thread::id>& id;
    ~Clear() { id = std::thread::id(); }
  } clear{s.busy};

  // Text completed by a token: decoded, held back where it may begin a stop string, cut at one.
  auto emit = [&](int32_t id, std::string text, bool last) -> bool {
    held += text;
    std::string out;
    bool stopped = false;
    size_t cut = std::string::npos;
    for (const std::string& stop : opts.stop) cut = std::min(cut, held.find(stop));
    if (cut != std::string::npos) {
      out = held.substr(0, cut);
      held.clear();
      stopped = true;
    } else if (last || longest_stop == 0) {
      out = std::move(held);
      held.clear();
    } else {
      // Keep the longest end of the text that some stop string starts with.
      size_t keep = 0;
      for (const std::string& stop : opts.stop)
        for (size_t k = std::min(stop.size() - 1, held.size()); k > keep; --k)
          if (held.compare(held.size() - k, k, stop, 0, k) == 0) {
            keep = k;
            break;
          }
      out = held.substr(0, held.size() - keep);
      held.erase(0, held.size() - keep);
    }
    // A cut inside a character would leave invalid UTF-8: the stream already holds whole ones.
    r.text += out;
    if (cb && !cb(id, out)) {
      if (!stopped) r.reason = StopReason::callback;
      return false;
    }
    return !stopped;
  };

  const int64_t capacity = s.model->options().max_context;
  if (s.pending && s.model->position() >= capacity) {
    r.reason = StopReason::context_full;
    return r;
  }
  for (int32_t i = 0; i < opts.max_tokens; ++i) {
    DUET_ASSIGN_OR_RETURN(int32_t id, s.next(sampler));
    r.tokens.push_back(id);
    const bool end = opts.stop_at_end && s.tok && s.tok->is_end(id);
    const bool full = s.model->position() >= capacity;  // no room to run this token
    const bool last = end || full || i + 1 == opts.max_tokens;
    std::string text = end || !s.tok ? std::string() : utf8.push(s.tok->piece(id));
    if (last) text += utf8.finish();
    if (!emit(id, std::move(text), last)) {
      if (r.reason != StopReason::callback) r.reason = StopReason::stop_string;
      return r;
    }
    if (end) {
      r.reason = StopReason::end_token;
      return r;
    }
    if (full) {
      r.reason = StopReason::context_full;
      return r;
    }
  }
  return r;
}

}  // namespace duet::llm
