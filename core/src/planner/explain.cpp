// Why the op runs where and how it does, in the step's words: the device against the others,
// the precision against the one asked, the tier, what each policy term removed, and every
// alternative with the reason it lost. A device chosen for lack of memory elsewhere is noted.
#include "duet/planner.h"
#include "planner_state.h"

namespace duet::planning {

PlanStep Planner::explain(const GraphNode& n, int node_index, const PrecisionFloor& floor,
                          const Placement& p) {
  const DeviceEval& e = p.pick();
  const int d = p.chosen;
  const Precision asked = floor.asked();
  const auto& forced = floor.forced();
  const std::string what = std::string(op_name(n.kind())) + " '" + n.name + "'";

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
  for (const DeviceEval& x : p.evals) usable += x.ok ? 1 : 0;
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
    if (p.cheapest != d && !p.evals[u(p.cheapest)].fits) {
      st.device_reason +=
          "; " + p.evals[u(p.cheapest)].fit_reason + ", so the work moves to " + dev(d).id;
      plan_.notes.push_back(what + " moved from " + dev(p.cheapest).id + " to " + dev(d).id + ": " +
                            p.evals[u(p.cheapest)].fit_reason);
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
  for (const DeviceEval& x : p.evals) {
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
  return st;
}

}  // namespace duet::planning
