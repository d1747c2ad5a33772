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
#include "planner.h"
#include "precision.h"

namespace duet::planning {

DeviceEval Planner::evaluate(const GraphNode& n, int d, const PrecisionFloor& floor) const {
  DeviceEval e;
  e.device = d;
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
    return e;
  }
  if (single_ >= 0 && d != single_) {
    e.denied = true;
    e.why_not = "the whole graph runs on " + dev(single_).id +
                (policy_.split ? " (estimated faster than spreading it)" : " (split=off)");
    return e;
  }
  // A state is written in place where it lives.
  if (const int st = written_state(n); st >= 0 && state_value(st) >= 0 && home_[u(st)] != d) {
    e.why_not =
        "writes state '" + g_.value(st).name + "' in place, which lives on " + dev(home_[u(st)]).id;
    Alternative a;
    a.device = pd.id;
    a.reason = e.why_not;
    e.alternatives.push_back(a);
    return e;
  }
  e.all = pd.rules ? pd.rules->choices(pd.caps, n.op) : std::vector<KernelChoice>{};
  // A quantized input is read in its blocks or not at all: a choice that would read it in
  // another dtype would have the planner insert a cast, a dequantized copy of the weight.
  for (KernelChoice& c : e.all)
    for (size_t i = 0; c.ok && i < n.op.inputs.size() && i < c.input_dtypes.size(); ++i)
      if (is_quantized(n.op.inputs[i].dtype) && c.input_dtypes[i] != n.op.inputs[i].dtype) {
        c.ok = false;
        c.reason = "reads '" + n.op.input_name(i) + "' as " +
                   std::string(dtype_name(c.input_dtypes[i])) + ": a " +
                   std::string(dtype_name(n.op.inputs[i].dtype)) +
                   " weight is never dequantized into memory (no kernel of this tier reads its "
                   "blocks)";
      }
  auto usable = [&](const KernelChoice& c) {
    return c.ok && policy_.tier_denied(pd.caps.backend, pd.id, c.tier).empty();
  };
  bool asked_here = false;
  for (const KernelChoice& c : e.all)
    asked_here = asked_here || (usable(c) && c.precision == floor.asked());
  // Every acceptable choice with its kernel's estimate; the fastest wins. Casts are left out of
  // this ranking: a value is converted once and then read by every op on the device (a bf16
  // graph on a device without bf16 runs in f16 after converting its values), so they weigh in
  // between devices (cost()), and here only to break a near tie (within 5%): fewer inputs to
  // cast from what exists, then a choice meeting the floor before a substitute, then the
  // backend's order.
  std::vector<Standing> standing;
  std::vector<double> us(e.all.size(), 0.0), cast(e.all.size(), 0.0);
  auto better = [&](size_t i, size_t b) {
    if (us[i] < us[b] * 0.95) return true;
    if (us[i] > us[b] * 1.05) return false;
    if (cast[i] != cast[b]) return cast[i] < cast[b];
    if (standing[i].kind != standing[b].kind) return standing[i].kind < standing[b].kind;
    // Then the precision the graph asks for (a bf16 graph's memory-bound matmul runs in bf16
    // where the device has bf16 dot products).
    const bool exact_i = e.all[i].precision == floor.asked(),
               exact_b = e.all[b].precision == floor.asked();
    if (exact_i != exact_b) return exact_i;
    return us[i] < us[b] * (1 - 1e-9);
  };
  int best = -1;
  for (size_t i = 0; i < e.all.size(); ++i) {
    const KernelChoice& c = e.all[i];
    standing.push_back(floor.judge(c, n.op, asked_here));
    if (!usable(c) || standing[i].kind == Standing::refused) continue;
    us[i] = estimate_kernel_us(n.op, c, pd.caps, &pd.measured);
    for (size_t k = 0; k < n.inputs.size() && k < c.input_dtypes.size(); ++k)
      if (available_dtype(n.inputs[k], d, c.input_dtypes[k]) != c.input_dtypes[k])
        cast[i] += estimate_cast_us(
            static_cast<uint64_t>(dtype_bytes(c.input_dtypes[k], n.op.inputs[k].numel())), pd.caps,
            &pd.measured);
    if (best < 0 || better(i, u(best))) best = static_cast<int>(i);
  }
  // Why each other choice lost.
  std::vector<std::string> reasons;  // for why_not
  for (size_t i = 0; i < e.all.size(); ++i) {
    const KernelChoice& c = e.all[i];
    if (static_cast<int>(i) == best) continue;
    Alternative a;
    a.device = pd.id;
    a.tier = c.tier;
    a.precision = c.precision;
    a.usable = c.ok;
    const std::string deny = policy_.tier_denied(pd.caps.backend, pd.id, c.tier);
    if (!c.ok) {
      a.reason = c.reason;
    } else if (!deny.empty()) {
      a.by_policy = true;
      a.term = deny;
      a.reason = "tier " + tname(c.tier) + " denied by policy (" + deny + ")";
      e.policy.push_back(deny);
    } else if (standing[i].kind == Standing::refused) {
      a.by_policy = standing[i].by_policy;
      a.term = standing[i].term;
      a.reason = standing[i].why;
      if (a.by_policy) e.policy.push_back(a.term);
    } else if (best >= 0) {
      const KernelChoice& b = e.all[u(best)];
      const bool near = us[i] <= us[u(best)] * 1.05;
      a.reason = !near ? "estimated " + format_us(us[i]) + " vs " + format_us(us[u(best)]) + " (" +
                             choice_name(b) + " chosen)"
                 : cast[i] > cast[u(best)]
                     ? "about as fast as " + choice_name(b) + " (" + format_us(us[i]) + " vs " +
                           format_us(us[u(best)]) + "), which needs fewer casts"
                 : standing[i].kind > standing[u(best)].kind
                     ? "about as fast as " + choice_name(b) + ", which meets the " +
                           pname(floor.asked()) + " asked"
                     : "backend prefers " + tname(b.tier) + " (listed first)";
    }
    e.alternatives.push_back(a);
    reasons.push_back(choice_name(c) + ": " + a.reason);
  }
  if (best < 0) {
    // One reason for every choice (no kernel image for the device's architecture) is said once.
    bool same = e.alternatives.size() > 1;
    for (const Alternative& a : e.alternatives) same = same && a.reason == e.alternatives[0].reason;
    std::string s;
    if (same)
      s = "all " + std::to_string(e.alternatives.size()) + " choices: " + e.alternatives[0].reason;
    else
      for (const std::string& r : reasons) s += (s.empty() ? "" : "; ") + r;
    e.why_not = s.empty() ? "the backend offers no kernel for this op" : s;
    return e;
  }
  e.ok = true;
  e.pick = e.all[u(best)];
  e.standing = standing[u(best)];
  e.kernel_us = us[u(best)] + cast[u(best)];
  // Tiers the backend ranks before the pick, and why they were not used.
  std::set<Tier> said;
  for (size_t i = 0; i < u(best); ++i) {
    const KernelChoice& c = e.all[i];
    if (c.tier == e.pick.tier || said.count(c.tier)) continue;
    // Prefer the explanation at the chosen precision, else the first seen.
    size_t at = i;
    for (size_t j = 0; j < u(best); ++j)
      if (e.all[j].tier == c.tier && e.all[j].precision == e.pick.precision) at = j;
    const KernelChoice& x = e.all[at];
    std::string why;
    const std::string deny = policy_.tier_denied(pd.caps.backend, pd.id, x.tier);
    if (!x.ok)
      why = x.reason;
    else if (!deny.empty())
      why = "denied by policy (" + deny + ")";
    else if (standing[at].kind == Standing::refused)
      why = standing[at].why;
    else
      why = "estimated " + format_us(us[at]) + " vs " + format_us(e.kernel_us);
    e.skipped.push_back(tname(c.tier) + " skipped: " + why);
    said.insert(c.tier);
  }
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
  const uint64_t live = live_bytes(d, node_index);
  const uint64_t b = budget(d);
  if (caps.max_allocation > 0 && largest > caps.max_allocation) {
    e.fits = false;
    e.fit_reason = "a buffer of " + format_bytes(largest) + " exceeds " + dev(d).id +
                   "'s largest allocation (" + format_bytes(caps.max_allocation) + ")";
  } else if (b != std::numeric_limits<uint64_t>::max() && live + bytes > b) {
    e.fits = false;
    e.fit_reason = dev(d).id + " would hold " + format_bytes(live + bytes) +
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

Status Planner::place(int node_index) {
  advance_live(node_index);
  const GraphNode& n = g_.nodes()[u(node_index)];
  if (is_view(n.kind())) return {};  // made where their consumers need them
  const PrecisionFloor floor(policy_, n.op);
  const Precision asked = floor.asked();
  const auto& forced = floor.forced();
  std::vector<DeviceEval> evals;
  for (size_t d = 0; d < plan_.devices.size(); ++d)
    evals.push_back(evaluate(n, static_cast<int>(d), floor));

  // The fastest device that fits (a choice meeting the floor before a substitute on a tie,
  // then the earlier device).
  auto faster = [&](const DeviceEval& a, const DeviceEval& b) {
    if (a.est_us < b.est_us * (1 - 1e-9)) return true;
    return a.est_us <= b.est_us * (1 + 1e-9) && a.standing.kind < b.standing.kind;
  };
  int chosen = -1, cheapest = -1;
  for (DeviceEval& e : evals) {
    if (!e.ok) continue;
    cost(n, node_index, e);
    if (cheapest < 0 || faster(e, evals[u(cheapest)])) cheapest = e.device;
    if (!e.fits) continue;
    if (chosen < 0 || faster(e, evals[u(chosen)])) chosen = e.device;
  }
  const std::string what = std::string(op_name(n.kind())) + " '" + n.name + "'";
  if (cheapest < 0) {
    std::string why;
    for (const DeviceEval& e : evals)
      why += "\n  " + dname(e.device) + ": " + (e.why_not.empty() ? "no kernel" : e.why_not);
    std::string pol = policy_.str();
    return Err(Code::unsupported)
        .op(op_name(n.kind()), n.name)
        .note("cannot be placed on any device" +
              (pol.empty() ? std::string() : " under policy '" + pol + "'") + ":" + why);
  }
  if (chosen < 0) {
    std::string why;
    for (const DeviceEval& e : evals)
      if (e.ok) why += "\n  " + dname(e.device) + ": " + e.fit_reason;
    return Err(Code::out_of_memory)
        .op(op_name(n.kind()), n.name)
        .note("no device has memory for it" +
              std::string(policy_.split ? "" : " (splitting is forbidden by policy: split=off)") +
              ":" + why);
  }
  DeviceEval& e = evals[u(chosen)];
  const int d = chosen;

  PlanStep st;
  st.kind = StepKind::kernel;
  st.name = n.name;
  st.node = node_index;
  st.device = d;
  st.requested = forced ? *forced : asked;
  st.est_us = e.est_us - e.moves_us;  // the moves are steps of their own
  st.est_basis = estimate_basis(n.op, e.pick, dev(d).caps, measured(d));
  st.skipped = e.skipped;

  // Why this device.
  int usable = 0;
  for (const DeviceEval& x : evals) usable += x.ok ? 1 : 0;
  if (single_ >= 0) {
    st.device_reason = "the whole graph runs on " + dev(d).id +
                       (policy_.split ? ": estimated faster than placing op by op (see the notes)"
                                      : " (policy split=off)");
  } else if (usable == 1) {
    st.device_reason = "the only device that can run it";
  } else {
    st.device_reason = "estimated " + format_us(e.est_us);
    if (!e.output_moves.empty()) {
      std::string to;
      for (int r : e.output_moves) to += (to.empty() ? "" : ", ") + dev(r).id;
      st.device_reason += " with moving its output to " + to + ", where the ops reading it run";
    } else if (u(node_index) < readers_.size() && !readers_[u(node_index)].empty()) {
      st.device_reason += " (the ops reading it run here too)";
    }
    if (cheapest != d && !evals[u(cheapest)].fits) {
      st.device_reason +=
          "; " + evals[u(cheapest)].fit_reason + ", so the work moves to " + dev(d).id;
      plan_.notes.push_back(what + " moved from " + dev(cheapest).id + " to " + dev(d).id + ": " +
                            evals[u(cheapest)].fit_reason);
    } else {
      st.device_reason += ", the lowest of " + std::to_string(usable) + " devices";
    }
  }
  // Why this precision.
  const std::string picked = pname(e.pick.precision);
  if (forced) {
    st.precision_reason = pname(*forced) + " forced by policy (" + floor.forced_term() + ")";
    if (!floor.data_movement() && significant_bits(*forced) < significant_bits(asked))
      st.precision_reason += ", below the " + pname(asked) + " the graph asks for (" +
                             std::to_string(significant_bits(*forced)) + " significant bits of " +
                             std::to_string(significant_bits(asked)) + ")";
    st.policy.push_back(floor.forced_term() + " set the precision to " + pname(*forced));
  } else if (e.pick.precision == asked) {
    st.precision_reason = pname(asked) + " as the graph asks";
  } else if (floor.data_movement()) {
    st.precision_reason = picked + " (data movement; the backend's kernel)";
  } else if (e.standing.kind == Standing::meets) {
    st.precision_reason = pname(asked) + " asked; " + picked +
                          " is at least as precise (the precision asked is a floor) and is the "
                          "fastest acceptable kernel on " +
                          dev(d).id;
    std::string refused;  // kernels at the precision asked that the device cannot run
    for (const KernelChoice& c : e.all)
      if (c.precision == asked && !c.ok)
        refused += (refused.empty() ? "" : "; ") + choice_name(c) + ": " + c.reason;
    if (!refused.empty()) st.precision_reason += " (" + refused + ")";
  } else if (e.standing.term == "fallback=f16") {
    std::string missing;
    for (const KernelChoice& c : e.all)
      if (c.precision == asked)
        missing += (missing.empty() ? "" : "; ") + tname(c.tier) + " " + pname(asked) + ": " +
                   (c.ok ? "denied by policy" : c.reason);
    st.precision_reason = pname(asked) + " asked, but " + dev(d).id + " has no " + pname(asked) +
                          " kernel for it" + (missing.empty() ? "" : " (" + missing + ")") + "; " +
                          picked + " with f32 accumulation instead (fallback=f16)";
  } else {
    st.precision_reason = pname(asked) + " asked; " + e.standing.why + ", and estimated faster";
    st.policy.push_back(e.standing.term + " allowed " + picked + " below the " + pname(asked) +
                        " asked");
  }
  st.tier_reason = tname(e.pick.tier) + ": " + e.pick.reason;
  // What each policy term removed, one line per term.
  std::vector<std::pair<std::string, std::string>> removed;  // term -> "cuda:0 flash bf16, ..."
  auto note_removed = [&](const std::string& term, const std::string& item) {
    for (auto& [t, list] : removed)
      if (t == term) {
        list += ", " + item;
        return;
      }
    removed.emplace_back(term, item);
  };
  for (const DeviceEval& x : evals) {
    for (const Alternative& a : x.alternatives) {
      st.rejected.push_back(a);
      if (a.by_policy && !a.term.empty())
        note_removed(a.term, !a.tier ? a.device + " (the device)"
                                     : a.device + " " + tname(*a.tier) + " " + pname(a.precision));
    }
    if (x.device != d && x.ok) {
      Alternative a;
      a.device = dev(x.device).id;
      a.tier = x.pick.tier;
      a.precision = x.pick.precision;
      a.usable = true;
      a.reason = !x.fits ? x.fit_reason
                         : "estimated " + format_us(x.est_us) + " vs " + format_us(e.est_us) +
                               " on " + dev(d).id;
      st.rejected.push_back(a);
    }
    if (x.device != d && x.denied && single_ >= 0 && x.device != single_) {
      Alternative a;
      a.device = dev(x.device).id;
      a.by_policy = !policy_.split;
      a.term = policy_.split ? "" : "split=off";
      a.reason = x.why_not;
      st.rejected.push_back(a);
    }
  }
  for (const auto& [term, list] : removed) st.policy.push_back(term + " removed " + list);

  // States this op reads or writes first are allocated on its device.
  for (int in : n.inputs)
    if (const int sv = storage_value(in); g_.value(sv).kind == ValueKind::state) home_state(sv, d);
  const int written = written_state(n);

  // Inputs, cast and copied as the kernel needs them.
  std::vector<int> ins;
  std::vector<TensorDesc> descs;
  std::vector<std::string> names;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const DType want =
        i < e.pick.input_dtypes.size() ? e.pick.input_dtypes[i] : n.op.inputs[i].dtype;
    DUET_ASSIGN_OR_RETURN(int r, need(n.inputs[i], d, want, what));
    ins.push_back(r);
    descs.push_back(plan_.values[u(r)].desc);
    names.push_back(g_.value(n.inputs[i]).name);
  }
  auto op = make_op(n.kind(), n.op.attrs, descs, names, n.name);
  if (!op.ok())
    return Status(Code::internal, op.status().message())
        .with_context("planner: " + what + " with the kernel's input dtypes on " + dev(d).id);
  // The launch shape for the op as executed (its dtypes and strides), when the backend agrees.
  KernelChoice choice = e.pick;
  bool agreed = false;
  std::string refusal;
  for (KernelChoice& c : dev(d).rules->choices(dev(d).caps, *op)) {
    if (c.tier != e.pick.tier || c.precision != e.pick.precision) continue;
    if (c.ok) {
      choice = std::move(c);
      agreed = true;
      break;
    }
    refusal = c.reason;
  }
  if (!agreed)
    plan_.notes.push_back(
        what + " on " + dev(d).id + ": the backend " +
        (refusal.empty()
             ? std::string("does not list ") + tname(e.pick.tier) + " " + pname(e.pick.precision)
             : "refuses " + tname(e.pick.tier) + " (" + refusal + ")") +
        " for the op as executed (" + describe(*op) +
        "); the launch shape is the one chosen for the graph's op");
  bool constant = true;
  for (int r : ins) constant = constant && plan_.values[u(r)].constant;
  home_[u(n.output)] = d;
  PlanValue out;
  out.name = rep_name(n.output, d, op->output.dtype);
  out.desc = op->output;
  out.device = d;
  out.graph_value = n.output;
  out.constant = constant;
  if (written >= 0) {
    // In place: the output is the state's storage.
    const int sv = state_value(written);
    if (ins[0] != sv)
      return Status(Code::internal, "planner: " + what + " on " + dev(d).id +
                                        " does not read state '" + g_.value(written).name +
                                        "' as it is stored (" + choice_name(choice) + ")");
    out.root = sv;
    out.constant = false;
    constant = false;
  }
  st.once = constant;
  st.inputs = std::move(ins);
  st.op = PlannedOp{std::move(*op), std::move(choice)};
  st.output = add_value(std::move(out));
  add_step(std::move(st));
  return {};
}

}  // namespace duet::planning
