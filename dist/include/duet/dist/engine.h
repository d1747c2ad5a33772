// A graph run over the ranks of a distributed run: every rank opens its own devices and loads the
// model from its own path; rank 0 gathers every rank's capability records and the measured links,
// plans the pipeline stages (duet/cluster.h) and tells the others; each rank then keeps only its
// stage (its weights, its KV caches) in an ordinary Engine on its devices. On each run rank 0
// sends the inputs to the stages that read them, each stage sends its activations to the next,
// and the outputs come back to rank 0.
//
//   auto t = dist::Transport::open();                       // under mpirun, on every rank
//   auto e = dist::DistributedEngine::create(**t, graph, devices, options);
//   if ((*t)->rank() == 0) { auto out = (*e)->run(inputs); ...; (*e)->finish(); }
//   else (*e)->serve();                                      // until rank 0 finishes
//
// An error on one rank leaves the others waiting for it until their timeout; a caller that cannot
// go on calls Transport::abort, which ends every rank at once with its message.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "duet/cluster.h"
#include "duet/device.h"
#include "duet/dist/transport.h"
#include "duet/engine.h"
#include "duet/graph.h"
#include "duet/host_tensor.h"
#include "duet/policy.h"

namespace duet::dist {

struct DistributedOptions {
  Policy policy;           // for every rank's planning
  ClusterOptions cluster;  // every_rank: a stage on every rank
  // Gives a stage's graph its constants' data: the rank's own weights, read from its own path
  // (the model file on a shared or copied disk), and only those of its stage. Not set: the graph
  // given to create() already holds them.
  std::function<Result<Graph>(const Graph& stage)> load_stage;
  // What else every rank must agree on besides the graph's structure, checked at start with it:
  // the identity of the model file where the graph's constants are declared without their data.
  std::string agree_on;
};

// A link between two ranks as measured at start: latency of a small message (half a round trip)
// and bandwidth of a 4 MiB one.
struct MeasuredLink {
  double latency_us = 0, gbps = 0;
};

// Collective, the start of every distributed command: checks that every rank runs the same duet
// build on the same graph, measures the link between every pair of ranks, and gathers every
// rank's capability records (its devices as it opened them). Every rank gets the whole cluster.
// `agree_on`: as DistributedOptions::agree_on. `transports`, where given, receives each rank's MPI
// library and whether it is CUDA-aware, in words (what --explain prints).
Result<Cluster> gather_cluster(Transport& transport, const Graph& graph,
                               const std::vector<Device*>& devices,
                               const std::string& agree_on = {}, std::string* transports = nullptr);

class DistributedEngine {
 public:
  // Collective: every rank calls it with the same graph structure (checked: duet build and graph
  // fingerprint) and its own devices.
  static Result<std::unique_ptr<DistributedEngine>> create(Transport& transport, const Graph& graph,
                                                           std::vector<Device*> devices,
                                                           DistributedOptions options = {});
  ~DistributedEngine();

  // The stages (every rank), with the planning figures and the explanation on rank 0 only.
  const ClusterPlan& plan() const { return plan_; }
  const std::string& explain() const { return explain_; }
  // This rank's stage's engine (nullptr when the rank holds no stage).
  Engine* stage_engine() { return engine_.get(); }

  // Rank 0: one run over every stage; inputs by name, outputs by name.
  Result<std::map<std::string, HostTensor>> run(const std::map<std::string, HostTensor>& inputs);
  // Rank 0: several runs one after another, pipelined over the stages (micro-batches): rank 0's
  // stage starts run i+1 while the later stages still work on run i, up to `depth` runs in
  // flight. Each run sees the states (KV caches) its predecessors left, as run() one by one
  // would: the outputs are those of run() in a loop, bit for bit (a prompt's chunks). Outputs in
  // the order of `requests`.
  Result<std::vector<std::map<std::string, HostTensor>>> run_pipelined(
      std::span<const std::map<std::string, HostTensor>> requests, int depth = 4);
  // Rank 0: every rank's states (KV caches) back to zero.
  Status reset_states();
  // Rank 0: tells the other ranks to return from serve().
  Status finish();
  // Other ranks: follow rank 0's runs until it finishes. Returns an error (naming this rank and
  // the run) where a run fails here.
  Status serve();

 private:
  DistributedEngine() = default;
  struct InFlight;
  // A run's part on this rank, without waiting for its messages to go out; then the outputs
  // gathered (rank 0) and every message finished.
  Status start_run(InFlight& run, const std::map<std::string, HostTensor>* caller_inputs);
  Status finish_run(InFlight& run);
  Status finish_sends(size_t keep);  // serving ranks: all but the last `keep` runs finished

  Transport* t_ = nullptr;
  Graph graph_;
  ClusterPlan plan_;
  std::string explain_;
  int stage_ = -1;  // this rank's stage index, -1: none
  std::unique_ptr<Engine> engine_;
  int runs_ = 0;
  bool finished_ = false;
  std::deque<std::unique_ptr<InFlight>> sending_;
};

}  // namespace duet::dist
