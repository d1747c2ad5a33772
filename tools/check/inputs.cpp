#include "check/inputs.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "duet/internal/files.h"
#include "duet/safetensors.h"

namespace duet::check {

std::string InputsSource::what() const {
  return std::string(folder ? "inputs folder '" : "inputs file '") + path + "'";
}

std::string InputsSource::where(const std::string& tensor) const {
  auto it = files.find(tensor);
  return what() + (folder && it != files.end() ? ", file '" + it->second + "'" : "");
}

std::string npy_file_name(const std::string& tensor) {
  std::string out;
  for (size_t i = 0; i < tensor.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(tensor[i]);
    if (std::isalnum(c) || c == '_' || c == '-' || (c == '.' && i > 0)) {
      out += static_cast<char>(c);
    } else {
      char b[4];
      std::snprintf(b, sizeof b, "%%%02X", c);
      out += b;
    }
  }
  return out + ".npy";
}

std::string npy_tensor_name(const std::string& file_name) {
  std::string s = file_name;
  if (s.size() >= 4 && s.compare(s.size() - 4, 4, ".npy") == 0) s.resize(s.size() - 4);
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

Result<std::map<std::string, HostTensor>> read_inputs_file(const std::string& path) {
  DUET_ASSIGN_OR_RETURN(SafetensorsFile f, read_safetensors(path));
  return inputs_from(f, InputsSource{path, false, {}});
}

Result<std::map<std::string, HostTensor>> inputs_from(const SafetensorsFile& f,
                                                      const InputsSource& source) {
  std::map<std::string, HostTensor> out;
  for (const SafetensorsEntry& e : f.tensors) {
    if (e.dtype != "I64") {
      auto t = f.tensor(e.name);
      if (!t.ok()) return t.status().with_context(source.where(e.name));
      out[e.name] = std::move(*t);
      continue;
    }
    auto fail = [&](const std::string& why) {
      return Status(Code::invalid_argument,
                    source.where(e.name) + ": tensor '" + e.name + "' (I64): " + why);
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
// How many values an integer input may take, [0, n), for the ops reading it: the rows of the
// embedding table it indexes, the room a run-time scalar has (a write_slice's offset, attention's
// key count), else 0 (no limit known).
int64_t integer_range(const Graph& g, int value) {
  int64_t range = 0;
  auto limit = [&](int64_t n) { range = range == 0 ? n : std::min(range, n); };
  for (const GraphNode& n : g.nodes()) {
    const OpDesc& op = n.op;
    if (n.kind() == OpKind::embedding && n.inputs.size() == 2 && n.inputs[1] == value)
      limit(g.value(n.inputs[0]).desc.dim(0));
    const int si = scalar_input(op);
    if (si < 0 || n.inputs[static_cast<size_t>(si)] != value) continue;
    if (n.kind() == OpKind::attention) limit(op.inputs[1].dim(2) + 1);
    if (n.kind() == OpKind::write_slice)
      limit(std::max<int64_t>(
          1, op.output.dim(op.attrs.axis) - op.inputs[1].dim(op.attrs.axis) - op.attrs.start + 1));
  }
  return range;
}

// Whether a float input must be drawn positive: an op that reads it, directly or through ops that
// move values unchanged (views, copies, casts, concat, a row lookup, a slice write), asks for
// positive values (op_input_range: log, sqrt, pow's base, a divisor), as the op checks draw them.
bool needs_positive(const Graph& g, int value) {
  std::vector<int> todo = {value};
  std::vector<char> seen(g.values().size(), 0);
  while (!todo.empty()) {
    const int at = todo.back();
    todo.pop_back();
    if (seen[static_cast<size_t>(at)]) continue;
    seen[static_cast<size_t>(at)] = 1;
    for (const GraphNode& n : g.nodes())
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (n.inputs[i] != at) continue;
        if (op_input_range(n.kind(), i) == InputRange::positive) return true;
        const OpKind k = n.kind();
        const bool moves = is_view(k) || k == OpKind::copy || k == OpKind::cast ||
                           k == OpKind::concat || (k == OpKind::embedding && i == 0) ||
                           (k == OpKind::write_slice && i < 2);
        if (moves) todo.push_back(n.output);
      }
  }
  return false;
}

// Deterministic inputs when none are given: floats in +-[0.05, 1] (in [0.05, 1] where
// needs_positive); integers in [0, n) with n from integer_range (else 10).
HostTensor random_input(const Graph& g, int value, uint64_t seed) {
  const GraphValue& v = g.value(value);
  HostTensor t = HostTensor::empty(v.desc);
  int64_t range = integer_range(g, value);
  if (range == 0) range = 10;
  const bool positive = is_float(v.desc.dtype) && needs_positive(g, value);
  std::vector<double> x(static_cast<size_t>(t.numel()));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (double& e : x) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const double r = static_cast<double>(s >> 11) / 9007199254740992.0;  // [0, 1)
    if (is_float(v.desc.dtype))
      e = (0.05 + 0.95 * r) * ((s >> 7) & 1 || positive ? 1 : -1);
    else
      e = std::floor(r * static_cast<double>(range));
  }
  t.from_doubles(x);
  return t;
}
}  // namespace

Result<std::map<std::string, HostTensor>> random_graph_inputs(const Graph& g, uint64_t seed) {
  // Every input is held at once: the sum is checked before the first is allocated.
  uint64_t total = 0;
  for (int id : g.inputs()) {
    const GraphValue& v = g.value(id);
    total += static_cast<uint64_t>(v.desc.nbytes());
    DUET_TRY(check_host_bytes(
        total, "graph '" + g.name() + "': random values for input '" + v.name + "' " +
                   v.desc.str() + (g.inputs().size() > 1 ? " and the inputs before it" : "")));
  }
  std::map<std::string, HostTensor> in;
  for (int id : g.inputs())
    in[g.value(id).name] = random_input(g, id, static_cast<uint64_t>(id) + (seed << 32));
  return in;
}

Result<std::map<std::string, HostTensor>> graph_inputs(
    const Graph& g, const std::map<std::string, HostTensor>* given, const InputsSource& source,
    std::string& note) {
  std::map<std::string, HostTensor> in;
  if (!given) {
    DUET_ASSIGN_OR_RETURN(in, random_graph_inputs(g, 0));
    note = g.inputs().empty() ? "" : "inputs: random (no --inputs given)";
    return in;
  }
  in = *given;
  std::string names;
  for (int id : g.inputs()) names += (names.empty() ? "" : ", ") + g.value(id).name;
  const bool npy = !source.files.empty() || source.folder;
  for (const auto& [name, t] : in)
    if (!g.find(name) || g.value(*g.find(name)).kind != ValueKind::input)
      return Status(Code::invalid_argument, source.where(name) + ": tensor '" + name +
                                                "' is not an input of graph '" + g.name() +
                                                "' (its inputs: " + names + ")");
  for (int id : g.inputs()) {
    const std::string& name = g.value(id).name;
    if (in.count(name)) continue;
    return Status(Code::invalid_argument,
                  source.what() + ": no " +
                      (npy ? "file '" + npy_file_name(name) + "' for input '" + name + "'"
                           : "tensor '" + name + "'") +
                      " (graph '" + g.name() + "' needs: " + names + ")");
  }
  // A duet-graph file declares each input's dtype and shape, and a tensor that differs is a
  // mistake to report, not a reason to plan again (an ONNX model's symbolic dimensions were
  // already sized from this file).
  for (int id : g.inputs()) {
    const GraphValue& v = g.value(id);
    const TensorDesc& t = in.at(v.name).desc();
    if (t.dtype != v.desc.dtype ||
        !std::equal(t.dims().begin(), t.dims().end(), v.desc.dims().begin(), v.desc.dims().end()))
      return at(source.where(v.name),
                Err(Code::invalid_argument)
                    .tensor(v.name)
                    .expected(TensorDesc::contiguous(v.desc.dtype, v.desc.dims()).str() +
                              " (graph '" + g.name() + "' declares it so)")
                    .got(TensorDesc::contiguous(t.dtype, t.dims()).str()));
  }
  note = "inputs: " + source.path;
  return in;
}

}  // namespace duet::check
