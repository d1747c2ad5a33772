#include "duet/engine.h"

#include "duet/internal/log.h"
#include "duet/planner.h"

namespace duet {

Result<std::unique_ptr<Engine>> Engine::create(Graph graph, std::vector<Device*> devices,
                                               Policy policy, std::shared_ptr<const void> owner) {
  std::unique_ptr<Engine> e(new Engine());
  e->source_ = graph;
  e->devices_ = std::move(devices);
  e->policy_ = std::move(policy);
  e->owner_ = std::move(owner);
  DUET_TRY(e->prepare(graph));
  return e;
}

Status Engine::prepare(const Graph& g) {
  DUET_ASSIGN_OR_RETURN(Plan plan, make_plan(g, plan_devices(devices_), policy_));
  ++plans_made_;
  log().debug("graph '{}': plan {} made, {} steps", g.name(), plans_made_, plan.steps.size());
  DUET_ASSIGN_OR_RETURN(auto executor,
                        Executor::create(g, std::move(plan), devices_, executor_.get()));
  graph_ = g;
  executor_ = std::move(executor);
  return {};
}

std::string Engine::explain() const {
  std::lock_guard<std::mutex> g(mutex_);
  return duet::explain(executor_->plan());
}

std::string Engine::recording_summary() const {
  std::lock_guard<std::mutex> g(mutex_);
  return executor_->recording_summary();
}

int Engine::plans_made() const {
  std::lock_guard<std::mutex> g(mutex_);
  return plans_made_;
}

Status Engine::replan_for(const std::map<std::string, HostTensor>& inputs,
                          const std::map<std::string, DeviceTensor>& device_inputs) {
  std::map<std::string, TensorDesc> changed;
  for (int id : graph_.inputs()) {
    const GraphValue& v = graph_.value(id);
    const TensorDesc* given = nullptr;
    if (auto it = inputs.find(v.name); it != inputs.end() && it->second.defined())
      given = &it->second.desc();
    else if (auto dt = device_inputs.find(v.name); dt != device_inputs.end())
      given = &dt->second.desc;
    if (!given) continue;  // the executor says what is missing
    const TensorDesc& t = *given;
    if (t.dtype == v.desc.dtype && !t.same_shape(v.desc))
      changed[v.name] = TensorDesc::contiguous(t.dtype, t.dims());
  }
  if (changed.empty()) return {};
  // New shapes: every input at its new shape, the rest as they are now.
  std::map<std::string, TensorDesc> shapes;
  for (int id : graph_.inputs()) shapes[graph_.value(id).name] = graph_.value(id).desc;
  for (auto& [name, d] : changed) shapes[name] = d;
  DUET_ASSIGN_OR_RETURN(Graph reshaped, source_.with_input_shapes(shapes));
  return prepare(reshaped);
}

Result<std::map<std::string, HostTensor>> Engine::run(
    const std::map<std::string, HostTensor>& inputs) {
  std::lock_guard<std::mutex> g(mutex_);
  DUET_TRY(replan_for(inputs));
  return executor_->run(inputs);
}

Result<std::map<std::string, HostTensor>> Engine::run(
    const std::map<std::string, HostTensor>& inputs, DeviceIo& device) {
  std::lock_guard<std::mutex> g(mutex_);
  DUET_TRY(replan_for(inputs, device.inputs));
  return executor_->run(inputs, device);
}

Result<std::map<std::string, HostTensor>> Engine::run_timed(
    const std::map<std::string, HostTensor>& inputs, std::vector<StepTime>& times) {
  std::lock_guard<std::mutex> g(mutex_);
  DUET_TRY(replan_for(inputs));
  return executor_->run_timed(inputs, times);
}

Result<std::map<std::string, HostTensor>> Engine::run_profiled(
    const std::map<std::string, HostTensor>& inputs, RunProfile& profile) {
  std::lock_guard<std::mutex> g(mutex_);
  DUET_TRY(replan_for(inputs));
  return executor_->run_profiled(inputs, profile);
}

Result<HostTensor> Engine::read_state(std::string_view name) {
  std::lock_guard<std::mutex> g(mutex_);
  return executor_->read_state(name);
}

Status Engine::write_state(std::string_view name, const HostTensor& value) {
  std::lock_guard<std::mutex> g(mutex_);
  return executor_->write_state(name, value);
}

Status Engine::reset_states() {
  std::lock_guard<std::mutex> g(mutex_);
  return executor_->reset_states();
}

}  // namespace duet
