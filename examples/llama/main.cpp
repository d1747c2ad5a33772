// duet-llama: greedy generation from a Llama-architecture GGUF file.
//
//   duet-llama model.gguf --prompt 1,15043,29892 -n 32 [--devices cpu:0,vulkan:0] [--timing]
//
// Prints the generated ids (and their strings when the file has a vocabulary), the prefill and
// decode speeds, and with --timing the per-token overhead: the wall time of a decode step minus
// the time of its kernels on their devices, both from the same runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
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

// Decode steps at the same positions measured three ways: whole runs (the step's wall time);
// profiled runs, each kernel timed by its device in the run's own submissions (device timestamps
// on Vulkan), so that the run's wall time minus its kernels is the engine's cost per token, from
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
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "duet-llama: %s\n", s.message().c_str());
    return 1;
  };
  double wall = 0, waited = 0, pwall = 0, pkern = 0, phost = 0, pspan = 0;
  std::vector<double> per_step(e.plan().steps.size(), 0.0);
  std::string unsupported;
  for (int i = 0; i < steps; ++i) {  // the same positions for every measurement
    auto in = in_at(start + i);
    const auto t0 = clock::now();
    auto r = e.run(in);
    wall += std::chrono::duration<double>(clock::now() - t0).count();
    if (!r.ok()) return fail(r.status());
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
        return fail(rp.status());
      }
    }
    std::vector<StepTime> times;
    auto r2 = e.run_timed(in, times);
    if (!r2.ok()) return fail(r2.status());
    for (const StepTime& s : times) waited += s.seconds;
  }
  const double ms = 1e3 / steps, step = wall * ms;
  std::printf(
      "timing: %d decode steps at positions %lld..%lld, %zu steps in the plan: step %.3f ms\n",
      steps, static_cast<long long>(start), static_cast<long long>(start + steps - 1),
      e.plan().steps.size(), step);
  if (unsupported.empty()) {
    const double w = pwall * ms, k = pkern * ms;
    std::printf(
        "timing: device-timed runs: step %.3f ms, kernels on the device %.3f ms, overhead %.3f ms "
        "(%.1f%% of the step); host time in execute %.3f ms, devices busy first to last kernel "
        "%.3f ms\n",
        w, k, w - k, 100.0 * (w - k) / w, phost * ms, pspan * ms);
    std::vector<size_t> order(per_step.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    const size_t top = std::min<size_t>(4, order.size());
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top), order.end(),
                      [&](size_t a, size_t b) { return per_step[a] > per_step[b]; });
    std::printf("timing: most device time:");
    for (size_t i = 0; i < top; ++i)
      std::printf(" %s %.3f ms%s", e.plan().steps[order[i]].name.c_str(), per_step[order[i]] * ms,
                  i + 1 < top ? "," : "\n");
  } else {
    std::printf("timing: device-timed runs: not supported: %s\n", unsupported.c_str());
  }
  const double wt = waited * ms;
  std::printf("timing: every step waited for: sum %.3f ms, step - sum %.3f ms (%.1f%%)\n", wt,
              step - wt, 100.0 * (step - wt) / step);
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
