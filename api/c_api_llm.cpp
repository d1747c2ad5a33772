// The C API's text generation (duet/duet_llm.h) over duet::llm::Generator; with `distributed`,
// its decoder split over the ranks of an MPI run (duet::dist, in a build with MPI).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>

#include "c_api_internal.h"
#include "duet/duet_llm.h"
#include "duet/llm.h"

#if DUET_HAVE_MPI
#include "duet/dist/engine.h"
#include "duet/dist/llm.h"
#include "duet/dist/transport.h"
#endif

struct duet_llm {
#if DUET_HAVE_MPI
  // A split over MPI ranks: the transport outlives the Generator, whose runner wraps `stages`.
  std::unique_ptr<duet::dist::Transport> transport;
  duet::dist::DistributedEngine* stages = nullptr;
  std::atomic<bool> finished{false};
#endif
  std::unique_ptr<duet::llm::Generator> g;
  // duet_llm_step's sampler, made again when the options change or after a reset.
  std::mutex m;
  std::optional<duet::llm::Sampler> sampler;
  duet_llm_sampling sampler_options{};
};

namespace {

using namespace duet::capi;

duet::llm::SamplerOptions sampler_options(const duet_llm_sampling& s) {
  duet::llm::SamplerOptions o;
  o.temperature = s.temperature;
  o.top_k = s.top_k;
  o.top_p = s.top_p;
  o.min_p = s.min_p;
  o.repeat_penalty = s.repeat_penalty;
  o.repeat_last_n = s.repeat_last_n;
  o.seed = s.seed;
  return o;
}

bool same(const duet_llm_sampling& a, const duet_llm_sampling& b) {
  return a.temperature == b.temperature && a.top_k == b.top_k && a.top_p == b.top_p &&
         a.min_p == b.min_p && a.repeat_penalty == b.repeat_penalty &&
         a.repeat_last_n == b.repeat_last_n && a.seed == b.seed;
}

duet_llm_stop to_c(duet::llm::StopReason r) {
  switch (r) {
    case duet::llm::StopReason::length:
      return DUET_LLM_STOP_LENGTH;
    case duet::llm::StopReason::end_token:
      return DUET_LLM_STOP_END_TOKEN;
    case duet::llm::StopReason::stop_string:
      return DUET_LLM_STOP_STRING;
    case duet::llm::StopReason::callback:
      return DUET_LLM_STOP_CALLBACK;
    case duet::llm::StopReason::context_full:
      return DUET_LLM_STOP_CONTEXT_FULL;
  }
  return DUET_LLM_STOP_LENGTH;
}

int rank_of(const duet_llm* m) {
#if DUET_HAVE_MPI
  if (m->transport) return m->transport->rank();
#else
  (void)m;
#endif
  return 0;
}

// Feeding, generating, stepping and resetting: rank 0's, and only until it finishes.
Status generating_rank(const duet_llm* m, const char* fn) {
  if (const int r = rank_of(m); r != 0)
    return Status(Code::invalid_argument,
                  std::string(fn) + ": called on rank " + std::to_string(r) +
                      "; only rank 0 generates (the other ranks call duet_llm_serve)");
#if DUET_HAVE_MPI
  if (m->finished)
    return Status(Code::invalid_argument,
                  std::string(fn) + ": the distributed run was finished (duet_llm_finish)");
#endif
  return {};
}

}  // namespace

extern "C" {

void duet_llm_options_init(duet_llm_options* o) {
  if (!o) return;
  *o = duet_llm_options{};
  o->cache_dtype = -1;
  o->prefill_chunk = duet::llm::ModelOptions{}.prefill_chunk;
}

void duet_llm_sampling_init(duet_llm_sampling* s) {
  if (!s) return;
  const duet::llm::SamplerOptions d;
  *s = duet_llm_sampling{d.temperature,    d.top_k,         d.top_p, d.min_p,
                         d.repeat_penalty, d.repeat_last_n, d.seed};
}

void duet_llm_generate_options_init(duet_llm_generate_options* o) {
  if (!o) return;
  *o = duet_llm_generate_options{};
  o->max_tokens = duet::llm::GenerateOptions{}.max_tokens;
  duet_llm_sampling_init(&o->sampling);
  o->stop_at_end = 1;
}

duet_status duet_llm_open(const char* path, const duet_llm_options* options, duet_llm** out) {
  return guard("duet_llm_open", [&]() -> Status {
    DUET_REQUIRE("duet_llm_open", path);
    DUET_REQUIRE("duet_llm_open", out);
    *out = nullptr;
    duet_llm_options o;
    duet_llm_options_init(&o);
    if (options) o = *options;
    duet::llm::ModelOptions mo;
    mo.registry = machine();
    mo.devices = split_commas(o.devices);
    if (o.policy) mo.policy = std::string(o.policy);
    mo.context = o.context;
    mo.prefill_chunk = o.prefill_chunk;
    switch (o.cache_dtype) {
      case -1:
        break;
      case DUET_F32:
        mo.cache_dtype = duet::DType::f32;
        break;
      case DUET_F16:
        mo.cache_dtype = duet::DType::f16;
        break;
      case DUET_BF16:
        mo.cache_dtype = duet::DType::bf16;
        break;
      default:
        return Status(Code::invalid_argument,
                      "duet_llm_open: cache_dtype: expected -1, DUET_F32, DUET_F16 or DUET_BF16, "
                      "got " +
                          std::to_string(o.cache_dtype));
    }
    if (!o.distributed && (o.every_rank || o.timeout_s > 0))
      return Status(Code::invalid_argument,
                    "duet_llm_open: every_rank and timeout_s go with distributed, which is 0");
    auto h = std::make_unique<duet_llm>();
    if (o.distributed) {
#if !DUET_HAVE_MPI
      return Status(Code::unsupported,
                    "duet_llm_open: distributed: this duet was built without MPI (install "
                    "libopenmpi-dev and rebuild; docs/distributed.md)");
#else
      if (!duet::dist::launched_by_mpirun())
        return Status(Code::unsupported,
                      "duet_llm_open: distributed: not started by mpirun (mpirun -np N APP ...: "
                      "one process per rank; docs/distributed.md)");
      duet::dist::TransportOptions topts;
      topts.timeout_s = 120;  // start-up: the slowest rank opens its devices and reads the file
      DUET_ASSIGN_OR_RETURN(h->transport, duet::dist::Transport::open(topts));
      if (o.timeout_s > 0)
        h->transport->set_timeout(std::max(h->transport->timeout_s(), o.timeout_s));
      mo.runner = duet::dist::llm_runner(*h->transport, o.every_rank != 0, &h->stages);
#endif
    }
    DUET_ASSIGN_OR_RETURN(h->g, duet::llm::Generator::open(path, std::move(mo)));
#if DUET_HAVE_MPI
    if (h->transport && o.timeout_s > 0) h->transport->set_timeout(o.timeout_s);
#endif
    *out = h.release();
    return {};
  });
}

void duet_llm_destroy(duet_llm* m) {
  if (!m) return;
  try {
    duet_llm_finish(m);  // rank 0 of a split: the other ranks return from duet_llm_serve
    delete m;            // the Generator, then the transport (finalizing MPI where it began it)
  } catch (...) {
  }
}

int64_t duet_llm_context(const duet_llm* m) {
  return m ? m->g->context() : 0;
}
int64_t duet_llm_position(const duet_llm* m) {
  return m ? m->g->position() : 0;
}
int64_t duet_llm_vocab_size(const duet_llm* m) {
  return m ? m->g->config().vocab : 0;
}
int duet_llm_has_tokenizer(const duet_llm* m) {
  return m && m->g->tokenizer() ? 1 : 0;
}
int32_t duet_llm_bos(const duet_llm* m) {
  return m && m->g->tokenizer() ? m->g->tokenizer()->bos() : -1;
}
int32_t duet_llm_eos(const duet_llm* m) {
  return m && m->g->tokenizer() ? m->g->tokenizer()->eos() : -1;
}
int duet_llm_is_end(const duet_llm* m, int32_t token) {
  return m && m->g->tokenizer() && m->g->tokenizer()->is_end(token) ? 1 : 0;
}

duet_status duet_llm_notes(const duet_llm* m, char** out) {
  return guard("duet_llm_notes", [&]() -> Status {
    DUET_REQUIRE("duet_llm_notes", m);
    DUET_REQUIRE("duet_llm_notes", out);
    std::string all;
    for (const std::string& n : m->g->notes()) all += n + "\n";
    *out = copy_string(all);
    return {};
  });
}

duet_status duet_llm_explain(const duet_llm* m, char** out) {
  return guard("duet_llm_explain", [&]() -> Status {
    DUET_REQUIRE("duet_llm_explain", m);
    DUET_REQUIRE("duet_llm_explain", out);
    *out = copy_string(m->g->explain());
    return {};
  });
}

duet_status duet_llm_tokenize(duet_llm* m, const char* text, size_t length, int flags, int32_t* ids,
                              size_t capacity, size_t* count) {
  return guard("duet_llm_tokenize", [&]() -> Status {
    DUET_REQUIRE("duet_llm_tokenize", m);
    DUET_REQUIRE("duet_llm_tokenize", text);
    DUET_REQUIRE("duet_llm_tokenize", count);
    if (!ids && capacity > 0) return null_argument("duet_llm_tokenize", "ids");
    if ((flags & ~(DUET_LLM_ADD_SPECIAL | DUET_LLM_PARSE_SPECIAL)) != 0)
      return Status(Code::invalid_argument,
                    "duet_llm_tokenize: unknown flags " + std::to_string(flags));
    const std::string_view t(text, length == static_cast<size_t>(-1) ? std::strlen(text) : length);
    duet::llm::EncodeOptions o;
    o.add_special = (flags & DUET_LLM_ADD_SPECIAL) != 0;
    o.parse_special = (flags & DUET_LLM_PARSE_SPECIAL) != 0;
    DUET_ASSIGN_OR_RETURN(std::vector<int32_t> v, m->g->tokenize(t, o));
    *count = v.size();
    if (v.size() > capacity)
      return Status(Code::invalid_argument,
                    "duet_llm_tokenize: the text has " + std::to_string(v.size()) +
                        " tokens, more than the capacity " + std::to_string(capacity));
    if (!v.empty()) std::memcpy(ids, v.data(), v.size() * sizeof(int32_t));
    return {};
  });
}

duet_status duet_llm_detokenize(duet_llm* m, const int32_t* ids, size_t count, char** out) {
  return guard("duet_llm_detokenize", [&]() -> Status {
    DUET_REQUIRE("duet_llm_detokenize", m);
    DUET_REQUIRE("duet_llm_detokenize", out);
    if (!ids && count > 0) return null_argument("duet_llm_detokenize", "ids");
    DUET_ASSIGN_OR_RETURN(std::string s, m->g->detokenize(std::span<const int32_t>(ids, count)));
    *out = copy_string(s);
    return {};
  });
}

duet_status duet_llm_feed(duet_llm* m, const int32_t* ids, size_t count) {
  return guard("duet_llm_feed", [&]() -> Status {
    DUET_REQUIRE("duet_llm_feed", m);
    DUET_TRY(generating_rank(m, "duet_llm_feed"));
    if (!ids && count > 0) return null_argument("duet_llm_feed", "ids");
    return m->g->feed(std::span<const int32_t>(ids, count));
  });
}

duet_status duet_llm_generate(duet_llm* m, const duet_llm_generate_options* options,
                              duet_llm_token_callback callback, void* user, duet_llm_stop* reason,
                              size_t* tokens) {
  return guard("duet_llm_generate", [&]() -> Status {
    DUET_REQUIRE("duet_llm_generate", m);
    DUET_TRY(generating_rank(m, "duet_llm_generate"));
    duet_llm_generate_options o;
    duet_llm_generate_options_init(&o);
    if (options) o = *options;
    duet::llm::GenerateOptions g;
    g.max_tokens = o.max_tokens;
    g.sampling = sampler_options(o.sampling);
    if (!o.stop && o.stop_count > 0) return null_argument("duet_llm_generate", "options->stop");
    for (size_t i = 0; i < o.stop_count; ++i) {
      if (!o.stop[i]) return null_argument("duet_llm_generate", "a stop string");
      g.stop.emplace_back(o.stop[i]);
    }
    g.stop_at_end = o.stop_at_end != 0;
    duet::llm::TokenCallback cb;
    if (callback) {
      cb = [&](int32_t id, std::string_view text) {
        const std::string s(text);  // NUL-terminated for C
        return callback(user, id, s.c_str(), s.size()) != 0;
      };
    }
    DUET_ASSIGN_OR_RETURN(duet::llm::GenerateResult r, m->g->generate(g, cb));
    if (reason) *reason = to_c(r.reason);
    if (tokens) *tokens = r.tokens.size();
    return {};
  });
}

duet_status duet_llm_step(duet_llm* m, const duet_llm_sampling* sampling, int32_t* token) {
  return guard("duet_llm_step", [&]() -> Status {
    DUET_REQUIRE("duet_llm_step", m);
    DUET_REQUIRE("duet_llm_step", token);
    DUET_TRY(generating_rank(m, "duet_llm_step"));
    duet_llm_sampling s;
    if (sampling) {
      s = *sampling;
    } else {
      const duet::llm::SamplerOptions g = duet::llm::SamplerOptions::greedy();
      s = duet_llm_sampling{g.temperature,    g.top_k,         g.top_p, g.min_p,
                            g.repeat_penalty, g.repeat_last_n, g.seed};
    }
    const duet::llm::SamplerOptions o = sampler_options(s);
    DUET_TRY(o.check());
    std::lock_guard<std::mutex> lock(m->m);
    if (!m->sampler || !same(s, m->sampler_options)) {
      m->sampler.emplace(o);
      m->sampler_options = s;
    }
    DUET_ASSIGN_OR_RETURN(*token, m->g->step(*m->sampler));
    return {};
  });
}

duet_status duet_llm_reset(duet_llm* m) {
  return guard("duet_llm_reset", [&]() -> Status {
    DUET_REQUIRE("duet_llm_reset", m);
    DUET_TRY(generating_rank(m, "duet_llm_reset"));
    std::lock_guard<std::mutex> lock(m->m);
    m->sampler.reset();
    return m->g->reset();
  });
}

duet_status duet_llm_get_timings(const duet_llm* m, duet_llm_timings* out) {
  return guard("duet_llm_get_timings", [&]() -> Status {
    DUET_REQUIRE("duet_llm_get_timings", m);
    DUET_REQUIRE("duet_llm_get_timings", out);
    const duet::llm::Timings t = m->g->timings();
    *out = duet_llm_timings{t.prompt_tokens, t.prompt_seconds, t.decode_tokens,  t.decode_seconds,
                            t.steady_tokens, t.steady_seconds, t.sample_seconds, t.runs};
    return {};
  });
}

void duet_llm_reset_timings(duet_llm* m) {
  if (m) m->g->reset_timings();
}

int duet_llm_rank(const duet_llm* m) {
  return m ? rank_of(m) : -1;
}

int duet_llm_ranks(const duet_llm* m) {
  if (!m) return 0;
#if DUET_HAVE_MPI
  if (m->transport) return m->transport->size();
#endif
  return 1;
}

duet_status duet_llm_serve(duet_llm* m) {
  return guard("duet_llm_serve", [&]() -> Status {
    DUET_REQUIRE("duet_llm_serve", m);
#if DUET_HAVE_MPI
    if (m->transport && m->transport->rank() != 0) return m->stages->serve();
    if (m->transport)
      return Status(Code::invalid_argument,
                    "duet_llm_serve: called on rank 0, which generates (the other ranks serve)");
#endif
    return Status(Code::invalid_argument,
                  "duet_llm_serve: the model is not split over ranks (options.distributed)");
  });
}

duet_status duet_llm_finish(duet_llm* m) {
  return guard("duet_llm_finish", [&]() -> Status {
    DUET_REQUIRE("duet_llm_finish", m);
#if DUET_HAVE_MPI
    if (!m->transport || m->transport->rank() != 0 || !m->stages) return {};
    std::lock_guard<std::mutex> lock(m->m);
    if (m->finished.exchange(true)) return {};
    return m->stages->finish();
#else
    return {};
#endif
  });
}

void duet_llm_abort(duet_llm* m, const char* message) {
  const char* what = message ? message : "duet_llm_abort";
#if DUET_HAVE_MPI
  if (m && m->transport) m->transport->abort(Status(Code::internal, what));
#else
  (void)m;
#endif
  // No run to end beyond this process: it ends alone, with the message.
  std::fprintf(stderr, "duet: %s\n", what);
  std::exit(1);
}

}  // extern "C"
