// The planner: greedy placement in dependency order under a simple cost model, precision and
// tier from the backends' rules and the policy, casts and copies where needed, then a memory plan
// per device (docs/planner.md).
#include "duet/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

#include "duet/internal/log.h"
#include "memory_plan.h"

namespace duet {

namespace {

size_t u(int i) {
  return static_cast<size_t>(i);
}

// Assumed when a capability record does not know its throughput.
constexpr double kDefaultGflops = 50.0;
constexpr double kDefaultMemoryGbps = 20.0;
constexpr double kDefaultLinkGbps = 8.0;
constexpr double kTransferLatencyUs = 10.0;

double tier_efficiency(std::string_view tier) {
  if (tier == "flash") return 0.6;
  if (tier == "cublas") return 0.7;
  if (tier == "coopmat") return 0.5;
  if (tier == "tiled") return 0.4;
  if (tier == "simd") return 0.5;
  if (tier == "subgroup") return 0.3;
  if (tier == "generic") return 0.15;
  if (tier == "reference") return 0.02;
  return 0.2;
}

double peak_gflops(Precision p, const DeviceCaps& c) {
  double v = 0;
  switch (p) {
    case Precision::f16:
      v = c.peak_gflops_f16;
      break;
    case Precision::bf16:
      v = c.peak_gflops_bf16;
      break;
    case Precision::f32:
      v = c.peak_gflops_f32;
      break;
    case Precision::f64:
      v = c.peak_gflops_f32 / 16.0;
      break;
  }
  if (v <= 0) v = c.peak_gflops_f32 > 0 ? c.peak_gflops_f32 : kDefaultGflops;
  return v;
}

double memory_gbps(const DeviceCaps& c) {
  return c.memory_gbps > 0 ? c.memory_gbps : kDefaultMemoryGbps;
}

double launch_us(const DeviceCaps& c) {
  return c.type == DeviceType::cpu ? 1.0 : 5.0;
}

// One leg of a copy through host memory.
double leg_us(uint64_t bytes, const DeviceCaps* c) {
  if (!c) return 0.0;
  const double b = static_cast<double>(bytes);
  if (c->type == DeviceType::cpu) return b / (memory_gbps(*c) * 1e3);
  const double link = c->host_link_gbps > 0 ? c->host_link_gbps : kDefaultLinkGbps;
  return b / (link * 1e3) + kTransferLatencyUs;
}

std::string fmt_us(double us) {
  char b[32];
  if (us >= 1000.0)
    std::snprintf(b, sizeof b, "%.2f ms", us / 1000.0);
  else
    std::snprintf(b, sizeof b, "%.1f us", us);
  return b;
}

bool data_movement(OpKind k) {
  return k == OpKind::cast || k == OpKind::copy || k == OpKind::concat || k == OpKind::embedding;
}

// The precision an op's tensors ask for: that of its first floating-point input.
Precision asked_precision(const OpDesc& op) {
  for (const TensorDesc& t : op.inputs)
    if (is_float(t.dtype)) return precision_of(t.dtype);
  return is_float(op.output.dtype) ? precision_of(op.output.dtype) : Precision::f32;
}

std::string pname(Precision p) {
  return std::string(precision_name(p));
}

std::string choice_name(const KernelChoice& c) {
  return c.tier + " " + pname(c.precision);
}

}  // namespace

double estimate_kernel_us(const OpDesc& op, const KernelChoice& choice, const DeviceCaps& caps) {
  if (is_view(op.kind)) return 0.0;
  const double flops = op_flops(op), bytes = op_bytes(op);
  const double compute =
      flops / (peak_gflops(choice.precision, caps) * tier_efficiency(choice.tier) * 1e3);
  const double memory = bytes / (memory_gbps(caps) * 0.8 * 1e3);
  return std::max(compute, memory) + launch_us(caps);
}

double estimate_transfer_us(uint64_t bytes, const DeviceCaps* from, const DeviceCaps* to) {
  return leg_us(bytes, from) + leg_us(bytes, to);
}

std::vector<PlanDevice> plan_devices(std::span<Device* const> devices) {
  std::vector<PlanDevice> out;
  for (Device* d : devices) {
    if (!d) continue;
    out.push_back(PlanDevice{d->id(), d->caps(), &d->rules(), {}});
  }
  return out;
}

namespace {

// What the planner thinks of one device for one op.
struct DeviceEval {
  int device = -1;
  bool denied = false;  // the policy keeps the device out
  bool ok = false;      // an acceptable choice exists
  KernelChoice pick;
  int rank = 0;  // precision rank of the pick (0 = as asked)
  std::vector<KernelChoice> all;
  std::vector<Alternative> alternatives;  // every choice other than the pick
  std::vector<std::string> skipped;       // better tiers than the pick on this device
  std::vector<std::string> policy;        // policy terms that removed choices
  std::string why_not;                    // when !ok: why, in one line
  // Filled when the op is placed:
  double est_us = 0;
  uint64_t new_bytes = 0;
  bool fits = true;
  std::string fit_reason;
};

class Planner {
 public:
  Planner(const Graph& g, std::vector<PlanDevice> devices, const Policy& policy,
          std::vector<uint64_t> cut)
      : g_(g), policy_(policy), cut_(std::move(cut)) {
    plan_.graph = g.name();
    plan_.devices = std::move(devices);
    plan_.policy = policy;
  }

  Result<Plan> run();

 private:
  const PlanDevice& dev(int d) const { return plan_.devices[u(d)]; }
  const DeviceCaps* caps_of(int d) const { return d == kHost ? nullptr : &dev(d).caps; }
  std::string dname(int d) const { return plan_.device_name(d); }

  uint64_t budget(int d) const;
  int storage_value(int gv) const;
  std::string rep_name(int gv, int d, DType t) const;
  std::optional<int> find_rep(int gv, int d, DType t) const;

  int add_value(PlanValue v);
  int add_step(PlanStep s);

  DeviceEval evaluate(const GraphNode& n, int d, Precision asked, std::optional<Precision> forced,
                      const std::string& forced_term) const;
  void cost(const GraphNode& n, int node_index, DeviceEval& e) const;
  uint64_t live_bytes(int d, int node_index) const;

  bool is_view_value(int gv) const;
  int pick_source(int gv, int d, DType preferred) const;
  DType available_dtype(int gv, int d, DType preferred) const;
  Result<int> on_device(int gv, int d, DType preferred, const std::string& why);
  Result<int> need(int gv, int d, DType t, const std::string& why);
  Result<int> cast_to(int gv, DType t, int d, const std::string& why);
  std::optional<KernelChoice> cast_choice(int d, const OpDesc& op) const;
  Result<int> add_view(int gv, const GraphNode& n, int base);
  int add_transfer(int src, int d, int gv);

  Status choose_single_device();
  Status place(int node_index);
  Status finish_outputs();

  const Graph& g_;
  const Policy& policy_;
  std::vector<uint64_t> cut_;  // bytes taken off each device's budget to move work away
  Plan plan_;
  std::vector<std::vector<int>> reps_;  // graph value -> plan values holding it
  std::vector<int> last_use_;
  std::vector<bool> is_output_;
  std::vector<int> home_;  // graph value -> device of the kernel that computed it
  int single_ = -1;        // split=off: the one device
};

uint64_t Planner::budget(int d) const {
  const PlanDevice& pd = dev(d);
  uint64_t b = pd.caps.memory_bytes;
  if (auto p = policy_.budget_for(pd.caps.backend, pd.id)) b = *p;
  if (b == 0) return std::numeric_limits<uint64_t>::max();
  return b > cut_[u(d)] ? b - cut_[u(d)] : 0;
}

// The graph value whose storage a (view) value reads.
int Planner::storage_value(int gv) const {
  while (true) {
    const GraphValue& v = g_.value(gv);
    if (v.kind != ValueKind::intermediate) return gv;
    const GraphNode& n = g_.nodes()[u(v.producer)];
    if (!is_view(n.kind())) return gv;
    gv = n.inputs[0];
  }
}

std::string Planner::rep_name(int gv, int d, DType t) const {
  const GraphValue& v = g_.value(gv);
  std::string s = v.name;
  if (t != v.desc.dtype) s += "." + std::string(dtype_name(t));
  const int home = home_[u(storage_value(gv))];
  if (d != kHost && d != home) s += "@" + dev(d).id;
  return s;
}

std::optional<int> Planner::find_rep(int gv, int d, DType t) const {
  for (int r : reps_[u(gv)])
    if (plan_.values[u(r)].device == d && plan_.values[u(r)].desc.dtype == t) return r;
  return std::nullopt;
}

int Planner::add_value(PlanValue v) {
  const int id = static_cast<int>(plan_.values.size());
  if (v.root < 0) v.root = id;
  const int gv = v.graph_value;
  plan_.values.push_back(std::move(v));
  if (gv >= 0) reps_[u(gv)].push_back(id);
  return id;
}

int Planner::add_step(PlanStep s) {
  const int id = static_cast<int>(plan_.steps.size());
  plan_.values[u(s.output)].producer = id;
  plan_.steps.push_back(std::move(s));
  return id;
}

DeviceEval Planner::evaluate(const GraphNode& n, int d, Precision asked,
                             std::optional<Precision> forced,
                             const std::string& forced_term) const {
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
    e.why_not = "the whole graph runs on " + dev(single_).id + " (split=off)";
    return e;
  }
  // Precisions acceptable for this op, best first.
  std::vector<Precision> order;
  if (forced) {
    order = {*forced};
  } else if (data_movement(n.kind())) {
    order = {asked, Precision::f32, Precision::f16, Precision::bf16};
  } else if (asked == Precision::bf16) {
    order = {Precision::bf16, policy_.bf16_fallback, Precision::f32};
  } else if (asked == Precision::f16) {
    order = {Precision::f16, Precision::f32};
  } else {
    order = {asked};
  }
  auto rank_of = [&](Precision p) {
    for (size_t i = 0; i < order.size(); ++i)
      if (order[i] == p) return static_cast<int>(i);
    return -1;
  };

  e.all = pd.rules ? pd.rules->choices(pd.caps, n.op) : std::vector<KernelChoice>{};
  int best = -1, best_rank = 0;
  std::vector<std::string> reasons;  // for why_not
  for (size_t i = 0; i < e.all.size(); ++i) {
    const KernelChoice& c = e.all[i];
    if (!c.ok) continue;
    if (!policy_.tier_denied(pd.caps.backend, pd.id, c.tier).empty()) continue;
    const int r = rank_of(c.precision);
    if (r < 0) continue;
    if (best < 0 || r < best_rank) {
      best = static_cast<int>(i);
      best_rank = r;
    }
  }
  // Why each other choice lost.
  for (size_t i = 0; i < e.all.size(); ++i) {
    const KernelChoice& c = e.all[i];
    if (static_cast<int>(i) == best) continue;
    Alternative a;
    a.device = pd.id;
    a.tier = c.tier;
    a.precision = c.precision;
    a.usable = c.ok;
    const std::string deny = policy_.tier_denied(pd.caps.backend, pd.id, c.tier);
    const int r = rank_of(c.precision);
    if (!c.ok) {
      a.reason = c.reason;
    } else if (!deny.empty()) {
      a.by_policy = true;
      a.term = deny;
      a.reason = "tier " + c.tier + " denied by policy (" + deny + ")";
      e.policy.push_back(deny);
    } else if (r < 0) {
      if (forced) {
        a.by_policy = true;
        a.term = forced_term;
        a.reason = "policy forces " + pname(*forced) + " (" + forced_term + ")";
        e.policy.push_back(forced_term);
      } else if (c.precision == Precision::f64) {
        a.reason = "f64 is the checking precision (select it with precision=f64)";
      } else {
        a.reason = pname(c.precision) + " is less precise than the " + pname(asked) +
                   " the graph asks for";
      }
    } else if (best >= 0) {
      const KernelChoice& b = e.all[u(best)];
      a.reason = r > best_rank ? pname(b.precision) + " preferred (" + choice_name(b) + " chosen)"
                               : "backend prefers " + b.tier + " (listed first)";
    }
    e.alternatives.push_back(a);
    reasons.push_back(choice_name(c) + ": " + a.reason);
  }
  if (best < 0) {
    std::string s;
    for (const std::string& r : reasons) s += (s.empty() ? "" : "; ") + r;
    e.why_not = s.empty() ? "the backend offers no kernel for this op" : s;
    return e;
  }
  e.ok = true;
  e.pick = e.all[u(best)];
  e.rank = best_rank;
  // Tiers the backend ranks before the pick, and why they were not used.
  std::set<std::string> said;
  for (size_t i = 0; i < u(best); ++i) {
    const KernelChoice& c = e.all[i];
    if (c.tier == e.pick.tier || said.count(c.tier)) continue;
    // Prefer the explanation at the chosen precision, else the first seen.
    const KernelChoice* at = &c;
    for (size_t j = 0; j < u(best); ++j)
      if (e.all[j].tier == c.tier && e.all[j].precision == e.pick.precision) at = &e.all[j];
    std::string why;
    const std::string deny = policy_.tier_denied(pd.caps.backend, pd.id, at->tier);
    if (!at->ok)
      why = at->reason;
    else if (!deny.empty())
      why = "denied by policy (" + deny + ")";
    else if (forced)
      why = "policy forces " + pname(*forced) + " (" + forced_term + ")";
    else
      why = "not at an acceptable precision";
    e.skipped.push_back(c.tier + " skipped: " + why);
    said.insert(c.tier);
  }
  return e;
}

// Bytes of non-constant values alive on a device when node `node_index` runs (conservatively:
// until the graph's last use of the value), plus resident constants.
uint64_t Planner::live_bytes(int d, int node_index) const {
  uint64_t live = 0;
  for (size_t gv = 0; gv < reps_.size(); ++gv) {
    const bool alive = is_output_[gv] || last_use_[gv] >= node_index;
    for (int r : reps_[gv]) {
      const PlanValue& v = plan_.values[u(r)];
      if (v.device != d || v.root != r) continue;
      if (v.constant || alive) live += v.storage_bytes();
    }
  }
  return live;
}

void Planner::cost(const GraphNode& n, int node_index, DeviceEval& e) const {
  const int d = e.device;
  const DeviceCaps& caps = dev(d).caps;
  double us = estimate_kernel_us(n.op, e.pick, caps);
  uint64_t bytes =
      static_cast<uint64_t>(dtype_bytes(n.op.output.dtype, n.op.output.numel()));  // the output
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
    if (!here && moved_storage.insert(sv).second) {
      // The cheapest source of the storage.
      double best = std::numeric_limits<double>::infinity();
      uint64_t moved = 0;
      for (int r : reps_[u(sv)]) {
        const PlanValue& v = plan_.values[u(r)];
        if (v.root != r) continue;
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
      us +=
          static_cast<double>(cast_bytes) * 2.0 / (memory_gbps(caps) * 0.8 * 1e3) + launch_us(caps);
      bytes += cast_bytes;
      largest = std::max(largest, cast_bytes);
    }
  }
  if (is_output_[u(n.output)])
    us += estimate_transfer_us(static_cast<uint64_t>(n.op.output.nbytes()), &caps, nullptr);
  e.est_us = us;
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

int Planner::add_transfer(int src, int d, int gv) {
  const PlanValue& s = plan_.values[u(src)];
  PlanValue v;
  v.name = rep_name(gv, d, s.desc.dtype);
  v.desc = s.desc;
  v.device = d;
  v.graph_value = gv;
  v.constant = s.constant;
  const uint64_t bytes = s.storage_bytes();
  const int src_device = s.device;
  const bool constant = s.constant;
  const int out = add_value(std::move(v));
  PlanStep st;
  st.kind = StepKind::transfer;
  st.name = plan_.values[u(out)].name;
  st.device = d;
  st.src_device = src_device;
  st.inputs = {src};
  st.output = out;
  st.bytes = bytes;
  st.once = constant;
  st.est_us = estimate_transfer_us(bytes, caps_of(src_device), caps_of(d));
  add_step(std::move(st));
  return out;
}

Result<int> Planner::add_view(int gv, const GraphNode& n, int base) {
  const PlanValue& b = plan_.values[u(base)];
  auto op = make_op(n.kind(), n.op.attrs, {b.desc}, {b.name}, n.name);
  if (!op.ok())
    return Status(Code::internal, op.status().message())
        .with_context("planner: re-creating view '" + n.name + "' on " + dname(b.device));
  PlanValue v;
  v.name = rep_name(gv, b.device, b.desc.dtype);
  v.desc = op->output;
  v.device = b.device;
  v.graph_value = gv;
  v.root = b.root;
  v.constant = b.constant;
  const bool constant = b.constant;
  const int device = b.device;
  const int out = add_value(std::move(v));
  PlanStep st;
  st.kind = StepKind::view;
  st.name = plan_.values[u(out)].name;
  st.node = g_.value(gv).producer;
  st.device = device;
  st.op.op = std::move(*op);
  st.inputs = {base};
  st.output = out;
  st.once = constant;
  add_step(std::move(st));
  return out;
}

bool Planner::is_view_value(int gv) const {
  const GraphValue& v = g_.value(gv);
  return v.kind == ValueKind::intermediate && is_view(g_.nodes()[u(v.producer)].kind());
}

// The root value a copy of `gv` to device d would read: one in `preferred` dtype if any, the
// cheapest to move among those (-1 when gv has no root value anywhere).
int Planner::pick_source(int gv, int d, DType preferred) const {
  int src = -1;
  bool src_matches = false;
  double best = std::numeric_limits<double>::infinity();
  for (int r : reps_[u(gv)]) {
    const PlanValue& pv = plan_.values[u(r)];
    if (pv.root != r || pv.device == d) continue;
    const bool matches = pv.desc.dtype == preferred;
    const double t = estimate_transfer_us(pv.storage_bytes(), caps_of(pv.device), caps_of(d));
    if (src < 0 || (matches && !src_matches) || (matches == src_matches && t < best)) {
      src = r;
      src_matches = matches;
      best = t;
    }
  }
  return src;
}

// The dtype in which on_device(gv, d, preferred) delivers the value.
DType Planner::available_dtype(int gv, int d, DType preferred) const {
  if (find_rep(gv, d, preferred)) return preferred;
  for (int r : reps_[u(gv)])
    if (plan_.values[u(r)].device == d) return plan_.values[u(r)].desc.dtype;
  if (is_view_value(gv))
    return available_dtype(g_.nodes()[u(g_.value(gv).producer)].inputs[0], d, preferred);
  const int src = pick_source(gv, d, preferred);
  return src >= 0 ? plan_.values[u(src)].desc.dtype : g_.value(gv).desc.dtype;
}

// A value of graph value `gv` on device d, in `preferred` dtype when one exists, else any.
Result<int> Planner::on_device(int gv, int d, DType preferred, const std::string& why) {
  if (auto r = find_rep(gv, d, preferred)) return *r;
  for (int r : reps_[u(gv)])
    if (plan_.values[u(r)].device == d) return r;
  if (is_view_value(gv)) {
    const GraphNode& n = g_.nodes()[u(g_.value(gv).producer)];
    DUET_ASSIGN_OR_RETURN(int base, on_device(n.inputs[0], d, preferred, why));
    return add_view(gv, n, base);
  }
  const int src = pick_source(gv, d, preferred);
  if (src < 0)
    return Status(Code::internal, "planner: value '" + g_.value(gv).name + "' needed by " + why +
                                      " exists nowhere");
  return add_transfer(src, d, gv);
}

std::optional<KernelChoice> Planner::cast_choice(int d, const OpDesc& op) const {
  const PlanDevice& pd = dev(d);
  if (!pd.rules || !policy_.device_denied(pd.caps.backend, pd.id).empty()) return std::nullopt;
  std::string forced_term;
  const auto forced = policy_.op_precision.count(OpKind::cast)
                          ? policy_.forced_precision(OpKind::cast, &forced_term)
                          : std::nullopt;
  for (const KernelChoice& c : pd.rules->choices(pd.caps, op)) {
    if (!c.ok || !policy_.tier_denied(pd.caps.backend, pd.id, c.tier).empty()) continue;
    if (forced ? c.precision != *forced : c.precision == Precision::f64) continue;
    if (!c.input_dtypes.empty() && c.input_dtypes[0] != op.inputs[0].dtype) continue;
    return c;
  }
  return std::nullopt;
}

// `gv` as dtype t on device d through a cast: on d when it can cast, else on a device that can
// (one holding the value first), then copied to d.
Result<int> Planner::cast_to(int gv, DType t, int d, const std::string& why) {
  OpAttrs at;
  at.to = t;
  std::vector<int> where = {d};
  auto add = [&](int e) {
    if (e != kHost && std::find(where.begin(), where.end(), e) == where.end()) where.push_back(e);
  };
  for (int r : reps_[u(gv)]) add(plan_.values[u(r)].device);
  for (int r : reps_[u(storage_value(gv))]) add(plan_.values[u(r)].device);
  for (size_t i = 0; i < plan_.devices.size(); ++i) add(static_cast<int>(i));
  const TensorDesc& gdesc = g_.value(gv).desc;
  std::string refusals;
  DType from = gdesc.dtype;
  for (int e : where) {
    if (single_ >= 0 && e != single_) continue;
    from = available_dtype(gv, e, t);
    const TensorDesc probe_in = TensorDesc::contiguous(from, gdesc.dims());
    auto probe = make_op(OpKind::cast, at, {probe_in}, {g_.value(gv).name}, rep_name(gv, e, t));
    if (!probe.ok()) return probe.status();
    if (!cast_choice(e, *probe)) {
      refusals += (refusals.empty() ? "" : "; ") + dev(e).id + " has no usable cast kernel from " +
                  std::string(dtype_name(from));
      continue;
    }
    DUET_ASSIGN_OR_RETURN(int in, on_device(gv, e, t, why));
    const PlanValue& iv = plan_.values[u(in)];
    auto op = make_op(OpKind::cast, at, {iv.desc}, {iv.name}, rep_name(gv, e, t));
    if (!op.ok()) return op.status();
    auto choice = cast_choice(e, *op);
    if (!choice)
      return Status(Code::internal, "planner: " + dev(e).id + " refused the cast of '" + iv.name +
                                        "' it offered for " + probe_in.str());
    PlanValue out;
    out.name = op->name;
    out.desc = op->output;
    out.device = e;
    out.graph_value = gv;
    out.constant = iv.constant;
    const bool constant = iv.constant;
    const int oid = add_value(std::move(out));
    PlanStep st;
    st.kind = StepKind::kernel;
    st.name = op->name;
    st.device = e;
    st.inputs = {in};
    st.output = oid;
    st.once = constant;
    st.requested = choice->precision;
    st.device_reason = "inserted: " + why + " reads " + std::string(dtype_name(t)) +
                       (e == d ? std::string() : " on " + dev(d).id + ", which cannot cast it");
    st.tier_reason = choice->tier + ": " + choice->reason;
    st.est_us = estimate_kernel_us(*op, *choice, dev(e).caps);
    st.op = PlannedOp{std::move(*op), std::move(*choice)};
    add_step(std::move(st));
    return e == d ? oid : add_transfer(oid, d, gv);
  }
  return Err(Code::unsupported)
      .op("cast", rep_name(gv, d, t))
      .tensor(g_.value(gv).name)
      .note("needed as " + std::string(dtype_name(t)) + " by " + why + ", but no device can cast " +
            std::string(dtype_name(from)) + " to " + std::string(dtype_name(t)) + " (" + refusals +
            ")");
}

Result<int> Planner::need(int gv, int d, DType t, const std::string& why) {
  if (auto r = find_rep(gv, d, t)) return *r;
  // Already in that dtype somewhere (or its storage, for a view): bring it.
  if (available_dtype(gv, d, t) == t) return on_device(gv, d, t, why);
  return cast_to(gv, t, d, why);
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
      std::string term;
      const auto forced = data_movement(n.kind()) && !policy_.op_precision.count(n.kind())
                              ? std::nullopt
                              : policy_.forced_precision(n.kind(), &term);
      DeviceEval e = evaluate(n, static_cast<int>(d), asked_precision(n.op), forced, term);
      if (!e.ok) {
        refusals += (refusals.empty() ? "" : "; ") + dev(static_cast<int>(d)).id + " cannot run " +
                    std::string(op_name(n.kind())) + " '" + n.name + "' (" + e.why_not + ")";
        all = false;
        break;
      }
      total += estimate_kernel_us(n.op, e.pick, dev(static_cast<int>(d)).caps);
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
  const GraphNode& n = g_.nodes()[u(node_index)];
  if (is_view(n.kind())) return {};  // made where their consumers need them
  std::string forced_term;
  const auto forced = data_movement(n.kind()) && !policy_.op_precision.count(n.kind())
                          ? std::nullopt
                          : policy_.forced_precision(n.kind(), &forced_term);
  const Precision asked = asked_precision(n.op);
  std::vector<DeviceEval> evals;
  for (size_t d = 0; d < plan_.devices.size(); ++d)
    evals.push_back(evaluate(n, static_cast<int>(d), asked, forced, forced_term));

  int chosen = -1, cheapest = -1;
  for (DeviceEval& e : evals) {
    if (!e.ok) continue;
    cost(n, node_index, e);
    if (cheapest < 0 || e.est_us < evals[u(cheapest)].est_us) cheapest = e.device;
    if (!e.fits) continue;
    // Precision as asked beats a fallback; then time.
    if (chosen < 0 || e.rank < evals[u(chosen)].rank ||
        (e.rank == evals[u(chosen)].rank && e.est_us < evals[u(chosen)].est_us))
      chosen = e.device;
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
  st.est_us = e.est_us;
  st.skipped = e.skipped;

  // Why this device.
  int usable = 0;
  for (const DeviceEval& x : evals) usable += x.ok ? 1 : 0;
  if (single_ >= 0) {
    st.device_reason = "the whole graph runs on " + dev(d).id + " (policy split=off)";
  } else if (usable == 1) {
    st.device_reason = "the only device that can run it";
  } else {
    st.device_reason = "estimated " + fmt_us(e.est_us);
    if (cheapest != d && !evals[u(cheapest)].fits) {
      st.device_reason +=
          "; " + evals[u(cheapest)].fit_reason + ", so the work moves to " + dev(d).id;
      plan_.notes.push_back(what + " moved from " + dev(cheapest).id + " to " + dev(d).id + ": " +
                            evals[u(cheapest)].fit_reason);
    } else if (e.rank > 0) {
      st.device_reason += ", no device runs it at " + pname(asked);
    } else {
      st.device_reason += ", the lowest of " + std::to_string(usable) + " devices";
    }
  }
  // Why this precision.
  if (forced) {
    st.precision_reason = pname(*forced) + " forced by policy (" + forced_term + ")";
    st.policy.push_back(forced_term + " set the precision to " + pname(*forced));
  } else if (e.pick.precision == asked) {
    st.precision_reason = pname(asked) + " as the graph asks";
  } else if (data_movement(n.kind())) {
    st.precision_reason = pname(e.pick.precision) + " (data movement; the backend's kernel)";
  } else {
    std::string missing;
    for (const KernelChoice& c : e.all)
      if (c.precision == asked)
        missing += (missing.empty() ? "" : "; ") + c.tier + " " + pname(asked) + ": " +
                   (c.ok ? "denied by policy" : c.reason);
    st.precision_reason =
        pname(asked) + " asked, but " + dev(d).id + " has no " + pname(asked) + " kernel for it" +
        (missing.empty() ? "" : " (" + missing + ")") + "; " + pname(e.pick.precision) +
        (e.pick.precision == Precision::f32 ? "" : " with f32 accumulation") + " instead";
    if (asked == Precision::bf16 && e.pick.precision == policy_.bf16_fallback)
      st.precision_reason += " (fallback=" + pname(policy_.bf16_fallback) + ")";
  }
  st.tier_reason = e.pick.tier + ": " + e.pick.reason;
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
        note_removed(a.term, a.tier.empty() ? a.device + " (the device)"
                                            : a.device + " " + a.tier + " " + pname(a.precision));
    }
    if (x.device != d && x.ok) {
      Alternative a;
      a.device = dev(x.device).id;
      a.tier = x.pick.tier;
      a.precision = x.pick.precision;
      a.usable = true;
      a.reason =
          !x.fits ? x.fit_reason
          : x.rank > e.rank
              ? pname(x.pick.precision) + " only, " + pname(e.pick.precision) + " on " + dev(d).id
              : "estimated " + fmt_us(x.est_us) + " vs " + fmt_us(e.est_us) + " on " + dev(d).id;
      st.rejected.push_back(a);
    }
    if (x.device != d && x.denied && single_ >= 0 && x.device != single_) {
      Alternative a;
      a.device = dev(x.device).id;
      a.by_policy = true;
      a.term = "split=off";
      a.reason = x.why_not;
      st.rejected.push_back(a);
    }
  }
  for (const auto& [term, list] : removed) st.policy.push_back(term + " removed " + list);

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
    plan_.notes.push_back(what + " on " + dev(d).id + ": the backend " +
                          (refusal.empty() ? std::string("does not list ") + e.pick.tier + " " +
                                                 pname(e.pick.precision)
                                           : "refuses " + e.pick.tier + " (" + refusal + ")") +
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
  st.once = constant;
  st.inputs = std::move(ins);
  st.op = PlannedOp{std::move(*op), std::move(choice)};
  st.output = add_value(std::move(out));
  add_step(std::move(st));
  return {};
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

}  // namespace

Result<Plan> make_plan(const Graph& graph, std::vector<PlanDevice> devices, const Policy& policy) {
  std::vector<uint64_t> cut(devices.size(), 0);
  for (int round = 0;; ++round) {
    Planner p(graph, devices, policy, cut);
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
