// A whole graph checked value by value: the float64 reference of every value, and a run of the
// graph on a device (once per kernel tier its ops can use at their precision) with every value a
// kernel computes compared with the reference, in graph order, so the first op whose error
// leaves its tolerance is the one that diverges. Used by `duet check MODEL` and the tests.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "check/check.h"
#include "duet/graph.h"
#include "duet/plan.h"
#include "duet/policy.h"

namespace duet::check {

// Every value of a graph on the float64 reference: each op evaluated in float64 from its inputs
// as the graph holds them (rounded to their dtypes, as any device holds them).
struct GraphReference {
  std::vector<std::vector<double>> exact;  // per value, row-major, before rounding
  std::vector<HostTensor> held;            // per value, dense, in its dtype
};
Result<GraphReference> reference_graph(const Graph& g,
                                       const std::map<std::string, HostTensor>& inputs);

// The graph with every value a kernel computes also marked as an output (names unchanged).
Result<Graph> expose_values(const Graph& g);

// The tiers a plan used on `device` that the device could replace by another at the same
// precision: denying them reaches the next tier.
std::vector<Tier> replaceable_tiers(const Plan& plan, const std::string& device);

struct NodeCheck {
  int node = -1;  // index into Graph::nodes()
  Tier tier = Tier::generic;
  Precision precision = Precision::f32;
  Metrics metrics;
  Tolerance tol;
  bool passed = false;
  // How far the error is from its bound: 1 at the bound (max of the ratios of each measure).
  double ratio = 0;
};

struct GraphCheck {
  std::string device;
  std::string deny;   // tiers denied to reach this run ("" for the planner's own choice)
  std::string error;  // the graph could not be planned or run on the device
  std::vector<NodeCheck> nodes;
  int first_failure = -1;  // index into `nodes`
  // The first failing op alone on the same kernel, fed the reference's inputs: whether the kernel
  // itself is off or the error came in with its inputs.
  Outcome alone;
  bool alone_run = false;
};

// Runs `g` on `device` under `policy`, then once more for each round of replaceable tiers
// denied. `ref` is reference_graph(g, inputs).
std::vector<GraphCheck> check_graph(const Graph& g, const GraphReference& ref,
                                    const std::map<std::string, HostTensor>& inputs, Device& device,
                                    const Policy& policy);

}  // namespace duet::check
