#include "duet/graph.h"

#include <cstring>

#include "duet/internal/index.h"

namespace duet {

namespace {
Status graph_error(const std::string& graph, Status s) {
  return s.with_context("graph '" + graph + "'");
}

bool same_bytes(const HostTensor& a, const HostTensor& b) {
  if (!(a.desc() == b.desc())) return false;
  HostTensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data<std::byte>(), cb.data<std::byte>(),
                     static_cast<size_t>(ca.desc().nbytes())) == 0;
}
}  // namespace

std::string_view value_kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::input:
      return "input";
    case ValueKind::constant:
      return "constant";
    case ValueKind::intermediate:
      return "intermediate";
    case ValueKind::state:
      return "state";
  }
  return "?";
}

std::vector<int> Graph::constants() const {
  std::vector<int> out;
  for (size_t i = 0; i < values_.size(); ++i)
    if (values_[i].kind == ValueKind::constant) out.push_back(static_cast<int>(i));
  return out;
}

std::vector<int> Graph::states() const {
  std::vector<int> out;
  for (size_t i = 0; i < values_.size(); ++i)
    if (values_[i].kind == ValueKind::state) out.push_back(static_cast<int>(i));
  return out;
}

int Graph::state_writer(int id) const {
  for (size_t n = 0; n < nodes_.size(); ++n)
    if (nodes_[n].kind() == OpKind::write_slice && nodes_[n].inputs[0] == id)
      return static_cast<int>(n);
  return -1;
}

std::optional<int> Graph::find(std::string_view name) const {
  for (size_t i = 0; i < values_.size(); ++i)
    if (values_[i].name == name) return static_cast<int>(i);
  return std::nullopt;
}

std::vector<int> Graph::last_uses() const {
  std::vector<int> last(values_.size(), -1);
  for (size_t n = 0; n < nodes_.size(); ++n)
    for (int v : nodes_[n].inputs) last[u(v)] = static_cast<int>(n);
  return last;
}

Status Graph::bind_constant(std::string_view name, HostTensor data) {
  auto id = find(name);
  if (!id || values_[u(*id)].kind != ValueKind::constant)
    return graph_error(name_, Err(Code::not_found)
                                  .tensor(name)
                                  .expected("the name of a constant of the graph")
                                  .got(id ? std::string(value_kind_name(values_[u(*id)].kind))
                                          : std::string("no such tensor")));
  GraphValue& v = values_[u(*id)];
  if (!data.defined() || data.dtype() != v.desc.dtype || !data.desc().same_shape(v.desc))
    return graph_error(name_, Err(Code::invalid_argument)
                                  .tensor(name)
                                  .expected(v.desc.str())
                                  .got(data.defined() ? data.desc().str() : "no data"));
  if (!data.desc().is_contiguous() || data.desc().offset != 0) data = data.contiguous();
  v.data = std::make_shared<const HostTensor>(std::move(data));
  return {};
}

std::vector<std::string> Graph::unbound_constants() const {
  std::vector<std::string> out;
  for (const GraphValue& v : values_)
    if (v.kind == ValueKind::constant && !v.data) out.push_back(v.name);
  return out;
}

Result<Graph> Graph::with_input_shapes(const std::map<std::string, TensorDesc>& shapes) const {
  for (const auto& [name, desc] : shapes) {
    auto id = find(name);
    if (!id || values_[u(*id)].kind != ValueKind::input)
      return graph_error(name_, Err(Code::not_found)
                                    .tensor(name)
                                    .expected("the name of a graph input")
                                    .got("no such input"));
    if (desc.dtype != values_[u(*id)].desc.dtype)
      return graph_error(name_, Err(Code::invalid_argument)
                                    .tensor(name)
                                    .expected(std::string(dtype_name(values_[u(*id)].desc.dtype)))
                                    .got(desc.str()));
  }
  if (!shape_note_.empty())
    for (const auto& [name, desc] : shapes) {
      const TensorDesc& now = values_[u(*find(name))].desc;
      if (desc.same_shape(now)) continue;
      if (remake_) {
        std::map<std::string, TensorDesc> all;
        for (int id : inputs_) all[values_[u(id)].name] = values_[u(id)].desc;
        for (const auto& [n, d] : shapes) all[n] = d;
        return (*remake_)(all);
      }
      return graph_error(name_, Status(Code::invalid_argument,
                                       "input '" + clip_text(name) + "' of shape " +
                                           desc.shape_str() + ": the graph takes " +
                                           now.shape_str() + " only (" + shape_note_ + ")"));
    }
  GraphBuilder b(name_);
  b.shape_note(shape_note_);
  b.g_.remake_ = remake_;
  std::vector<ValueId> map(values_.size());
  for (size_t i = 0; i < values_.size(); ++i) {
    const GraphValue& v = values_[i];
    if (v.kind == ValueKind::input) {
      auto it = shapes.find(v.name);
      const TensorDesc& d = it == shapes.end() ? v.desc : it->second;
      map[i] = b.input(v.name, d.dtype, std::vector<int64_t>(d.dims().begin(), d.dims().end()));
    } else if (v.kind == ValueKind::constant) {
      map[i] =
          b.constant(v.name, v.desc.dtype,
                     std::vector<int64_t>(v.desc.dims().begin(), v.desc.dims().end()), v.source);
      if (v.data && map[i].valid()) b.g_.values_[u(map[i].id)].data = v.data;
    } else if (v.kind == ValueKind::state) {
      map[i] = b.state(v.name, v.desc.dtype,
                       std::vector<int64_t>(v.desc.dims().begin(), v.desc.dims().end()));
    } else {
      const GraphNode& n = nodes_[u(v.producer)];
      std::vector<ValueId> ins;
      for (int in : n.inputs) ins.push_back(map[u(in)]);
      map[i] = b.op(n.op.kind, ins, n.op.attrs, n.name);
    }
  }
  for (int o : outputs_) b.output(map[u(o)]);
  return b.build();
}

bool Graph::same_as(const Graph& o, std::string* difference) const {
  auto differ = [&](const std::string& what) {
    if (difference) *difference = what;
    return false;
  };
  auto names = [](const Graph& g, const std::vector<int>& ids) {
    std::vector<std::string> out;
    for (int id : ids) out.push_back(g.value(id).name);
    return out;
  };
  if (name_ != o.name_) return differ("graph name '" + name_ + "' vs '" + o.name_ + "'");
  if (values_.size() != o.values_.size()) return differ("number of tensors");
  if (nodes_.size() != o.nodes_.size()) return differ("number of nodes");
  if (names(*this, inputs_) != names(o, o.inputs_)) return differ("inputs");
  if (names(*this, outputs_) != names(o, o.outputs_)) return differ("outputs");
  for (const GraphValue& a : values_) {
    auto bi = o.find(a.name);
    if (!bi) return differ("tensor '" + a.name + "' missing");
    const GraphValue& b = o.value(*bi);
    if (a.kind != b.kind || !(a.desc == b.desc) || !(a.source == b.source))
      return differ("tensor '" + a.name + "'");
    if (static_cast<bool>(a.data) != static_cast<bool>(b.data))
      return differ("constant '" + a.name + "' has data on one side only");
    if (a.data && !same_bytes(*a.data, *b.data)) return differ("data of constant '" + a.name + "'");
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const GraphNode &a = nodes_[i], &b = o.nodes_[i];
    if (a.name != b.name || a.op.kind != b.op.kind || names(*this, a.inputs) != names(o, b.inputs))
      return differ("node '" + a.name + "'");
    if (!(a.op.attrs == b.op.attrs)) return differ("attributes of node '" + a.name + "'");
  }
  return true;
}

// ---------------------------------------------------------------------------------------------

GraphBuilder::GraphBuilder(std::string graph_name) {
  g_.name_ = std::move(graph_name);
  if (g_.name_.empty())
    status_ = Status(Code::invalid_argument, "graph: expected a non-empty graph name");
}

bool GraphBuilder::take_name(const std::string& name, const char* what) {
  if (!status_.ok()) return false;
  if (name.empty()) {
    status_ = graph_error(g_.name_, Err(Code::invalid_argument)
                                        .expected(std::string("a non-empty name for the ") + what)
                                        .got("\"\""));
    return false;
  }
  if (names_.count(name)) {
    status_ = graph_error(g_.name_, Err(Code::invalid_argument)
                                        .tensor(name)
                                        .expected("a name not used before in the graph")
                                        .got("a second " + std::string(what) + " named so"));
    return false;
  }
  return true;
}

bool GraphBuilder::check_id(ValueId v, const std::string& context) {
  if (!status_.ok()) return false;
  if (v.id < 0 || u(v.id) >= g_.values_.size()) {
    status_ = graph_error(g_.name_, Err(Code::invalid_argument)
                                        .note(context + ": expected a value of this graph, got " +
                                              (v.id < 0 ? std::string("an invalid handle")
                                                        : "handle " + std::to_string(v.id))));
    return false;
  }
  return true;
}

ValueId GraphBuilder::add_value(GraphValue v) {
  const int id = static_cast<int>(g_.values_.size());
  names_[v.name] = id;
  g_.values_.push_back(std::move(v));
  return ValueId{id};
}

std::optional<GraphValue> GraphBuilder::declare(std::string name, ValueKind kind, DType dtype,
                                                const std::vector<int64_t>& shape) {
  const std::string what(value_kind_name(kind));
  if (!take_name(name, what.c_str())) return std::nullopt;
  if (shape.size() > static_cast<size_t>(kMaxRank)) {
    status_ = graph_error(g_.name_, Err(Code::invalid_argument)
                                        .tensor(name)
                                        .expected("rank <= " + std::to_string(kMaxRank))
                                        .got("rank " + std::to_string(shape.size())));
    return std::nullopt;
  }
  GraphValue v;
  v.name = std::move(name);
  v.kind = kind;
  v.desc = TensorDesc::contiguous(dtype, shape);
  if (Status s = validate(v.desc); !s.ok()) {
    status_ = graph_error(g_.name_, s.with_context(what + " '" + v.name + "'"));
    return std::nullopt;
  }
  return v;
}

ValueId GraphBuilder::input(std::string name, DType dtype, std::vector<int64_t> shape) {
  std::optional<GraphValue> v = declare(std::move(name), ValueKind::input, dtype, shape);
  if (!v) return {};
  ValueId id = add_value(std::move(*v));
  g_.inputs_.push_back(id.id);
  return id;
}

ValueId GraphBuilder::constant(std::string name, DType dtype, std::vector<int64_t> shape,
                               ConstantSource source) {
  std::optional<GraphValue> v = declare(std::move(name), ValueKind::constant, dtype, shape);
  if (!v) return {};
  v->source = std::move(source);
  if (!v->source.empty() && v->source.key.empty()) v->source.key = v->name;
  return add_value(std::move(*v));
}

ValueId GraphBuilder::state(std::string name, DType dtype, std::vector<int64_t> shape) {
  std::optional<GraphValue> v = declare(std::move(name), ValueKind::state, dtype, shape);
  if (!v) return {};
  if (is_quantized(dtype)) {
    status_ = graph_error(g_.name_, Err(Code::invalid_argument)
                                        .tensor(v->name)
                                        .expected("a state of an element dtype")
                                        .got(v->desc.str()));
    return {};
  }
  return add_value(std::move(*v));
}

int GraphBuilder::storage_of(int v) const {
  while (g_.values_[u(v)].kind == ValueKind::intermediate) {
    const GraphNode& n = g_.nodes_[u(g_.values_[u(v)].producer)];
    if (!is_view(n.kind())) break;
    v = n.inputs[0];
  }
  return v;
}

ValueId GraphBuilder::constant(std::string name, HostTensor data) {
  if (!status_.ok()) return {};
  if (!data.defined()) {
    status_ = graph_error(
        g_.name_, Err(Code::invalid_argument).tensor(name).expected("constant data").got("none"));
    return {};
  }
  const TensorDesc d = data.desc();
  ValueId id = constant(name, d.dtype, std::vector<int64_t>(d.dims().begin(), d.dims().end()), {});
  if (!id.valid()) return id;
  if (!d.is_contiguous() || d.offset != 0) data = data.contiguous();
  g_.values_[u(id.id)].data = std::make_shared<const HostTensor>(std::move(data));
  return id;
}

ValueId GraphBuilder::op(OpKind kind, std::vector<ValueId> inputs, OpAttrs attrs,
                         std::string name) {
  if (!status_.ok()) return {};
  if (name.empty()) {
    do {
      name = std::string(op_name(kind)) + std::to_string(counter_++);
    } while (names_.count(name));
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!check_id(inputs[i],
                  std::string(op_name(kind)) + " '" + name + "': input " + std::to_string(i)))
      return {};
  if (!take_name(name, "node")) return {};
  // States: written at most once, in place; after the write only its value is read.
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int sv = storage_of(inputs[i].id);
    const GraphValue& st = g_.values_[u(sv)];
    if (st.kind != ValueKind::state) continue;
    const int writer = g_.state_writer(sv);
    const bool writes = kind == OpKind::write_slice && i == 0;
    std::string want, got;
    if (writes && sv != inputs[i].id) {
      want = "a write into the state itself";
      got = "a view of state '" + st.name + "'";
    } else if (writer >= 0) {
      const std::string& w = g_.nodes_[u(writer)].name;
      want = writes ? "one write of state '" + st.name + "' per graph"
                    : "a read of '" + w + "', the state as written";
      got = writes ? "a second write (the first is '" + w + "')"
                   : "a read of state '" + st.name + "' after '" + w + "' wrote it";
    } else {
      continue;
    }
    status_ = graph_error(g_.name_, Err(Code::invalid_argument)
                                        .op(op_name(kind), name)
                                        .tensor(g_.values_[u(inputs[i].id)].name)
                                        .expected(want)
                                        .got(got));
    return {};
  }
  std::vector<TensorDesc> descs;
  std::vector<std::string> names;
  std::vector<int> ids;
  for (ValueId v : inputs) {
    descs.push_back(g_.values_[u(v.id)].desc);
    names.push_back(g_.values_[u(v.id)].name);
    ids.push_back(v.id);
  }
  auto op = make_op(kind, std::move(attrs), std::move(descs), std::move(names), name);
  if (!op.ok()) {
    status_ = graph_error(g_.name_, op.status());
    return {};
  }
  GraphNode n;
  n.name = name;
  n.inputs = std::move(ids);
  n.op = std::move(*op);
  GraphValue v;
  v.name = name;
  v.kind = ValueKind::intermediate;
  v.desc = n.op.output;
  v.producer = static_cast<int>(g_.nodes_.size());
  ValueId id = add_value(std::move(v));
  n.output = id.id;
  g_.nodes_.push_back(std::move(n));
  return id;
}

void GraphBuilder::output(ValueId v) {
  if (!check_id(v, "output")) return;
  const GraphValue& val = g_.values_[u(v.id)];
  if (val.kind != ValueKind::intermediate) {
    status_ = graph_error(g_.name_, Err(Code::invalid_argument)
                                        .tensor(val.name)
                                        .expected("an output computed by a node")
                                        .got("a graph " + std::string(value_kind_name(val.kind))));
    return;
  }
  for (int o : g_.outputs_)
    if (o == v.id) {
      status_ = graph_error(g_.name_, Err(Code::invalid_argument)
                                          .tensor(val.name)
                                          .expected("each output marked once")
                                          .got("a second output() call"));
      return;
    }
  g_.outputs_.push_back(v.id);
}

const TensorDesc* GraphBuilder::desc(ValueId v) const {
  if (v.id < 0 || u(v.id) >= g_.values_.size()) return nullptr;
  return &g_.values_[u(v.id)].desc;
}

Result<Graph> GraphBuilder::build() {
  if (!status_.ok()) return status_;
  if (built_) return graph_error(g_.name_, Status(Code::invalid_argument, "build() called twice"));
  if (g_.outputs_.empty())
    return graph_error(g_.name_, Err(Code::invalid_argument)
                                     .expected("at least one output (GraphBuilder::output)")
                                     .got("none"));
  built_ = true;
  return std::move(g_);
}

// Helpers --------------------------------------------------------------------------------------

ValueId GraphBuilder::matmul(ValueId a, ValueId b, bool transpose_b, std::string name) {
  OpAttrs at;
  at.transpose_b = transpose_b;
  return op(OpKind::matmul, {a, b}, at, std::move(name));
}
ValueId GraphBuilder::add(ValueId a, ValueId b, std::string name) {
  return op(OpKind::add, {a, b}, {}, std::move(name));
}
ValueId GraphBuilder::sub(ValueId a, ValueId b, std::string name) {
  return op(OpKind::sub, {a, b}, {}, std::move(name));
}
ValueId GraphBuilder::mul(ValueId a, ValueId b, std::string name) {
  return op(OpKind::mul, {a, b}, {}, std::move(name));
}
ValueId GraphBuilder::div(ValueId a, ValueId b, std::string name) {
  return op(OpKind::div, {a, b}, {}, std::move(name));
}
ValueId GraphBuilder::scale(ValueId x, float alpha, std::string name) {
  OpAttrs at;
  at.alpha = alpha;
  return op(OpKind::scale, {x}, at, std::move(name));
}
ValueId GraphBuilder::silu(ValueId x, std::string name) {
  return op(OpKind::silu, {x}, {}, std::move(name));
}
ValueId GraphBuilder::gelu(ValueId x, std::string name) {
  return op(OpKind::gelu, {x}, {}, std::move(name));
}
ValueId GraphBuilder::relu(ValueId x, std::string name) {
  return op(OpKind::relu, {x}, {}, std::move(name));
}
ValueId GraphBuilder::exp(ValueId x, std::string name) {
  return op(OpKind::exp, {x}, {}, std::move(name));
}
ValueId GraphBuilder::softmax(ValueId x, std::string name) {
  return op(OpKind::softmax, {x}, {}, std::move(name));
}
ValueId GraphBuilder::rmsnorm(ValueId x, ValueId weight, float eps, std::string name) {
  OpAttrs at;
  at.eps = eps;
  return op(OpKind::rmsnorm, {x, weight}, at, std::move(name));
}
ValueId GraphBuilder::rope(ValueId x, int64_t offset, std::string name) {
  OpAttrs at;
  at.rope_offset = offset;
  return op(OpKind::rope, {x}, at, std::move(name));
}
ValueId GraphBuilder::rope(ValueId x, ValueId pos, std::string name) {
  return op(OpKind::rope, {x, pos}, {}, std::move(name));
}
ValueId GraphBuilder::attention(ValueId q, ValueId k, ValueId v, bool causal, std::string name) {
  OpAttrs at;
  at.causal = causal;
  return op(OpKind::attention, {q, k, v}, at, std::move(name));
}
ValueId GraphBuilder::attention(ValueId q, ValueId k, ValueId v, ValueId kv_len, bool causal,
                                std::string name) {
  OpAttrs at;
  at.causal = causal;
  return op(OpKind::attention, {q, k, v, kv_len}, at, std::move(name));
}
ValueId GraphBuilder::write_slice(ValueId state, ValueId x, ValueId pos, int axis,
                                  std::string name) {
  OpAttrs at;
  at.axis = axis;
  return op(OpKind::write_slice, {state, x, pos}, at, std::move(name));
}
ValueId GraphBuilder::cast(ValueId x, DType to, std::string name) {
  OpAttrs at;
  at.to = to;
  return op(OpKind::cast, {x}, at, std::move(name));
}
ValueId GraphBuilder::copy(ValueId x, std::string name) {
  return op(OpKind::copy, {x}, {}, std::move(name));
}
ValueId GraphBuilder::concat(std::vector<ValueId> xs, int axis, std::string name) {
  OpAttrs at;
  at.axis = axis;
  return op(OpKind::concat, std::move(xs), at, std::move(name));
}
ValueId GraphBuilder::embedding(ValueId table, ValueId ids, std::string name) {
  return op(OpKind::embedding, {table, ids}, {}, std::move(name));
}
ValueId GraphBuilder::reshape(ValueId x, std::vector<int64_t> shape, std::string name) {
  OpAttrs at;
  at.shape = std::move(shape);
  return op(OpKind::reshape, {x}, at, std::move(name));
}
ValueId GraphBuilder::transpose(ValueId x, int dim0, int dim1, std::string name) {
  OpAttrs at;
  at.dim0 = dim0;
  at.dim1 = dim1;
  return op(OpKind::transpose, {x}, at, std::move(name));
}
ValueId GraphBuilder::permute(ValueId x, std::vector<int> perm, std::string name) {
  OpAttrs at;
  at.perm = std::move(perm);
  return op(OpKind::permute, {x}, at, std::move(name));
}
ValueId GraphBuilder::slice(ValueId x, int axis, int64_t start, int64_t stop, int64_t step,
                            std::string name) {
  OpAttrs at;
  at.axis = axis;
  at.start = start;
  at.stop = stop;
  at.step = step;
  return op(OpKind::slice, {x}, at, std::move(name));
}

}  // namespace duet
