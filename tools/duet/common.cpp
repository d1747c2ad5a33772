#include "duet/common.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "duet/model_file.h"
#include "duet/safetensors.h"

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
    if (!parse_op(op)) return Err(Code::not_found).op(op).note("unknown op");
  return {};
}

Status validate_dtypes(const std::vector<std::string>& dtypes) {
  for (const std::string& t : dtypes)
    if (!parse_dtype(t))
      return Err(Code::not_found).expected("a dtype: f32, f16, bf16, i8, i32").got(t);
  return {};
}

Status write_file_atomically(const std::string& path, const std::string& content) {
  // Unique per process, so two runs writing the same path cannot interleave their partial files.
  const std::string tmp = path + ".partial-" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) return Status(Code::io_error, "cannot write " + path + ": " + std::strerror(errno));
    f << content;
    f.flush();
    if (!f) {
      const std::string why = std::strerror(errno);
      std::remove(tmp.c_str());
      return Status(Code::io_error, "cannot write " + path + ": " + why);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return Status(Code::io_error, "cannot move the finished " + path + " into place: " + why);
  }
  return {};
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

Result<Graph> load_graph_file(const ModelArgs& model, bool load_constants,
                              const std::map<std::string, HostTensor>* inputs,
                              std::vector<std::string>* notes) {
  const std::string& path = model.path;
  {
    std::ifstream probe(path, std::ios::binary);
    if (!probe)
      return Status(Code::not_found,
                    "cannot open graph file '" + path + "': " + std::strerror(errno));
  }
  ModelOptions o;
  o.load_constants = load_constants;
  for (const std::string& d : split_list(model.dims)) {
    const size_t eq = d.find('=');
    int64_t n = 0;
    const char* end = d.data() + d.size();
    const bool number =
        eq != std::string::npos && std::from_chars(d.data() + eq + 1, end, n).ptr == end && n > 0;
    if (eq == 0 || !number)
      return Status(Code::invalid_argument,
                    "--dim '" + d + "': expected NAME=SIZE with a positive size, e.g. batch=4");
    o.onnx.dims[d.substr(0, eq)] = n;
  }
  if (inputs)
    for (const auto& [name, t] : *inputs)
      o.onnx.input_shapes[name] = {t.desc().dims().begin(), t.desc().dims().end()};
  o.onnx.notes = notes;
  DUET_ASSIGN_OR_RETURN(ModelFormat format, model_format(path));
  if (format == ModelFormat::duet_json && !model.dims.empty())
    return Status(Code::invalid_argument,
                  "--dim applies to ONNX models; '" + path + "' is a duet-graph file");
  return load_model(path, o);
}

void add_dim_option(CLI::App& cmd, ModelArgs& model) {
  cmd.add_option("--dim", model.dims,
                 "ONNX models: the size of a symbolic dimension, NAME=SIZE (repeatable; unnamed "
                 "and unset dimensions are 1)");
}

Result<std::map<std::string, HostTensor>> read_inputs_file(const std::string& path) {
  DUET_ASSIGN_OR_RETURN(SafetensorsFile f, read_safetensors(path));
  std::map<std::string, HostTensor> out;
  for (const SafetensorsEntry& e : f.tensors) {
    if (e.dtype != "I64") {
      auto t = f.tensor(e.name);
      if (!t.ok()) return t.status().with_context("inputs file '" + path + "'");
      out[e.name] = std::move(*t);
      continue;
    }
    auto fail = [&](const std::string& why) {
      return Status(Code::invalid_argument,
                    "inputs file '" + path + "': tensor '" + e.name + "' (I64): " + why);
    };
    if (e.shape.size() > static_cast<size_t>(kMaxRank)) return fail("rank above 4");
    const TensorDesc desc = TensorDesc::contiguous(DType::i32, e.shape);
    if (Status s = validate(desc); !s.ok()) return fail(s.message());
    HostTensor t = HostTensor::empty(desc);
    for (int64_t i = 0; i < t.numel(); ++i) {
      int64_t v;
      std::memcpy(&v, f.data.data() + e.begin + static_cast<uint64_t>(i) * 8, 8);
      if (v < INT32_MIN || v > INT32_MAX)
        return fail("value " + std::to_string(v) + " at element " + std::to_string(i) +
                    " does not fit the i32 duet holds ids in");
      t.data<int32_t>()[i] = static_cast<int32_t>(v);
    }
    out[e.name] = std::move(t);
  }
  return out;
}

namespace {
// Deterministic inputs when none are given: floats in +-[0.05, 1]; integers in [0, n) where n is
// the row count of the embedding table they index (else 10).
HostTensor random_input(const Graph& g, int value, uint64_t seed) {
  const GraphValue& v = g.value(value);
  HostTensor t = HostTensor::empty(v.desc);
  int64_t range = 0;
  for (const GraphNode& n : g.nodes())
    if (n.kind() == OpKind::embedding && n.inputs.size() == 2 && n.inputs[1] == value) {
      const int64_t rows = g.value(n.inputs[0]).desc.dim(0);
      range = range == 0 ? rows : std::min(range, rows);
    }
  if (range == 0) range = 10;
  std::vector<double> x(static_cast<size_t>(t.numel()));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (double& e : x) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const double r = static_cast<double>(s >> 11) / 9007199254740992.0;  // [0, 1)
    if (is_float(v.desc.dtype))
      e = (0.05 + 0.95 * r) * ((s >> 7) & 1 ? 1 : -1);
    else
      e = std::floor(r * static_cast<double>(range));
  }
  t.from_doubles(x);
  return t;
}
}  // namespace

Result<std::map<std::string, HostTensor>> graph_inputs(
    const Graph& g, const std::map<std::string, HostTensor>* given, const std::string& path,
    std::string& note) {
  std::map<std::string, HostTensor> in;
  if (!given) {
    for (int id : g.inputs()) in[g.value(id).name] = random_input(g, id, static_cast<uint64_t>(id));
    note = g.inputs().empty() ? "" : "inputs: random (no --inputs given)";
    return in;
  }
  in = *given;
  std::string names;
  for (int id : g.inputs()) names += (names.empty() ? "" : ", ") + g.value(id).name;
  for (const auto& [name, t] : in)
    if (!g.find(name) || g.value(*g.find(name)).kind != ValueKind::input)
      return Status(Code::invalid_argument, "inputs file '" + path + "': tensor '" + name +
                                                "' is not an input of graph '" + g.name() +
                                                "' (its inputs: " + names + ")");
  for (int id : g.inputs())
    if (!in.count(g.value(id).name))
      return Status(Code::invalid_argument, "inputs file '" + path + "': no tensor '" +
                                                g.value(id).name + "' (graph '" + g.name() +
                                                "' needs: " + names + ")");
  note = "inputs: " + path;
  return in;
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
