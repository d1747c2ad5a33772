// The engine: a graph, the devices to run it on and a policy; it plans once, runs the plan as
// many times as asked with new inputs, and plans again only when the input shapes change. The
// graph's states (duet/graph.h) live as long as the engine: across runs and across re-plans (a
// new plan takes over their contents, and the weights it keeps in the same place).
//
//   auto engine = Engine::create(std::move(graph), devices, *policy_from_env());
//   auto out = (*engine)->run({{"x", x}});
//
// Thread safety: run() may be called from several threads; calls on one Engine are serialised.
// Several Engines may share devices and run at the same time (see duet/executor.h). explain()
// and plans_made() may be called while other threads run. plan() and graph() return references
// to the current plan and graph: do not use them while another thread may run() with new shapes
// (a re-plan replaces both).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "duet/device.h"
#include "duet/executor.h"
#include "duet/export.h"
#include "duet/graph.h"
#include "duet/plan.h"
#include "duet/policy.h"

namespace duet {

class DUET_API Engine {
 public:
  // Plans `graph` for `devices` under `policy` and prepares the executor (constants uploaded).
  // `owner` keeps whatever owns the devices alive as long as the engine (e.g. a Registry).
  static Result<std::unique_ptr<Engine>> create(Graph graph, std::vector<Device*> devices,
                                                Policy policy = {},
                                                std::shared_ptr<const void> owner = {});

  const Graph& graph() const { return graph_; }
  const Plan& plan() const { return executor_->plan(); }
  std::string explain() const;  // the current plan in words
  const Policy& policy() const { return policy_; }
  // How many plans were made (1 after create; +1 for each change of input shapes).
  int plans_made() const;
  // What plain runs of the current plan replay (Executor::recording_summary).
  std::string recording_summary() const;

  // Runs the graph. Inputs by name; outputs dense, by name. Inputs of new shapes (same dtypes)
  // re-plan for those shapes first.
  Result<std::map<std::string, HostTensor>> run(const std::map<std::string, HostTensor>& inputs);
  // run() with inputs and outputs in device memory (Executor::run, DeviceIo).
  Result<std::map<std::string, HostTensor>> run(const std::map<std::string, HostTensor>& inputs,
                                                DeviceIo& device);
  // run(), also timing every step of the plan (see Executor::run_timed).
  Result<std::map<std::string, HostTensor>> run_timed(
      const std::map<std::string, HostTensor>& inputs, std::vector<StepTime>& times);
  // run(), with every kernel timed on its device (see Executor::run_profiled).
  Result<std::map<std::string, HostTensor>> run_profiled(
      const std::map<std::string, HostTensor>& inputs, RunProfile& profile);

  // States by name: read back (dense), overwritten (the state's dtype and shape), all zeroed.
  Result<HostTensor> read_state(std::string_view name);
  Status write_state(std::string_view name, const HostTensor& value);
  Status reset_states();

 private:
  Engine() = default;
  Status prepare(const Graph& g);
  Status replan_for(const std::map<std::string, HostTensor>& inputs,
                    const std::map<std::string, DeviceTensor>& device_inputs = {});

  Graph source_;  // the graph as given
  Graph graph_;   // the graph at the current input shapes
  std::vector<Device*> devices_;
  Policy policy_;
  std::shared_ptr<const void> owner_;
  std::unique_ptr<Executor> executor_;
  int plans_made_ = 0;
  mutable std::mutex mutex_;  // held by run() (and a re-plan), explain(), plans_made(), states
};

}  // namespace duet
