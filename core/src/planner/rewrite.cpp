// Graph rewriting: the plan values that hold each graph value (per device and dtype), and the
// steps that make them: copies between devices, casts to the dtype a kernel reads (on the device
// when it can cast, else where one can), and views re-created over the storage where it lives.
#include <algorithm>
#include <limits>

#include "duet/planner.h"
#include "planner_state.h"

namespace duet::planning {

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
  count_live(id);
  return id;
}

int Planner::written_state(const GraphNode& n) const {
  if (n.kind() != OpKind::write_slice) return -1;
  return g_.value(n.inputs[0]).kind == ValueKind::state ? n.inputs[0] : -1;
}

int Planner::state_value(int gv) const {
  for (int r : reps_[u(gv)])
    if (plan_.values[u(r)].state) return r;
  return -1;
}

int Planner::home_state(int gv, int d) {
  if (int r = state_value(gv); r >= 0) return r;
  const GraphValue& g = g_.value(gv);
  PlanValue v;
  v.name = g.name;
  v.desc = g.desc;
  v.device = d;
  v.graph_value = gv;
  v.state = true;
  home_[u(gv)] = d;
  const int id = add_value(std::move(v));
  plan_.states[g.name] = id;
  return id;
}

bool Planner::owns_storage(int r) const {
  const PlanValue& v = plan_.values[u(r)];
  return v.root == r || plan_.values[u(v.root)].state;
}

int Planner::add_step(PlanStep s) {
  const int id = static_cast<int>(plan_.steps.size());
  plan_.values[u(s.output)].producer = id;
  plan_.steps.push_back(std::move(s));
  return id;
}

int Planner::add_transfer(int src, int d, int gv) {
  const PlanValue& s = plan_.values[u(src)];
  PlanValue v;
  v.name = rep_name(gv, d, s.desc.dtype);
  v.desc = s.desc;
  v.device = d;
  v.graph_value = gv;
  v.constant = s.constant;
  v.borrowed = s.constant && s.device == kHost && d != kHost && dev(d).caps.reads_host_memory;
  const uint64_t bytes = s.storage_bytes();
  const int src_device = s.device;
  const bool constant = s.constant;
  const bool borrowed = v.borrowed;
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
  st.est_us = borrowed ? 0.0 : estimate_transfer_us(bytes, caps_of(src_device), caps_of(d));
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
    if (!owns_storage(r) || pv.device == d) continue;
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
    st.tier_reason = tname(choice->tier) + ": " + choice->reason;
    st.est_us = estimate_kernel_us(*op, *choice, dev(e).caps, measured(e));
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
  if (is_quantized(g_.value(gv).desc.dtype) && t != g_.value(gv).desc.dtype)
    return Status(Code::internal, "planner: " + why + " would read the " +
                                      std::string(dtype_name(g_.value(gv).desc.dtype)) + " '" +
                                      g_.value(gv).name + "' as " + std::string(dtype_name(t)) +
                                      " (a dequantized copy; placement must not choose it)");
  // Already in that dtype somewhere (or its storage, for a view): bring it.
  if (available_dtype(gv, d, t) == t) return on_device(gv, d, t, why);
  return cast_to(gv, t, d, why);
}

// The graph around the op's kernel: the states it touches first homed on its device, its inputs
// brought there in the dtypes the kernel reads (casts, copies, views), the launch shape for the
// op as executed, its output value, and its step.
Status Planner::rewrite(const GraphNode& n, const DeviceEval& e, PlanStep st) {
  const int d = e.device;
  const std::string what = std::string(op_name(n.kind())) + " '" + n.name + "'";
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
