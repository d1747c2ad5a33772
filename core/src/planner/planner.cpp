// The planner: greedy placement in dependency order under a simple cost model, precision and
// tier from the backends' rules and the policy, casts and copies where needed, then a memory plan
// per device (docs/planner.md). This file assembles the plan; the parts are in planner.h.
#include "duet/planner.h"

#include "duet/calibration.h"

#include <algorithm>
#include <optional>
#include <set>

#include "duet/internal/log.h"
#include "memory_plan.h"
#include "planner_state.h"

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

uint64_t memory_reserve(const DeviceCaps& c, std::string* why) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  uint64_t r = 0;
  std::string w;
  if (c.type == DeviceType::cpu) {
    r = std::max<uint64_t>(c.memory_bytes / 10, 1024 * kMiB);
    w = "for the system and other processes: 10% of host memory, at least 1 GiB";
  } else {
    r = std::max<uint64_t>(c.memory_bytes / 20, 512 * kMiB);
    w = "for the driver context and workspaces: 5% of a GPU's memory, at least 512 MiB";
  }
  if (r > c.memory_bytes / 2) {
    r = c.memory_bytes / 2;
    w += ", at most half";
  }
  if (why) *why = w;
  return r;
}

std::vector<int> other_routes(const std::vector<PlanDevice>& devices, int d) {
  std::vector<int> out;
  const auto& id = devices[u(d)].caps.uuid;
  if (!id || devices[u(d)].caps.type == DeviceType::cpu) return out;
  for (size_t o = 0; o < devices.size(); ++o)
    if (static_cast<int>(o) != d && devices[o].caps.uuid == id) out.push_back(static_cast<int>(o));
  return out;
}

uint64_t Planner::budget(int d) const {
  const PlanDevice& pd = dev(d);
  uint64_t b = pd.caps.memory_bytes - memory_reserve(pd.caps);
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
    DeviceMemoryPlan& m = plan_.memory[d];
    if (b) {
      m.budget_bytes = *b;
      m.budget_source = "policy " + term;
    } else {
      std::string why;
      const uint64_t reserve = memory_reserve(pd.caps, &why);
      m.budget_bytes = pd.caps.memory_bytes - reserve;
      m.budget_source = "device memory " + format_bytes(pd.caps.memory_bytes) +
                        " less a reserve of " + format_bytes(reserve) + " " + why;
    }
    std::string routes;
    for (int o : other_routes(plan_.devices, static_cast<int>(d)))
      routes += (routes.empty() ? "" : ", ") + plan_.devices[u(o)].id;
    if (!routes.empty()) m.budget_source += ", shared with " + routes + " (the same GPU)";
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

namespace {

// Plans; while a device's plan exceeds its budget, takes the excess off that budget and plans
// again, so work moves to other devices.
Result<Plan> plan_within_budgets(const Graph& graph, const std::vector<PlanDevice>& devices,
                                 const Policy& policy,
                                 const std::vector<std::vector<int>>& readers) {
  std::vector<uint64_t> cut(devices.size(), 0);
  for (int round = 0;; ++round) {
    planning::Planner p(graph, devices, policy, cut, readers);
    DUET_ASSIGN_OR_RETURN(Plan plan, p.run());
    // Over a budget? Move work away from that device and plan again. The routes to one GPU
    // (one UUID) hold their peaks in its one memory: their sum is held against the budget.
    std::string over;
    bool any = false;
    for (size_t d = 0; d < plan.devices.size(); ++d) {
      const std::vector<int> others = planning::other_routes(plan.devices, static_cast<int>(d));
      if (!others.empty() && others.front() < static_cast<int>(d)) continue;  // said at the first
      const DeviceMemoryPlan& m = plan.memory[d];
      uint64_t peak = m.peak_bytes, constants = m.constant_bytes;
      std::string name = plan.device_name(static_cast<int>(d));
      for (int o : others) {
        peak += plan.memory[u(o)].peak_bytes;
        constants += plan.memory[u(o)].constant_bytes;
        name += " and " + plan.device_name(o);
      }
      if (m.budget_bytes == 0 || peak <= m.budget_bytes) continue;
      over += (over.empty() ? "" : "; ") + name + " need" + (others.empty() ? "s " : " ") +
              format_bytes(peak) + " at peak (resident constants " + format_bytes(constants) +
              "), budget " + format_bytes(m.budget_bytes) + " (" + m.budget_source + ")";
      const uint64_t excess = peak - m.budget_bytes;
      cut[d] += excess + excess / 8 + 1;
      for (int o : others) cut[u(o)] += excess + excess / 8 + 1;
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

// Per graph node, the devices on which kernels read its output in `plan` (through views).
std::vector<std::vector<int>> readers_of(const Graph& g, const Plan& plan) {
  std::vector<std::vector<int>> r(g.nodes().size());
  auto producer = [&](int gv) {
    for (int p = g.value(gv).producer; p >= 0; p = g.value(gv).producer) {
      const GraphNode& n = g.nodes()[static_cast<size_t>(p)];
      if (!is_view(n.kind())) return p;
      gv = n.inputs[0];
    }
    return -1;
  };
  for (const PlanStep& st : plan.steps) {
    if (st.kind != StepKind::kernel || st.node < 0 || st.device < 0) continue;
    for (int gv : g.nodes()[static_cast<size_t>(st.node)].inputs) {
      const int p = producer(gv);
      if (p < 0) continue;
      std::vector<int>& v = r[static_cast<size_t>(p)];
      if (std::find(v.begin(), v.end(), st.device) == v.end()) v.push_back(st.device);
    }
  }
  return r;
}

// The device of every graph node's kernel.
std::vector<std::pair<int, int>> placement_of(const Plan& plan) {
  std::vector<std::pair<int, int>> p;
  for (const PlanStep& st : plan.steps)
    if (st.kind == StepKind::kernel && st.node >= 0) p.emplace_back(st.node, st.device);
  return p;
}

// Placement over `devices`, every one of them usable together.
Result<Plan> plan_placed(const Graph& graph, std::vector<PlanDevice> devices,
                         const Policy& policy) {
  // Placement in graph order sees what moving an op's inputs costs, not what moving its output
  // to the ops reading it will cost. So plan again with each op charged for moving its output to
  // where its readers ran in the previous plan, until the placement settles (at most 3 rounds),
  // and keep the plan with the lowest estimated time.
  DUET_ASSIGN_OR_RETURN(Plan best, plan_within_budgets(graph, devices, policy, {}));
  if (!policy.split || devices.size() < 2) return best;
  Plan last = best;
  for (int round = 0; round < 3; ++round) {
    Result<Plan> next = plan_within_budgets(graph, devices, policy, readers_of(graph, last));
    if (!next.ok()) break;
    const bool settled = placement_of(*next) == placement_of(last);
    if (next->est_us < best.est_us * (1 - 1e-6)) best = *next;
    if (settled) break;
    last = std::move(*next);
  }
  // Placed op by op, small ops can end up on another device than the large ones around them,
  // each move paying for itself alone but not all of them together (a decode step's norms and
  // residual adds on the CPU between a GPU's matmuls). So the whole graph on each device is a
  // candidate too.
  const double spread = best.est_us;
  int whole = -1;
  uint64_t constants = 0;
  for (const GraphValue& v : graph.values())
    if (v.kind == ValueKind::constant) constants += static_cast<uint64_t>(v.desc.nbytes());
  for (size_t d = 0; d < devices.size(); ++d) {
    const DeviceCaps& caps = devices[d].caps;
    const auto stated = policy.budget_for(caps.backend, devices[d].id);
    const uint64_t budget = stated ? *stated : caps.memory_bytes - planning::memory_reserve(caps);
    if (budget > 0 && constants > budget) continue;  // its weights alone do not fit
    planning::Planner p(graph, devices, policy, std::vector<uint64_t>(devices.size(), 0), {},
                        static_cast<int>(d));
    Result<Plan> one = p.run();
    if (!one.ok()) continue;
    bool fits = true;
    for (const DeviceMemoryPlan& m : one->memory)
      fits = fits && (m.budget_bytes == 0 || m.peak_bytes <= m.budget_bytes);
    if (fits && one->est_us < best.est_us * (1 - 1e-6)) {
      best = std::move(*one);
      whole = static_cast<int>(d);
    }
  }
  if (whole >= 0)
    best.notes.push_back("the whole graph on " + devices[static_cast<size_t>(whole)].id +
                         " is estimated " + format_us(best.est_us) + " per run, placed op by op " +
                         format_us(spread));
  return best;
}

// Whether the policy's device list names device `id` itself (not only its backend).
bool named(const Policy& policy, const PlanDevice& d) {
  for (const PolicyTarget& t : policy.allow)
    if (t.is_placement() && t.device == d.id) return true;
  return false;
}

}  // namespace

// One GPU seen through CUDA and Vulkan (one UUID) is one GPU: a graph runs on one of its routes,
// not split between them (moving data between two APIs of one GPU goes through the host, and the
// split would gain nothing), unless the policy's device list names several of them
// (device=cuda:0,vulkan:0). Each choice of one route per GPU is planned and the fastest kept.
Result<Plan> make_plan(const Graph& graph, std::vector<PlanDevice> devices, const Policy& policy) {
  std::vector<std::vector<int>> gpus;  // per GPU with several usable routes: their indices
  std::vector<bool> grouped(devices.size(), false);
  for (size_t d = 0; d < devices.size(); ++d) {
    if (grouped[d]) continue;
    std::vector<int> routes = planning::other_routes(devices, static_cast<int>(d));
    if (routes.empty()) continue;
    int asked = 0;
    routes.insert(routes.begin(), static_cast<int>(d));
    std::vector<int> usable;
    for (int r : routes) {
      grouped[u(r)] = true;
      const PlanDevice& pd = devices[u(r)];
      if (!policy.device_denied(pd.caps.backend, pd.id).empty()) continue;
      usable.push_back(r);
      asked += named(policy, pd) ? 1 : 0;
    }
    if (usable.size() > 1 && asked < 2) gpus.push_back(std::move(usable));
  }
  if (gpus.empty()) return plan_placed(graph, std::move(devices), policy);

  // Every choice of one route per GPU (a workstation has one or two such GPUs).
  std::vector<size_t> pick(gpus.size(), 0);
  std::optional<Plan> best;
  std::optional<Status> first_error;
  std::string tried;
  for (int n = 0; n < 64; ++n) {
    std::vector<bool> drop(devices.size(), false);
    std::string chosen;
    for (size_t g = 0; g < gpus.size(); ++g)
      for (size_t r = 0; r < gpus[g].size(); ++r) {
        if (r != pick[g])
          drop[u(gpus[g][r])] = true;
        else
          chosen += (chosen.empty() ? "" : "+") + devices[u(gpus[g][r])].id;
      }
    std::vector<PlanDevice> kept;
    for (size_t d = 0; d < devices.size(); ++d)
      if (!drop[d]) kept.push_back(devices[d]);
    Result<Plan> p = plan_placed(graph, std::move(kept), policy);
    if (p.ok()) {
      tried += (tried.empty() ? "" : ", ") + chosen + " " + format_us(p->est_us);
      if (!best || p->est_us < best->est_us * (1 - 1e-6)) best = std::move(*p);
    } else {
      tried += (tried.empty() ? "" : ", ") + chosen + " failed";
      if (!first_error) first_error = p.status();
    }
    size_t g = 0;
    while (g < gpus.size() && ++pick[g] == gpus[g].size()) pick[g++] = 0;
    if (g == gpus.size()) break;
  }
  if (!best) return *first_error;
  for (const std::vector<int>& routes : gpus) {
    std::string names, ids;
    for (int r : routes) {
      names += (names.empty() ? "" : ", ") + devices[u(r)].id;
      ids += (ids.empty() ? "" : ",") + devices[u(r)].id;
    }
    best->notes.push_back(names + " are one GPU (the same UUID): the graph runs on one of them " +
                          "(policy device=" + ids +
                          " allows splitting it); planned on each: " + tried);
  }
  return std::move(*best);
}

}  // namespace duet
