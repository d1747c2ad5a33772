// The cluster planner: where a graph is cut into pipeline stages over the ranks of a distributed
// run (duet/cluster.h). Each rank's cost of each node comes from the ordinary planner on that
// rank's devices; a dynamic program over (last rank used, nodes covered) finds the cheapest split
// in rank order whose stages fit their ranks' memory.
#include "duet/cluster.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

#include "duet/planner.h"
#include "planner_state.h"

namespace duet {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// What the split needs to know of the graph, per value and per node.
struct Facts {
  std::vector<char> const_only;  // values computed from constants alone (recomputed, never sent)
  std::vector<char> of_state;    // a state or a value aliasing one (a cut must not cross it)
  std::vector<int> last_use;     // per value: the last node reading it (-1: none)
  std::vector<std::vector<int>> constants;  // per node: constants it reads, through const_only
  std::vector<std::vector<int>> inputs;     // per node: graph inputs it reads
  std::vector<std::vector<int>> states;     // per node: states it reads
  // Per cut position i (between node i-1 and node i): the values that cross it.
  std::vector<std::vector<int>> live;
  // Per cut position: whether it falls between two nodes using one state (its cache would be
  // on two ranks).
  std::vector<char> splits_state;
};

Facts facts_of(const Graph& g) {
  Facts f;
  const size_t nv = g.values().size(), nn = g.nodes().size();
  f.const_only.assign(nv, 0);
  f.of_state.assign(nv, 0);
  f.last_use = g.last_uses();
  f.constants.resize(nn);
  f.inputs.resize(nn);
  f.states.resize(nn);
  std::vector<std::vector<int>> const_deps(nv);  // constants a const_only value derives from
  for (size_t v = 0; v < nv; ++v) {
    const GraphValue& gv = g.values()[v];
    if (gv.kind == ValueKind::constant) {
      f.const_only[v] = 1;
      const_deps[v] = {static_cast<int>(v)};
    }
    if (gv.kind == ValueKind::state) f.of_state[v] = 1;
  }
  for (size_t n = 0; n < nn; ++n) {
    const GraphNode& node = g.nodes()[n];
    bool all_const = !node.inputs.empty();
    bool state = false;
    for (int in : node.inputs) {
      const GraphValue& gv = g.value(in);
      all_const = all_const && f.const_only[u(in)];
      if (f.const_only[u(in)])
        for (int c : const_deps[u(in)]) f.constants[n].push_back(c);
      if (gv.kind == ValueKind::input) f.inputs[n].push_back(in);
      if (gv.kind == ValueKind::state) f.states[n].push_back(in);
      // A write into a state, and views of what aliases a state, alias it too.
      if (f.of_state[u(in)] && (node.kind() == OpKind::write_slice || is_view(node.kind())))
        state = true;
    }
    auto& cs = f.constants[n];
    std::sort(cs.begin(), cs.end());
    cs.erase(std::unique(cs.begin(), cs.end()), cs.end());
    f.const_only[u(node.output)] = all_const ? 1 : 0;
    if (all_const) const_deps[u(node.output)] = cs;
    f.of_state[u(node.output)] = state ? 1 : 0;
  }
  f.splits_state.assign(nn + 1, 0);
  std::map<int, std::pair<int, int>> users;  // state -> first and last node using it
  for (size_t n = 0; n < nn; ++n)
    for (int st : f.states[n]) {
      auto [it, fresh] = users.try_emplace(st, static_cast<int>(n), static_cast<int>(n));
      if (!fresh) it->second.second = static_cast<int>(n);
    }
  for (const auto& [st, span] : users)
    for (int cut = span.first + 1; cut <= span.second; ++cut) f.splits_state[u(cut)] = 1;
  f.live.resize(nn + 1);
  for (size_t v = 0; v < nv; ++v) {
    const GraphValue& gv = g.values()[v];
    if (gv.kind != ValueKind::intermediate || f.const_only[v] || f.last_use[v] < 0) continue;
    for (int cut = gv.producer + 1; cut <= f.last_use[v]; ++cut)
      f.live[u(cut)].push_back(static_cast<int>(v));
  }
  return f;
}

// Whether the graph may be cut before node `cut`: no state (a KV cache) crosses it.
bool cut_allowed(const Facts& f, int cut) {
  if (f.splits_state[u(cut)]) return false;
  for (int v : f.live[u(cut)])
    if (f.of_state[u(v)]) return false;
  return true;
}

uint64_t bytes_of(const Graph& g, int v) {
  return static_cast<uint64_t>(g.value(v).desc.nbytes());
}

Status check_ranges(const Graph& g, const Facts& f, const std::vector<StageRange>& ranges) {
  const int n = static_cast<int>(g.nodes().size());
  int at = 0, last_rank = -1;
  for (const StageRange& r : ranges) {
    if (r.begin != at || r.end <= r.begin || r.rank <= last_rank)
      return Status(Code::invalid_argument,
                    "cluster stages: rank " + std::to_string(r.rank) + " nodes [" +
                        std::to_string(r.begin) + ", " + std::to_string(r.end) +
                        "): expected non-empty ranges covering the nodes in order, one per rank "
                        "in rank order");
    if (r.begin > 0 && !cut_allowed(f, r.begin))
      return Status(Code::invalid_argument, "cluster stages: a cut before node '" +
                                                g.nodes()[u(r.begin)].name +
                                                "' would separate a state from the nodes using it");
    at = r.end;
    last_rank = r.rank;
  }
  if (at != n)
    return Status(Code::invalid_argument, "cluster stages: the ranges cover " + std::to_string(at) +
                                              " of " + std::to_string(n) + " nodes");
  return Status::ok_status();
}

std::vector<Stage> flows(const Graph& g, const Facts& f, const std::vector<StageRange>& ranges) {
  std::vector<Stage> stages;
  for (const StageRange& r : ranges) {
    Stage s;
    s.range = r;
    std::set<int> nodes, inputs;
    // Constant-only values read from before the range: their producing nodes, recursively.
    std::vector<int> todo;
    for (int n = r.begin; n < r.end; ++n) {
      nodes.insert(n);
      for (int in : g.nodes()[u(n)].inputs) todo.push_back(in);
    }
    while (!todo.empty()) {
      const int v = todo.back();
      todo.pop_back();
      const GraphValue& gv = g.value(v);
      if (gv.kind == ValueKind::input) inputs.insert(v);
      if (gv.kind != ValueKind::intermediate || !f.const_only[u(v)] || gv.producer >= r.begin)
        continue;
      if (nodes.insert(gv.producer).second)
        for (int in : g.nodes()[u(gv.producer)].inputs) todo.push_back(in);
    }
    s.nodes.assign(nodes.begin(), nodes.end());
    s.inputs.assign(inputs.begin(), inputs.end());
    s.receives = f.live[u(r.begin)];
    s.sends = f.live[u(r.end)];
    for (int o : g.outputs()) {
      const GraphValue& gv = g.value(o);
      if (gv.producer >= r.begin && gv.producer < r.end &&
          std::find(s.outputs.begin(), s.outputs.end(), o) == s.outputs.end())
        s.outputs.push_back(o);
    }
    stages.push_back(std::move(s));
  }
  return stages;
}

// Crossings of the stages: inputs from rank 0, activations stage to stage, outputs to rank 0.
std::vector<Crossing> crossings_of(const Graph& g, const std::vector<Stage>& stages,
                                   const Cluster* cluster) {
  std::vector<Crossing> out;
  auto add = [&](int v, int from, int to, Crossing::Kind kind) {
    if (from == to) return;
    Crossing c;
    c.value = v;
    c.from_rank = from;
    c.to_rank = to;
    c.bytes = bytes_of(g, v);
    c.kind = kind;
    if (cluster) c.est_us = cluster->links[u(from)][u(to)].cost_us(c.bytes);
    out.push_back(c);
  };
  for (size_t i = 0; i < stages.size(); ++i) {
    const Stage& s = stages[i];
    for (int v : s.inputs) add(v, 0, s.range.rank, Crossing::Kind::input);
    if (i > 0)
      for (int v : s.receives)
        add(v, stages[i - 1].range.rank, s.range.rank, Crossing::Kind::activation);
    for (int v : s.outputs) add(v, s.range.rank, 0, Crossing::Kind::output);
  }
  return out;
}

// One way a rank may run a stage: on all its devices or on one alone, with what the cost model
// says each node costs there (its kernel steps, and the casts and copies inserted before them) and
// where each node runs. Planned with memory lifted: the split checks each stage's weights and
// states against the memory pools of the devices its nodes run on.
struct Variant {
  std::vector<double> prefix;  // prefix sums of node costs (empty: cannot plan the graph)
  // The same while the other ranks of its host compute too (pipelined runs): a node on the CPU
  // or an integrated GPU at the host's rate divided among its ranks.
  std::vector<double> shared_prefix;
  std::vector<int> pool;         // per node: the memory pool of the device it runs on (-1: none)
  std::vector<uint64_t> budget;  // per pool (0: no stated limit)
  std::vector<std::string> pool_names;
  Plan plan;
  std::string why;  // why it cannot plan
};

// A device's memory for weights and states: its budget; host memory shared by the ranks on its
// host (`sharing` of them), so that it is not counted once per rank.
uint64_t device_budget(const PlanDevice& d, const Policy& policy, int sharing) {
  const auto stated = policy.budget_for(d.caps.backend, d.id);
  uint64_t b = stated ? *stated : d.caps.memory_bytes - planning::memory_reserve(d.caps);
  if (d.caps.type != DeviceType::discrete_gpu && sharing > 1) b /= static_cast<uint64_t>(sharing);
  return b;
}

Variant plan_variant(const Graph& g, std::vector<PlanDevice> devices, const Policy& policy,
                     int sharing, int rank) {
  Variant v;
  // Pools: each discrete GPU its own; the CPU and integrated GPUs share host memory (counted once).
  std::vector<int> pool_of(devices.size());
  int host_pool = -1;
  for (size_t d = 0; d < devices.size(); ++d) {
    const uint64_t b = device_budget(devices[d], policy, sharing);
    if (devices[d].caps.type == DeviceType::discrete_gpu || host_pool < 0) {
      pool_of[d] = static_cast<int>(v.budget.size());
      if (devices[d].caps.type != DeviceType::discrete_gpu) host_pool = pool_of[d];
      v.budget.push_back(b);
      v.pool_names.push_back(rank_device_id(rank, devices[d].id));
    } else {
      pool_of[d] = host_pool;
      v.budget[u(host_pool)] = std::max(v.budget[u(host_pool)], b);
      v.pool_names[u(host_pool)] += "+" + devices[d].id;
    }
    devices[d].caps.memory_bytes = 0;
    devices[d].caps.max_allocation = 0;
  }
  Policy unlimited = policy;
  unlimited.budget.reset();
  unlimited.budgets.clear();
  Result<Plan> plan = make_plan(g, devices, unlimited);
  if (!plan.ok()) {
    v.why = plan.status().message();
    return v;
  }
  std::vector<double> cost(g.nodes().size(), 0.0), shared(g.nodes().size(), 0.0);
  v.pool.assign(g.nodes().size(), -1);
  double pending = 0;
  for (const PlanStep& st : plan->steps) {
    if (st.kind == StepKind::kernel && st.node >= 0) v.pool[u(st.node)] = pool_of[u(st.device)];
    if (st.once) continue;
    if (st.node >= 0 && st.kind == StepKind::kernel) {
      const bool host = plan->devices[u(st.device)].caps.type != DeviceType::discrete_gpu;
      cost[u(st.node)] += st.est_us + pending;
      shared[u(st.node)] += (st.est_us + pending) * (host ? sharing : 1);
      pending = 0;
    } else {
      pending += st.est_us;
    }
  }
  if (!cost.empty()) {
    cost.back() += pending;
    shared.back() += pending;
  }
  v.prefix.assign(cost.size() + 1, 0.0);
  v.shared_prefix.assign(cost.size() + 1, 0.0);
  for (size_t n = 0; n < cost.size(); ++n) {
    v.prefix[n + 1] = v.prefix[n] + cost[n];
    v.shared_prefix[n + 1] = v.shared_prefix[n] + shared[n];
  }
  v.plan = std::move(*plan);
  return v;
}

// The memory a growing stage holds on each pool of each variant of its rank: weights and states
// of its nodes, each counted once per pool.
// Marks of what a stage holds, per variant, pool and value: reused by every stage a rank tries
// (a stage counts a value once where its mark is not yet the stage's generation).
struct Marks {
  std::vector<std::vector<std::vector<int>>> seen;
  int generation = 0;
  Marks(const Graph& g, const std::vector<Variant>& vs) : seen(vs.size()) {
    for (size_t i = 0; i < vs.size(); ++i)
      seen[i].assign(vs[i].budget.size(), std::vector<int>(g.values().size(), -1));
  }
};

class StageMemory {
 public:
  StageMemory(const Graph& g, const Facts& f, const std::vector<Variant>& vs, Marks& marks)
      : g_(g), f_(f), vs_(vs), held_(vs.size()), marks_(marks), gen_(++marks.generation) {
    for (size_t i = 0; i < vs.size(); ++i) held_[i].assign(vs[i].budget.size(), 0);
  }
  void add(int n) {
    for (size_t i = 0; i < vs_.size(); ++i) {
      if (vs_[i].prefix.empty()) continue;
      const int pool = vs_[i].pool[u(n)];
      if (pool < 0) continue;  // a view: its readers hold what it reads
      auto hold = [&](int v) {
        int& mark = marks_.seen[i][u(pool)][u(v)];
        if (mark == gen_) return;
        mark = gen_;
        held_[i][u(pool)] += static_cast<uint64_t>(g_.value(v).desc.nbytes());
      };
      for (int c : f_.constants[u(n)]) hold(c);
      for (int s : f_.states[u(n)]) hold(s);
    }
  }
  bool fits(size_t i) const {
    if (vs_[i].prefix.empty()) return false;
    for (size_t p = 0; p < held_[i].size(); ++p)
      if (vs_[i].budget[p] && held_[i][p] > vs_[i].budget[p]) return false;
    return true;
  }
  // "rank1/cuda:0 20.1 GiB of 21.8 GiB; ..." for variant i.
  std::string describe(size_t i) const {
    std::string out;
    for (size_t p = 0; p < held_[i].size(); ++p) {
      if (!held_[i][p]) continue;
      out += (out.empty() ? "" : "; ") + vs_[i].pool_names[p] + " " + format_bytes(held_[i][p]) +
             " of " + (vs_[i].budget[p] ? format_bytes(vs_[i].budget[p]) : std::string("any"));
    }
    return out.empty() ? std::string("nothing") : out;
  }

 private:
  const Graph& g_;
  const Facts& f_;
  const std::vector<Variant>& vs_;
  std::vector<std::vector<uint64_t>> held_;
  Marks& marks_;
  int gen_;
};

std::string node_name(const Graph& g, int n) {
  return "'" + g.nodes()[u(n)].name + "'";
}

}  // namespace

double ClusterLink::cost_us(uint64_t bytes) const {
  return latency_us + (gbps > 0 ? static_cast<double>(bytes) / (gbps * 1e3) : 0.0);
}

std::vector<StageRange> ClusterPlan::ranges() const {
  std::vector<StageRange> r;
  for (const Stage& s : stages) r.push_back(s.range);
  return r;
}

std::string rank_device_id(int rank, std::string_view id) {
  return "rank" + std::to_string(rank) + "/" + std::string(id);
}

Result<ClusterPlan> cluster_stages(const Graph& graph, std::vector<StageRange> ranges) {
  const Facts f = facts_of(graph);
  DUET_TRY(check_ranges(graph, f, ranges));
  ClusterPlan p;
  p.graph = graph.name();
  p.stages = flows(graph, f, ranges);
  p.crossings = crossings_of(graph, p.stages, nullptr);
  return p;
}

Result<ClusterPlan> plan_cluster(const Graph& graph, const Cluster& cluster, const Policy& policy,
                                 const ClusterOptions& options) {
  const int R = static_cast<int>(cluster.ranks.size());
  const int N = static_cast<int>(graph.nodes().size());
  if (R == 0 || N == 0)
    return Status(Code::invalid_argument, "cluster plan: needs at least one rank and one node");
  if (cluster.links.size() != u(R))
    return Status(Code::invalid_argument, "cluster plan: links for " +
                                              std::to_string(cluster.links.size()) +
                                              " ranks, expected " + std::to_string(R));
  const Facts f = facts_of(graph);

  ClusterPlan p;
  p.graph = graph.name();
  // Ranks on one host share its memory.
  std::map<std::string, int> on_host;
  for (const ClusterRank& cr : cluster.ranks) ++on_host[cr.host];
  std::vector<std::vector<Variant>> variants(u(R));
  std::vector<Marks> marks;
  for (int r = 0; r < R; ++r) {
    const ClusterRank& cr = cluster.ranks[u(r)];
    const int sharing = on_host[cr.host];
    std::string devices;
    for (const PlanDevice& d : cr.devices) devices += (devices.empty() ? "" : ", ") + d.id;
    p.ranks.push_back("rank" + std::to_string(r) + " (" + cr.host + "): " + devices +
                      (sharing > 1 ? "; host memory shared with " + std::to_string(sharing - 1) +
                                         " other rank(s) on " + cr.host
                                   : std::string()));
    for (int t = 0; t < R; ++t) {
      if (t == r) continue;
      const ClusterLink& l = cluster.links[u(r)][u(t)];
      char b[200];
      std::snprintf(b, sizeof b, "rank%d -> rank%d: %.1f us + %.3g GB/s (%s)", r, t, l.latency_us,
                    l.gbps, l.source.empty() ? "given" : l.source.c_str());
      p.links.push_back(b);
    }
    // All its devices (the rank's own planner spreads the stage), and each device alone.
    variants[u(r)].push_back(plan_variant(graph, cr.devices, policy, sharing, r));
    if (cr.devices.size() > 1)
      for (const PlanDevice& d : cr.devices)
        variants[u(r)].push_back(plan_variant(graph, {d}, policy, sharing, r));
    marks.emplace_back(graph, variants[u(r)]);
    bool any = false;
    for (const Variant& v : variants[u(r)]) any = any || !v.prefix.empty();
    if (!any)
      p.notes.push_back("rank" + std::to_string(r) +
                        " cannot run the graph's ops: " + variants[u(r)][0].why);
  }
  // The least time of [b, e) on rank r among its variants whose memory holds the stage, and
  // which variant (-1: none holds it).
  // With `shared`, at the rate its host's CPU gives it while the host's other ranks compute too.
  auto stage_on = [&](int r, int b, int e, const StageMemory& m,
                      bool shared = false) -> std::pair<double, int> {
    std::pair<double, int> best_v{kInf, -1};
    const auto& vs = variants[u(r)];
    for (size_t i = 0; i < vs.size(); ++i) {
      if (!m.fits(i)) continue;
      const auto& prefix = shared ? vs[i].shared_prefix : vs[i].prefix;
      const double t = prefix[u(e)] - prefix[u(b)];
      if (t < best_v.first) best_v = {t, static_cast<int>(i)};
    }
    return best_v;
  };

  // What the values crossing a cut cost over a link.
  auto cut_us = [&](int c, int from, int to) {
    double t = 0;
    for (int v : f.live[u(c)]) t += cluster.links[u(from)][u(to)].cost_us(bytes_of(graph, v));
    return t;
  };

  // The stage of rank r over [b, e): compute, inputs from rank 0, outputs to rank 0; kInf where
  // it does not fit the rank's budget (weights and states, each counted once).
  std::vector<int> stamp(graph.values().size(), -1);
  int stamp_id = 0;
  std::vector<char> is_output(graph.values().size(), 0);
  for (int o : graph.outputs()) is_output[u(o)] = 1;

  // A split's figures so far: one run's time (stages and crossings one after the other) and, runs
  // pipelined, the time per run of its slowest stage or link. Ordered by the one planned for
  // (options.pipelined), ties broken by the other.
  struct Cost {
    double run = kInf, pipe = kInf;
  };
  const bool piped = options.pipelined;
  auto better = [piped](const Cost& a, const Cost& b) {
    const double ka = piped ? a.pipe : a.run, kb = piped ? b.pipe : b.run;
    return ka < kb || (ka == kb && (piped ? a.run < b.run : a.pipe < b.pipe));
  };
  auto then = [](const Cost& a, double run, double pipe) {
    return Cost{a.run + run, std::max(a.pipe, pipe)};
  };
  // best[r][i]: the least cost with the last stage on rank r ending at node i; from[r][i] its
  // stage's start and the rank before it (-1: the first stage).
  std::vector<std::vector<Cost>> best(u(R), std::vector<Cost>(u(N) + 1));
  std::vector<std::vector<std::pair<int, int>>> from(
      u(R), std::vector<std::pair<int, int>>(u(N) + 1, {-1, -1}));
  std::vector<double> single(u(R), kInf);
  for (int b = 0; b < N; ++b) {
    if (b > 0 && !cut_allowed(f, b)) continue;
    for (int r = 0; r < R; ++r) {
      // Predecessors: the start (b == 0), or a stage on a rank before r ending at b.
      std::vector<std::pair<Cost, int>> preds;
      if (b == 0) {
        if (!options.every_rank || r == 0) preds.emplace_back(Cost{0, 0}, -1);
      } else {
        for (int k = 0; k < r; ++k) {
          if (options.every_rank && k != r - 1) continue;
          if (best[u(k)][u(b)].run < kInf) {
            const double cut = cut_us(b, k, r);
            preds.emplace_back(then(best[u(k)][u(b)], cut, cut), k);
          }
        }
      }
      // A rank with no way in is still tried from the start, for its single-rank estimate.
      if (preds.empty() && b != 0) continue;
      ++stamp_id;
      StageMemory memory(graph, f, variants[u(r)], marks[u(r)]);
      double io = 0;
      for (int e = b + 1; e <= N; ++e) {
        const int n = e - 1;
        memory.add(n);
        for (int in : f.inputs[u(n)])
          if (stamp[u(in)] != stamp_id) {
            stamp[u(in)] = stamp_id;
            if (r != 0) io += cluster.links[0][u(r)].cost_us(bytes_of(graph, in));
          }
        const int out = graph.nodes()[u(n)].output;
        if (is_output[u(out)] && r != 0) io += cluster.links[u(r)][0].cost_us(bytes_of(graph, out));
        const auto [compute, variant] = stage_on(r, b, e, memory);
        if (variant < 0) break;  // what it holds only grows with e
        if (e < N && !cut_allowed(f, e)) continue;
        const double stage = compute + io;
        // Pipelined, the host's other ranks compute at the same time (a stage of the whole graph
        // has none beside it).
        const double piped_stage =
            b == 0 && e == N ? stage : stage_on(r, b, e, memory, true).first + io;
        if (b == 0 && e == N) single[u(r)] = stage;
        for (const auto& [t, k] : preds) {
          const Cost c = then(t, stage, piped_stage);
          if (better(c, best[u(r)][u(e)])) {
            best[u(r)][u(e)] = c;
            from[u(r)][u(e)] = {b, k};
          }
        }
      }
    }
  }

  int last = -1;
  for (int r = 0; r < R; ++r) {
    if (options.every_rank && r != R - 1) continue;
    if (best[u(r)][u(N)].run < kInf && (last < 0 || better(best[u(r)][u(N)], best[u(last)][u(N)])))
      last = r;
  }
  if (last < 0) {
    std::string why = options.every_rank ? "no split with a stage on every rank fits"
                                         : "no split of the graph over the ranks fits";
    uint64_t weights = 0;
    for (int c : graph.constants()) weights += bytes_of(graph, c);
    why += ": its weights and states are " + format_bytes(weights) + " in all";
    for (int r = 0; r < R; ++r) {
      StageMemory all(graph, f, variants[u(r)], marks[u(r)]);
      for (int n = 0; n < N; ++n) all.add(n);
      if (!variants[u(r)].empty() && !variants[u(r)][0].prefix.empty())
        why += "; on rank" + std::to_string(r) + " the whole graph would take " + all.describe(0);
    }
    for (const std::string& n : p.notes) why += "; " + n;
    return Status(Code::out_of_memory, "cluster plan for graph '" + graph.name() + "': " + why);
  }
  std::vector<StageRange> ranges;
  for (int r = last, e = N; r >= 0 && e > 0;) {
    const auto [b, k] = from[u(r)][u(e)];
    ranges.push_back({r, b, e});
    r = k;
    e = b;
  }
  std::reverse(ranges.begin(), ranges.end());
  p.stages = flows(graph, f, ranges);
  p.crossings = crossings_of(graph, p.stages, &cluster);
  p.est_us = best[u(last)][u(N)].run;
  p.pipelined_us = best[u(last)][u(N)].pipe;
  p.planned_pipelined = piped;

  for (Stage& s : p.stages) {
    const int r = s.range.rank;
    std::set<int> held;
    for (int n : s.nodes) {
      for (int c : f.constants[u(n)])
        if (held.insert(c).second) s.weight_bytes += bytes_of(graph, c);
      for (int st : f.states[u(n)])
        if (held.insert(st).second) s.state_bytes += bytes_of(graph, st);
    }
    auto memory_of = [&](int rank) {
      StageMemory m(graph, f, variants[u(rank)], marks[u(rank)]);
      for (int n = s.range.begin; n < s.range.end; ++n) m.add(n);
      return m;
    };
    const StageMemory m = memory_of(r);
    const auto [compute, vi] = stage_on(r, s.range.begin, s.range.end, m);
    s.compute_us = compute;
    const Variant& v = variants[u(r)][u(std::max(vi, 0))];
    s.memory = m.describe(u(std::max(vi, 0)));
    std::map<int, int> per_device;
    for (const PlanStep& st : v.plan.steps)
      if (st.kind == StepKind::kernel && st.node >= s.range.begin && st.node < s.range.end)
        ++per_device[st.device];
    for (const auto& [d, count] : per_device)
      s.devices_used.push_back(rank_device_id(r, v.plan.devices[u(d)].id) + ": " +
                               std::to_string(count) + " ops");
    for (int o = 0; o < R; ++o) {
      if (o == r) continue;
      const auto [t, ov] = stage_on(o, s.range.begin, s.range.end, memory_of(o));
      s.elsewhere.push_back("rank" + std::to_string(o) + " " +
                            (ov < 0 ? std::string("does not hold its weights") : format_us(t)));
    }
  }

  for (int r = 0; r < R; ++r)
    if (single[u(r)] < kInf && (p.single_rank < 0 || single[u(r)] < p.single_us)) {
      p.single_rank = r;
      p.single_us = single[u(r)];
    }
  const std::string per_run =
      piped ? "time per run with the runs pipelined (the slowest stage or link bounds it)"
            : "time per run";
  if (options.every_rank)
    p.why = "a stage on every rank (every_rank), cut where the estimated " + per_run + " is least";
  else if (p.stages.size() == 1)
    p.why = "rank" + std::to_string(p.stages[0].range.rank) +
            " alone: every split over several ranks is estimated slower (crossings cost more than "
            "they save" +
            (piped ? std::string(", even pipelined") : std::string()) + ") or does not fit";
  else
    p.why = "the split of least estimated " + per_run +
            ", among the splits in rank order whose stages fit their ranks' memory";
  // What the plan is compared with the best single rank by: one run, or pipelined runs.
  const double mine = piped ? p.pipelined_us : p.est_us;
  if (p.single_rank < 0)
    p.notes.push_back("no rank alone holds the graph's weights and states: it must be split");
  else if (p.stages.size() > 1 && mine > p.single_us)
    p.notes.push_back("slower than rank" + std::to_string(p.single_rank) + " alone (" +
                      format_us(p.single_us) + " per run) by " + format_us(mine - p.single_us) +
                      (piped ? " even pipelined" : "") +
                      ": split only because every rank was "
                      "asked to hold a stage");
  return p;
}

Result<Graph> stage_graph(const Graph& graph, const Stage& stage) {
  GraphBuilder b(graph.name() + ".rank" + std::to_string(stage.range.rank));
  std::map<int, ValueId> ids;
  auto declare = [&](int v) -> ValueId {
    if (auto it = ids.find(v); it != ids.end()) return it->second;
    const GraphValue& gv = graph.value(v);
    const auto dims = gv.desc.dims();
    std::vector<int64_t> shape(dims.begin(), dims.end());
    ValueId id;
    switch (gv.kind) {
      case ValueKind::constant:
        id = gv.data ? b.constant(gv.name, *gv.data)
                     : b.constant(gv.name, gv.desc.dtype, shape, gv.source);
        break;
      case ValueKind::state:
        id = b.state(gv.name, gv.desc.dtype, shape);
        break;
      default:  // a graph input, or a value received from the stage before (dense)
        id = b.input(gv.name, gv.desc.dtype, shape);
        break;
    }
    ids[v] = id;
    return id;
  };
  for (int v : stage.inputs) declare(v);
  // Received values as inputs, those its nodes read (the others it only passes on).
  const std::set<int> received(stage.receives.begin(), stage.receives.end());
  for (int n : stage.nodes) {
    const GraphNode& node = graph.nodes()[u(n)];
    std::vector<ValueId> ins;
    for (int in : node.inputs) {
      const GraphValue& gv = graph.value(in);
      if (gv.kind == ValueKind::intermediate && !ids.count(in) && !received.count(in))
        return Status(Code::internal, "stage graph: node '" + node.name + "' reads '" + gv.name +
                                          "', which the stage neither makes nor receives");
      ins.push_back(declare(in));
    }
    ids[node.output] = b.op(node.kind(), ins, node.op.attrs, node.name);
  }
  std::set<int> marked;
  auto mark = [&](int v) {
    if (marked.insert(v).second) b.output(ids.at(v));
  };
  for (int v : stage.outputs) mark(v);
  for (int v : stage.sends) {
    const int p = graph.value(v).producer;
    if (p >= stage.range.begin && p < stage.range.end) mark(v);
  }
  if (marked.empty())
    return Status(Code::invalid_argument, "stage graph: the stage of rank " +
                                              std::to_string(stage.range.rank) +
                                              " makes nothing another stage or the caller reads");
  return b.build();
}

std::string explain(const ClusterPlan& p, const Graph& g) {
  std::string out = "cluster plan for graph '" + p.graph + "': " + std::to_string(p.stages.size()) +
                    (p.stages.size() == 1 ? " stage" : " stages") + ", estimated ";
  if (p.stages.size() == 1)
    out += format_us(p.est_us) + " per run\n";
  else if (p.planned_pipelined)
    out += format_us(p.pipelined_us) + " per run pipelined (" + format_us(p.est_us) +
           " for one run alone)\n";
  else
    out += format_us(p.est_us) + " per run (" + format_us(p.pipelined_us) +
           " per run if runs were pipelined)\n";
  out += "why: " + p.why + "\n";
  out += "ranks:\n";
  for (const std::string& r : p.ranks) out += "  " + r + "\n";
  if (!p.links.empty()) {
    out += "links:\n";
    for (const std::string& l : p.links) out += "  " + l + "\n";
  }
  for (size_t i = 0; i < p.stages.size(); ++i) {
    const Stage& s = p.stages[i];
    out += "stage " + std::to_string(i) + " on rank" + std::to_string(s.range.rank) + ": nodes " +
           std::to_string(s.range.begin) + ".." + std::to_string(s.range.end - 1) + " (" +
           node_name(g, s.range.begin) + " .. " + node_name(g, s.range.end - 1) + "), " +
           format_us(s.compute_us) + " of kernels\n";
    out += "  weights " + format_bytes(s.weight_bytes) + ", states " + format_bytes(s.state_bytes) +
           (s.memory.empty() ? "" : ": " + s.memory) + "\n";
    if (!s.devices_used.empty()) {
      out += "  on:";
      for (const std::string& d : s.devices_used) out += " " + d + ";";
      out.back() = '\n';
    }
    if (!s.elsewhere.empty()) {
      out += "  the same nodes elsewhere:";
      for (const std::string& e : s.elsewhere) out += " " + e + ";";
      out.back() = '\n';
    }
    if (s.nodes.size() > static_cast<size_t>(s.range.end - s.range.begin))
      out += "  recomputes " +
             std::to_string(s.nodes.size() - static_cast<size_t>(s.range.end - s.range.begin)) +
             " nodes of weights alone (not sent)\n";
  }
  if (!p.crossings.empty()) {
    out += "crossings per run:\n";
    for (const Crossing& c : p.crossings) {
      const char* kind = c.kind == Crossing::Kind::input        ? "input"
                         : c.kind == Crossing::Kind::activation ? "activation"
                                                                : "output";
      out += "  " + std::string(kind) + " '" + g.value(c.value).name + "' rank" +
             std::to_string(c.from_rank) + " -> rank" + std::to_string(c.to_rank) + ": " +
             format_bytes(c.bytes) + ", " + format_us(c.est_us) + "\n";
    }
  }
  if (p.single_rank >= 0)
    out += "best single rank: rank" + std::to_string(p.single_rank) + ", " +
           format_us(p.single_us) + " per run\n";
  for (const std::string& n : p.notes) out += "note: " + n + "\n";
  return out;
}

}  // namespace duet
