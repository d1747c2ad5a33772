// duet run GRAPH: runs a graph on this machine's devices and prints, per op, the device,
// precision, kernel tier and time. Inputs and outputs are .safetensors files, so results can be
// compared with another framework's.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>

#include <nlohmann/json.hpp>

#include "check/inputs.h"
#include "duet/backends.h"
#include "duet/commands.h"
#include "duet/common.h"
#include "duet/distributed.h"
#include "duet/engine.h"
#include "duet/internal/files.h"
#include "duet/internal/index.h"
#include "duet/plan_view.h"
#include "duet/planner.h"
#include "duet/safetensors.h"

namespace duet::cli {

// Named for the command, so that the sources compile together in a unity build.
namespace run_command {
namespace {

struct Options {
  ModelArgs model;
  std::string inputs_path, outputs_path, json_path;
  std::string policy;
  const CLI::Option* policy_given = nullptr;
  int repeats = 1;
  std::vector<std::string> print;  // outputs whose values are printed
  bool print_all = false;          // every output's
  int64_t print_limit = 1000;      // more elements than this are summarised (0: never)
  bool distributed = false;
  bool explain = false;
  DistributedArgs dist;
};

std::string stats(const HostTensor& t) {
  const std::vector<double> v = t.to_doubles();
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  int64_t bad = 0;
  for (double x : v) {
    if (!std::isfinite(x)) {
      ++bad;
      continue;
    }
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
  }
  char b[160];
  const double n = static_cast<double>(v.size() - static_cast<size_t>(bad));
  std::snprintf(b, sizeof b, "mean %.6g, min %.6g, max %.6g", n > 0 ? sum / n : 0.0, lo, hi);
  std::string s = b;
  if (bad) s += ", " + std::to_string(bad) + " not finite";
  return s;
}

// A tensor's values as NumPy prints them: nested brackets, one row per line (wrapped at 75
// columns), every element of one width; with more than `limit` elements (limit > 0), each dimension
// shows its first and last three entries around "...".
std::string format_values(const HostTensor& t, int64_t limit) {
  const std::vector<double> v = t.to_doubles();
  const auto dims = t.desc().dims();
  const size_t rank = dims.size();
  const bool summarise = limit > 0 && t.numel() > limit;
  constexpr int64_t kEdge = 3;
  std::vector<std::vector<int64_t>> shown(rank);  // per dimension; -1 stands for "..."
  for (size_t d = 0; d < rank; ++d)
    for (int64_t i = 0; i < dims[d]; ++i) {
      if (summarise && dims[d] > 2 * kEdge && i == kEdge) {
        shown[d].push_back(-1);
        i = dims[d] - kEdge - 1;
        continue;
      }
      shown[d].push_back(i);
    }
  const bool integral = !is_float(t.dtype());
  auto text = [&](double x) {
    char b[48];
    if (integral)
      std::snprintf(b, sizeof b, "%.0f", x);
    else
      std::snprintf(b, sizeof b, "%.6g", x);
    return std::string(b);
  };
  // Row-major strides, then the width of every element shown.
  std::vector<int64_t> stride(rank, 1);
  for (size_t d = rank; d-- > 1;) stride[d - 1] = stride[d] * dims[d];
  size_t width = 0;
  std::function<void(size_t, int64_t)> measure = [&](size_t d, int64_t at) {
    if (d == rank) {
      width = std::max(width, text(v[static_cast<size_t>(at)]).size());
      return;
    }
    for (int64_t i : shown[d])
      if (i >= 0) measure(d + 1, at + i * stride[d]);
  };
  measure(0, 0);
  std::string out;
  std::function<void(size_t, int64_t)> emit = [&](size_t d, int64_t at) {
    if (d == rank) {
      const std::string s = text(v[static_cast<size_t>(at)]);
      out += std::string(width - s.size(), ' ') + s;
      return;
    }
    out += '[';
    const std::string sep =
        d + 1 == rank ? ", " : "," + std::string(rank - d - 1, '\n') + std::string(d + 1, ' ');
    for (size_t k = 0; k < shown[d].size(); ++k) {
      // A row wider than 75 columns goes on over several lines, as NumPy wraps it.
      const size_t column =
          out.size() - (out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
      if (k && d + 1 == rank && column + 2 + width + 1 > 75)
        out += ",\n" + std::string(rank, ' ');
      else if (k)
        out += sep;
      if (shown[d][k] < 0)
        out += "...";
      else
        emit(d + 1, at + shown[d][k] * stride[d]);
    }
    out += ']';
  };
  emit(0, 0);
  return out;
}

// An error naming a --print name that is not an output of the graph, with the outputs.
Status check_print_names(const Graph& graph, const std::vector<std::string>& print) {
  std::vector<std::string> outs;
  for (int id : graph.outputs()) outs.push_back(graph.value(id).name);
  for (const std::string& want : split_list(print))
    if (std::find(outs.begin(), outs.end(), want) == outs.end()) {
      std::string names;
      for (const std::string& n : outs) names += (names.empty() ? "" : ", ") + n;
      return Status(Code::invalid_argument, "--print: '" + want + "' is not an output of graph '" +
                                                graph.name() + "' (its outputs: " + names + ")");
    }
  return {};
}

// The runs of an engine, each timed step by step: per step its times over the runs, the wall
// time of each run, and the last run's outputs.
struct Runs {
  std::vector<std::vector<double>> per_step;
  std::vector<double> walls;
  std::map<std::string, HostTensor> outputs;
};

Result<Runs> run_repeats(Engine& e, const std::map<std::string, HostTensor>& inputs, int repeats) {
  Runs r;
  for (int i = 0; i < repeats; ++i) {
    std::vector<StepTime> times;
    const auto t0 = std::chrono::steady_clock::now();
    auto out = e.run_timed(inputs, times);
    r.walls.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (!out.ok()) return out.status();
    r.per_step.resize(e.plan().steps.size());
    for (const StepTime& t : times) r.per_step[u(t.step)].push_back(t.seconds);
    r.outputs = std::move(*out);
  }
  return r;
}

double median(std::vector<double> v) {
  if (v.empty()) return -1.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The table of steps with their median times (kernels and copies; views and the steps run once
// are left out), printed; returns the same rows as JSON and adds the kernels' time to `kernels`.
nlohmann::json print_steps(const Plan& plan, const Runs& runs, double& kernels) {
  struct Line {
    std::string step, op, device, precision, tier, time;
  };
  std::vector<Line> rows = {{"step", "op", "device", "precision", "tier", "time"}};
  nlohmann::json jsteps = nlohmann::json::array();
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    const double t = median(runs.per_step[i]);
    if (s.once || s.kind == StepKind::view || t < 0) continue;
    const std::string time = format_us(t * 1e6);
    if (s.kind == StepKind::transfer) {
      const std::string what = plan.values[u(s.inputs[0])].name;
      rows.push_back({what, transfer_name(plan, s) + " " + format_bytes(s.bytes),
                      device_id(plan, s.src_device) + " -> " + device_id(plan, s.device), "", "",
                      time});
      jsteps.push_back({{"step", s.name},
                        {"kind", transfer_name(plan, s)},
                        {"value", what},
                        {"from", device_id(plan, s.src_device)},
                        {"to", device_id(plan, s.device)},
                        {"bytes", s.bytes},
                        {"seconds", t}});
      continue;
    }
    kernels += t;
    rows.push_back({s.name, std::string(op_name(s.op.op.kind)), device_id(plan, s.device),
                    std::string(precision_name(s.op.choice.precision)),
                    std::string(tier_name(s.op.choice.tier)), time});
    jsteps.push_back({{"step", s.name},
                      {"kind", "kernel"},
                      {"op", op_name(s.op.op.kind)},
                      {"device", plan.devices[u(s.device)].id},
                      {"precision", precision_name(s.op.choice.precision)},
                      {"tier", tier_name(s.op.choice.tier)},
                      {"seconds", t}});
  }
  size_t w[5] = {};
  for (const Line& r : rows) {
    w[0] = std::max(w[0], r.step.size());
    w[1] = std::max(w[1], r.op.size());
    w[2] = std::max(w[2], r.device.size());
    w[3] = std::max(w[3], r.precision.size());
    w[4] = std::max(w[4], r.tier.size());
  }
  for (const Line& r : rows)
    std::printf("  %-*s  %-*s  %-*s  %-*s  %-*s  %10s\n", static_cast<int>(w[0]), r.step.c_str(),
                static_cast<int>(w[1]), r.op.c_str(), static_cast<int>(w[2]), r.device.c_str(),
                static_cast<int>(w[3]), r.precision.c_str(), static_cast<int>(w[4]), r.tier.c_str(),
                r.time.c_str());
  return jsteps;
}

Status write_outputs(const std::string& path, const Plan& plan,
                     const std::map<std::string, HostTensor>& outputs) {
  std::vector<std::pair<std::string, HostTensor>> list(outputs.begin(), outputs.end());
  DUET_ASSIGN_OR_RETURN(auto bytes, encode_safetensors(list, {{"graph", plan.graph},
                                                              {"policy", plan.policy.str()},
                                                              {"producer", "duet run"}}));
  const std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return write_file_atomically(path, text);
}

int run_graph(const CLI::App& cmd, const Options& o) {
  // Outputs are checked before any work: a device, fifo or folder is never replaced.
  for (const auto& [option, path] :
       {std::pair<const char*, const std::string*>{"--outputs", &o.outputs_path},
        {"--json", &o.json_path}})
    if (Status s = check_output_target(*path, option); !s.ok()) return fail(cmd, s.message(), 2);
  if (o.repeats < 1) return fail(cmd, "--repeats must be at least 1", 2);
  auto policy = choose_policy(o.policy_given->count() ? std::optional(o.policy) : std::nullopt);
  if (!policy.ok()) return fail(cmd, policy.status().message(), 2);
  if (o.distributed) {
    DistributedArgs a = o.dist;
    a.model = o.model;
    a.inputs_path = o.inputs_path;
    a.outputs_path = o.outputs_path;
    a.policy = *policy;
    a.repeats = o.repeats;
    a.explain = o.explain;
    return run_distributed(cmd, a);
  }
  if (o.dist.every_rank || o.dist.pipelined || o.explain || o.dist.timeout_s > 0)
    return fail(cmd,
                std::string(o.explain           ? "--explain"
                            : o.dist.pipelined  ? "--pipelined"
                            : o.dist.every_rank ? "--every-rank"
                                                : "--timeout") +
                    " applies to --distributed runs",
                2);
  if (o.print_limit < 0) return fail(cmd, "--print-limit must be 0 (no limit) or more", 2);
  auto model = load_model_and_inputs(o.model, o.inputs_path);
  if (!model.ok()) return fail(cmd, model.status().message(), 2);
  const Graph& graph = model->graph;
  if (Status s = check_print_names(graph, o.print); !s.ok()) return fail(cmd, s.message(), 2);

  // A registry of this command's own, closed before the process exits (not the process-wide
  // shared_registry(), whose devices would be torn down during exit).
  Registry reg = open_registry();
  auto engine = Engine::create(graph, reg.devices(), policy->policy);
  if (!engine.ok())
    return fail(cmd, engine.status().message(),
                plan_failure_status(graph, plan_devices(reg.devices(), false), policy->policy,
                                    engine.status()));
  // Every run is timed step by step; the table shows the median per step over the repeats.
  auto runs = run_repeats(**engine, model->inputs, o.repeats);
  if (!runs.ok()) return fail(cmd, runs.status().message(), 1);

  const Plan& plan = (*engine)->plan();
  std::printf("graph '%s': %d run%s\n%s\n%s\n", plan.graph.c_str(), o.repeats,
              o.repeats == 1 ? "" : "s (times: median per step)", devices_line(plan).c_str(),
              policy->line().c_str());
  if (!model->inputs_note.empty()) std::printf("%s\n", model->inputs_note.c_str());
  for (const std::string& n : model->notes) std::printf("import: %s\n", n.c_str());
  double kernel_total = 0;
  const nlohmann::json jsteps = print_steps(plan, *runs, kernel_total);
  const double wall = median(runs->walls);
  std::printf("kernels %s, run %s (each step waits for its device while timed)\n",
              format_us(kernel_total * 1e6).c_str(), format_us(wall * 1e6).c_str());
  nlohmann::json jout = nlohmann::json::object();
  for (const auto& [name, t] : runs->outputs) {
    std::printf("output %s %s: %s\n", name.c_str(), t.desc().str().c_str(), stats(t).c_str());
    jout[name] = t.desc().str();
  }
  const std::vector<std::string> print = split_list(o.print);
  for (const auto& [name, t] : runs->outputs)
    if (o.print_all || std::find(print.begin(), print.end(), name) != print.end())
      std::printf("%s %s =\n%s\n", name.c_str(), t.desc().str().c_str(),
                  format_values(t, o.print_limit).c_str());

  if (!o.outputs_path.empty()) {
    if (Status s = write_outputs(o.outputs_path, plan, runs->outputs); !s.ok())
      return fail(cmd, s.message());
    std::printf("outputs written to %s\n", o.outputs_path.c_str());
  }
  if (!o.json_path.empty()) {
    nlohmann::json j = {
        {"graph", plan.graph}, {"policy", plan.policy.str()}, {"policy_source", policy->source},
        {"runs", o.repeats},   {"run_seconds", wall},         {"steps", jsteps},
        {"outputs", jout}};
    if (Status s = write_file_atomically(o.json_path, j.dump(2) + "\n"); !s.ok())
      return fail(cmd, s.message());
  }
  return 0;
}

}  // namespace
}  // namespace run_command

Command add_run(CLI::App& app) {
  using namespace run_command;
  auto* sub = app.add_subcommand("run",
                                 "Run a model file (duet-graph JSON or ONNX) on this machine's "
                                 "devices: per op the device, precision, tier and time; "
                                 "inputs and outputs as .safetensors");
  auto o = std::make_shared<Options>();
  sub->add_option("graph", o->model.path, "Model file: duet-graph JSON or ONNX")->required();
  add_dim_option(*sub, o->model);
  sub->add_option("--inputs", o->inputs_path,
                  "Inputs, one tensor per graph input by name: a .safetensors file or a folder of "
                  ".npy files named after the inputs (default: random values)");
  sub->add_option("--outputs", o->outputs_path, "Write the outputs to this .safetensors file");
  o->policy_given = sub->add_option(
      "--policy", o->policy, "Overrides, e.g. 'deny=vulkan;precision=f32' (default: $DUET_POLICY)");
  sub->add_option("--repeats", o->repeats, "Runs; times are the median per step")
      ->capture_default_str();
  sub->add_option("--json", o->json_path, "Write the per-step times to this JSON file");
  sub->add_option("--print", o->print,
                  "Print this output's values (repeatable, or a,b; summarised beyond "
                  "--print-limit elements)")
      ->allow_extra_args(false);
  sub->add_flag("--print-all", o->print_all, "Print every output's values");
  sub->add_option("--print-limit", o->print_limit,
                  "Outputs with more elements than this are printed summarised: the first and "
                  "last 3 of each dimension (0: print everything)")
      ->capture_default_str();
  add_distributed_options(*sub, o->distributed, o->dist);
  sub->add_flag("--explain", o->explain, "With --distributed: print the stage plan and why");
  auto run = std::make_shared<std::function<int()>>([sub, o] { return run_graph(*sub, *o); });
  return {sub, run};
}

}  // namespace duet::cli
