// Why the op runs where and how it does, in the step's words: the device against the others,
// the precision against the one asked, the tier, what each policy term removed, and every
// alternative with the reason it lost. A device chosen for lack of memory elsewhere is noted.
#include <set>

#include "duet/planner.h"
#include "planner_state.h"

namespace duet::planning {

// Why each choice of device d other than the pick lost (with the policy terms that removed
// some), and either why none is usable or the tiers the backend ranks before the pick that were
// skipped.
void Planner::explain_choices(int d, const PrecisionFloor& floor, const Ranking& r,
                              DeviceEval& e) const {
  const PlanDevice& pd = dev(d);
  const int best = r.best;
  const std::vector<Standing>& standing = r.standing;
  const std::vector<double>& us = r.us;
  const std::vector<double>& cast = r.cast;
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
      const KernelChoice& b = e.pick;
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
      for (const std::string& line : reasons) s += (s.empty() ? "" : "; ") + line;
    e.why_not = s.empty() ? "the backend offers no kernel for this op" : s;
    return;
  }
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
}

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
