// duet-llama: text generation from a Llama-architecture GGUF file, over duet/llm.h.
//
//   duet-llama model.gguf --prompt "Once upon a time" -n 64 [--temp 0] [--devices cuda:0]
//
//   mpirun -np 2 duet-llama model.gguf --prompt "Once upon a time" --distributed
//
// The generated text goes to stdout as it is made; everything else (the model's shape, notes,
// speeds, --explain, --timing) to stderr. Exit status: 0 done, 1 a failure while running, 2 bad
// input (options, prompt, a file that cannot be read as a model). With --distributed the decoder
// is split in pipeline stages over the ranks of an MPI run (docs/distributed.md): rank 0 reads
// the prompt, samples and prints; the others run their stages.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "duet/builtin_engine.h"
#include "duet/llm.h"
#include "duet/policy.h"

#if DUET_HAVE_MPI
#include "duet/dist/agreement.h"
#include "duet/dist/engine.h"
#include "duet/dist/llm.h"
#endif

namespace {

using namespace duet;

const char* kUsage =
    R"(usage: duet-llama MODEL.gguf [PROMPT] [-n N] [options]

Generates text from a Llama-architecture GGUF file (llama, mistral, qwen2) with its tokenizer,
printing it as it is made.

prompt (one of):
  --prompt TEXT          the prompt as text (the file's tokenizer; BOS as the file says)
  -f, --file FILE        the prompt from a file (UTF-8)
  --prompt-ids ID,ID,..  the prompt as token ids (also for files without a tokenizer)
  --bench-prompt N       a made-up prompt of N ids, run once untimed first (timing at
                         position N)
generation:
  -n N                   tokens to generate, at most (default 128)
  --temp T               temperature; 0 is greedy (default 0.8)
  --top-k K              keep the K most likely (default 40; 0: off)
  --top-p P              keep the most likely up to probability P (default 0.95; 1: off)
  --min-p P              keep those at least P times the most likely (default 0.05; 0: off)
  --repeat-penalty R     penalise the latest tokens (default 1: off)
  --repeat-last-n N      how many latest tokens (default 64)
  --seed S               the sampler's seed (default: random, printed)
  --stop TEXT            stop before this text (repeatable)
  --ignore-eos           do not stop at the end-of-sequence token
  --special              read control tokens written in the prompt (<|eot_id|>, ...) as tokens
model and devices:
  --devices ID,ID        devices to use (default: all of this machine)
  --policy TERMS         planner overrides (docs/planner.md)
  -c, --ctx N            context length (default: the file's, at most 4096)
  --cache-dtype f16|f32  KV cache dtype (default: f16 where attention computes f16)
  --prefill-chunk N      rows per prompt run (default 512)
distributed (docs/distributed.md):
  --distributed          run as one rank of an MPI run (mpirun -np N duet-llama MODEL ...
                         --distributed): the decoder in pipeline stages over the ranks, each
                         reading its stage's weights from its own copy of MODEL
  --every-rank           a stage on every rank, even where fewer are estimated faster
  --timeout SECONDS      how long a rank waits for another once started (default:
                         $DUET_DIST_TIMEOUT, else 120)
output:
  --print-ids            print the generated ids after the text
  --explain              print the KV cache's dtype and the decode plan
  --timing               after generating, time 16 decode steps: overhead beyond the kernels
  -h, --help             this text
)";

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "duet-llama: %s\n(duet-llama --help for the options)\n", msg.c_str());
  return 2;
}

#if DUET_HAVE_MPI
// The transport of a --distributed run: a failure there ends every rank with its message.
dist::Transport* g_transport = nullptr;
#endif

int failure(const Status& s, int code = 1) {
#if DUET_HAVE_MPI
  // A refusal at start (another build or model on some rank) is the same on every rank: each
  // says it and ends alone, with no MPI_Abort racing the others' messages.
  if (g_transport && dist::refused_at_start(s)) {
    std::fprintf(stderr, "duet-llama: rank %d (%s): %s\n", g_transport->rank(),
                 g_transport->host().c_str(), s.message().c_str());
    return code;
  }
  if (g_transport) g_transport->abort(s, code);
#endif
  std::fprintf(stderr, "duet-llama: %s\n", s.message().c_str());
  return code;
}

bool parse_ids(const std::string& s, std::vector<int32_t>& out) {
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end || v < 0 || v > 2147483647L) return false;
    out.push_back(static_cast<int32_t>(v));
  }
  return !out.empty();
}

bool parse_long(const char* s, long lo, long hi, long& out) {
  char* end = nullptr;
  out = std::strtol(s, &end, 10);
  return *s && !*end && out >= lo && out <= hi;
}

bool parse_float(const char* s, float& out) {
  char* end = nullptr;
  out = std::strtof(s, &end);
  return *s && !*end;
}

// Decode steps at the same positions measured three ways: whole runs (the step's wall time);
// profiled runs, each kernel timed by its device in the run's own submissions (device timestamps
// on GPUs), so that the run's wall time minus its kernels is the engine's cost per token, from
// one and the same run; and runs that wait for every step (run_timed), the earlier method.
int timing(llama::Model& m, int steps) {
  using clock = std::chrono::steady_clock;
  Engine& e = m.engine();
  const int64_t start = m.position();
  auto in_at = [&](int64_t pos) {
    HostTensor t = HostTensor::empty(DType::i32, std::vector<int64_t>{1});
    HostTensor p = HostTensor::empty(DType::i32, std::vector<int64_t>{1});
    HostTensor l = HostTensor::empty(DType::i32, std::vector<int64_t>{1});
    t.data<int32_t>()[0] = 1;
    p.data<int32_t>()[0] = static_cast<int32_t>(pos);
    l.data<int32_t>()[0] = static_cast<int32_t>(pos + 1);
    return std::map<std::string, HostTensor>{{"tokens", t}, {"pos", p}, {"len", l}};
  };
  double wall = 0, waited = 0, pwall = 0, pkern = 0, phost = 0, pspan = 0;
  std::vector<double> per_step(e.plan().steps.size(), 0.0);
  std::string unsupported;
  for (int i = 0; i < steps; ++i) {  // the same positions for every measurement
    auto in = in_at(start + i);
    const auto t0 = clock::now();
    auto r = e.run(in);
    wall += std::chrono::duration<double>(clock::now() - t0).count();
    if (!r.ok()) return failure(r.status());
    if (unsupported.empty()) {
      RunProfile prof;
      auto rp = e.run_profiled(in, prof);
      if (rp.ok()) {
        pwall += prof.wall_seconds;
        pkern += prof.kernel_seconds();
        phost += prof.host_seconds();
        // Per device: first kernel's start to last kernel's end on its clock.
        std::map<int, std::pair<double, double>> busy;
        for (const StepProfile& s : prof.steps) {
          per_step[static_cast<size_t>(s.step)] += s.device_seconds;
          auto [it, fresh] = busy.try_emplace(s.device, s.start, s.end);
          it->second.first = std::min(it->second.first, s.start);
          it->second.second = std::max(it->second.second, s.end);
        }
        for (const auto& [d, b] : busy) pspan += b.second - b.first;
      } else if (rp.status().code() == Code::unsupported) {
        unsupported = rp.status().message();
      } else {
        return failure(rp.status());
      }
    }
    std::vector<StepTime> times;
    auto r2 = e.run_timed(in, times);
    if (!r2.ok()) return failure(r2.status());
    for (const StepTime& s : times) waited += s.seconds;
  }
  const double ms = 1e3 / steps, step = wall * ms;
  std::fprintf(
      stderr,
      "timing: %d decode steps at positions %lld..%lld, %zu steps in the plan: step %.3f ms\n",
      steps, static_cast<long long>(start), static_cast<long long>(start + steps - 1),
      e.plan().steps.size(), step);
  const std::string replayed = e.recording_summary();
  if (!replayed.empty())
    std::fprintf(stderr, "timing: plain runs replay recordings (%s); device-timed runs do not\n",
                 replayed.c_str());
  if (unsupported.empty()) {
    const double w = pwall * ms, k = pkern * ms;
    std::fprintf(stderr,
                 "timing: device-timed runs: step %.3f ms, kernels on the device %.3f ms, "
                 "overhead %.3f ms (%.1f%% of the step); host time in execute %.3f ms, devices "
                 "busy first to last kernel %.3f ms\n",
                 w, k, w - k, 100.0 * (w - k) / w, phost * ms, pspan * ms);
    if (!replayed.empty())
      std::fprintf(stderr,
                   "timing: replayed step %.3f ms, kernels on the device %.3f ms: overhead %.3f ms "
                   "(%.1f%% of the step)\n",
                   step, k, step - k, 100.0 * (step - k) / step);
    std::vector<size_t> order(per_step.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    const size_t top = std::min<size_t>(4, order.size());
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top), order.end(),
                      [&](size_t a, size_t b) { return per_step[a] > per_step[b]; });
    std::fprintf(stderr, "timing: most device time:");
    for (size_t i = 0; i < top; ++i)
      std::fprintf(stderr, " %s %.3f ms%s", e.plan().steps[order[i]].name.c_str(),
                   per_step[order[i]] * ms, i + 1 < top ? "," : "\n");
    // The step's device time by op and kernel tier: where a decode step goes.
    std::map<std::string, std::pair<int, double>> by_kind;
    for (size_t i = 0; i < per_step.size(); ++i) {
      const PlanStep& s = e.plan().steps[i];
      if (s.kind != StepKind::kernel || s.once) continue;
      auto& [n, t] = by_kind[std::string(op_name(s.op.op.kind)) + "/" +
                             std::string(tier_name(s.op.choice.tier))];
      ++n;
      t += per_step[i];
    }
    std::vector<std::pair<std::string, std::pair<int, double>>> kinds(by_kind.begin(),
                                                                      by_kind.end());
    std::sort(kinds.begin(), kinds.end(),
              [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
    std::fprintf(stderr, "timing: by op/tier (kernels, ms a step, us a kernel):");
    for (size_t i = 0; i < kinds.size(); ++i)
      std::fprintf(stderr, " %s %d %.3f %.1f%s", kinds[i].first.c_str(), kinds[i].second.first,
                   kinds[i].second.second * ms,
                   kinds[i].second.second * ms * 1e3 / std::max(1, kinds[i].second.first),
                   i + 1 < kinds.size() ? "," : "\n");
  } else {
    std::fprintf(stderr, "timing: device-timed runs: not supported: %s\n", unsupported.c_str());
  }
  const double wt = waited * ms;
  std::fprintf(stderr, "timing: every step waited for: sum %.3f ms, step - sum %.3f ms (%.1f%%)\n",
               wt, step - wt, 100.0 * (step - wt) / step);
  return 0;
}

struct Args {
  std::string path, devices, policy, prompt_text, prompt_file, cache_dtype;
  std::vector<int32_t> prompt_ids;
  long bench_prompt = 0, n = 128, ctx = 0, chunk = 512;
  std::vector<std::string> sources;  // the prompt options given
  llm::GenerateOptions gen;
  bool seed_given = false, special = false, print_ids = false, explain = false, want_timing = false,
       has_policy = false, distributed = false, every_rank = false;
  float timeout_s = 0;  // 0: the transport's default
};

// 0: parsed; else the exit status (help printed: 0 through `help`).
int parse(int argc, char** argv, Args& a, bool& help) {
  a.gen.max_tokens = 128;
  for (int i = 1; i < argc; ++i) {
    const std::string o = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    auto need = [&](const char* v, const std::string& what) {
      if (!v) usage_error(o + ": expected " + what);
      return v != nullptr;
    };
    auto number = [&](float& out, const std::string& what) {
      const char* v = value();
      if (!need(v, what)) return false;
      if (!parse_float(v, out))
        return usage_error(o + ": expected " + what + ", got '" + v + "'"), false;
      return true;
    };
    auto count = [&](long& out, long lo, long hi, const std::string& what) {
      const char* v = value();
      if (!need(v, what)) return false;
      if (!parse_long(v, lo, hi, out))
        return usage_error(o + ": expected " + what + ", got '" + v + "'"), false;
      return true;
    };
    long tmp = 0;
    if (o == "-h" || o == "--help") {
      help = true;
      return 0;
    } else if (o == "--prompt") {
      const char* v = value();
      if (!need(v, "a text")) return 2;
      a.prompt_text = v;
      a.sources.push_back(o);
    } else if (o == "-f" || o == "--file") {
      const char* v = value();
      if (!need(v, "a file")) return 2;
      a.prompt_file = v;
      a.sources.push_back(o);
    } else if (o == "--prompt-ids") {
      const char* v = value();
      if (!need(v, "ids like 1,2,3")) return 2;
      if (!parse_ids(v, a.prompt_ids))
        return usage_error("--prompt-ids: expected ids like 1,2,3, got '" + std::string(v) + "'");
      a.sources.push_back(o);
    } else if (o == "--bench-prompt") {
      if (!count(a.bench_prompt, 1, 1 << 24, "a token count from 1 to 16777216")) return 2;
      a.sources.push_back(o);
    } else if (o == "-n") {
      if (!count(a.n, 1, 1 << 24, "a token count from 1 to 16777216")) return 2;
    } else if (o == "--temp") {
      if (!number(a.gen.sampling.temperature, "a temperature >= 0")) return 2;
    } else if (o == "--top-k") {
      if (!count(tmp, 0, 1 << 30, "a count >= 0")) return 2;
      a.gen.sampling.top_k = static_cast<int32_t>(tmp);
    } else if (o == "--top-p") {
      if (!number(a.gen.sampling.top_p, "a probability in (0, 1]")) return 2;
    } else if (o == "--min-p") {
      if (!number(a.gen.sampling.min_p, "a ratio in [0, 1]")) return 2;
    } else if (o == "--repeat-penalty") {
      if (!number(a.gen.sampling.repeat_penalty, "a penalty > 0")) return 2;
    } else if (o == "--repeat-last-n") {
      if (!count(tmp, 0, 1 << 30, "a count >= 0")) return 2;
      a.gen.sampling.repeat_last_n = static_cast<int32_t>(tmp);
    } else if (o == "--seed") {
      const char* v = value();
      if (!need(v, "a seed")) return 2;
      char* end = nullptr;
      a.gen.sampling.seed = std::strtoull(v, &end, 10);
      if (!*v || *end || *v == '-') return usage_error("--seed: expected an integer >= 0");
      a.seed_given = true;
    } else if (o == "--stop") {
      const char* v = value();
      if (!need(v, "a text")) return 2;
      if (!*v) return usage_error("--stop: the stop text is empty");
      a.gen.stop.push_back(v);
    } else if (o == "--ignore-eos") {
      a.gen.stop_at_end = false;
    } else if (o == "--special") {
      a.special = true;
    } else if (o == "--devices") {
      const char* v = value();
      if (!need(v, "ids like cpu:0,vulkan:0")) return 2;
      a.devices = v;
    } else if (o == "--policy") {
      const char* v = value();
      if (!need(v, "policy terms")) return 2;
      a.policy = v;
      a.has_policy = true;
    } else if (o == "-c" || o == "--ctx" || o == "--max-context") {
      if (!count(a.ctx, 1, 1 << 24, "a token count from 1 to 16777216")) return 2;
    } else if (o == "--cache-dtype") {
      const char* v = value();
      if (!need(v, "f16 or f32")) return 2;
      a.cache_dtype = v;
      if (a.cache_dtype != "f16" && a.cache_dtype != "f32" && a.cache_dtype != "bf16")
        return usage_error("--cache-dtype: expected f16, f32 or bf16, got '" + a.cache_dtype + "'");
    } else if (o == "--prefill-chunk") {
      if (!count(a.chunk, 1, 1 << 24, "a row count >= 1")) return 2;
    } else if (o == "--print-ids") {
      a.print_ids = true;
    } else if (o == "--explain") {
      a.explain = true;
    } else if (o == "--timing") {
      a.want_timing = true;
    } else if (o == "--distributed") {
      a.distributed = true;
    } else if (o == "--every-rank") {
      a.every_rank = true;
    } else if (o == "--timeout") {
      if (!number(a.timeout_s, "seconds > 0")) return 2;
      if (!(a.timeout_s > 0)) return usage_error("--timeout: expected seconds > 0");
    } else if (!o.empty() && o[0] == '-') {
      return usage_error("unknown option " + o);
    } else if (a.path.empty()) {
      a.path = o;
    } else {
      return usage_error("a second model file '" + o + "' (the prompt goes after --prompt)");
    }
  }
  if (a.path.empty()) return usage_error("a model file is needed");
  if (a.sources.size() > 1)
    return usage_error("one prompt only: " + a.sources[0] + " and " + a.sources[1] +
                       " were both given");
  if (auto s = a.gen.sampling.check(); !s.ok()) return usage_error(s.message());
  if (a.distributed && a.want_timing)
    return usage_error("--timing times the decoder in one process; it does not take --distributed");
  if (!a.distributed && (a.every_rank || a.timeout_s > 0))
    return usage_error(std::string(a.every_rank ? "--every-rank" : "--timeout") +
                       " goes with --distributed");
  a.gen.max_tokens = static_cast<int32_t>(a.n);
  return 0;
}

// The prompt's text from --prompt or -f, checked before the model is read: 0, or the exit status.
int prompt_text(const Args& a, std::string& text) {
  if (a.sources.empty() ||
      (a.sources[0] != "--prompt" && a.sources[0] != "-f" && a.sources[0] != "--file"))
    return 0;
  text = a.prompt_text;
  if (!a.prompt_file.empty()) {
    // A regular file of bounded size, read without exceptions: a directory, /dev/zero or a
    // fifo is an error, not a crash or an endless read.
    const std::string what = a.sources[0] + ": '" + a.prompt_file + "'";
    std::error_code ec;
    const auto st = std::filesystem::status(a.prompt_file, ec);
    if (ec || !std::filesystem::exists(st)) return usage_error(what + ": cannot read it");
    if (!std::filesystem::is_regular_file(st)) return usage_error(what + ": not a regular file");
    constexpr uintmax_t kMaxPromptBytes = 256u << 20;
    const uintmax_t size = std::filesystem::file_size(a.prompt_file, ec);
    if (ec) return usage_error(what + ": cannot read it (" + ec.message() + ")");
    if (size > kMaxPromptBytes)
      return usage_error(what + ": " + std::to_string(size) +
                         " bytes, more than a prompt file may have (256 MiB)");
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(a.prompt_file.c_str(), "rb"),
                                                      &std::fclose);
    if (!f) return usage_error(what + ": cannot read it");
    text.resize(static_cast<size_t>(size));
    const size_t got = text.empty() ? 0 : std::fread(text.data(), 1, text.size(), f.get());
    if (got != text.size() || std::ferror(f.get()))
      return usage_error(what + ": cannot read it (read " + std::to_string(got) + " of " +
                         std::to_string(size) + " bytes)");
  }
  if (text.empty()) return usage_error(a.sources[0] + ": the prompt is empty");
  if (const size_t bad = llm::first_invalid_utf8(text); bad != std::string::npos)
    return usage_error(a.sources[0] + ": the prompt is not valid UTF-8 (byte " +
                       std::to_string(static_cast<unsigned char>(text[bad])) + " at offset " +
                       std::to_string(bad) + ")");
  return 0;
}

// The prompt's ids: tokenized text, ids as given, or made up. 0, or the exit status.
int prompt_ids(const Args& a, const std::string& text, llm::Generator& g,
               std::vector<int32_t>& ids) {
  if (!a.prompt_ids.empty()) {
    ids = a.prompt_ids;
    return 0;
  }
  if (a.bench_prompt > 0) {
    const int64_t vocab = g.config().vocab;
    for (long i = 0; i < a.bench_prompt; ++i)
      ids.push_back(static_cast<int32_t>(1 + i % (vocab - 1)));
    return 0;
  }
  if (a.sources.empty()) {
    if (g.tokenizer() && g.tokenizer()->bos() >= 0) {  // nothing given: generate after BOS
      ids = {g.tokenizer()->bos()};
      return 0;
    }
    return usage_error("a prompt is needed (--prompt, -f or --prompt-ids)");
  }
  if (!g.tokenizer())
    return usage_error(a.sources[0] +
                       ": the model has no usable tokenizer; give the prompt as ids "
                       "(--prompt-ids)");
  llm::EncodeOptions eo;
  eo.parse_special = a.special;
  auto t = g.tokenize(text, eo);
  if (!t.ok()) return usage_error(a.sources[0] + ": " + t.status().message());
  ids = std::move(*t);
  if (ids.empty()) return usage_error(a.sources[0] + ": the prompt has no tokens");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  bool help = false;
  if (argc < 2) return usage_error("a model file is needed");
  if (int rc = parse(argc, argv, a, help); rc != 0 || help) {
    if (help) std::fputs(kUsage, stdout);
    return help ? 0 : rc;
  }
  if (!a.seed_given) a.gen.sampling.seed = std::random_device{}();
  std::string text;
  if (int rc = prompt_text(a, text); rc != 0) return rc;

  llm::ModelOptions mo;
  std::stringstream ds(a.devices);
  for (std::string id; std::getline(ds, id, ',');)
    if (!id.empty()) mo.devices.push_back(id);
  if (a.has_policy) {
    auto p = parse_policy(a.policy, {}, "--policy");
    if (!p.ok()) return usage_error(p.status().message());
    mo.policy = a.policy;
  }
  mo.context = a.ctx;
  mo.prefill_chunk = a.chunk;
  if (!a.cache_dtype.empty())
    mo.cache_dtype = a.cache_dtype == "f16"    ? DType::f16
                     : a.cache_dtype == "bf16" ? DType::bf16
                                               : DType::f32;
#if DUET_HAVE_MPI
  std::unique_ptr<dist::Transport> transport;
  dist::DistributedEngine* stages = nullptr;
#endif
  if (a.distributed) {
#if !DUET_HAVE_MPI
    return usage_error(
        "--distributed: this duet-llama was built without MPI (install libopenmpi-dev and "
        "rebuild; docs/distributed.md)");
#else
    if (!dist::launched_by_mpirun())
      return usage_error(
          "--distributed: start it with mpirun, one process per rank (mpirun -np 2 duet-llama "
          "MODEL --distributed ...); docs/distributed.md");
    dist::TransportOptions topts;
    topts.timeout_s = 120;  // start-up: the slowest rank opens its devices and reads the file
    auto t = dist::Transport::open(topts);
    if (!t.ok()) return failure(t.status());
    transport = std::move(*t);
    if (a.timeout_s > 0)
      transport->set_timeout(std::max(transport->timeout_s(), static_cast<double>(a.timeout_s)));
    // From here an error on any rank ends every rank, with its message.
    g_transport = transport.get();
    mo.runner = dist::llm_runner(*transport, a.every_rank, &stages);
#endif
  }
  auto opened = llm::Generator::open(a.path, mo);
  if (!opened.ok()) {
    const Code c = opened.status().code();
    const bool input = c == Code::invalid_argument || c == Code::parse_error ||
                       c == Code::not_found || c == Code::io_error;
    return failure(opened.status(), input ? 2 : 1);
  }
  llm::Generator& g = **opened;
#if DUET_HAVE_MPI
  // Rank 0 runs the generation below; the other ranks follow it until it finishes.
  if (transport) {
    if (a.timeout_s > 0) transport->set_timeout(a.timeout_s);
    if (transport->rank() != 0) {
      if (Status s = stages->serve(); !s.ok()) return failure(s);
      return 0;
    }
  }
  // However rank 0 ends from here (done, or a bad prompt), the other ranks end with it.
  struct Finish {
    dist::DistributedEngine* e;
    ~Finish() {
      if (!e) return;
      if (Status s = e->finish(); !s.ok()) failure(s);
    }
  } finish{stages};
#endif
  const llama::Config& c = g.config();
  std::fprintf(stderr,
               "%s: %lld layers, embedding %lld, heads %lld/%lld, ff %lld, vocab %lld, "
               "context %lld, cache %s\n",
               c.arch.c_str(), static_cast<long long>(c.layers), static_cast<long long>(c.embd),
               static_cast<long long>(c.heads), static_cast<long long>(c.kv_heads),
               static_cast<long long>(c.ff), static_cast<long long>(c.vocab),
               static_cast<long long>(g.context()),
               std::string(dtype_name(g.cache_dtype())).c_str());
  for (const std::string& note : g.notes()) std::fprintf(stderr, "warning: %s\n", note.c_str());
  if (a.explain) std::fprintf(stderr, "%s\n", g.explain().c_str());

  std::vector<int32_t> ids;
  if (int rc = prompt_ids(a, text, g, ids); rc != 0) return rc;
  if (static_cast<int64_t>(ids.size()) > g.context())
    return usage_error("the prompt has " + std::to_string(ids.size()) +
                       " tokens, more than the context's " + std::to_string(g.context()) +
                       " (--ctx)");
  for (int32_t id : ids)
    if (id < 0 || id >= c.vocab)
      return usage_error("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                         std::to_string(c.vocab) + ")");
  if (a.gen.sampling.temperature > 0)
    std::fprintf(stderr, "sampling: temperature %g, top-k %d, top-p %g, min-p %g, seed %llu\n",
                 static_cast<double>(a.gen.sampling.temperature), a.gen.sampling.top_k,
                 static_cast<double>(a.gen.sampling.top_p),
                 static_cast<double>(a.gen.sampling.min_p),
                 static_cast<unsigned long long>(a.gen.sampling.seed));

  if (a.bench_prompt > 0) {  // timing: plan and warm up for the prompt's shape first, untimed
    if (Status s = g.feed(ids); !s.ok()) return failure(s);
    if (Status s = g.reset(); !s.ok()) return failure(s);
    g.reset_timings();
  }
  if (Status s = g.feed(ids); !s.ok()) return failure(s);
  const bool as_text = g.tokenizer() != nullptr;
  auto r = g.generate(a.gen, [&](int32_t id, std::string_view piece) {
    if (as_text)
      std::fwrite(piece.data(), 1, piece.size(), stdout);
    else
      std::printf("%d ", id);
    std::fflush(stdout);
    return true;
  });
  if (!r.ok()) return failure(r.status());
  std::printf("\n");
  if (a.print_ids) {
    std::printf("ids:");
    for (int32_t id : r->tokens) std::printf(" %d", id);
    std::printf("\n");
  }
  std::fflush(stdout);
  const llm::Timings t = g.timings();
  std::fprintf(
      stderr, "prefill: %lld tokens in %.3f s (%.1f tokens/s)\n",
      static_cast<long long>(t.prompt_tokens), t.prompt_seconds,
      t.prompt_seconds > 0 ? static_cast<double>(t.prompt_tokens) / t.prompt_seconds : 0.0);
  if (t.decode_tokens > 0)
    std::fprintf(stderr,
                 "decode: %lld tokens in %.3f s (%.1f tokens/s) at positions %zu..%lld; sampling "
                 "%.3f ms per token\n",
                 static_cast<long long>(t.decode_tokens), t.decode_seconds,
                 static_cast<double>(t.decode_tokens) / t.decode_seconds, ids.size(),
                 static_cast<long long>(g.model().position() - 1),
                 1e3 * t.sample_seconds / static_cast<double>(r->tokens.size()));
  if (t.steady_tokens > 0) {
    const std::string replayed = g.model().recording_summary();
    std::fprintf(stderr,
                 "decode steady: %lld token%s in %.3f s (%.1f tokens/s, %.3f ms a step)%s%s\n",
                 static_cast<long long>(t.steady_tokens), t.steady_tokens == 1 ? "" : "s",
                 t.steady_seconds, static_cast<double>(t.steady_tokens) / t.steady_seconds,
                 1e3 * t.steady_seconds / static_cast<double>(t.steady_tokens),
                 replayed.empty() ? "" : "; replayed: ", replayed.c_str());
  }
  std::fprintf(stderr, "stop: %s after %zu token%s\n",
               std::string(llm::stop_reason_name(r->reason)).c_str(), r->tokens.size(),
               r->tokens.size() == 1 ? "" : "s");
  if (a.want_timing) {
    const int steps = static_cast<int>(std::min<int64_t>(16, g.context() - g.model().position()));
    if (steps < 1) return usage_error("--timing needs room left in the context");
    return timing(g.model(), steps);
  }
  return 0;
}
