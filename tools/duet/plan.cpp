// duet plan GRAPH: what the planner decides for a graph on this machine or on capability
// profiles, and with --explain why.
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "duet/backends.h"
#include "duet/builtin_engine.h"
#include "duet/cluster.h"
#include "duet/commands.h"
#include "duet/common.h"
#include "duet/distributed.h"
#include "duet/plan_view.h"
#include "duet/planner.h"

namespace duet::cli {

// Named for the command, so that the sources compile together in a unity build.
namespace plan_command {
namespace {

struct Options {
  ModelArgs model;
  std::vector<std::string> profiles;
  std::string policy;
  const CLI::Option* policy_given = nullptr;
  bool explain = false;
  bool json = false;
  bool distributed = false;
  DistributedArgs dist;
  std::string link = "50,1.25";
  const CLI::Option* link_given = nullptr;
};

// Profiles named "rankN/NAME": a cluster of ranks, one host each, joined by `link` ("LATENCY_US,
// GBPS"); empty when no profile names a rank.
Result<std::optional<Cluster>> profile_cluster(const std::vector<std::string>& profiles,
                                               const std::string& link) {
  std::map<int, std::vector<std::string>> by_rank;
  bool any = false;
  for (const std::string& p : profiles) {
    int rank = -1;
    size_t slash = p.find('/');
    if (p.rfind("rank", 0) == 0 && slash != std::string::npos) {
      try {
        size_t used = 0;
        rank = std::stoi(p.substr(4, slash - 4), &used);
        if (used != slash - 4) rank = -1;
      } catch (const std::exception&) {
        rank = -1;
      }
    }
    if (rank >= 0) {
      any = true;
      by_rank[rank].push_back(p.substr(slash + 1));
    } else {
      by_rank[-1].push_back(p);
    }
  }
  if (!any) return std::optional<Cluster>();
  if (by_rank.count(-1))
    return Status(Code::invalid_argument,
                  "--profile: '" + by_rank[-1][0] +
                      "' names no rank; with rankN/NAME profiles, every profile names its rank");
  double latency = 0, gbps = 0;
  char tail = 0;
  if (std::sscanf(link.c_str(), "%lf,%lf%c", &latency, &gbps, &tail) != 2 || latency < 0 ||
      gbps <= 0)
    return Status(
        Code::invalid_argument,
        "--link: expected LATENCY_US,GBPS (e.g. 50,1.25 for 10 Gbit Ethernet), got '" + link + "'");
  Cluster c;
  int expect = 0;
  for (const auto& [rank, names] : by_rank) {
    if (rank != expect)
      return Status(Code::invalid_argument, "--profile: rank" + std::to_string(expect) +
                                                " has no profile (ranks are numbered from 0)");
    ++expect;
    ClusterRank r;
    r.host = "host" + std::to_string(rank);
    DUET_ASSIGN_OR_RETURN(r.devices, profile_devices(names));
    c.ranks.push_back(std::move(r));
  }
  c.links.assign(c.ranks.size(),
                 std::vector<ClusterLink>(c.ranks.size(), ClusterLink{latency, gbps, "--link"}));
  return std::optional<Cluster>(std::move(c));
}

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
  if (o.json && (o.distributed || o.dist.every_rank || o.dist.pipelined))
    return fail(cmd, "--json: a cluster plan is printed as text only", 2);
  if (o.distributed) {
    DistributedArgs a = o.dist;
    a.model = o.model;
    a.policy = *policy;
    a.plan_only = true;
    return run_distributed(cmd, a);
  }
  if (o.dist.timeout_s > 0)
    return fail(cmd, "--timeout applies to --distributed (the ranks of an MPI run)", 2);
  auto cluster = profile_cluster(profiles, o.link);
  if (!cluster.ok()) return fail(cmd, cluster.status().message(), 2);
  if (!*cluster && (o.dist.every_rank || o.dist.pipelined || o.link_given->count()))
    return fail(cmd,
                std::string(o.dist.every_rank  ? "--every-rank"
                            : o.dist.pipelined ? "--pipelined"
                                               : "--link") +
                    " plans a cluster: give every profile its rank (--profile "
                    "rank0/NAME,rank1/NAME) or plan the ranks of an MPI run (--distributed)",
                2);
  // Planning needs shapes, not weights: constants' files are not read.
  std::vector<std::string> notes;
  auto graph = load_graph_file(o.model, false, nullptr, &notes);
  if (!graph.ok()) return fail(cmd, graph.status().message(), 2);
  for (const std::string& n : notes) std::fprintf(stderr, "duet plan: import: %s\n", n.c_str());
  if (*cluster) {
    ClusterOptions co;
    co.every_rank = o.dist.every_rank;
    co.pipelined = o.dist.pipelined;
    auto plan = plan_cluster(*graph, **cluster, policy->policy, co);
    if (!plan.ok()) return fail(cmd, plan.status().message(), 1);
    std::cout << explain(*plan, *graph);
    return 0;
  }
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
}  // namespace plan_command

Command add_plan(CLI::App& app) {
  using namespace plan_command;
  auto* sub = app.add_subcommand(
      "plan",
      "Plan a model file (duet-graph JSON or ONNX) for this machine's devices or for capability "
      "profiles (no hardware "
      "needed): per op the device, precision and kernel tier, and with --explain why");
  auto o = std::make_shared<Options>();
  sub->add_option("graph", o->model.path, "Model file: duet-graph JSON or ONNX")->required();
  add_dim_option(*sub, o->model);
  sub->add_option(
      "--profile", o->profiles,
      "Plan for these capability profiles instead of this machine's devices "
      "(comma-separated or repeated; names from profiles/ or paths to .json; rankN/NAME "
      "puts a device on rank N of a cluster: docs/distributed.md)");
  o->policy_given =
      sub->add_option("--policy", o->policy,
                      "Overrides, e.g. 'deny=cuda.flash;precision=f32' (default: $DUET_POLICY)");
  sub->add_flag("--explain", o->explain, "Print every decision with its reason and alternatives");
  sub->add_flag("--json", o->json, "Print the plan as JSON");
  add_distributed_options(*sub, o->distributed, o->dist);
  o->link_given =
      sub->add_option("--link", o->link,
                      "With rankN/NAME profiles: the link between ranks, LATENCY_US,GBPS")
          ->capture_default_str();
  auto run = std::make_shared<std::function<int()>>([sub, o] { return run_plan(*sub, *o); });
  return {sub, run};
}

}  // namespace duet::cli
