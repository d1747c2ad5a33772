#include "importer.h"

#include <onnx/defs/schema.h>

#include <algorithm>
#include <cstdio>
#include <string_view>

#include "duet/policy.h"
#include "fold.h"
#include "fuse.h"

namespace duet::onnx_import {

namespace {

constexpr int kMinOpset = 7, kMaxOpset = 18;
// Below kMinOpset (opsets 1 to 6) a model is read only when every node's op type is one whose
// definition at its old opset means what the mappings read: these changed since then only by
// dropping the legacy `consumed_inputs` attribute, allowing more element types or negative axes.
// (Add, Mul, Gemm and the like broadcast differently there, with a `broadcast` attribute.)
// clang-format off
constexpr std::string_view kOldOpsetOps[] = {
    "Abs", "Elu", "Exp", "GlobalAveragePool", "GlobalMaxPool", "HardSigmoid", "Identity",
    "InstanceNormalization", "LeakyRelu", "Log", "LogSoftmax", "MatMul", "Neg", "Not",
    "Reciprocal", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
    "ReduceMean", "ReduceMin", "ReduceSum", "ReduceSumSquare", "Relu", "Selu", "Sigmoid", "Softmax",
    "Softplus", "Softsign", "Sqrt", "Tanh", "Transpose"};
// clang-format on
// Known values larger than this stop being known once they are graph constants (weights); shape
// arithmetic never reads tensors this large.
constexpr size_t kKeepKnownBytes = size_t{1} << 20;

std::string node_label(const onnx::NodeProto& n, int opset) {
  std::string who = !n.name().empty()     ? "node '" + n.name() + "'"
                    : n.output_size() > 0 ? "the node making '" + n.output(0) + "'"
                                          : "a node";
  return who + " (" + n.op_type() + ", opset " + std::to_string(opset) + ")";
}

// Offset of the first byte of `s` that does not start or continue a well-formed UTF-8 sequence
// (overlong forms, surrogates and code points above U+10FFFF are not well-formed), or npos.
size_t bad_utf8_at(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int extra = 0;
    unsigned lo = 0x80, hi = 0xBF;  // allowed range of the first continuation byte
    if (c < 0x80)
      extra = 0;
    else if (c >= 0xC2 && c <= 0xDF)
      extra = 1;
    else if (c == 0xE0)
      extra = 2, lo = 0xA0;
    else if (c >= 0xE1 && c <= 0xEC)
      extra = 2;
    else if (c == 0xED)
      extra = 2, hi = 0x9F;
    else if (c >= 0xEE && c <= 0xEF)
      extra = 2;
    else if (c == 0xF0)
      extra = 3, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3)
      extra = 3;
    else if (c == 0xF4)
      extra = 3, hi = 0x8F;
    else
      return i;
    if (s.size() - i <= static_cast<size_t>(extra)) return i;  // cut short by the end
    for (int k = 1; k <= extra; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if (k == 1 ? (d < lo || d > hi) : (d < 0x80 || d > 0xBF)) return i;
    }
    i += static_cast<size_t>(extra) + 1;
  }
  return std::string_view::npos;
}

// Names become the graph's names, which the graph file, plans and messages write as JSON text:
// ONNX requires them to be UTF-8 and protobuf's proto2 strings do not check it, so this does.
Status check_names_are_utf8(const onnx::GraphProto& g) {
  auto check = [](const std::string& name, const std::string& what) -> Status {
    const size_t at = bad_utf8_at(name);
    if (at == std::string_view::npos) return {};
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(name[at]));
    return Status(Code::invalid_argument, what + " is not valid UTF-8 (byte " + byte +
                                              " at offset " + std::to_string(at) + ")");
  };
  DUET_TRY(check(g.name(), "the graph's name"));
  for (const auto& t : g.initializer()) DUET_TRY(check(t.name(), "an initializer's name"));
  for (const auto& v : g.input()) DUET_TRY(check(v.name(), "a graph input's name"));
  for (const auto& v : g.output()) DUET_TRY(check(v.name(), "a graph output's name"));
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    const std::string which = "node " + std::to_string(i);
    DUET_TRY(check(n.name(), "the name of " + which));
    DUET_TRY(check(n.op_type(), "the op type of " + which));
    for (const auto& s : n.input()) DUET_TRY(check(s, "an input name of " + which));
    for (const auto& s : n.output()) DUET_TRY(check(s, "an output name of " + which));
  }
  return {};
}

// The inputs ONNX's schema of the op requires (neither optional nor variadic) and the outputs it
// must have are there: the fusions and the mappings read them without asking.
Status check_arity(const onnx::NodeProto& n, int opset) {
  const onnx::OpSchema* s = onnx::OpSchemaRegistry::Schema(n.op_type(), opset);
  if (!s) {
    // No schema at this opset (Gelu is ONNX's from opset 20; duet reads it at any opset): every
    // op duet maps reads its input 0 and writes its output 0.
    if (n.input_size() < 1 || n.input(0).empty())
      return Status(Code::invalid_argument, "input 0 is required and not given");
    if (n.output_size() < 1 || n.output(0).empty())
      return Status(Code::invalid_argument, "output 0 is required and has no name");
    return {};
  }
  const auto& formal = s->inputs();
  for (size_t i = 0; i < formal.size(); ++i) {
    if (formal[i].GetOption() != onnx::OpSchema::Single) continue;
    if (static_cast<int>(i) >= n.input_size() || n.input(static_cast<int>(i)).empty())
      return Status(Code::invalid_argument, "input " + std::to_string(i) + " ('" +
                                                formal[i].GetName() +
                                                "') is required and not given");
  }
  if (n.input_size() < s->min_input())
    return Status(Code::invalid_argument, "expected at least " + std::to_string(s->min_input()) +
                                              " inputs, got " + std::to_string(n.input_size()));
  if (n.output_size() < std::max(1, s->min_output()))
    return Status(Code::invalid_argument, "expected at least " +
                                              std::to_string(std::max(1, s->min_output())) +
                                              " output(s), got " + std::to_string(n.output_size()));
  // The outputs the schema requires are named; where it makes every output optional (RNN, GRU,
  // LSTM: a model may read Y_h alone), output 0 may be unnamed too.
  for (int i = 0; i < std::min(n.output_size(), s->min_output()); ++i)
    if (n.output(i).empty())
      return Status(Code::invalid_argument,
                    "output " + std::to_string(i) + " is required and has no name");
  return {};
}

const Mapping* find_mapping(std::string_view type, std::string_view domain) {
  if (domain != kFusedDomain && fused_only(type)) return nullptr;
  for (auto family : {math_mappings(), shape_mappings(), nn_mappings(), conv_mappings()})
    for (const Mapping& m : family)
      if (m.type == type) return &m;
  return nullptr;
}

}  // namespace

// ---- Node -----------------------------------------------------------------------------------

bool Node::has(size_t i) const {
  return i < num_inputs() && !p_.input(static_cast<int>(i)).empty();
}

const Value& Node::in(size_t i) const {
  return im_.values_.find(p_.input(static_cast<int>(i)))->second;
}

bool Node::all_known() const {
  for (size_t i = 0; i < num_inputs(); ++i)
    if (has(i) && !known(i)) return false;
  return true;
}

std::vector<int64_t> Node::shape(size_t i) const {
  const Value& v = in(i);
  if (v.known) return v.known->dims();
  const TensorDesc& d = desc(v.id);
  return {d.dims().begin(), d.dims().end()};
}

Result<std::vector<int64_t>> Node::ints(size_t i, std::string_view what) const {
  if (!has(i)) return invalid(std::string(what) + " is missing");
  if (!known(i))
    return unsupported(std::string(what) + " '" + p_.input(static_cast<int>(i)) +
                       "' is computed at run time; duet needs it known at import (a constant or "
                       "shape arithmetic)");
  if (elem_is_float(elem(i)))
    return invalid(std::string(what) + " must be an integer tensor, got " + elem_name(elem(i)));
  return array(i).ints();
}

Result<ValueId> Node::runtime(size_t i) {
  const std::string& name = p_.input(static_cast<int>(i));
  return im_.materialize(name, im_.values_.find(name)->second);
}

Result<ValueId> Node::constant(Array a, std::string_view purpose) {
  Value v;
  v.elem = a.elem();
  v.known = std::make_shared<const Array>(std::move(a));
  return im_.materialize(output_name(0) + "/" + std::string(purpose), v);
}

const TensorDesc& Node::desc(ValueId v) const {
  // A value the builder refused has no description; its error is in the builder's status, which
  // map_node reports after the mapping returns. Until then mappings read an empty description.
  static const TensorDesc none{};
  const TensorDesc* d = im_.b_->desc(v);
  return d ? *d : none;
}

const onnx::AttributeProto* Node::attr(std::string_view name) const {
  for (const auto& a : p_.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t Node::attr_int(std::string_view name, int64_t dflt) const {
  const auto* a = attr(name);
  return a ? a->i() : dflt;
}

float Node::attr_float(std::string_view name, float dflt) const {
  const auto* a = attr(name);
  return a ? a->f() : dflt;
}

std::string Node::attr_string(std::string_view name, std::string dflt) const {
  const auto* a = attr(name);
  return a ? a->s() : dflt;
}

std::optional<std::vector<int64_t>> Node::attr_ints(std::string_view name) const {
  const auto* a = attr(name);
  if (!a) return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

Result<Array> Node::tensor_attr(const onnx::AttributeProto& a) const {
  onnx::TensorProto t = a.t();
  return tensor_array(t, im_.data_);
}

ValueId Node::reshape(ValueId x, std::vector<int64_t> shape, std::string_view purpose, size_t out) {
  const TensorDesc* d = im_.b_->desc(x);
  if (d && !duet::reshape(*d, shape).ok())
    x = op(OpKind::copy, {x}, {}, purpose.empty() ? "dense" : std::string(purpose) + "/dense");
  OpAttrs at;
  at.shape = std::move(shape);
  return op(OpKind::reshape, {x}, at, purpose, out);
}

bool Node::output_used(size_t i) const {
  const std::string& n = output_name(i);
  if (n.empty()) return false;
  auto it = im_.readers_.find(n);
  return (it != im_.readers_.end() && it->second > 0) || im_.outputs_.count(n);
}

ValueId Node::op(OpKind kind, std::vector<ValueId> inputs, OpAttrs attrs, std::string_view purpose,
                 size_t out) {
  std::string name = purpose.empty() ? im_.unique(output_name(out), true)
                                     : im_.unique(output_name(0) + "/" + std::string(purpose));
  return im_.add_op(kind, std::move(inputs), std::move(attrs), std::move(name));
}

void Node::set(size_t i, ValueId v, int elem) {
  if (i >= num_outputs() || output_name(i).empty()) return;
  Value& val = im_.values_[output_name(i)];
  val = Value{};
  val.id = v;
  val.elem = elem;
}

void Node::forward(size_t i, size_t j) {
  if (i >= num_outputs() || output_name(i).empty()) return;
  const Value copy = in(j);
  im_.values_[output_name(i)] = copy;
}

void Node::set_known(size_t i, Array a) {
  if (i >= num_outputs() || output_name(i).empty()) return;
  Value& val = im_.values_[output_name(i)];
  val = Value{};
  val.elem = a.elem();
  const uint64_t bytes = a.bytes().size();
  std::shared_ptr<uint64_t> live = im_.folded_;
  *live += bytes;
  val.known = std::shared_ptr<const Array>(new Array(std::move(a)), [live, bytes](const Array* p) {
    *live -= bytes;
    delete p;
  });
}

void Node::set_constant(size_t i, Array a) {
  if (i >= num_outputs() || output_name(i).empty()) return;
  Value& val = im_.values_[output_name(i)];
  val = Value{};
  val.elem = a.elem();
  val.known = std::make_shared<const Array>(std::move(a));
}

Status Node::room_for(const std::vector<int64_t>& dims, int elem, int work) const {
  if (Status s = check_folded_size(dims); !s.ok()) return invalid(s.message());
  const uint64_t per = static_cast<uint64_t>(std::max(elem_size(elem), 1) + std::max(work, 0));
  const uint64_t need = static_cast<uint64_t>(*count(dims)) * per;
  const uint64_t used = *im_.folded_;
  if (used + need <= im_.budget_) return {};
  return invalid("a value of shape " + dims_str(dims) + " evaluated at import would take " +
                 format_bytes(need) + " (with its working memory)" +
                 (used ? " beside the " + format_bytes(used) + " such values hold now" : "") +
                 ", more than the import's memory budget of " + format_bytes(im_.budget_) +
                 " (DUET_IMPORT_MEMORY or OnnxOptions::memory_budget raise it)");
}

Status Node::unsupported(std::string_view why) const {
  return Status(Code::unsupported, std::string(why));
}

void Node::note(std::string_view text) const {
  im_.note(node_label(p_, opset_) + ": " + std::string(text));
}

Status Node::invalid(std::string_view why) const {
  return Status(Code::invalid_argument, std::string(why));
}

// ---- Importer -------------------------------------------------------------------------------

void Importer::note(std::string text) {
  if (options_.notes) options_.notes->push_back(std::move(text));
}

std::string Importer::unique(const std::string& base, bool owner) {
  auto free = [&](const std::string& n) {
    return !n.empty() && !taken_.count(n) && (owner || !reserved_.count(n));
  };
  std::string name = base.empty() ? "value" : base;
  for (int k = 1; !free(name); ++k) {
    name = (base.empty() ? "value" : base) + "#" + std::to_string(k);
    owner = false;
  }
  taken_.insert(name);
  return name;
}

ValueId Importer::add_op(OpKind kind, std::vector<ValueId> inputs, OpAttrs attrs,
                         std::string name) {
  ValueId v = b_->op(kind, std::move(inputs), std::move(attrs), name);
  if (v.valid()) {
    names_.resize(std::max(names_.size(), static_cast<size_t>(v.id) + 1));
    names_[static_cast<size_t>(v.id)] = std::move(name);
  }
  return v;
}

Result<ValueId> Importer::materialize(const std::string& name, Value& v) {
  if (v.id.valid()) return v.id;
  if (!v.known) return Status(Code::internal, "value '" + name + "' has no data and no id");
  const Array& a = *v.known;
  const std::string cname = unique(name);
  if (!options_.load_constants) {
    // Planning: shape and type only.
    DUET_ASSIGN_OR_RETURN(DType dtype, a.host_dtype(name));
    v.id = b_->constant(cname, dtype, a.dims());
  } else {
    auto host = a.to_host(name);
    if (!host.ok()) return host.status();
    v.id = b_->constant(cname, std::move(*host));
  }
  if (!b_->status().ok()) return b_->status();
  names_.resize(std::max(names_.size(), static_cast<size_t>(v.id.id) + 1));
  names_[static_cast<size_t>(v.id.id)] = cname;
  if (a.bytes().size() > kKeepKnownBytes) v.known.reset();
  return v.id;
}

Status Importer::read_initializers(onnx::GraphProto& g) {
  if (g.sparse_initializer_size() > 0)
    return Status(
        Code::unsupported,
        "sparse initializers ('" + g.sparse_initializer(0).values().name() + "') are not imported");
  for (onnx::TensorProto& t : *g.mutable_initializer()) {
    if (t.name().empty()) return Status(Code::invalid_argument, "an initializer has no name");
    if (values_.count(t.name()))
      return Status(Code::invalid_argument, "two initializers named '" + t.name() + "'");
    DUET_ASSIGN_OR_RETURN(Array a, tensor_array(t, data_));
    Value v;
    v.elem = a.elem();
    v.known = std::make_shared<const Array>(std::move(a));
    values_[t.name()] = std::move(v);
  }
  return {};
}

Status Importer::declare_inputs(const onnx::GraphProto& g) {
  // A size given for a symbolic dimension must name one the inputs have: a misspelt name would
  // otherwise be ignored and its dimension set to 1.
  if (!options_.dims.empty()) {
    std::vector<std::string> symbols;
    for (const auto& in : g.input()) {
      if (values_.count(in.name()) || !in.type().has_tensor_type() ||
          !in.type().tensor_type().has_shape())
        continue;
      for (const auto& dim : in.type().tensor_type().shape().dim())
        if (!dim.dim_param().empty() &&
            std::find(symbols.begin(), symbols.end(), dim.dim_param()) == symbols.end())
          symbols.push_back(dim.dim_param());
    }
    for (const auto& [name, size] : options_.dims)
      if (std::find(symbols.begin(), symbols.end(), name) == symbols.end()) {
        std::string known;
        for (const std::string& s : symbols) known += (known.empty() ? "" : ", ") + s;
        return Status(Code::invalid_argument,
                      "dimension '" + name + "' is given a size, but no input of the model has a " +
                          "symbolic dimension of that name (" +
                          (symbols.empty() ? std::string("it has none")
                                           : "its symbolic dimensions: " + known) +
                          ")");
      }
  }
  for (const auto& in : g.input()) {
    if (values_.count(in.name())) continue;  // an initializer listed as input (IR < 4): a constant
    auto fail = [&](Code c, const std::string& why) {
      return Status(c, "graph input '" + in.name() + "': " + why);
    };
    if (auto f = options_.frozen_inputs.find(in.name()); f != options_.frozen_inputs.end()) {
      const HostTensor t = f->second.contiguous();
      const int elem = in.type().has_tensor_type() ? in.type().tensor_type().elem_type() : 0;
      if (elem_of(t.dtype()) != elem && !(elem == kInt64 && t.dtype() == DType::i32) &&
          !(elem == kBool && t.dtype() == DType::i8))
        return fail(Code::invalid_argument,
                    "frozen as " + t.desc().str() + ", the model says " + elem_name(elem));
      std::string bytes(reinterpret_cast<const char*>(t.data<std::byte>()),
                        static_cast<size_t>(t.desc().nbytes()));
      DUET_ASSIGN_OR_RETURN(
          Array a,
          Array::from_bytes(elem_of(t.dtype()), {t.desc().dims().begin(), t.desc().dims().end()},
                            std::move(bytes)));
      Value v;
      v.elem = elem;
      v.known = std::make_shared<const Array>(elem == kInt64 || elem == kBool ? a.cast(elem)
                                                                              : std::move(a));
      values_[in.name()] = std::move(v);
      continue;
    }
    if (!in.type().has_tensor_type())
      return fail(Code::unsupported,
                  "only tensor inputs are imported (not sequences, maps or "
                  "optionals)");
    const auto& tt = in.type().tensor_type();
    auto dtype = runtime_dtype(tt.elem_type());
    if (!dtype.ok()) return fail(Code::unsupported, dtype.status().message());
    std::vector<int64_t> shape;
    if (auto it = options_.input_shapes.find(in.name()); it != options_.input_shapes.end()) {
      shape = it->second;
      // The symbolic dims take the given tensor's sizes; a size given for one of them as well
      // must agree.
      if (tt.has_shape() && tt.shape().dim_size() == static_cast<int>(shape.size()))
        for (int d = 0; d < tt.shape().dim_size(); ++d) {
          const std::string& sym = tt.shape().dim(d).dim_param();
          if (sym.empty()) continue;
          const int64_t size = shape[static_cast<size_t>(d)];
          symbols_.emplace(sym, size);
          if (auto found = options_.dims.find(sym);
              found != options_.dims.end() && found->second != size)
            return fail(Code::invalid_argument,
                        "dim " + std::to_string(d) + " is '" + sym + "', of size " +
                            std::to_string(size) + " in the given tensor " + dims_str(shape) +
                            ", but its size is also given as " + sym + "=" +
                            std::to_string(found->second) + " (--dim); give one of them");
        }
    } else if (!tt.has_shape()) {
      return fail(Code::invalid_argument,
                  "the model gives no shape; pass one (OnnxOptions::input_shapes, or --inputs)");
    } else {
      for (int d = 0; d < tt.shape().dim_size(); ++d) {
        const auto& dim = tt.shape().dim(d);
        if (dim.has_dim_value()) {
          shape.push_back(dim.dim_value());
          continue;
        }
        const std::string& sym = dim.dim_param();
        if (auto found = options_.dims.find(sym); !sym.empty() && found != options_.dims.end()) {
          shape.push_back(found->second);
          symbols_.emplace(sym, found->second);
          continue;
        }
        shape.push_back(1);
        if (!sym.empty()) symbols_.emplace(sym, 1);
        note("input '" + in.name() + "' dim " + std::to_string(d) +
             (sym.empty() ? " has no size" : " is '" + sym + "'") + ": set to 1" +
             (sym.empty() ? ""
                          : " (--dim " + sym + "=N, or duet_graph_load_onnx(path, \"" + sym +
                                "=N\", &graph), to choose; a run at other sizes imports the model "
                                "again)"));
      }
    }
    taken_.insert(in.name());
    Value v;
    v.elem = tt.elem_type();
    v.id = b_->input(in.name(), *dtype, shape);
    if (!b_->status().ok()) return b_->status();
    names_.resize(std::max(names_.size(), static_cast<size_t>(v.id.id) + 1));
    names_[static_cast<size_t>(v.id.id)] = in.name();
    values_[in.name()] = std::move(v);
  }
  return {};
}

Status Importer::map_node(const onnx::NodeProto& n) {
  const std::string label = node_label(n, opset_);
  auto in_context = [&](const Status& s) { return s.with_context(what_ + ": " + label); };
  if (!n.domain().empty() && n.domain() != "ai.onnx" && n.domain() != kFusedDomain)
    return in_context(Status(Code::unsupported, "the domain '" + n.domain() +
                                                    "' is not imported (only ONNX's own ops)"));
  const Mapping* m = find_mapping(n.op_type(), n.domain());
  if (!m)
    return in_context(Status(Code::unsupported, "op type '" + n.op_type() +
                                                    "' is not mapped onto duet's op set "
                                                    "(docs/onnx.md lists the ops)"));
  if (n.domain() != kFusedDomain)
    if (Status s = check_arity(n, opset_); !s.ok()) return in_context(s);
  for (int i = 0; i < n.input_size(); ++i)
    if (!n.input(i).empty() && !values_.count(n.input(i)))
      return in_context(Status(Code::invalid_argument,
                               "input '" + n.input(i) +
                                   "' is neither a graph input, an initializer nor made by an "
                                   "earlier node"));
  for (int i = 0; i < n.output_size(); ++i)
    if (!n.output(i).empty() && values_.count(n.output(i)))
      return in_context(
          Status(Code::invalid_argument, "output '" + n.output(i) + "' is already defined"));
  Node node(*this, n, opset_);
  if (Status s = m->fn(node); !s.ok()) return in_context(s);
  if (!b_->status().ok()) return in_context(b_->status());
  for (size_t i = 0; i < node.num_outputs(); ++i)
    if (node.output_used(i) && !values_.count(node.output_name(i)))
      return in_context(
          Status(Code::unsupported, "output " + std::to_string(i) + " ('" + node.output_name(i) +
                                        "') is used, and duet computes only the first"));
  return {};
}

Status Importer::finish_outputs(const onnx::GraphProto& g) {
  std::set<std::string> seen;
  for (const auto& o : g.output()) {
    if (!seen.insert(o.name()).second)
      return Status(Code::invalid_argument, "graph output '" + o.name() + "' listed twice");
    auto it = values_.find(o.name());
    if (it == values_.end())
      return Status(Code::invalid_argument, "graph output '" + o.name() + "' is never computed");
    Value& v = it->second;
    DUET_ASSIGN_OR_RETURN(ValueId id, materialize(o.name(), v));
    // An output aliasing another value (an input, a constant, an Identity) gets its own copy
    // under its own name, so outputs come back by their ONNX names.
    if (names_[static_cast<size_t>(id.id)] != o.name() || v.known)
      id = add_op(OpKind::copy, {id}, {}, unique(o.name(), true));
    b_->output(id);
    if (!b_->status().ok()) return b_->status();
  }
  return {};
}

Result<Graph> Importer::run(onnx::ModelProto& model) {
  int opset = 0;
  std::string domains;
  for (const auto& o : model.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = static_cast<int>(o.version());
    domains += (domains.empty() ? "" : ", ") + o.domain();
  }
  if (model.opset_import_size() == 0) opset = 1;  // IR version 1/2 models: opset 1
  if (opset == 0)
    return Status(Code::unsupported, what_ +
                                         ": the model uses no opset of ONNX's default "
                                         "domain, only " +
                                         domains);
  if (opset < 1 || opset > kMaxOpset)
    return Status(Code::unsupported, what_ + ": opset " + std::to_string(opset) +
                                         " of the default domain; duet imports opsets " +
                                         std::to_string(kMinOpset) + " to " +
                                         std::to_string(kMaxOpset));
  opset_ = opset;
  onnx::GraphProto& g = *model.mutable_graph();
  if (Status s = check_names_are_utf8(g); !s.ok()) return s.with_context(what_);
  if (opset < kMinOpset)
    for (const auto& n : g.node())
      if (std::find(std::begin(kOldOpsetOps), std::end(kOldOpsetOps), n.op_type()) ==
          std::end(kOldOpsetOps))
        return Status(Code::unsupported,
                      what_ + ": " + node_label(n, opset) + ": opset " + std::to_string(opset) +
                          " of the default domain; duet imports opsets " +
                          std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) +
                          ", and below " + std::to_string(kMinOpset) +
                          " only ops whose definition has not changed since (docs/onnx.md)");
  b_ = std::make_unique<GraphBuilder>(g.name().empty() ? std::string("onnx") : g.name());
  for (const auto& o : g.output()) {
    outputs_.insert(o.name());
    reserved_.insert(o.name());
  }
  if (outputs_.empty()) return Status(Code::invalid_argument, what_ + ": the graph has no output");
  auto ctx = [&](const Status& s) { return s.with_context(what_); };
  if (Status s = read_initializers(g); !s.ok()) return ctx(s);
  if (Status s = declare_inputs(g); !s.ok()) return ctx(s);
  const KnownLookup known = [this](const std::string& name) -> const Array* {
    auto it = values_.find(name);
    return it == values_.end() ? nullptr : it->second.known.get();
  };
  // Every node duet maps has what its schema requires before the fusions look at node patterns
  // (an op duet does not map is reported as such when its turn comes).
  for (const auto& n : g.node())
    if ((n.domain().empty() || n.domain() == "ai.onnx") && find_mapping(n.op_type(), n.domain()))
      if (Status s = check_arity(n, opset_); !s.ok())
        return s.with_context(what_ + ": " + node_label(n, opset_));
  std::vector<onnx::NodeProto> nodes = fuse(g, opset_, known, options_.notes);
  for (const auto& n : nodes)
    for (const auto& i : n.input()) ++readers_[i];
  budget_ = import_memory_budget(options_.memory_budget);
  for (const auto& n : nodes) {
    DUET_TRY(map_node(n));
    for (const auto& i : n.input()) {
      // A value evaluated at import that no later node reads is let go (a graph constant made
      // from it stays).
      if (--readers_[i] > 0 || outputs_.count(i)) continue;
      if (auto it = values_.find(i); it != values_.end()) it->second.known.reset();
    }
  }
  if (Status s = finish_outputs(g); !s.ok()) return ctx(s);
  b_->shape_note(shape_note());
  if (remake_) b_->remake(remake_);
  return b_->build();
}

// What a run at other input shapes is told when the graph cannot take them: the shape arithmetic
// was folded for the sizes of this import, so the model must be imported again.
std::string Importer::shape_note() const {
  std::string sizes, example;
  for (const auto& [sym, size] : symbols_) {
    sizes += (sizes.empty() ? "" : ", ") + sym + "=" + std::to_string(size);
    if (example.empty()) example = sym + "=" + std::to_string(size + 1);
  }
  if (sizes.empty())
    return "an ONNX model's shapes are fixed at import: import it again with inputs of the new "
           "shapes (--inputs, OnnxOptions::input_shapes)";
  return "an ONNX model's shapes are fixed at import, here " + sizes +
         ": import it again at the new sizes (--dim " + example +
         ", duet_graph_load_onnx(path, \"" + example + "\", &graph), or --inputs of those shapes)";
}

}  // namespace duet::onnx_import
