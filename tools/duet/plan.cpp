// duet plan GRAPH: what the planner decides for a graph on this machine or on capability
// profiles, and with --explain why.
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "duet/backends.h"
#include "duet/builtin_engine.h"
#include "duet/commands.h"
#include "duet/common.h"
#include "duet/plan_view.h"
#include "duet/planner.h"

namespace duet::cli {

namespace {

struct Options {
  ModelArgs model;
  std::vector<std::string> profiles;
  std::string policy;
  const CLI::Option* policy_given = nullptr;
  bool explain = false;
  bool json = false;
};

Result<std::vector<PlanDevice>> planner_devices(const std::vector<std::string>& profiles,
                                                std::optional<Registry>& keep) {
  if (profiles.empty()) {
    keep = open_registry();
    return plan_devices(keep->devices());
  }
  return profile_devices(profiles);
}

int run_plan(const CLI::App& cmd, const Options& o) {
  auto policy = choose_policy(o.policy_given->count() ? std::optional(o.policy) : std::nullopt);
  if (!policy.ok()) return fail(cmd, policy.status().message(), 2);
  const std::vector<std::string> profiles = split_list(o.profiles);
  // Planning needs shapes, not weights: constants' files are not read.
  std::vector<std::string> notes;
  auto graph = load_graph_file(o.model, false, nullptr, &notes);
  if (!graph.ok()) return fail(cmd, graph.status().message(), 2);
  for (const std::string& n : notes) std::fprintf(stderr, "duet plan: import: %s\n", n.c_str());
  std::optional<Registry> registry;
  auto devices = planner_devices(profiles, registry);
  if (!devices.ok()) return fail(cmd, devices.status().message(), 2);
  auto plan = make_plan(*graph, *devices, policy->policy);
  if (!plan.ok())
    return fail(cmd, plan.status().message(),
                plan_failure_status(*graph, *devices, policy->policy, plan.status()));

  if (o.json) {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(plan_json(*plan));
    j["policy_source"] = policy->source;
    std::cout << j.dump(2) << "\n";
  } else if (o.explain) {
    std::cout << with_policy_source(explain(*plan), *policy);
  } else {
    std::cout << plan_summary(*plan, *policy) << "(--explain says why)\n";
  }
  return 0;
}

}  // namespace

Command add_plan(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "plan",
      "Plan a model file (duet-graph JSON or ONNX) for this machine's devices or for capability "
      "profiles (no hardware "
      "needed): per op the device, precision and kernel tier, and with --explain why");
  auto o = std::make_shared<Options>();
  sub->add_option("graph", o->model.path, "Model file: duet-graph JSON or ONNX")->required();
  add_dim_option(*sub, o->model);
  sub->add_option("--profile", o->profiles,
                  "Plan for these capability profiles instead of this machine's devices "
                  "(comma-separated or repeated; names from profiles/ or paths to .json)");
  o->policy_given =
      sub->add_option("--policy", o->policy,
                      "Overrides, e.g. 'deny=cuda.flash;precision=f32' (default: $DUET_POLICY)");
  sub->add_flag("--explain", o->explain, "Print every decision with its reason and alternatives");
  sub->add_flag("--json", o->json, "Print the plan as JSON");
  auto run = std::make_shared<std::function<int()>>([sub, o] { return run_plan(*sub, *o); });
  return {sub, run};
}

}  // namespace duet::cli
