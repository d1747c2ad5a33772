// duet-llama: greedy generation from a Llama-architecture GGUF file.
//
//   duet-llama model.gguf --prompt 1,15043,29892 -n 32 [--devices cpu:0,vulkan:0] [--timing]
//
// Prints the generated ids (and their strings when the file has a vocabulary), the prefill and
// decode speeds, and with --timing the per-token overhead: the wall time of a decode step minus
// the sum of its kernels' times.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "duet/builtin_engine.h"
#include "duet/policy.h"
#include "llama.h"

namespace {

using namespace duet;

int usage(const char* msg) {
  std::fprintf(stderr,
               "duet-llama: %s\nusage: duet-llama MODEL.gguf [--prompt ID,ID,...] [-n N] "
               "[--devices ID,ID] [--max-context N] [--policy TERMS] [--timing]\n",
               msg);
  return 2;
}

bool parse_ints(const std::string& s, std::vector<int32_t>& out) {
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

bool parse_count(const char* s, long lo, long hi, long& out) {
  char* end = nullptr;
  out = std::strtol(s, &end, 10);
  return *s && !*end && out >= lo && out <= hi;
}

// Decode steps timed twice: whole runs (wall time) and kernel by kernel (run_timed); the
// overhead is what a step costs beyond its kernels.
int timing(llama::Model& m, int steps) {
  using clock = std::chrono::steady_clock;
  Engine& e = m.engine();
  const int64_t start = m.position();
  std::vector<int32_t> tok = {1};
  auto in_at = [&](int64_t pos) {
    HostTensor t = HostTensor::empty(DType::i32, std::vector<int64_t>{1});
    HostTensor p = HostTensor::empty(DType::i32, std::vector<int64_t>{1});
    HostTensor l = HostTensor::empty(DType::i32, std::vector<int64_t>{1});
    t.data<int32_t>()[0] = tok[0];
    p.data<int32_t>()[0] = static_cast<int32_t>(pos);
    l.data<int32_t>()[0] = static_cast<int32_t>(pos + 1);
    return std::map<std::string, HostTensor>{{"tokens", t}, {"pos", p}, {"len", l}};
  };
  double wall = 0, kernels = 0;
  int64_t pos = start;
  for (int i = 0; i < steps; ++i) {  // the same positions for both measurements
    auto in = in_at(pos + i);
    const auto t0 = clock::now();
    auto r = e.run(in);
    wall += std::chrono::duration<double>(clock::now() - t0).count();
    if (!r.ok()) return std::fprintf(stderr, "duet-llama: %s\n", r.status().message().c_str()), 1;
    std::vector<StepTime> times;
    auto r2 = e.run_timed(in, times);
    if (!r2.ok()) return std::fprintf(stderr, "duet-llama: %s\n", r2.status().message().c_str()), 1;
    for (const StepTime& s : times) kernels += s.seconds;
  }
  const double step = wall / steps, kern = kernels / steps;
  std::printf(
      "timing: %d decode steps at positions %lld..%lld: step %.3f ms, kernels %.3f ms, "
      "overhead %.3f ms (%.1f%% of the step), %zu steps in the plan\n",
      steps, static_cast<long long>(start), static_cast<long long>(start + steps - 1), step * 1e3,
      kern * 1e3, (step - kern) * 1e3, 100.0 * (step - kern) / step, e.plan().steps.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage("a model file is needed");
  std::string path, devices_arg, policy_arg;
  std::vector<int32_t> prompt;
  long n = 16, ctx = 512;
  bool want_timing = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--prompt") {
      const char* v = value();
      if (!v || !parse_ints(v, prompt)) return usage("--prompt: expected ids like 1,2,3");
    } else if (a == "-n") {
      const char* v = value();
      if (!v || !parse_count(v, 1, 1 << 20, n)) return usage("-n: expected a count >= 1");
    } else if (a == "--max-context") {
      const char* v = value();
      if (!v || !parse_count(v, 1, 1 << 24, ctx)) return usage("--max-context: expected >= 1");
    } else if (a == "--devices") {
      const char* v = value();
      if (!v) return usage("--devices: expected ids like cpu:0,vulkan:0");
      devices_arg = v;
    } else if (a == "--policy") {
      const char* v = value();
      if (!v) return usage("--policy: expected terms");
      policy_arg = v;
    } else if (a == "--timing") {
      want_timing = true;
    } else if (!a.empty() && a[0] == '-') {
      return usage(("unknown option " + a).c_str());
    } else if (path.empty()) {
      path = a;
    } else {
      return usage(("a second model file " + a).c_str());
    }
  }
  if (path.empty()) return usage("a model file is needed");
  if (prompt.empty()) prompt = {1};

  auto reg = shared_registry();
  std::vector<Device*> devices;
  if (devices_arg.empty()) {
    devices = reg->devices();
  } else {
    std::stringstream ss(devices_arg);
    std::string id;
    while (std::getline(ss, id, ',')) {
      Device* d = reg->find(id);
      if (!d) {
        std::fprintf(stderr, "duet-llama: --devices: no device '%s' on this machine\n", id.c_str());
        return 1;
      }
      devices.push_back(d);
    }
  }
  Policy policy;
  if (!policy_arg.empty()) {
    auto p = parse_policy(policy_arg);
    if (!p.ok()) return std::fprintf(stderr, "duet-llama: %s\n", p.status().message().c_str()), 2;
    policy = *p;
  }
  llama::BuildOptions opts;
  opts.max_context = ctx;
  auto m = llama::Model::open(path, devices, opts, policy);
  if (!m.ok()) return std::fprintf(stderr, "duet-llama: %s\n", m.status().message().c_str()), 1;
  const llama::Config& c = (*m)->config();
  std::printf("%s: %lld layers, embedding %lld, heads %lld/%lld, ff %lld, vocab %lld, cache %ld\n",
              c.arch.c_str(), static_cast<long long>(c.layers), static_cast<long long>(c.embd),
              static_cast<long long>(c.heads), static_cast<long long>(c.kv_heads),
              static_cast<long long>(c.ff), static_cast<long long>(c.vocab), ctx);
  if ((*m)->dequantized())
    std::printf("weights dequantized to f32 at load time: %s\n", (*m)->note().c_str());
  if (static_cast<long>(prompt.size()) + n > ctx)
    return usage("the prompt and -n do not fit in --max-context");

  llama::StepStats s;
  auto ids = (*m)->generate(prompt, static_cast<int>(n), -1, &s);
  if (!ids.ok()) return std::fprintf(stderr, "duet-llama: %s\n", ids.status().message().c_str()), 1;
  std::printf("ids:");
  for (int32_t t : *ids) std::printf(" %d", t);
  std::printf("\n");
  const auto& vocab = (*m)->vocab();
  if (!vocab.empty()) {
    std::printf("text:");
    for (int32_t t : *ids)
      std::printf(" %s", t < static_cast<int32_t>(vocab.size()) ? vocab[t].c_str() : "?");
    std::printf("\n");
  }
  std::printf("prefill: %zu tokens in %.3f s (%.1f tokens/s)\n", prompt.size(), s.prefill_s,
              static_cast<double>(prompt.size()) / s.prefill_s);
  if (s.decode_steps > 0)
    std::printf("decode: %d tokens in %.3f s (%.1f tokens/s)\n", s.decode_steps, s.decode_s,
                s.decode_steps / s.decode_s);
  if (want_timing) {
    const int steps = static_cast<int>(std::min<long>(16, ctx - (*m)->position()));
    if (steps < 1) return usage("--timing needs room left in the cache");
    return timing(**m, steps);
  }
  return 0;
}
