// The planner: greedy placement in dependency order under a simple cost model, precision and
// tier from the backends' rules and the policy, casts and copies where needed, then a memory plan
// per device (docs/planner.md). This file assembles the plan; the parts are in planner.h.
#include "duet/planner.h"

#include "duet/calibration.h"

#include <algorithm>
#include <set>

#include "duet/internal/log.h"
#include "memory_plan.h"
#include "planner.h"

namespace duet {

std::vector<PlanDevice> plan_devices(std::span<Device* const> devices, bool calibrate) {
  std::vector<PlanDevice> out;
  for (Device* d : devices) {
    if (!d) continue;
    out.push_back(PlanDevice{d->id(), d->caps(), &d->rules(), {}, {}});
  }
  // Measured rates rank devices; with one device there is nothing to rank it against.
  if (calibrate && out.size() > 1) {
    std::vector<Device*> present;
    for (Device* d : devices)
      if (d) present.push_back(d);
    std::vector<Calibration> c = calibrations_for(present);
    for (size_t i = 0; i < out.size(); ++i) out[i].measured = std::move(c[i]);
  }
  return out;
}

namespace planning {

uint64_t Planner::budget(int d) const {
  const PlanDevice& pd = dev(d);
  uint64_t b = pd.caps.memory_bytes;
  if (auto p = policy_.budget_for(pd.caps.backend, pd.id)) b = *p;
  if (b == 0) return std::numeric_limits<uint64_t>::max();
  return b > cut_[u(d)] ? b - cut_[u(d)] : 0;
}

Status Planner::finish_outputs() {
  for (int gv : g_.outputs()) {
    const GraphValue& v = g_.value(gv);
    const int sv = storage_value(gv);
    // The device where it (or the storage it views) was produced.
    int d = kHost;
    for (int r : reps_[u(gv)])
      if (plan_.values[u(r)].device != kHost && plan_.values[u(r)].desc.dtype == v.desc.dtype)
        d = plan_.values[u(r)].device;
    for (int r : reps_[u(sv)])
      if (d == kHost && plan_.values[u(r)].device != kHost) d = plan_.values[u(r)].device;
    if (d == kHost) {
      // A view of an input or constant: made on the first device the policy allows.
      for (size_t i = 0; i < plan_.devices.size() && d == kHost; ++i)
        if (policy_.device_denied(plan_.devices[i].caps.backend, plan_.devices[i].id).empty() &&
            (single_ < 0 || single_ == static_cast<int>(i)))
          d = static_cast<int>(i);
    }
    if (d == kHost)
      return Status(Code::internal, "planner: output '" + v.name + "' was not computed");
    DUET_ASSIGN_OR_RETURN(int r, need(gv, d, v.desc.dtype, "graph output '" + v.name + "'"));
    const PlanValue& src = plan_.values[u(r)];
    const PlanValue& root = plan_.values[u(src.root)];
    PlanValue host;
    host.name = v.name;
    host.desc = src.desc;
    host.device = kHost;
    host.graph_value = -1;  // not a source for later copies
    const uint64_t bytes = root.storage_bytes();
    const int src_device = src.device;
    const int hv = add_value(std::move(host));
    PlanStep st;
    st.kind = StepKind::transfer;
    st.name = v.name + "->host";
    st.device = kHost;
    st.src_device = src_device;
    st.inputs = {r};
    st.output = hv;
    st.bytes = bytes;
    st.est_us = estimate_transfer_us(bytes, caps_of(src_device), nullptr);
    add_step(std::move(st));
    plan_.outputs[v.name] = hv;
  }
  return {};
}

Result<Plan> Planner::run() {
  if (plan_.devices.empty())
    return Status(Code::invalid_argument, "planner: no devices to plan for");
  std::set<std::string> ids;
  for (const PlanDevice& d : plan_.devices) {
    if (!d.rules)
      return Status(Code::invalid_argument, "planner: device '" + d.id + "' has no rules");
    if (!ids.insert(d.id).second)
      return Status(Code::invalid_argument, "planner: device id '" + d.id + "' given twice");
  }
  if (auto unbound = g_.unbound_constants(); !unbound.empty())
    log().debug("planning graph '{}' with {} unbound constants", g_.name(), unbound.size());
  cut_.resize(plan_.devices.size(), 0);
  reps_.assign(g_.values().size(), {});
  last_use_ = g_.last_uses();
  is_output_.assign(g_.values().size(), false);
  home_.assign(g_.values().size(), kHost);
  for (int o : g_.outputs()) is_output_[u(o)] = true;
  // A graph output keeps its storage alive to the end, through views too.
  for (int o : g_.outputs()) is_output_[u(storage_value(o))] = true;
  // Views keep the storage they read alive as long as they are read.
  for (size_t gv = 0; gv < g_.values().size(); ++gv) {
    const int sv = storage_value(static_cast<int>(gv));
    last_use_[u(sv)] = std::max(last_use_[u(sv)], last_use_[gv]);
  }

  bool any_allowed = false;
  for (const PlanDevice& d : plan_.devices)
    any_allowed = any_allowed || policy_.device_denied(d.caps.backend, d.id).empty();
  if (!any_allowed) {
    std::string list;
    for (const PlanDevice& d : plan_.devices)
      list += (list.empty() ? "" : ", ") + d.id + " (" +
              policy_.device_denied(d.caps.backend, d.id) + ")";
    return Status(Code::invalid_argument, "graph '" + g_.name() + "': the policy '" +
                                              policy_.str() +
                                              "' leaves no device to run on: " + list);
  }

  for (int id : g_.inputs()) {
    PlanValue v;
    v.name = g_.value(id).name;
    v.desc = g_.value(id).desc;
    v.graph_value = id;
    const std::string name = v.name;
    plan_.inputs[name] = add_value(std::move(v));
  }
  for (int id : g_.constants()) {
    PlanValue v;
    v.name = g_.value(id).name;
    v.desc = g_.value(id).desc;
    v.graph_value = id;
    v.constant = true;
    add_value(std::move(v));
  }
  if (!policy_.split) DUET_TRY(choose_single_device());
  for (size_t i = 0; i < g_.nodes().size(); ++i) {
    Status s = place(static_cast<int>(i));
    if (!s.ok()) return s.with_context("graph '" + g_.name() + "'");
  }
  if (Status s = finish_outputs(); !s.ok()) return s.with_context("graph '" + g_.name() + "'");

  plan_memory(plan_);
  for (size_t d = 0; d < plan_.devices.size(); ++d) {
    const PlanDevice& pd = plan_.devices[d];
    std::string term;
    auto b = policy_.budget_for(pd.caps.backend, pd.id, &term);
    plan_.memory[d].budget_bytes = b ? *b : pd.caps.memory_bytes;
    plan_.memory[d].budget_source = b ? "policy " + term : "device memory";
  }
  for (const PlanStep& st : plan_.steps)
    if (!st.once) plan_.est_us += st.est_us;

  // Policy terms that decided nothing: say so, a typo must not pass silently.
  for (const PolicyTarget& t : policy_.deny) {
    bool matched = false;
    for (const PlanDevice& d : plan_.devices) {
      if (t.is_placement())
        matched = matched || t.matches_device(d.caps.backend, d.id);
      else
        matched = matched || t.matches_device(d.caps.backend, d.id) || !t.backend;
    }
    if (!matched)
      plan_.notes.push_back("policy term deny=" + t.text + " matches no device of this plan");
  }
  return std::move(plan_);
}

}  // namespace planning

Result<Plan> make_plan(const Graph& graph, std::vector<PlanDevice> devices, const Policy& policy) {
  std::vector<uint64_t> cut(devices.size(), 0);
  for (int round = 0;; ++round) {
    planning::Planner p(graph, devices, policy, cut);
    DUET_ASSIGN_OR_RETURN(Plan plan, p.run());
    // Over a budget? Move work away from that device and plan again.
    std::string over;
    bool any = false;
    for (size_t d = 0; d < plan.devices.size(); ++d) {
      const DeviceMemoryPlan& m = plan.memory[d];
      if (m.budget_bytes == 0 || m.peak_bytes <= m.budget_bytes) continue;
      over += (over.empty() ? "" : "; ") + plan.device_name(static_cast<int>(d)) + " needs " +
              format_bytes(m.peak_bytes) + " at peak (resident constants " +
              format_bytes(m.constant_bytes) + "), budget " + format_bytes(m.budget_bytes) + " (" +
              m.budget_source + ")";
      const uint64_t excess = m.peak_bytes - m.budget_bytes;
      cut[d] += excess + excess / 8 + 1;
      any = true;
    }
    if (!any) return plan;
    if (!policy.split || plan.devices.size() < 2 || round >= 8)
      return Status(
          Code::out_of_memory,
          "graph '" + graph.name() + "' does not fit: " + over +
              (!policy.split             ? "; splitting across devices is forbidden by policy "
                                           "(split=off)"
               : plan.devices.size() < 2 ? "; no other device to move work to"
                                         : "; moving work to other devices did not help"));
  }
}

}  // namespace duet
