#include "check/graph_check.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "duet/engine.h"
#include "duet/internal/index.h"
#include "reference/reference.h"

namespace duet::check {

namespace {
double error_ratio(const Metrics& m, const Tolerance& t) {
  if (m.nan || m.inf_mismatch) return INFINITY;
  if (t.exact) return m.mismatches ? INFINITY : 0.0;
  return std::max(t.nmse > 0 ? m.nmse / t.nmse : 0.0, t.max_rel > 0 ? m.max_rel / t.max_rel : 0.0);
}

Tolerance exact_tolerance() {
  Tolerance t;
  t.exact = true;
  return t;
}

Tolerance loosest(const Tolerance& a, const Tolerance& b) {
  if (a.exact) return b;
  if (b.exact) return a;
  Tolerance t;
  t.nmse = std::max(a.nmse, b.nmse);
  t.max_rel = std::max(a.max_rel, b.max_rel);
  return t;
}

// The reference rounded once to the output's dtype, as a device must store it.
std::vector<double> rounded(const std::vector<double>& exact, DType t) {
  HostTensor h = HostTensor::empty(t, std::vector<int64_t>{static_cast<int64_t>(exact.size())});
  h.from_doubles(exact);
  return h.to_doubles();
}

// The op alone on the chosen kernel: inputs as the reference holds them, cast to what the
// kernel reads where the planner would have cast them.
Outcome run_alone(Device& device, const KernelChoice& choice, const GraphNode& n,
                  const GraphReference& ref) {
  std::vector<HostTensor> ins;
  std::vector<TensorDesc> descs;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    HostTensor t = ref.held[u(n.inputs[i])];
    if (i < choice.input_dtypes.size() && choice.input_dtypes[i] != t.dtype()) {
      HostTensor c = HostTensor::empty(choice.input_dtypes[i], t.desc().dims());
      c.from_doubles(t.to_doubles());
      t = c;
    }
    descs.push_back(t.desc());
    ins.push_back(std::move(t));
  }
  Outcome o;
  auto op = make_op(n.kind(), n.op.attrs, descs, {}, n.name);
  if (!op.ok()) {
    o.message = op.status().message();
    return o;
  }
  return run_case(device, choice, *op, ins, ref.exact[u(n.output)]);
}
}  // namespace

Result<GraphReference> reference_graph(const Graph& g,
                                       const std::map<std::string, HostTensor>& inputs) {
  GraphReference r;
  r.exact.resize(g.values().size());
  r.held.resize(g.values().size());
  auto hold = [&](int id, const HostTensor& t) {
    r.held[u(id)] = t.contiguous();
    r.exact[u(id)] = r.held[u(id)].to_doubles();
  };
  for (int id : g.inputs()) {
    auto it = inputs.find(g.value(id).name);
    if (it == inputs.end())
      return Status(Code::invalid_argument, "no value for input '" + g.value(id).name + "'");
    hold(id, it->second);
  }
  for (int id : g.constants()) {
    if (!g.value(id).data)
      return Status(Code::invalid_argument, "constant '" + g.value(id).name + "' has no data");
    hold(id, *g.value(id).data);
  }
  for (int id : g.states()) {  // as a fresh engine holds them: zeros
    HostTensor z = HostTensor::empty(g.value(id).desc);
    z.fill_bytes(0);
    hold(id, z);
  }
  for (const GraphNode& n : g.nodes()) {
    std::vector<HostTensor> ins;
    std::vector<TensorDesc> descs;
    for (int in : n.inputs) {
      ins.push_back(r.held[u(in)]);
      descs.push_back(ins.back().desc());
    }
    DUET_ASSIGN_OR_RETURN(OpDesc op, make_op(n.kind(), n.op.attrs, descs, {}, n.name));
    DUET_ASSIGN_OR_RETURN(std::vector<double> y, reference::evaluate(op, ins));
    HostTensor out = HostTensor::empty(op.output.dtype, op.output.dims());
    out.from_doubles(y);
    r.held[u(n.output)] = std::move(out);
    r.exact[u(n.output)] = std::move(y);
  }
  return r;
}

Result<Graph> expose_values(const Graph& g) {
  GraphBuilder b(g.name());
  std::vector<ValueId> map(g.values().size());
  for (size_t i = 0; i < g.values().size(); ++i) {
    const GraphValue& v = g.values()[i];
    const std::vector<int64_t> shape(v.desc.dims().begin(), v.desc.dims().end());
    if (v.kind == ValueKind::input) {
      map[i] = b.input(v.name, v.desc.dtype, shape);
    } else if (v.kind == ValueKind::constant) {
      map[i] = v.data ? b.constant(v.name, *v.data) : b.constant(v.name, v.desc.dtype, shape);
    } else if (v.kind == ValueKind::state) {
      map[i] = b.state(v.name, v.desc.dtype, shape);
    } else {
      const GraphNode& n = g.nodes()[u(v.producer)];
      std::vector<ValueId> ins;
      for (int in : n.inputs) ins.push_back(map[u(in)]);
      map[i] = b.op(n.kind(), ins, n.op.attrs, n.name);
    }
  }
  std::set<int> outs(g.outputs().begin(), g.outputs().end());
  for (int o : g.outputs()) b.output(map[u(o)]);
  for (const GraphNode& n : g.nodes())
    if (!is_view(n.kind()) && !outs.count(n.output)) b.output(map[u(n.output)]);
  return b.build();
}

std::vector<Tier> replaceable_tiers(const Plan& plan, const std::string& device) {
  std::set<Tier> out;
  for (const PlanStep& s : plan.steps) {
    if (s.kind != StepKind::kernel || s.device < 0) continue;
    for (const Alternative& a : s.rejected)
      if (a.device == device && a.usable && !a.by_policy && a.tier != s.op.choice.tier &&
          a.precision == s.op.choice.precision && a.tier != Tier::reference)
        out.insert(s.op.choice.tier);
  }
  return {out.begin(), out.end()};
}

std::vector<GraphCheck> check_graph(const Graph& g, const GraphReference& ref,
                                    const std::map<std::string, HostTensor>& inputs, Device& device,
                                    const Policy& policy) {
  std::vector<GraphCheck> runs;
  auto exposed = expose_values(g);
  std::string deny;
  for (int round = 0; round < 8; ++round) {
    GraphCheck c;
    c.device = device.id();
    c.deny = deny;
    Policy p = policy;
    if (!deny.empty()) {
      auto parsed = parse_policy("deny=" + deny, policy);
      if (!parsed.ok()) {
        c.error = parsed.status().message();
        runs.push_back(std::move(c));
        break;
      }
      p = *parsed;
    }
    Result<std::unique_ptr<Engine>> e =
        exposed.ok() ? Engine::create(*exposed, {&device}, p) : exposed.status();
    Result<std::map<std::string, HostTensor>> out =
        e.ok() ? (*e)->run(inputs) : Result<std::map<std::string, HostTensor>>(e.status());
    if (!out.ok()) {
      c.error = out.status().message();
      runs.push_back(std::move(c));
      break;
    }
    const Plan& plan = (*e)->plan();
    // Data movement adds no error of its own but carries what its inputs carry: its bound is the
    // loosest of the values it reads (exact only when they are).
    std::vector<Tolerance> carried(g.values().size(), exact_tolerance());
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const GraphNode& n = g.nodes()[i];
      const PlanStep* s = plan.step(n.name);
      Tolerance inherited = exact_tolerance();
      for (int in : n.inputs) inherited = loosest(inherited, carried[u(in)]);
      carried[u(n.output)] = inherited;
      auto got = out->find(n.name);
      if (is_view(n.kind()) || !s || got == out->end()) continue;
      NodeCheck k;
      k.node = static_cast<int>(i);
      k.tier = s->op.choice.tier;
      k.precision = s->op.choice.precision;
      k.tol = tolerance(n.op, k.precision);
      if (k.tol.exact && is_float(n.op.output.dtype)) k.tol = inherited;
      carried[u(n.output)] = k.tol;
      const std::vector<double>& want = ref.exact[u(n.output)];
      k.metrics = compare(got->second.to_doubles(),
                          is_float(n.op.output.dtype) ? rounded(want, n.op.output.dtype) : want,
                          k.tol.exact);
      k.passed = passes(k.metrics, k.tol);
      k.ratio = error_ratio(k.metrics, k.tol);
      if (!k.passed && c.first_failure < 0) {
        c.first_failure = static_cast<int>(c.nodes.size());
        c.alone = run_alone(device, s->op.choice, n, ref);
        c.alone_run = true;
      }
      c.nodes.push_back(std::move(k));
    }
    const std::vector<Tier> more = replaceable_tiers(plan, device.id());
    runs.push_back(std::move(c));
    if (more.empty()) break;
    for (Tier t : more)
      deny += (deny.empty() ? "" : ",") + device.id() + "." + std::string(tier_name(t));
  }
  return runs;
}

}  // namespace duet::check
