// Planning a graph over the ranks of a distributed run (several duet processes, one per host or
// per part of a host, joined by MPI: docs/distributed.md). Each rank's devices are planner devices
// like any other, shown as "rank1/cuda:0"; what the cluster planner adds is where the graph is cut:
// pipeline stages of contiguous nodes, one stage per rank in rank order, each stage planned on its
// rank's own devices by the ordinary planner, every value that crosses a cut charged the link's
// latency and its bytes over the link's bandwidth.
//
// It is pure, like make_plan: capability records (probed and gathered from the ranks, or
// profiles) and link figures (measured, or given), so a cluster can be planned without it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "duet/export.h"
#include "duet/graph.h"
#include "duet/plan.h"
#include "duet/policy.h"

namespace duet {

struct DUET_API ClusterRank {
  std::string host;                 // where the rank runs (shown; ranks on one host are fine)
  std::vector<PlanDevice> devices;  // as the rank itself names them ("cpu:0")
};

// One direction of the link between two ranks.
struct DUET_API ClusterLink {
  double latency_us = 0;  // one small message, one way
  double gbps = 0;        // GB/s one way for large messages
  std::string source;     // "measured", "--link", ...
  // The time one value of `bytes` takes to cross.
  double cost_us(uint64_t bytes) const;
};

struct DUET_API Cluster {
  std::vector<ClusterRank> ranks;
  std::vector<std::vector<ClusterLink>> links;  // links[from][to]; the diagonal is unused
};

struct DUET_API ClusterOptions {
  // A stage on every rank, even where fewer ranks would be faster (what a model needs when the
  // user knows better than the memory figures, and what the tests of one machine use). The plan
  // says how much slower than the best single rank it is estimated.
  bool every_rank = false;
  // The runs will be pipelined over the stages (many runs given at once: a prompt's chunks,
  // DistributedEngine::run_pipelined): the split of least time per run in the steady state, which
  // the slowest stage or link bounds, rather than of least time for one run alone. Ranks of one
  // host then compute at the same time, so a stage on its CPU (or integrated GPU) is estimated at
  // the host's rate divided among them.
  bool pipelined = false;
};

// The nodes [begin, end) of the graph (Graph::nodes order) on one rank.
struct DUET_API StageRange {
  int rank = 0;
  int begin = 0, end = 0;
  bool operator==(const StageRange&) const = default;
};

// A value one rank sends another on every run.
struct DUET_API Crossing {
  int value = -1;  // the graph value
  int from_rank = 0, to_rank = 0;
  uint64_t bytes = 0;
  double est_us = 0;  // over the link: its latency plus the bytes at its bandwidth
  enum class Kind : uint8_t { input, activation, output } kind = Kind::activation;
};

struct DUET_API Stage {
  StageRange range;
  // The nodes it runs, in graph order: its range, and before them the nodes computed from
  // constants alone that its range reads (weights' views: recomputed on the rank, never sent).
  std::vector<int> nodes;
  std::vector<int> inputs;    // graph inputs its nodes read (from rank 0's caller)
  std::vector<int> receives;  // values from the stage before (made there or passed on)
  std::vector<int> sends;     // values to the stage after (made here or passed on)
  std::vector<int> outputs;   // graph outputs made here (to rank 0)
  // Planning figures (when planned with a Cluster): the estimated kernel time of its nodes on its
  // rank, the weights and states it keeps there, and what that takes of each device's memory
  // ("rank1/cuda:0 20.1 GiB of 21.8 GiB").
  double compute_us = 0;
  uint64_t weight_bytes = 0, state_bytes = 0;
  std::string memory;
  std::vector<std::string> devices_used;  // "rank1/cpu:0: 12 ops"
  std::vector<std::string> elsewhere;     // the same nodes on each other rank: "rank0: 1.2 ms"
};

struct DUET_API ClusterPlan {
  std::string graph;
  std::vector<std::string> ranks;  // per rank: "rank1 (hostB): cpu:0, cuda:0"
  std::vector<std::string> links;  // "rank0 -> rank1: 21 us + 5.2 GB/s (measured)"
  std::vector<Stage> stages;       // in pipeline order (rank order), none empty
  std::vector<Crossing> crossings;
  double est_us = 0;  // one run: every stage and crossing one after the other
  // Runs pipelined over the stages, in the steady state: the time per run of the slowest stage
  // (its kernels and its crossings to and from rank 0) or link between two stages.
  double pipelined_us = 0;
  bool planned_pipelined = false;  // chosen by pipelined_us (ClusterOptions::pipelined)
  // The best single rank that holds the whole graph (-1: none does) and its estimate (the same
  // pipelined or not: one stage overlaps with nothing).
  int single_rank = -1;
  double single_us = 0;
  std::string why;  // why these stages
  std::vector<std::string> notes;

  std::vector<StageRange> ranges() const;
};

// A device of rank `rank` as the cluster plan names it: "rank1/cpu:0".
DUET_API std::string rank_device_id(int rank, std::string_view id);

// Plans the stages: every split of the graph into contiguous ranges, one per rank in rank order
// (a rank may get none unless options.every_rank), whose weights and states fit each rank's
// budget, the one of the least estimated time per run (one run alone, or pipelined runs with
// options.pipelined). Errors say why no split fits.
DUET_API Result<ClusterPlan> plan_cluster(const Graph& graph, const Cluster& cluster,
                                          const Policy& policy = {},
                                          const ClusterOptions& options = {});

// The stages of given ranges, without estimates: what each rank derives from the ranges rank 0
// decided. Ranges must be non-empty, in rank order, and cover the nodes in order; no cut may
// separate a state from the nodes that use it.
DUET_API Result<ClusterPlan> cluster_stages(const Graph& graph, std::vector<StageRange> ranges);

// The graph one stage runs: its nodes; the graph inputs and the received values its nodes read,
// as inputs (dense); the constants (data or file sources) and states its nodes use; its graph
// outputs and the values it makes and sends on, as outputs (values it only passes on are not in
// it: the caller forwards them).
DUET_API Result<Graph> stage_graph(const Graph& graph, const Stage& stage);

// The plan in words: ranks and links, each stage with why it is there, each crossing with its
// cost, the comparison with the best single rank.
DUET_API std::string explain(const ClusterPlan& plan, const Graph& graph);

}  // namespace duet
