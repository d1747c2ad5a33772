#include "duet/graph_file.h"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "constant_files.h"
#include "duet/gguf.h"
#include "duet/internal/attrs_json.h"
#include "duet/internal/files.h"
#include "duet/internal/json.h"
#include "duet/internal/text.h"
#include "duet/safetensors.h"

namespace duet {

using nlohmann::json;
using ojson = nlohmann::ordered_json;
namespace fs = std::filesystem;

namespace {

// Floats: numbers when finite (a double holds a float exactly, and the JSON writer prints the
// shortest text that reads back to the same double), strings otherwise.
ojson float_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

// A float as the double of its shortest decimal ("0.1", not "0.10000000149011612"), when that
// double reads back to the same float; else the float's exact double.
ojson float_json(float f) {
  if (!std::isfinite(f)) return float_json(static_cast<double>(f));
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, f);
  const double d = std::strtod(std::string(buf, r.ptr).c_str(), nullptr);
  return static_cast<float>(d) == f ? ojson(d) : ojson(static_cast<double>(f));
}

bool float_from(const json& j, double* out) {
  if (j.is_number()) {
    *out = j.get<double>();
    return true;
  }
  if (!j.is_string()) return false;
  const std::string s = j.get<std::string>();
  if (s == "nan")
    *out = std::numeric_limits<double>::quiet_NaN();
  else if (s == "inf")
    *out = std::numeric_limits<double>::infinity();
  else if (s == "-inf")
    *out = -std::numeric_limits<double>::infinity();
  else
    return false;
  return true;
}

// Every OpAttrs field, listed once for both directions: name, write (when not default), read.
struct AttrIO {
  ojson* out = nullptr;      // writing
  const json* in = nullptr;  // reading
  OpAttrs* attrs = nullptr;
  std::set<std::string> seen;  // fields read
  std::string error;           // first bad field
};

template <class T>
bool read_as(const json& j, T* v) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!j.is_boolean()) return false;
    *v = j.get<bool>();
  } else if constexpr (std::is_same_v<T, float>) {
    double d;
    if (!float_from(j, &d)) return false;
    *v = static_cast<float>(d);
  } else if constexpr (std::is_integral_v<T>) {
    if (!j.is_number_integer()) return false;
    const int64_t x = j.get<int64_t>();
    if (x < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        x > static_cast<int64_t>(std::numeric_limits<T>::max()))
      return false;
    *v = static_cast<T>(x);
  } else {
    return false;
  }
  return true;
}

template <class T>
ojson write_as(const T& v) {
  if constexpr (std::is_same_v<T, float>)
    return float_json(v);
  else
    return v;
}

template <class T>
void field(AttrIO& io, const char* key, T& v, const T& def) {
  if (io.out) {
    if (!(v == def)) (*io.out)[key] = write_as(v);
    return;
  }
  if (!io.in->contains(key) || !io.error.empty()) return;
  io.seen.insert(key);
  if (!read_as((*io.in)[key], &v)) io.error = key;
}

template <class F>
void attr_fields(AttrIO& io, OpAttrs& a, F&& custom) {
  const OpAttrs d;
  field(io, "transpose_a", a.transpose_a, d.transpose_a);
  field(io, "transpose_b", a.transpose_b, d.transpose_b);
  field(io, "alpha", a.alpha, d.alpha);
  field(io, "exponent", a.exponent, d.exponent);
  field(io, "eps", a.eps, d.eps);
  field(io, "causal", a.causal, d.causal);
  field(io, "rope_offset", a.rope_offset, d.rope_offset);
  field(io, "rope_theta", a.rope_theta, d.rope_theta);
  field(io, "rope_dims", a.rope_dims, d.rope_dims);
  field(io, "axis", a.axis, d.axis);
  field(io, "start", a.start, d.start);
  field(io, "stop", a.stop, d.stop);
  field(io, "step", a.step, d.step);
  field(io, "dim0", a.dim0, d.dim0);
  field(io, "dim1", a.dim1, d.dim1);
  field(io, "negative_ids", a.negative_ids, d.negative_ids);
  custom();  // scale, gelu_approx, rope_mode, to, shape, perm, axes: not plain scalars
}

ojson attrs_to_json(const OpAttrs& attrs) {
  ojson j = ojson::object();
  OpAttrs a = attrs;
  AttrIO io;
  io.out = &j;
  attr_fields(io, a, [&] {
    if (a.scale) j["scale"] = float_json(static_cast<float>(*a.scale));
    if (a.gelu_approx != GeluApprox::none) j["gelu_approx"] = gelu_approx_name(a.gelu_approx);
    if (a.rope_mode != RopeMode::neox) j["rope_mode"] = rope_mode_name(a.rope_mode);
    if (a.to != DType::f32) j["to"] = dtype_name(a.to);
    if (!a.shape.empty()) j["shape"] = a.shape;
    if (!a.perm.empty()) j["perm"] = a.perm;
    if (!a.axes.empty()) j["axes"] = a.axes;
  });
  return j;
}

}  // namespace

// The error for a bad attribute names the node and the field.
Result<OpAttrs> attrs_from_json(const json& j, const std::string& node) {
  auto bad = [&](const std::string& key, const std::string& want) -> Status {
    return at("attrs." + key, Err(Code::parse_error)
                                  .expected(want)
                                  .got(j.contains(key) ? json_excerpt(j[key]) : "none"))
        .with_context("node '" + node + "'");
  };
  if (!j.is_object()) return Err(Code::parse_error).op("node", node).expected("attrs object");
  OpAttrs a;
  AttrIO io;
  io.in = &j;
  std::string custom_error;
  attr_fields(io, a, [&] {
    auto take = [&](const char* key) {
      if (!j.contains(key)) return false;
      io.seen.insert(key);
      return true;
    };
    double d;
    if (take("scale")) {
      if (float_from(j["scale"], &d))
        a.scale = static_cast<float>(d);
      else
        custom_error = "scale";
    }
    if (take("gelu_approx")) {
      const json& v = j["gelu_approx"];
      if (v == "none")
        a.gelu_approx = GeluApprox::none;
      else if (v == "tanh")
        a.gelu_approx = GeluApprox::tanh;
      else
        custom_error = "gelu_approx";
    }
    if (take("rope_mode")) {
      const json& v = j["rope_mode"];
      if (v == "neox")
        a.rope_mode = RopeMode::neox;
      else if (v == "gptj")
        a.rope_mode = RopeMode::gptj;
      else
        custom_error = "rope_mode";
    }
    if (take("to")) {
      auto t = j["to"].is_string() ? parse_dtype(j["to"].get<std::string>()) : std::nullopt;
      if (t)
        a.to = *t;
      else
        custom_error = "to";
    }
    if (take("shape")) {
      const json& v = j["shape"];
      bool ok = v.is_array();
      for (size_t i = 0; ok && i < v.size(); ++i) ok = v[i].is_number_integer();
      if (ok)
        a.shape = v.get<std::vector<int64_t>>();
      else
        custom_error = "shape";
    }
    for (const char* key : {"perm", "axes"}) {
      if (!take(key)) continue;
      const json& v = j[key];
      bool ok = v.is_array();
      for (size_t i = 0; ok && i < v.size(); ++i)
        ok = v[i].is_number_integer() && std::abs(v[i].get<int64_t>()) < 1000;
      if (ok)
        (key[0] == 'p' ? a.perm : a.axes) = v.get<std::vector<int>>();
      else
        custom_error = key;
    }
  });
  if (!io.error.empty()) return bad(io.error, "a value of the field's type");
  if (!custom_error.empty()) {
    static const std::map<std::string, std::string> want = {
        {"scale", "a number"},
        {"gelu_approx", "\"none\" or \"tanh\""},
        {"rope_mode", "\"neox\" or \"gptj\""},
        {"to", "a dtype (f32, f16, bf16, i8, i32)"},
        {"shape", "an array of integers"},
        {"perm", "an array of small integers"},
        {"axes", "an array of small integers"}};
    return bad(custom_error, want.at(custom_error));
  }
  for (const auto& [key, _] : j.items())
    if (!io.seen.count(key))
      return bad(
          key,
          "a known attribute (transpose_a, transpose_b, alpha, exponent, scale, eps, causal, "
          "gelu_approx, rope_mode, rope_offset, rope_theta, rope_dims, to, axis, "
          "start, stop, step, dim0, dim1, negative_ids, shape, perm, axes)");
  return a;
}

namespace {

Status parse_err(const std::string& where, const std::string& expected, const json& got) {
  return at(
      where,
      Err(Code::parse_error).expected(expected).got(got.is_null() ? "none" : json_excerpt(got)));
}

Status check_keys(const json& obj, const std::string& where, std::set<std::string> allowed) {
  for (const auto& [key, _] : obj.items())
    if (!allowed.count(key)) {
      std::string list;
      for (const std::string& k : allowed) list += (list.empty() ? "" : ", ") + k;
      return at(where, Err(Code::parse_error).expected("fields " + list).got("'" + key + "'"));
    }
  return {};
}

struct TensorDecl {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
};

Result<TensorDecl> decl_from(const json& j, const std::string& what) {
  if (!j.is_object()) return parse_err(what, "an object", j);
  TensorDecl d;
  if (!j.contains("name") || !j["name"].is_string())
    return parse_err(what, "a \"name\" string", j.value("name", json()));
  d.name = j["name"].get<std::string>();
  const std::string where = what + " '" + d.name + "'";
  auto dt = j.contains("dtype") && j["dtype"].is_string()
                ? parse_dtype(j["dtype"].get<std::string>())
                : std::nullopt;
  if (!dt)
    return parse_err(
        where + " dtype",
        dtype_names(kElementDTypes) + " or a block format (" + dtype_names(kQuantizedDTypes) + ")",
        j.value("dtype", json()));
  d.dtype = *dt;
  const json& s = j.contains("shape") ? j["shape"] : json();
  bool ok = s.is_array() && s.size() <= static_cast<size_t>(kMaxRank);
  for (size_t i = 0; ok && i < s.size(); ++i)
    ok = s[i].is_number_integer() && s[i].get<int64_t>() > 0;
  if (!ok)
    return parse_err(where + " shape",
                     "an array of at most " + std::to_string(kMaxRank) + " positive integers", s);
  d.shape = s.get<std::vector<int64_t>>();
  return d;
}

// Where a floating dtype overflows: its largest finite value plus half a unit in the last place,
// from where round-to-nearest gives infinity.
double overflow_bound(DType t) {
  switch (t) {
    case DType::f16:
      return 65504.0 + 16.0;
    case DType::bf16:
      return std::ldexp(255.0, 120) + std::ldexp(1.0, 119);
    default:
      return static_cast<double>(std::numeric_limits<float>::max()) + std::ldexp(1.0, 103);
  }
}

Result<HostTensor> inline_values(const json& v, const TensorDecl& d, const std::string& where) {
  // The count is checked before anything is allocated: the declared shape may be far larger
  // than the values given (or than the machine).
  int64_t numel = 1;
  for (int64_t n : d.shape)
    if (__builtin_mul_overflow(numel, n, &numel)) numel = std::numeric_limits<int64_t>::max();
  if (!v.is_array() || static_cast<int64_t>(v.size()) != numel)
    return parse_err(where + " values", "an array of " + std::to_string(numel) + " numbers",
                     v.is_array() ? json("an array of " + std::to_string(v.size())) : v);
  std::vector<double> vals(v.size());
  const double bound = overflow_bound(d.dtype);
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string item = where + " values[" + std::to_string(i) + "]";
    if (!float_from(v[i], &vals[i])) return parse_err(item, "a number", v[i]);
    if (is_integer(d.dtype)) {
      const double lo = d.dtype == DType::i8 ? -128.0 : -2147483648.0;
      const double hi = d.dtype == DType::i8 ? 127.0 : 2147483647.0;
      if (vals[i] != std::floor(vals[i]) || vals[i] < lo || vals[i] > hi)
        return parse_err(item, "an integer that fits " + std::string(dtype_name(d.dtype)), v[i]);
    } else if (std::isfinite(vals[i]) && std::abs(vals[i]) >= bound) {
      // A finite number that would round to infinity: "inf" says so on purpose, 1e39 by mistake.
      return parse_err(item,
                       "a number that fits " + std::string(dtype_name(d.dtype)) +
                           " without becoming infinite (write \"inf\" for infinity)",
                       v[i]);
    }
  }
  const TensorDesc desc = TensorDesc::contiguous(d.dtype, d.shape);
  auto t = HostTensor::with_storage(desc, static_cast<uint64_t>(desc.nbytes()));
  if (!t.ok()) return t.status().with_context(where);
  t->from_doubles(vals);
  return t;
}

ojson values_json(const HostTensor& t) {
  ojson arr = ojson::array();
  for (double x : t.to_doubles()) {
    if (is_integer(t.dtype()))
      arr.push_back(static_cast<int64_t>(x));
    else if (t.dtype() == DType::f32)
      arr.push_back(float_json(static_cast<float>(x)));
    else
      arr.push_back(float_json(x));
  }
  return arr;
}

// One line per tensor and per node, so a graph file reads (and diffs) like a listing.
std::string graph_text(const Graph& g, const std::map<std::string, ConstantSource>& moved) {
  auto shape = [](const TensorDesc& d) {
    return std::vector<int64_t>(d.dims().begin(), d.dims().end());
  };
  std::vector<ojson> inputs, constants, states, nodes;
  for (int id : g.inputs()) {
    const GraphValue& v = g.value(id);
    inputs.push_back(
        {{"name", v.name}, {"dtype", dtype_name(v.desc.dtype)}, {"shape", shape(v.desc)}});
  }
  for (int id : g.constants()) {
    const GraphValue& v = g.value(id);
    ojson c = {{"name", v.name}, {"dtype", dtype_name(v.desc.dtype)}, {"shape", shape(v.desc)}};
    auto it = moved.find(v.name);
    const ConstantSource& src = it != moved.end() ? it->second : v.source;
    if (!src.empty()) {
      c["file"] = src.file;
      if (src.key != v.name) c["key"] = src.key;
    } else if (v.data) {
      c["values"] = values_json(*v.data);
    }
    constants.push_back(std::move(c));
  }
  for (int id : g.states()) {
    const GraphValue& v = g.value(id);
    states.push_back(
        {{"name", v.name}, {"dtype", dtype_name(v.desc.dtype)}, {"shape", shape(v.desc)}});
  }
  for (const GraphNode& n : g.nodes()) {
    ojson ins = ojson::array();
    for (int in : n.inputs) ins.push_back(g.value(in).name);
    ojson node = {{"name", n.name}, {"op", op_name(n.op.kind)}, {"inputs", ins}};
    ojson attrs = attrs_to_json(n.op.attrs);
    if (!attrs.empty()) node["attrs"] = attrs;
    nodes.push_back(std::move(node));
  }
  ojson outputs = ojson::array();
  for (int id : g.outputs()) outputs.push_back(g.value(id).name);

  // Names come from users and importers: bytes that are not UTF-8 are written as U+FFFD rather
  // than thrown (a graph built through the API may carry any bytes in its names).
  auto text = [](const ojson& j) {
    return j.dump(-1, ' ', false, ojson::error_handler_t::replace);
  };
  auto lines = [&text](const std::vector<ojson>& items) {
    if (items.empty()) return std::string("[]");
    std::string s = "[\n";
    for (size_t i = 0; i < items.size(); ++i)
      s += "  " + text(items[i]) + (i + 1 < items.size() ? ",\n" : "\n");
    return s + " ]";
  };
  std::string s = "{\n";
  s += " \"format\": \"duet-graph\",\n";
  s += " \"version\": " + std::to_string(kGraphFormatVersion) + ",\n";
  s += " \"name\": " + text(ojson(g.name())) + ",\n";
  s += " \"inputs\": " + lines(inputs) + ",\n";
  s += " \"constants\": " + lines(constants) + ",\n";
  if (!states.empty()) s += " \"states\": " + lines(states) + ",\n";
  s += " \"nodes\": " + lines(nodes) + ",\n";
  s += " \"outputs\": " + text(outputs) + "\n";
  return s + "}\n";
}

}  // namespace

std::string graph_to_json(const Graph& g) {
  return graph_text(g, {});
}

namespace {

// `folder`: where the constants' files must lie.
Result<Graph> graph_from_text(std::string_view text, const std::string& base_dir,
                              const ModelFolder& folder, const GraphLoadOptions& options) {
  static const std::set<std::string> kFields = {"format",    "version", "name",  "inputs",
                                                "constants", "states",  "nodes", "outputs"};
  JsonLimits limits;
  limits.memory = options.memory_budget;
  // An unknown top-level field is refused when its key is read, before its value is held.
  Status unknown_field;
  limits.on_key = [&unknown_field](int depth, std::string_view key) -> Status {
    if (depth != 1 || kFields.count(std::string(key))) return {};
    json one = json::object();
    one[std::string(key)] = nullptr;
    unknown_field = check_keys(one, "", kFields);
    return unknown_field;
  };
  auto parsed = parse_json(text, limits);
  if (!parsed.ok())
    return unknown_field.ok() ? parsed.status().with_context("graph file") : unknown_field;
  const json& j = *parsed;
  if (!j.is_object()) return Status(Code::parse_error, "graph file: expected a JSON object");
  DUET_TRY(check_keys(j, "", kFields));
  if (j.value("format", json()) != "duet-graph")
    return parse_err("field 'format'", "\"duet-graph\"", j.value("format", json()));
  const json& ver = j.contains("version") ? j["version"] : json();
  if (!ver.is_number_integer()) return parse_err("field 'version'", "an integer", ver);
  if (ver.get<int64_t>() > kGraphFormatVersion || ver.get<int64_t>() < 1)
    return at("field 'version'",
              Err(Code::parse_error)
                  .expected("version 1 to " + std::to_string(kGraphFormatVersion) +
                            " (a newer file needs a newer duet)")
                  .got(json_excerpt(ver)));
  if (!j.contains("name") || !j["name"].is_string())
    return parse_err("field 'name'", "a string", j.value("name", json()));
  GraphBuilder b(j["name"].get<std::string>());
  std::map<std::string, ValueId> ids;
  static const json kNone = json::array();
  auto list = [&](const char* key) -> Result<const json*> {
    const json& v = j.contains(key) ? j[key] : kNone;
    if (!v.is_array()) return parse_err(std::string("graph file ") + key, "an array", v);
    return &v;
  };
  ConstantFiles files(folder);
  std::map<std::string, HostTensor> bound;  // constants read from their files

  DUET_ASSIGN_OR_RETURN(const json* inputs, list("inputs"));
  for (const json& in : *inputs) {
    DUET_ASSIGN_OR_RETURN(TensorDecl d, decl_from(in, "input"));
    DUET_TRY(check_keys(in, "input '" + d.name + "'", {"name", "dtype", "shape"}));
    ids[d.name] = b.input(d.name, d.dtype, d.shape);
  }
  DUET_ASSIGN_OR_RETURN(const json* constants, list("constants"));
  for (const json& c : *constants) {
    DUET_ASSIGN_OR_RETURN(TensorDecl d, decl_from(c, "constant"));
    const std::string where = "constant '" + d.name + "'";
    DUET_TRY(check_keys(c, where, {"name", "dtype", "shape", "file", "key", "values"}));
    if (c.contains("values") && c.contains("file"))
      return at(where,
                Err(Code::parse_error).expected("either \"file\" or \"values\"").got("both"));
    if (c.contains("values")) {
      if (is_quantized(d.dtype))
        return at(where, Err(Code::parse_error)
                             .expected("a \"file\" for a " + std::string(dtype_name(d.dtype)) +
                                       " constant (inline values would be quantized again)")
                             .got("\"values\""));
      DUET_ASSIGN_OR_RETURN(HostTensor t, inline_values(c["values"], d, where));
      ids[d.name] = b.constant(d.name, std::move(t));
      continue;
    }
    ConstantSource src;
    if (c.contains("file")) {
      if (!c["file"].is_string() || c["file"].get<std::string>().empty())
        return parse_err(where + " file", "a file name", c["file"]);
      src.file = c["file"].get<std::string>();
      src.key = d.name;
      if (c.contains("key")) {
        if (!c["key"].is_string()) return parse_err(where + " key", "a string", c["key"]);
        src.key = c["key"].get<std::string>();
      }
    } else if (c.contains("key")) {
      return at(where, Err(Code::parse_error).expected("\"key\" only with \"file\"").got("a key"));
    }
    ids[d.name] = b.constant(d.name, d.dtype, d.shape, src);
    if (src.empty() || !options.load_constants || !b.status().ok()) continue;
    const fs::path path =
        fs::path(src.file).is_absolute() ? fs::path(src.file) : fs::path(base_dir) / src.file;
    auto t = files.load(path.string(), src.key, d.dtype, d.shape);
    if (!t.ok()) return t.status().with_context(where + " (key '" + src.key + "')");
    bound.emplace(d.name, std::move(*t));
  }
  DUET_ASSIGN_OR_RETURN(const json* states, list("states"));
  for (const json& st : *states) {
    DUET_ASSIGN_OR_RETURN(TensorDecl d, decl_from(st, "state"));
    DUET_TRY(check_keys(st, "state '" + d.name + "'", {"name", "dtype", "shape"}));
    ids[d.name] = b.state(d.name, d.dtype, d.shape);
  }
  DUET_TRY(b.status());

  DUET_ASSIGN_OR_RETURN(const json* nodes, list("nodes"));
  for (const json& n : *nodes) {
    if (!n.is_object()) return parse_err("node", "an object", n);
    if (!n.contains("name") || !n["name"].is_string())
      return parse_err("node", "a \"name\" string", n.value("name", json()));
    const std::string name = n["name"].get<std::string>();
    const std::string where = "node '" + name + "'";
    DUET_TRY(check_keys(n, where, {"name", "op", "inputs", "attrs"}));
    auto kind = n.contains("op") && n["op"].is_string() ? parse_op(n["op"].get<std::string>())
                                                        : std::nullopt;
    if (!kind)
      return parse_err(where + " op", "an op name (matmul, add, attention, ...)",
                       n.value("op", json()));
    const json& ins = n.contains("inputs") ? n["inputs"] : json();
    if (!ins.is_array()) return parse_err(where + " inputs", "an array of tensor names", ins);
    std::vector<ValueId> in_ids;
    for (const json& in : ins) {
      if (!in.is_string()) return parse_err(where + " inputs", "tensor names", in);
      auto it = ids.find(in.get<std::string>());
      if (it == ids.end())
        return Err(Code::parse_error)
            .op(n["op"].get<std::string>(), name)
            .tensor(in.get<std::string>())
            .expected("an input, constant or earlier node")
            .got("an unknown name");
      in_ids.push_back(it->second);
    }
    OpAttrs attrs;
    if (n.contains("attrs")) {
      DUET_ASSIGN_OR_RETURN(attrs, attrs_from_json(n["attrs"], name));
    }
    ids[name] = b.op(*kind, in_ids, attrs, name);
    DUET_TRY(b.status());
  }
  DUET_ASSIGN_OR_RETURN(const json* outputs, list("outputs"));
  for (const json& o : *outputs) {
    if (!o.is_string()) return parse_err("field 'outputs'", "tensor names", o);
    auto it = ids.find(o.get<std::string>());
    if (it == ids.end())
      return Err(Code::parse_error)
          .tensor(o.get<std::string>())
          .expected("an output naming a node")
          .got("an unknown name");
    b.output(it->second);
  }
  DUET_ASSIGN_OR_RETURN(Graph g, b.build());
  for (auto& [name, t] : bound) DUET_TRY(g.bind_constant(name, std::move(t)));
  return g;
}

}  // namespace

Result<Graph> graph_from_json(std::string_view text, const std::string& base_dir,
                              const GraphLoadOptions& options) {
  return graph_from_text(text, base_dir, ModelFolder::of_dir(base_dir), options);
}

Result<Graph> graph_from_json_file(std::string_view text, const std::string& path,
                                   const GraphLoadOptions& options) {
  auto g = graph_from_text(text, fs::path(path).parent_path().string(),
                           ModelFolder::of_model_file(path), options);
  if (!g.ok()) return g.status().with_context("graph file '" + path + "'");
  return g;
}

Result<Graph> load_graph(const std::string& path, const GraphLoadOptions& options) {
  // A stream (a pipe, /dev/stdin) is read once, within the cap.
  DUET_ASSIGN_OR_RETURN(std::string text,
                        read_whole_file(path, kGraphFileMaxBytes, "graph file", true));
  return graph_from_json_file(text, path, options);
}

Status save_graph(const Graph& g, const std::string& path, int64_t inline_limit) {
  std::vector<std::pair<std::string, HostTensor>> external, quantized;
  std::map<std::string, ConstantSource> moved;
  const fs::path weights = fs::path(path).replace_extension(".safetensors");
  const fs::path blocks = fs::path(path).replace_extension(".gguf");
  for (int id : g.constants()) {
    const GraphValue& v = g.value(id);
    if (!v.source.empty() || !v.data) continue;
    if (is_quantized(v.data->dtype())) {
      // Block formats go to a GGUF file beside the graph (safetensors has no such dtypes, and
      // inline values would be quantized again).
      if (dtype_info(v.data->dtype()).ggml_type < 0)
        return Err(Code::unsupported)
            .tensor(v.name)
            .expected("a constant GGUF can hold (" + std::string(dtype_name(v.data->dtype())) +
                      " has no GGUF type; keep it in the checkpoint it was read from)")
            .got(v.data->desc().str() + " without a source file");
      quantized.emplace_back(v.name, *v.data);
      moved[v.name] = ConstantSource{blocks.filename().string(), v.name};
    } else if (v.data->numel() > inline_limit) {
      external.emplace_back(v.name, *v.data);
      moved[v.name] = ConstantSource{weights.filename().string(), v.name};
    }
  }
  if (!external.empty()) DUET_TRY(write_safetensors(weights.string(), external));
  if (!quantized.empty()) DUET_TRY(write_gguf(blocks.string(), {}, quantized));
  return write_file_atomically(path, graph_text(g, moved));
}

}  // namespace duet
