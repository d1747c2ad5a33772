// duet.check() and duet.bench() as data: the machinery of `duet check MODEL` (tools/check: every
// value of the graph on the float64 reference, each device's run compared op by op, the first op
// whose error leaves the tolerance of its precision marked) and whole-graph timings per device
// with the time of every step.
#include <algorithm>
#include <chrono>
#include <cmath>

#include <pybind11/stl.h>

#include "check/graph_check.h"
#include "check/inputs.h"
#include "common.h"
#include "duet/builtin_engine.h"
#include "duet/internal/index.h"

namespace duetpy {

namespace {

using duet::u;

// The run's inputs: the given ones (every input, checked by name and dtype) or, without them,
// the deterministic random inputs `duet check` draws (inside each op's domain).
std::map<std::string, duet::HostTensor> inputs_for(const duet::Graph& g, py::handle inputs,
                                                   Borrowed& keep, std::string& note) {
  if (inputs.is_none()) {
    duet::check::InputsSource none;
    auto drawn = duet::check::graph_inputs(g, nullptr, none, note);
    note = "random inputs, drawn inside each op's domain";
    return unwrap(std::move(drawn));
  }
  if (!py::isinstance<py::dict>(inputs))
    bad_input("inputs: expected a dict of input name -> array, or None for random inputs");
  note = "inputs given";
  return graph_inputs_from_dict(g, inputs.cast<py::dict>(), keep);
}

duet::Policy policy_or_env(py::handle policy) {
  if (std::optional<duet::Policy> p = policy_from_object(policy)) return *p;
  return unwrap(duet::policy_from_env());
}

py::object finite_or_none(double v) {
  return std::isfinite(v) ? py::object(py::float_(v)) : py::object(py::none());
}

py::dict run_dict(const duet::Graph& g, const duet::check::GraphCheck& r) {
  py::dict d;
  d["device"] = r.device;
  d["deny"] = r.deny;
  d["error"] = r.error.empty() ? py::object(py::none()) : py::object(py::str(r.error));
  d["first_failure"] =
      r.first_failure < 0
          ? py::object(py::none())
          : py::object(py::str(g.nodes()[u(r.nodes[u(r.first_failure)].node)].name));
  py::list ops;
  for (const duet::check::NodeCheck& k : r.nodes) {
    const duet::GraphNode& n = g.nodes()[u(k.node)];
    py::dict o;
    o["node"] = n.name;
    o["op"] = std::string(duet::op_name(n.kind()));
    o["output"] = n.op.output.str();
    o["tier"] = std::string(duet::tier_name(k.tier));
    o["precision"] = std::string(duet::precision_name(k.precision));
    o["passed"] = k.passed;
    o["ratio"] = finite_or_none(k.ratio);
    o["nmse"] = k.metrics.nmse;
    o["max_abs"] = k.metrics.max_abs;
    o["max_rel"] = k.metrics.max_rel;
    o["nan"] = k.metrics.nan;
    o["mismatches"] = k.metrics.mismatches;
    o["reference_nan"] = k.metrics.undefined;
    o["tolerance"] = k.tol.str();
    ops.append(o);
  }
  d["ops"] = ops;
  if (r.alone_run) {
    py::dict a;
    a["passed"] = r.alone.passed;
    a["nmse"] = r.alone.metrics.nmse;
    a["max_rel"] = r.alone.metrics.max_rel;
    a["message"] = r.alone.message;
    d["first_failure_alone"] = a;
  } else {
    d["first_failure_alone"] = py::none();
  }
  return d;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

void bind_check(py::module_& m) {
  m.def(
      "_check",
      [](py::handle model, py::handle inputs, py::handle devices, py::handle policy) {
        GraphPtr g = graph_from_object(model);
        if (auto missing = g->unbound_constants(); !missing.empty())
          bad_input("graph '" + g->name() + "': constant '" + missing[0] + "' has no data");
        duet::Policy pol = policy_or_env(policy);
        std::vector<duet::Device*> devs = select_devices(devices);
        Borrowed keep;
        std::string note;
        std::map<std::string, duet::HostTensor> in = inputs_for(*g, inputs, keep, note);
        std::vector<duet::check::GraphCheck> runs;
        duet::Status failed;
        {
          py::gil_scoped_release nogil;
          auto ref = duet::check::reference_graph(*g, in);
          if (!ref.ok()) {
            failed = ref.status().with_context("float64 reference");
          } else {
            for (duet::Device* d : devs)
              for (auto& r : duet::check::check_graph(*g, *ref, in, *d, pol))
                runs.push_back(std::move(r));
          }
        }
        check(failed);
        py::dict report;
        report["model"] = g->name();
        report["inputs"] = note;
        report["policy"] = pol.str();
        py::list rs;
        for (const auto& r : runs) rs.append(run_dict(*g, r));
        report["runs"] = rs;
        return report;
      },
      py::arg("model"), py::arg("inputs") = py::none(), py::arg("devices") = py::none(),
      py::arg("policy") = py::none());

  m.def(
      "_bench",
      [](py::handle model, py::handle inputs, py::handle devices, py::handle policy, int repeats,
         double min_seconds) {
        if (repeats < 1) bad_input("repeats: expected at least 1, got " + std::to_string(repeats));
        GraphPtr g = graph_from_object(model);
        duet::Policy pol = policy_or_env(policy);
        std::vector<duet::Device*> devs = select_devices(devices);
        Borrowed keep;
        std::string note;
        std::map<std::string, duet::HostTensor> in = inputs_for(*g, inputs, keep, note);
        struct Row {
          std::string device, error;
          std::vector<double> times;
          std::vector<std::tuple<std::string, std::string, std::string, double>> steps;
        };
        std::vector<Row> rows;
        {
          py::gil_scoped_release nogil;
          for (duet::Device* d : devs) {
            Row r;
            r.device = d->id();
            auto e = duet::Engine::create(*g, {d}, pol, registry());
            auto run_once = [&]() -> duet::Status {
              const auto t0 = std::chrono::steady_clock::now();
              auto out = (*e)->run(in);
              if (!out.ok()) return out.status();
              r.times.push_back(
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
              return {};
            };
            duet::Status s = e.ok() ? run_once() : e.status();  // warm-up
            r.times.clear();
            double total = 0;
            while (s.ok() && static_cast<int>(r.times.size()) < repeats &&
                   (r.times.size() < 3 || total < min_seconds)) {
              s = run_once();
              if (s.ok()) total += r.times.back();
            }
            std::vector<duet::StepTime> times;
            if (s.ok()) s = (*e)->run_timed(in, times).status();
            if (!s.ok()) {
              r.error = s.message();
            } else {
              const duet::Plan& plan = (*e)->plan();
              for (const duet::StepTime& t : times) {
                const duet::PlanStep& st = plan.steps[u(t.step)];
                const std::string what =
                    st.kind == duet::StepKind::kernel
                        ? std::string(duet::op_name(st.op.op.kind)) + " " +
                              std::string(duet::tier_name(st.op.choice.tier)) + " " +
                              std::string(duet::precision_name(st.op.choice.precision))
                        : std::string(duet::step_kind_name(st.kind));
                r.steps.emplace_back(st.name, what, plan.device_name(st.device), t.seconds);
              }
            }
            rows.push_back(std::move(r));
          }
        }
        py::dict report;
        report["model"] = g->name();
        report["inputs"] = note;
        report["policy"] = pol.str();
        py::list rs;
        for (const Row& r : rows) {
          py::dict d;
          d["device"] = r.device;
          d["error"] = r.error.empty() ? py::object(py::none()) : py::object(py::str(r.error));
          d["runs"] = r.error.empty() ? r.times.size() : 0;
          d["median_s"] =
              r.error.empty() ? py::object(py::float_(median(r.times))) : py::object(py::none());
          d["min_s"] =
              r.error.empty()
                  ? py::object(py::float_(*std::min_element(r.times.begin(), r.times.end())))
                  : py::object(py::none());
          d["max_s"] =
              r.error.empty()
                  ? py::object(py::float_(*std::max_element(r.times.begin(), r.times.end())))
                  : py::object(py::none());
          py::list steps;
          for (const auto& [name, what, device, seconds] : r.steps) {
            py::dict s;
            s["name"] = name;
            s["what"] = what;
            s["device"] = device;
            s["seconds"] = seconds;
            steps.append(s);
          }
          d["steps"] = steps;
          rs.append(d);
        }
        report["runs"] = rs;
        return report;
      },
      py::arg("model"), py::arg("inputs") = py::none(), py::arg("devices") = py::none(),
      py::arg("policy") = py::none(), py::arg("repeats") = 10, py::arg("min_seconds") = 0.2);
}

}  // namespace duetpy
