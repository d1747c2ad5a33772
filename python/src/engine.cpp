// duet.devices() and duet._Engine: an engine on this process's devices (the registry opened once
// and shared, as duet::open_engine does), runs with the GIL released, inputs read in place and
// outputs handed to NumPy without a copy.
#include <pybind11/stl.h>

#include "common.h"
#include "devices_report.h"
#include "duet/builtin_engine.h"

namespace duetpy {

namespace {

// The Python object's engine. close() drops it; a run in flight keeps its own reference, so a
// close from another thread never pulls the engine from under it.
struct PyEngine {
  std::shared_ptr<duet::Engine> e;
  GraphPtr source;  // the graph as given: names and dtypes of inputs and outputs

  std::shared_ptr<duet::Engine> get() const {
    if (!e)
      throw StatusError(
          duet::Status(duet::Code::invalid_argument, "engine of graph '" + source->name() +
                                                         "' is closed: make a new duet.Engine"),
          "EngineClosedError");
    return e;
  }
};

py::object json_loads(const std::string& text) {
  return py::module_::import("json").attr("loads")(text);
}

}  // namespace

std::optional<duet::Policy> policy_from_object(py::handle policy) {
  if (policy.is_none()) return std::nullopt;
  if (!py::isinstance<py::str>(policy))
    bad_input(
        "policy: expected a string in DUET_POLICY's syntax ('device=cpu;precision=f32') or "
        "None, got " +
        std::string(py::str(py::type::handle_of(policy).attr("__name__"))));
  return unwrap(duet::parse_policy(policy.cast<std::string>(), {}, "policy"));
}

std::vector<duet::Device*> select_devices(py::handle ids) {
  std::shared_ptr<duet::Registry> reg = registry();
  if (ids.is_none()) return reg->devices();
  if (py::isinstance<py::str>(ids)) bad_input("devices: expected a list of ids such as ['cpu:0']");
  std::vector<duet::Device*> out;
  for (py::handle h : ids) {
    const std::string id = py::str(h);
    duet::Device* d = reg->find(id);
    if (!d) {
      std::string known;
      for (duet::Device* k : reg->devices()) known += (known.empty() ? "" : ", ") + k->id();
      raise(duet::Status(duet::Code::not_found,
                         "device '" + id + "': this machine has " + known + " (duet.devices())"));
    }
    out.push_back(d);
  }
  if (out.empty()) bad_input("devices: an empty list; None means every device");
  return out;
}

std::map<std::string, duet::HostTensor> graph_inputs_from_dict(
    const duet::Graph& g, const py::dict& inputs, Borrowed& keep,
    std::map<std::string, duet::DeviceTensor>* device) {
  auto listing = [&] {
    std::string s;
    for (int id : g.inputs())
      s += (s.empty() ? "" : ", ") + g.value(id).name + " (" + g.value(id).desc.str() + ")";
    return s;
  };
  std::map<std::string, duet::HostTensor> out;
  for (auto [k, v] : inputs) {
    if (!py::isinstance<py::str>(k))
      bad_input("inputs: keys are input names (str), got " + std::string(py::repr(k)));
    const std::string name = k.cast<std::string>();
    const std::optional<int> id = g.find(name);
    if (!id || g.value(*id).kind != duet::ValueKind::input)
      raise(duet::Status(duet::Code::not_found, "input '" + name + "': graph '" + g.name() +
                                                    "' has no input of that name; it takes " +
                                                    listing()));
    const duet::DType want = g.value(*id).desc.dtype;
    if (device && in_device_memory(v))
      (*device)[name] = device_tensor_from_object(v, "input '" + name + "'", want);
    else
      out[name] = tensor_from_object(v, "input '" + name + "'", &want, keep);
  }
  for (int id : g.inputs())
    if (!out.count(g.value(id).name) && !(device && device->count(g.value(id).name)))
      bad_input("input '" + g.value(id).name + "' is missing: graph '" + g.name() + "' takes " +
                listing());
  return out;
}

void bind_engine(py::module_& m) {
  m.def(
      "_devices_json",
      [] {
        std::shared_ptr<duet::Registry> reg = registry();
        return json_loads(duet::devices_json(*reg).dump());
      },
      "This machine's backends and devices (what `duet devices --json` prints).");

  py::class_<PyEngine>(m, "_Engine")
      .def(py::init([](py::handle graph, py::handle policy, py::handle devices) {
             PyEngine p;
             p.source = graph_from_object(graph);
             std::optional<duet::Policy> pol = policy_from_object(policy);
             std::vector<duet::Device*> devs = select_devices(devices);
             duet::Result<std::unique_ptr<duet::Engine>> e =
                 duet::Status(duet::Code::internal, "not created");
             {
               // open_engine's rule: the policy given, else DUET_POLICY's.
               py::gil_scoped_release nogil;
               duet::Result<duet::Policy> chosen =
                   pol ? duet::Result<duet::Policy>(*pol) : duet::policy_from_env();
               if (!chosen.ok())
                 e = chosen.status();
               else
                 e = duet::Engine::create(*p.source, devs, std::move(*chosen), registry());
             }
             p.e = unwrap(std::move(e));
             return p;
           }),
           py::arg("graph"), py::arg("policy") = py::none(), py::arg("devices") = py::none())
      .def(
          "run",
          [](const PyEngine& p, const py::dict& inputs, bool as_numpy, bool device_outputs) {
            std::shared_ptr<duet::Engine> e = p.get();
            Borrowed keep;
            duet::DeviceIo io;
            std::map<std::string, duet::HostTensor> in =
                graph_inputs_from_dict(*p.source, inputs, keep, &io.inputs);
            if (device_outputs)
              for (duet::Device* d : registry()->devices())
                if (d->caps().backend == duet::BackendKind::cuda) io.keep_outputs_on.push_back(d);
            const bool on_device = !io.inputs.empty() || !io.keep_outputs_on.empty();
            duet::Result<std::map<std::string, duet::HostTensor>> out =
                duet::Status(duet::Code::internal, "not run");
            {
              py::gil_scoped_release nogil;
              out = on_device ? e->run(in, io) : e->run(in);
            }
            auto result = unwrap(std::move(out));
            py::dict d;
            for (int id : p.source->outputs()) {
              const std::string& name = p.source->value(id).name;
              if (auto dev = io.outputs.find(name); dev != io.outputs.end()) {
                d[py::str(name)] = wrap_device_tensor(std::move(dev->second));
                continue;
              }
              auto it = result.find(name);
              if (it == result.end()) continue;
              d[py::str(name)] =
                  as_numpy ? to_numpy(std::move(it->second)) : wrap_tensor(std::move(it->second));
            }
            return d;
          },
          py::arg("inputs"), py::arg("as_numpy") = true, py::arg("device_outputs") = false)
      .def("explain",
           [](const PyEngine& p) {
             std::shared_ptr<duet::Engine> e = p.get();
             py::gil_scoped_release nogil;
             return e->explain();
           })
      .def("plan", [](const PyEngine& p) { return json_loads(duet::plan_json(p.get()->plan())); })
      .def("plans_made", [](const PyEngine& p) { return p.get()->plans_made(); })
      .def("policy", [](const PyEngine& p) { return p.get()->policy().str(); })
      .def("read_state",
           [](const PyEngine& p, const std::string& name) {
             std::shared_ptr<duet::Engine> e = p.get();
             duet::Result<duet::HostTensor> t = duet::Status(duet::Code::internal, "not read");
             {
               py::gil_scoped_release nogil;
               t = e->read_state(name);
             }
             return to_numpy(unwrap(std::move(t)));
           })
      .def("write_state",
           [](const PyEngine& p, const std::string& name, py::handle value) {
             std::shared_ptr<duet::Engine> e = p.get();
             const std::optional<int> id = p.source->find(name);
             if (!id || p.source->value(*id).kind != duet::ValueKind::state)
               raise(duet::Status(duet::Code::not_found, "state '" + name + "': graph '" +
                                                             p.source->name() +
                                                             "' has no state of that name"));
             const duet::DType want = p.source->value(*id).desc.dtype;
             Borrowed keep;
             duet::HostTensor t = tensor_from_object(value, "state '" + name + "'", &want, keep);
             py::gil_scoped_release nogil;
             check(e->write_state(name, t));
           })
      .def("reset_states",
           [](const PyEngine& p) {
             std::shared_ptr<duet::Engine> e = p.get();
             py::gil_scoped_release nogil;
             check(e->reset_states());
           })
      .def("close", [](PyEngine& p) { p.e.reset(); })
      .def_property_readonly("closed", [](const PyEngine& p) { return !p.e; })
      .def_property_readonly("graph", [](const PyEngine& p) { return wrap_graph(*p.source); });
}

}  // namespace duetpy
