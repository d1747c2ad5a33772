// duet check MODEL: a user's own model (duet-graph JSON or ONNX) run on every device and kernel
// tier that can run it, every value a kernel computes compared with the float64 reference, one
// table with a row per op and a column per run, and the first op whose error leaves the
// tolerance of its precision marked.
#include <cmath>
#include <cstdio>
#include <set>

#include <nlohmann/json.hpp>

#include "check/graph_check.h"
#include "check/inputs.h"
#include "duet/backends.h"
#include "duet/check_model.h"
#include "duet/common.h"
#include "duet/internal/index.h"
#include "duet/internal/text.h"
#include "duet/planner.h"

namespace duet::cli {

// Named for the command, so that the sources compile together in a unity build.
namespace check_model_command {
namespace {

// A cell of the table; `elements` is the op's output size ("undefined" when the reference has no
// value at any of them).
std::string ratio_text(const check::NodeCheck& k, int64_t elements) {
  const check::Metrics& m = k.metrics;
  if (m.undefined > 0 && m.undefined == elements) return "undefined";
  if (m.nan) return "FAIL " + std::to_string(m.nan) + " NaN";
  if (m.inf_mismatch) return "FAIL inf";
  if (k.tol.exact) return m.mismatches ? "FAIL " + std::to_string(m.mismatches) + " differ" : "0";
  char b[32];
  if (k.ratio == 0)
    std::snprintf(b, sizeof b, "0");
  else
    std::snprintf(b, sizeof b, k.ratio < 0.01 ? "%.0e" : "%.2f", k.ratio);
  return k.passed ? std::string(b) : "FAIL " + std::string(b);
}

std::string run_label(const check::GraphCheck& r) {
  return r.device + (r.deny.empty() ? "" : " deny=" + r.deny);
}

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

nlohmann::json run_json(const Graph& g, const check::GraphCheck& r) {
  nlohmann::json j = {{"device", r.device}, {"deny", r.deny}, {"error", r.error}};
  j["first_failure"] = r.first_failure < 0
                           ? nlohmann::json()
                           : nlohmann::json(g.nodes()[u(r.nodes[u(r.first_failure)].node)].name);
  j["ops"] = nlohmann::json::array();
  for (const check::NodeCheck& k : r.nodes) {
    const GraphNode& n = g.nodes()[u(k.node)];
    j["ops"].push_back(
        {{"node", n.name},
         {"op", op_name(n.kind())},
         {"output", n.op.output.str()},
         {"tier", k.tier},
         {"precision", precision_name(k.precision)},
         {"passed", k.passed},
         {"ratio", std::isfinite(k.ratio) ? nlohmann::json(k.ratio) : nlohmann::json()},
         {"nmse", k.metrics.nmse},
         {"max_abs", k.metrics.max_abs},
         {"max_rel", k.metrics.max_rel},
         {"nan", k.metrics.nan},
         {"mismatches", k.metrics.mismatches},
         {"reference_nan", k.metrics.undefined},
         {"tolerance", k.tol.str()}});
  }
  if (r.alone_run)
    j["first_failure_alone"] = {{"passed", r.alone.passed},
                                {"nmse", r.alone.metrics.nmse},
                                {"max_rel", r.alone.metrics.max_rel},
                                {"message", r.alone.message}};
  return j;
}

void print_table(const Graph& g, const std::vector<check::GraphCheck>& runs) {
  std::vector<const check::GraphCheck*> cols;
  for (const auto& r : runs)
    if (r.error.empty()) cols.push_back(&r);
  std::printf("runs:\n");
  for (size_t c = 0; c < runs.size(); ++c) {
    const auto& r = runs[c];
    if (!r.error.empty())
      std::printf("       %s: not run: %s\n", run_label(r).c_str(), r.error.c_str());
  }
  for (size_t c = 0; c < cols.size(); ++c)
    std::printf("  [%zu]  %s\n", c + 1, run_label(*cols[c]).c_str());
  if (cols.empty()) return;
  std::printf(
      "error / tolerance of each op's value in the graph (1 = at the bound of its precision)\n");
  // Rows: every kernel node, in graph order.
  struct Row {
    std::vector<std::string> cells;
  };
  std::vector<std::string> head = {"#", "node", "op", "output", "tier"};
  for (size_t c = 0; c < cols.size(); ++c) head.push_back("[" + std::to_string(c + 1) + "]");
  std::vector<Row> rows = {{head}};
  std::vector<int> seen;
  int index = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const GraphNode& n = g.nodes()[i];
    if (is_view(n.kind())) continue;
    Row row;
    row.cells = {std::to_string(++index), n.name, std::string(op_name(n.kind())), n.op.output.str(),
                 ""};
    std::string tiers;
    for (const check::GraphCheck* r : cols) {
      std::string cell = "-";
      for (size_t k = 0; k < r->nodes.size(); ++k) {
        const check::NodeCheck& nc = r->nodes[k];
        if (u(nc.node) != i) continue;
        cell = ratio_text(nc, n.op.output.numel());
        if (static_cast<int>(k) == r->first_failure) cell += " <- first";
        const std::string t =
            std::string(tier_name(nc.tier)) + " " + std::string(precision_name(nc.precision));
        if (tiers.find(t) == std::string::npos) tiers += (tiers.empty() ? "" : ", ") + t;
      }
      row.cells.push_back(cell);
    }
    row.cells[4] = tiers;
    rows.push_back(std::move(row));
  }
  std::vector<size_t> w(head.size(), 0);
  for (const Row& r : rows)
    for (size_t c = 0; c < r.cells.size(); ++c) w[c] = std::max(w[c], r.cells[c].size());
  for (const Row& r : rows) {
    std::string line = " ";
    for (size_t c = 0; c < r.cells.size(); ++c) {
      const std::string& s = r.cells[c];
      if (c == 0)
        line += std::string(w[c] - s.size(), ' ') + s;
      else
        line += "  " + s + (c + 1 < r.cells.size() ? std::string(w[c] - s.size(), ' ') : "");
    }
    std::printf("%s\n", line.c_str());
  }
}

// The ops whose float64 value is NaN where their inputs are not: inputs outside the op's domain
// (log or sqrt of a negative number). Those elements are left out of every comparison; said once
// here rather than reported as devices disagreeing.
void print_undefined(const Graph& g, const check::GraphReference& ref, bool random_inputs) {
  auto nans = [&](int value) {
    int64_t n = 0;
    for (double x : ref.exact[u(value)]) n += std::isnan(x);
    return n;
  };
  for (const GraphNode& n : g.nodes()) {
    const int64_t count = nans(n.output);
    if (count == 0 || is_view(n.kind())) continue;
    bool inherited = false;
    for (int in : n.inputs) inherited = inherited || nans(in) > 0;
    if (inherited) continue;
    std::printf(
        "undefined: %s '%s' is NaN in the float64 reference at %lld of %s: its input lies "
        "outside the op's domain%s; those elements (and what follows from them) are not "
        "compared\n",
        std::string(op_name(n.kind())).c_str(), n.name.c_str(), static_cast<long long>(count),
        counted(int64_t(ref.exact[u(n.output)].size()), "element").c_str(),
        random_inputs ? "" : " for the inputs given");
  }
}

}  // namespace
}  // namespace check_model_command

int check_model(const CLI::App& cmd, const ModelCheckOptions& o) {
  using namespace check_model_command;
  auto policy = choose_policy(o.policy_given ? std::optional(o.policy) : std::nullopt);
  if (!policy.ok()) return fail(cmd, policy.status().message(), 2);
  auto model = load_model_and_inputs(o.model, o.inputs_path);
  if (!model.ok()) return fail(cmd, model.status().message(), 2);
  const Graph& graph = model->graph;
  const std::vector<std::string>& notes = model->notes;
  const std::string& inputs_note = model->inputs_note;
  const std::map<std::string, HostTensor>& inputs = model->inputs;
  Registry reg = open_registry();
  auto devices = select_devices(reg, o.devices);
  if (!devices.ok()) return fail(cmd, devices.status().message(), 2);
  // A policy that no placement on these devices satisfies (one that leaves no device, or names a
  // device that is not here) is bad input, as for plan and run: the planner's reason, exit 2.
  if (!policy->policy.empty()) {
    const std::vector<PlanDevice> pd = plan_devices(*devices, false);
    if (auto plan = make_plan(graph, pd, policy->policy); !plan.ok())
      if (plan_failure_status(graph, pd, policy->policy, plan.status()) == 2)
        return fail(cmd, plan.status().message(), 2);
  }

  auto ref = check::reference_graph(graph, inputs);
  if (!ref.ok()) return fail(cmd, "float64 reference: " + ref.status().message(), 1);
  std::vector<check::GraphCheck> runs;
  for (Device* d : *devices)
    for (auto& r : check::check_graph(graph, *ref, inputs, *d, policy->policy))
      runs.push_back(std::move(r));

  int kernels = 0;
  for (const GraphNode& n : graph.nodes()) kernels += !is_view(n.kind());
  const size_t n_in = graph.inputs().size();
  std::printf("model '%s': %s, %s; reference: float64, each value held in its dtype\n",
              graph.name().c_str(), counted(kernels, "op").c_str(),
              counted(int64_t(n_in), "input").c_str());
  if (!inputs_note.empty()) std::printf("%s\n", inputs_note.c_str());
  for (const std::string& n : notes) std::printf("import: %s\n", n.c_str());
  std::printf("%s\n", policy->line().c_str());
  print_table(graph, runs);

  int diverged = 0, ran = 0;
  for (const auto& r : runs) {
    if (!r.error.empty()) continue;
    ++ran;
    if (r.first_failure < 0) continue;
    ++diverged;
    const check::NodeCheck& k = r.nodes[u(r.first_failure)];
    const GraphNode& n = graph.nodes()[u(k.node)];
    std::printf("FIRST DIVERGENCE on %s: %s '%s' (%s %s): ", run_label(r).c_str(),
                std::string(op_name(n.kind())).c_str(), n.name.c_str(),
                std::string(tier_name(k.tier)).c_str(),
                std::string(precision_name(k.precision)).c_str());
    if (k.tol.exact) {
      const int64_t differ = k.metrics.mismatches + k.metrics.nan;
      std::printf("%s %s, exact expected\n", counted(differ, "element").c_str(),
                  differ == 1 ? "differs" : "differ");
    } else {
      std::printf("nmse %s, max rel %s; tolerance %s\n", fmt(k.metrics.nmse).c_str(),
                  fmt(k.metrics.max_rel).c_str(), k.tol.str().c_str());
    }
    if (r.alone.passed)
      std::printf(
          "  alone on the same kernel, fed the reference's inputs, it passes (nmse %s): "
          "the error came in with its inputs\n",
          fmt(r.alone.metrics.nmse).c_str());
    else
      std::printf("  alone on the same kernel, fed the reference's inputs, it fails too: %s\n",
                  r.alone.message.c_str());
  }
  print_undefined(graph, *ref, o.inputs_path.empty());
  // Devices count where a run ran; the ones none ran on are named.
  std::set<std::string> ran_on, idle;
  for (const auto& r : runs) (r.error.empty() ? ran_on : idle).insert(r.device);
  std::string none_ran;
  for (const std::string& d : idle)
    if (!ran_on.count(d)) none_ran += (none_ran.empty() ? "" : ", ") + d;
  std::printf("%s on %s: %d within tolerance, %d %s, %zu not run%s\n", counted(ran, "run").c_str(),
              counted(int64_t(ran_on.size()), "device").c_str(), ran - diverged, diverged,
              diverged == 1 ? "diverges" : "diverge", runs.size() - static_cast<size_t>(ran),
              none_ran.empty() ? "" : (" (nothing ran on " + none_ran + ")").c_str());

  if (!o.json_path.empty()) {
    nlohmann::json j = {{"model", graph.name()}, {"runs", nlohmann::json::array()}};
    for (const auto& r : runs) j["runs"].push_back(run_json(graph, r));
    if (Status st = write_file_atomically(o.json_path, j.dump(2) + "\n"); !st.ok())
      return fail(cmd, st.message());
  }
  return diverged == 0 && ran > 0 ? 0 : 1;
}

}  // namespace duet::cli
