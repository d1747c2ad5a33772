// Placement: for each op, every device's kernel choices filtered by the policy and ranked by
// precision, the cost of each device (kernel, moving its inputs, casts) against its memory budget,
// and the decision with a reason for the pick and for every alternative (docs/planner.md).
#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <set>

#include "cost_model.h"
#include "duet/planner.h"
#include "planner_state.h"
#include "precision.h"

namespace duet::planning {

// Whether device d cannot take the op at all (the policy keeps the device out, the graph runs
// whole on another, a state it writes lives elsewhere); e says why.
bool Planner::excluded(const GraphNode& n, int d, DeviceEval& e) const {
  const PlanDevice& pd = dev(d);
  if (std::string term = policy_.device_denied(pd.caps.backend, pd.id); !term.empty()) {
    e.denied = true;
    e.why_not = "device not used by policy (" + term + ")";
    e.policy.push_back(term);
    Alternative a;
    a.device = pd.id;
    a.by_policy = true;
    a.term = term;
    a.reason = e.why_not;
    e.alternatives.push_back(a);
    return true;
  }
  if (single_ >= 0 && d != single_) {
    e.denied = true;
    e.why_not = "the whole graph runs on " + dev(single_).id +
                (policy_.split ? " (estimated faster than spreading it)" : " (split=off)");
    return true;
  }
  // A state is written in place where it lives.
  if (const int st = written_state(n); st >= 0 && state_value(st) >= 0 && home_[u(st)] != d) {
    e.why_not =
        "writes state '" + g_.value(st).name + "' in place, which lives on " + dev(home_[u(st)]).id;
    Alternative a;
    a.device = pd.id;
    a.reason = e.why_not;
    e.alternatives.push_back(a);
    return true;
  }
  return false;
}

// The backend's choices for the op on device d, those that would read a quantized input in
// another dtype refused.
std::vector<KernelChoice> Planner::choices(const GraphNode& n, int d) const {
  const PlanDevice& pd = dev(d);
  std::vector<KernelChoice> all =
      pd.rules ? pd.rules->choices(pd.caps, n.op) : std::vector<KernelChoice>{};
  // A quantized input is read in its blocks or not at all: a choice that would read it in
  // another dtype would have the planner insert a cast, a dequantized copy of the weight.
  for (KernelChoice& c : all)
    for (size_t i = 0; c.ok && i < n.op.inputs.size() && i < c.input_dtypes.size(); ++i)
      if (is_quantized(n.op.inputs[i].dtype) && c.input_dtypes[i] != n.op.inputs[i].dtype) {
        c.ok = false;
        c.reason = "reads '" + n.op.input_name(i) + "' as " +
                   std::string(dtype_name(c.input_dtypes[i])) + ": a " +
                   std::string(dtype_name(n.op.inputs[i].dtype)) +
                   " weight is never dequantized into memory (no kernel of this tier reads its "
                   "blocks)";
      }
  return all;
}

// Device d's choices for the op ranked (below).
Ranking Planner::rank(const GraphNode& n, int d, const PrecisionFloor& floor,
                      const std::vector<KernelChoice>& all) const {
  const PlanDevice& pd = dev(d);
  auto usable = [&](const KernelChoice& c) {
    return c.ok && policy_.tier_denied(pd.caps.backend, pd.id, c.tier).empty();
  };
  bool asked_here = false;
  for (const KernelChoice& c : all)
    asked_here = asked_here || (usable(c) && c.precision == floor.asked());
  // Every acceptable choice with its kernel's estimate; the fastest wins. Casts are left out of
  // this ranking: a value is converted once and then read by every op on the device (a bf16
  // graph on a device without bf16 runs in f16 after converting its values), so they weigh in
  // between devices (cost()), and here only to break a near tie (within 5%): fewer inputs to
  // cast from what exists, then a choice meeting the floor before a substitute, then the
  // backend's order.
  Ranking r;
  std::vector<Standing>& standing = r.standing;
  std::vector<double>& us = r.us;
  std::vector<double>& cast = r.cast;
  us.assign(all.size(), 0.0);
  cast.assign(all.size(), 0.0);
  auto better = [&](size_t i, size_t b) {
    if (us[i] < us[b] * 0.95) return true;
    if (us[i] > us[b] * 1.05) return false;
    if (cast[i] != cast[b]) return cast[i] < cast[b];
    if (standing[i].kind != standing[b].kind) return standing[i].kind < standing[b].kind;
    // Then the precision the graph asks for (a bf16 graph's memory-bound matmul runs in bf16
    // where the device has bf16 dot products).
    const bool exact_i = all[i].precision == floor.asked(),
               exact_b = all[b].precision == floor.asked();
    if (exact_i != exact_b) return exact_i;
    return us[i] < us[b] * (1 - 1e-9);
  };
  for (size_t i = 0; i < all.size(); ++i) {
    const KernelChoice& c = all[i];
    standing.push_back(floor.judge(c, n.op, asked_here));
    if (!usable(c) || standing[i].kind == Standing::refused) continue;
    us[i] = estimate_kernel_us(n.op, c, pd.caps, &pd.measured);
    for (size_t k = 0; k < n.inputs.size() && k < c.input_dtypes.size(); ++k)
      if (available_dtype(n.inputs[k], d, c.input_dtypes[k]) != c.input_dtypes[k])
        cast[i] += estimate_cast_us(
            static_cast<uint64_t>(dtype_bytes(c.input_dtypes[k], n.op.inputs[k].numel())), pd.caps,
            &pd.measured);
    if (r.best < 0 || better(i, u(r.best))) r.best = static_cast<int>(i);
  }
  return r;
}

DeviceEval Planner::evaluate(const GraphNode& n, int d, const PrecisionFloor& floor) const {
  DeviceEval e;
  e.device = d;
  if (excluded(n, d, e)) return e;
  e.all = choices(n, d);
  const Ranking r = rank(n, d, floor, e.all);
  if (r.best >= 0) {
    const size_t b = u(r.best);
    e.ok = true;
    e.pick = e.all[b];
    e.standing = r.standing[b];
    e.kernel_us = r.us[b] + r.cast[b];
  }
  explain_choices(d, floor, r, e);
  return e;
}

// Bytes of non-constant values alive on a device when node `node_index` runs (conservatively:
// until the graph's last use of the value), plus resident constants. Placement asks at the node it
// places, where the running sums answer (debug builds, the sanitizer job's, check them against
// the count on small graphs); any other node is counted value by value.
uint64_t Planner::live_bytes(int d, int node_index) const {
  if (node_index != live_node_ || u(d) >= live_.size()) return count_live_bytes(d, node_index);
  assert(reps_.size() >= 4096 || count_live_bytes(d, node_index) == live_[u(d)]);
  return live_[u(d)];
}

uint64_t Planner::count_live_bytes(int d, int node_index) const {
  uint64_t live = 0;
  for (size_t gv = 0; gv < reps_.size(); ++gv) {
    const bool alive = is_output_[gv] || last_use_[gv] >= node_index;
    for (int r : reps_[gv]) {
      const PlanValue& v = plan_.values[u(r)];
      if (v.device != d || v.root != r) continue;
      if (v.constant || v.state || alive) live += v.storage_bytes();
    }
  }
  return live;
}

void Planner::count_live(int id) {
  const PlanValue& v = plan_.values[u(id)];
  if (v.graph_value < 0 || v.device < 0 || v.root != id) return;
  if (live_.size() < plan_.devices.size()) live_.resize(plan_.devices.size(), 0);
  const uint64_t bytes = v.storage_bytes();
  const int gv = v.graph_value;
  if (v.constant || v.state || is_output_[u(gv)]) {
    live_[u(v.device)] += bytes;
    return;
  }
  const int last = last_use_[u(gv)];
  if (last < live_node_) return;  // not alive at any node still to be placed
  live_[u(v.device)] += bytes;
  if (expiring_.size() <= u(last)) expiring_.resize(u(last) + 1);
  expiring_[u(last)].emplace_back(v.device, bytes);
}

void Planner::advance_live(int node_index) {
  for (; live_node_ < node_index; ++live_node_) {
    if (u(live_node_) >= expiring_.size()) continue;
    for (const auto& [d, bytes] : expiring_[u(live_node_)]) live_[u(d)] -= bytes;
    expiring_[u(live_node_)].clear();
  }
}

void Planner::cost(const GraphNode& n, int node_index, DeviceEval& e) const {
  const int d = e.device;
  const DeviceCaps& caps = dev(d).caps;
  double us = estimate_kernel_us(n.op, e.pick, caps, measured(d));
  // The output (none for a write in place: it is the state's storage).
  uint64_t bytes = written_state(n) >= 0
                       ? 0
                       : static_cast<uint64_t>(dtype_bytes(n.op.output.dtype, n.op.output.numel()));
  uint64_t largest = bytes;
  std::set<std::pair<int, DType>> seen;  // an input read twice (attention(x, x, x)) comes once
  std::set<int> moved_storage;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const int gv = n.inputs[i];
    const DType want =
        i < e.pick.input_dtypes.size() ? e.pick.input_dtypes[i] : n.op.inputs[i].dtype;
    if (find_rep(gv, d, want) || !seen.insert({gv, want}).second) continue;
    const uint64_t cast_bytes = static_cast<uint64_t>(dtype_bytes(want, n.op.inputs[i].numel()));
    bool here = false;
    for (int r : reps_[u(gv)]) here = here || plan_.values[u(r)].device == d;
    const int sv = storage_value(gv);
    for (int r : reps_[u(sv)]) here = here || plan_.values[u(r)].device == d;
    const bool first_move = !here && moved_storage.insert(sv).second;
    if (first_move && g_.value(sv).kind == ValueKind::state && state_value(sv) < 0) {
      // A state with no device yet: it would be allocated here.
      const uint64_t st = static_cast<uint64_t>(g_.value(sv).desc.nbytes());
      bytes += st;
      largest = std::max(largest, st);
    } else if (first_move) {
      // The cheapest source of the storage.
      double best = std::numeric_limits<double>::infinity();
      uint64_t moved = 0;
      for (int r : reps_[u(sv)]) {
        const PlanValue& v = plan_.values[u(r)];
        if (!owns_storage(r)) continue;
        const double t = v.constant && v.device == kHost
                             ? 0.0  // uploaded once, when the plan is loaded
                             : estimate_transfer_us(v.storage_bytes(), caps_of(v.device), &caps);
        if (t < best) {
          best = t;
          moved = v.storage_bytes();
        }
      }
      if (std::isfinite(best)) us += best;
      bytes += moved;
      largest = std::max(largest, moved);
    }
    if (n.op.inputs[i].dtype != want) {
      // A cast: an elementwise pass on this device.
      us += estimate_cast_us(cast_bytes, caps, measured(d));
      bytes += cast_bytes;
      largest = std::max(largest, cast_bytes);
    }
  }
  if (is_output_[u(n.output)])
    us += estimate_transfer_us(static_cast<uint64_t>(n.op.output.nbytes()), &caps, nullptr);
  // Moving the output to where the ops reading it ran in the previous round (make_plan).
  if (u(node_index) < readers_.size())
    for (int r : readers_[u(node_index)])
      if (r != d) {
        e.moves_us +=
            estimate_transfer_us(static_cast<uint64_t>(n.op.output.nbytes()), &caps, caps_of(r));
        e.output_moves.push_back(r);
      }
  e.est_us = us + e.moves_us;
  e.new_bytes = bytes;
  // The routes to one GPU share its memory: what the others hold counts too.
  uint64_t live = live_bytes(d, node_index);
  std::string shared;
  for (int o : other_routes(plan_.devices, d)) {
    live += live_bytes(o, node_index);
    shared += " with " + dev(o).id;
  }
  if (!shared.empty()) shared += " (the same GPU)";
  const uint64_t b = budget(d);
  if (caps.max_allocation > 0 && largest > caps.max_allocation) {
    e.fits = false;
    e.fit_reason = "a buffer of " + format_bytes(largest) + " exceeds " + dev(d).id +
                   "'s largest allocation (" + format_bytes(caps.max_allocation) + ")";
  } else if (b != std::numeric_limits<uint64_t>::max() && live + bytes > b) {
    e.fits = false;
    e.fit_reason = dev(d).id + shared + " would hold " + format_bytes(live + bytes) +
                   ", over its budget of " + format_bytes(b);
  }
}

Status Planner::choose_single_device() {
  // split=off: the cheapest device that can run every op.
  double best = std::numeric_limits<double>::infinity();
  std::string refusals;
  for (size_t d = 0; d < plan_.devices.size(); ++d) {
    double total = 0;
    bool all = true;
    for (const GraphNode& n : g_.nodes()) {
      if (is_view(n.kind())) continue;
      DeviceEval e = evaluate(n, static_cast<int>(d), PrecisionFloor(policy_, n.op));
      if (!e.ok) {
        refusals += (refusals.empty() ? "" : "; ") + dev(static_cast<int>(d)).id + " cannot run " +
                    std::string(op_name(n.kind())) + " '" + n.name + "' (" + e.why_not + ")";
        all = false;
        break;
      }
      total += e.kernel_us;
    }
    if (all && total < best) {
      best = total;
      single_ = static_cast<int>(d);
    }
  }
  if (single_ < 0)
    return Status(Code::unsupported, "graph '" + g_.name() +
                                         "': splitting is forbidden by policy (split=off) and no "
                                         "single device can run every op: " +
                                         refusals);
  return {};
}

// An op's placement, in three parts: decide which device, precision and tier run it (here),
// explain why in the step's reasons (explain.cpp), and rewrite the graph around the kernel: its
// inputs brought where and how it reads them, its output (rewrite.cpp).
Status Planner::place(int node_index) {
  advance_live(node_index);
  const GraphNode& n = g_.nodes()[u(node_index)];
  if (is_view(n.kind())) return {};  // made where their consumers need them
  const PrecisionFloor floor(policy_, n.op);
  DUET_ASSIGN_OR_RETURN(Placement p, decide(n, node_index, floor));
  PlanStep st = explain(n, node_index, floor, p);
  return rewrite(n, p.pick(), std::move(st));
}

// Every device evaluated and costed; the fastest that fits, or why none can run the op.
Result<Placement> Planner::decide(const GraphNode& n, int node_index,
                                  const PrecisionFloor& floor) const {
  Placement p;
  for (size_t d = 0; d < plan_.devices.size(); ++d)
    p.evals.push_back(evaluate(n, static_cast<int>(d), floor));

  // The fastest device that fits (a choice meeting the floor before a substitute on a tie,
  // then the earlier device).
  auto faster = [&](const DeviceEval& a, const DeviceEval& b) {
    if (a.est_us < b.est_us * (1 - 1e-9)) return true;
    return a.est_us <= b.est_us * (1 + 1e-9) && a.standing.kind < b.standing.kind;
  };
  for (DeviceEval& e : p.evals) {
    if (!e.ok) continue;
    cost(n, node_index, e);
    if (p.cheapest < 0 || faster(e, p.evals[u(p.cheapest)])) p.cheapest = e.device;
    if (!e.fits) continue;
    if (p.chosen < 0 || faster(e, p.evals[u(p.chosen)])) p.chosen = e.device;
  }
  if (p.cheapest < 0) {
    std::string why;
    for (const DeviceEval& e : p.evals)
      why += "\n  " + dname(e.device) + ": " + (e.why_not.empty() ? "no kernel" : e.why_not);
    std::string pol = policy_.str();
    return Err(Code::unsupported)
        .op(op_name(n.kind()), n.name)
        .note("cannot be placed on any device" +
              (pol.empty() ? std::string() : " under policy '" + pol + "'") + ":" + why);
  }
  if (p.chosen < 0) {
    std::string why;
    for (const DeviceEval& e : p.evals)
      if (e.ok) why += "\n  " + dname(e.device) + ": " + e.fit_reason;
    return Err(Code::out_of_memory)
        .op(op_name(n.kind()), n.name)
        .note("no device has memory for it" +
              std::string(policy_.split ? "" : " (splitting is forbidden by policy: split=off)") +
              ":" + why);
  }
  return p;
}

}  // namespace duet::planning
