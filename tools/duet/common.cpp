#include "duet/common.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "duet/internal/files.h"
#include "duet/internal/text.h"
#include "duet/model_file.h"
#include "duet/planner.h"

namespace duet::cli {

Result<std::vector<Device*>> select_devices(const Registry& reg,
                                            const std::vector<std::string>& ids) {
  std::vector<Device*> out;
  for (const std::string& id : ids) {
    Device* d = reg.find(id);
    if (!d) {
      std::string known;
      for (Device* k : reg.devices()) known += (known.empty() ? "" : ", ") + k->id();
      return Err(Code::not_found)
          .device(id)
          .expected("one of: " + known)
          .note("see `duet devices`");
    }
    out.push_back(d);
  }
  if (out.empty()) out = reg.devices();
  return out;
}

Status validate_ops(const std::vector<std::string>& ops) {
  for (const std::string& op : ops)
    if (!parse_op(op)) {
      std::string known;
      for (int k = 0; k < kNumOpKinds; ++k)
        known += (k ? ", " : "") + std::string(op_name(static_cast<OpKind>(k)));
      return Status(Code::not_found, "op '" + op + "': expected one of " + known);
    }
  return {};
}

Status validate_dtypes(const std::vector<std::string>& dtypes) {
  for (const std::string& t : dtypes)
    if (!parse_dtype(t))
      return Err(Code::not_found)
          .expected("a dtype: " + dtype_names(kElementDTypes) + ", or a block format (" +
                    dtype_names(kQuantizedDTypes) + ")")
          .got(t);
  return {};
}

Status write_file_atomically(const std::string& path, const std::string& content) {
  return duet::write_file_atomically(path, content);
}

int exit_status_for(const Status& s) {
  switch (s.code()) {
    case Code::invalid_argument:
    case Code::not_found:
    case Code::parse_error:
      return 2;
    default:
      return 1;
  }
}

bool selected(const std::vector<std::string>& list, std::string_view value) {
  return list.empty() || std::find(list.begin(), list.end(), value) != list.end();
}

bool dtypes_selected(const std::vector<std::string>& list, const std::vector<TensorDesc>& inputs) {
  if (list.empty() || inputs.empty()) return true;
  if (selected(list, dtype_name(inputs[0].dtype))) return true;
  for (const TensorDesc& t : inputs)
    if (is_quantized(t.dtype) && selected(list, dtype_name(t.dtype))) return true;
  return false;
}

std::string ChosenPolicy::line() const {
  return "policy: " + (policy.empty() ? std::string("(none)") : policy.str()) + " (from " + source +
         ")";
}

Result<ChosenPolicy> choose_policy(const std::optional<std::string>& cli_text) {
  const char* env = std::getenv("DUET_POLICY");
  const bool env_set = env && *env;
  ChosenPolicy c;
  if (cli_text) {
    DUET_ASSIGN_OR_RETURN(c.policy, parse_policy(*cli_text, {}, "--policy"));
    c.source = "--policy";
    if (env_set) c.source += ", which wins over DUET_POLICY='" + std::string(env) + "'";
    return c;
  }
  if (env_set) {
    DUET_ASSIGN_OR_RETURN(c.policy, parse_policy(env, {}, "DUET_POLICY"));
    c.source = "DUET_POLICY";
    return c;
  }
  c.source = "default: no --policy, DUET_POLICY unset";
  return c;
}

int plan_failure_status(const Graph& graph, const std::vector<PlanDevice>& devices,
                        const Policy& policy, const Status& failure) {
  if (failure.code() != Code::unsupported && failure.code() != Code::out_of_memory)
    return exit_status_for(failure);
  if (policy.empty()) return 1;
  return make_plan(graph, devices, Policy{}).ok() ? 2 : 1;
}

Result<LoadedModel> load_model_and_inputs(const ModelArgs& model, const std::string& inputs_path) {
  std::optional<std::map<std::string, HostTensor>> given;
  check::InputsSource source;
  if (!inputs_path.empty()) {
    DUET_ASSIGN_OR_RETURN(auto read, read_inputs(inputs_path, source));
    given = std::move(read);
  }
  // One .npy file given for a graph of one input is that input, whatever the file is named
  // (docs/cli.md): the graph's inputs are read first (shapes only), then the tensor renamed, so
  // that an ONNX model's symbolic dims take its sizes.
  if (given && !source.folder && !source.files.empty() && given->size() == 1) {
    DUET_ASSIGN_OR_RETURN(Graph peek, load_graph_file(model, false, nullptr, nullptr));
    if (peek.inputs().size() == 1) {
      const std::string& name = peek.value(peek.inputs()[0]).name;
      if (!given->count(name)) {
        auto one = given->extract(given->begin());
        one.key() = name;
        given->insert(std::move(one));
        source.files = {{name, source.files.begin()->second}};
      }
    }
  }
  LoadedModel m;
  DUET_ASSIGN_OR_RETURN(m.graph, load_graph_file(model, true, given ? &*given : nullptr, &m.notes));
  if (auto missing = m.graph.unbound_constants(); !missing.empty()) {
    std::string names;
    for (const std::string& n : missing) names += (names.empty() ? "" : ", ") + n;
    return Status(Code::invalid_argument,
                  "graph '" + m.graph.name() + "': constants without data: " + names +
                      " (give each a \"file\" or \"values\" in the graph file)");
  }
  DUET_ASSIGN_OR_RETURN(
      m.inputs, check::graph_inputs(m.graph, given ? &*given : nullptr, source, m.inputs_note));
  return m;
}

Result<Graph> load_graph_file(const ModelArgs& model, bool load_constants,
                              const std::map<std::string, HostTensor>* inputs,
                              std::vector<std::string>* notes) {
  const std::string& path = model.path;
  ModelOptions o;
  o.load_constants = load_constants;
  {
    // One list, so that a dimension given twice with two sizes is caught across --dim options.
    std::string all;
    for (const std::string& d : split_list(model.dims)) all += (all.empty() ? "" : ",") + d;
    auto parsed = parse_onnx_dims(all);
    if (!parsed.ok()) return Status(Code::invalid_argument, "--dim: " + parsed.status().message());
    o.onnx.dims = std::move(*parsed);
  }
  if (inputs)
    for (const auto& [name, t] : *inputs)
      o.onnx.input_shapes[name] = {t.desc().dims().begin(), t.desc().dims().end()};
  o.onnx.notes = notes;
  ModelFormat format = ModelFormat::onnx;
  auto g = load_model(path, o, &format);
  if (format == ModelFormat::duet_json && !model.dims.empty())
    return Status(Code::invalid_argument,
                  "--dim applies to ONNX models; '" + path + "' is a duet-graph file");
  return g;
}

void add_dim_option(CLI::App& cmd, ModelArgs& model) {
  cmd.add_option("--dim", model.dims,
                 "ONNX models: the size of a symbolic dimension, NAME=SIZE (repeatable; unnamed "
                 "and unset dimensions are 1)");
}

std::vector<std::string> split_list(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const std::string& item : items) {
    size_t start = 0;
    while (start <= item.size()) {
      const size_t comma = std::min(item.find(',', start), item.size());
      if (comma > start) out.push_back(item.substr(start, comma - start));
      start = comma + 1;
    }
  }
  return out;
}

}  // namespace duet::cli
