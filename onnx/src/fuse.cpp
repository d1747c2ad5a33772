#include "fuse.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "array.h"
#include "proto.h"

namespace duet::onnx_import {

namespace {

class Matcher {
 public:
  Matcher(const onnx::GraphProto& g, std::vector<onnx::NodeProto>& nodes, const KnownLookup& known)
      : nodes_(nodes), known_(known) {
    for (const auto& o : g.output()) graph_outputs_.insert(o.name());
    for (size_t i = 0; i < nodes_.size(); ++i) {
      for (const auto& in : nodes_[i].input()) {
        ++uses_[in];
        auto& r = readers_[in];
        if (r.empty() || r.back() != i) r.push_back(i);
      }
      for (const auto& out : nodes_[i].output()) producer_[out] = i;
    }
  }

  // Patterns are made of ONNX's own ops only: a node of another domain may have any inputs.
  static bool onnx_domain(const onnx::NodeProto& n) {
    return n.domain().empty() || n.domain() == "ai.onnx";
  }

  // The nodes of ONNX's domain reading `name`, each once (inner() still counts every reader).
  std::vector<const onnx::NodeProto*> readers(const std::string& name) const {
    std::vector<const onnx::NodeProto*> out;
    if (auto it = readers_.find(name); it != readers_.end())
      for (size_t i : it->second)
        if (onnx_domain(nodes_[i])) out.push_back(&nodes_[i]);
    return out;
  }

  // The node making `name`, when it is of `type` (default domain).
  const onnx::NodeProto* made_by(const std::string& name, std::string_view type) const {
    auto it = producer_.find(name);
    if (it == producer_.end()) return nullptr;
    const onnx::NodeProto& n = nodes_[it->second];
    if (n.op_type() != type || !onnx_domain(n)) return nullptr;
    return &n;
  }

  bool is_output(const std::string& name) const { return graph_outputs_.count(name) > 0; }

  // Whether `name` is read once, by the pattern, and is not a graph output.
  bool inner(const std::string& name) const {
    auto it = uses_.find(name);
    return it != uses_.end() && it->second == 1 && !graph_outputs_.count(name);
  }

  // A float scalar constant (initializer or Constant node) close to `want`.
  bool is(const std::string& name, double want) const {
    std::optional<double> v = scalar(name);
    return v && std::fabs(*v - want) <= 1e-4 * std::fabs(want);
  }

  // For a binary node, the operand that is not `name` when one of them is (else "").
  static std::string other(const onnx::NodeProto& n, const std::string& name) {
    if (n.input_size() != 2) return {};
    if (n.input(0) == name) return n.input(1);
    if (n.input(1) == name) return n.input(0);
    return {};
  }

  // The single node reading `name`, when it is of `type` (default domain) and nothing else reads
  // it.
  const onnx::NodeProto* read_by(const std::string& name, std::string_view type) const {
    auto it = readers_.find(name);
    if (it == readers_.end() || it->second.size() != 1) return nullptr;
    const onnx::NodeProto& n = nodes_[it->second[0]];
    return n.op_type() == type && onnx_domain(n) ? &n : nullptr;
  }

  size_t index(const onnx::NodeProto* n) const { return static_cast<size_t>(n - nodes_.data()); }

  // The data of a constant (initializer or Constant node) held inline.
  std::optional<Array> constant(const std::string& name) const {
    onnx::TensorProto t;
    if (const Array* a = known_(name)) {
      if (a->numel() > 1 << 16) return std::nullopt;  // patterns read scalars and vectors
      return *a;
    }
    if (const auto* c = made_by(name, "Constant")) {
      if (c->attribute_size() != 1 || c->attribute(0).name() != "value") return std::nullopt;
      t = c->attribute(0).t();
    } else {
      return std::nullopt;
    }
    if (is_external(t)) return std::nullopt;
    auto a = tensor_array(t, DataFolder{});  // inline data only (external was left out above)
    if (!a.ok()) return std::nullopt;
    return std::move(*a);
  }

  // The value of a float scalar constant.
  std::optional<double> scalar(const std::string& name) const {
    std::optional<Array> a = constant(name);
    if (!a || !elem_is_float(a->elem()) || a->numel() != 1) return std::nullopt;
    return a->real_at(0);
  }

  // A constant of one value per channel of the last dim (every other dim 1): norm weights.
  bool channel_vector(const std::string& name) const {
    std::optional<Array> a = constant(name);
    if (!a || !elem_is_float(a->elem()) || a->dims().empty()) return false;
    for (size_t d = 0; d + 1 < a->dims().size(); ++d)
      if (a->dims()[d] != 1) return false;
    return true;
  }

  // A ReduceMean over the last axis alone, keeping it (axes as the attribute or, from opset 18,
  // a constant input).
  bool mean_of_last(const onnx::NodeProto& n) const {
    if (n.op_type() != "ReduceMean") return false;
    std::vector<int64_t> axes;
    for (const auto& a : n.attribute()) {
      if (a.name() == "axes") axes.assign(a.ints().begin(), a.ints().end());
      if (a.name() == "keepdims" && a.i() == 0) return false;
    }
    if (n.input_size() > 1) {
      std::optional<Array> a = constant(n.input(1));
      if (!a) return false;
      axes = a->ints();
    }
    return axes == std::vector<int64_t>{-1};
  }

 private:
  std::vector<onnx::NodeProto>& nodes_;
  const KnownLookup& known_;
  std::set<std::string> graph_outputs_;
  std::map<std::string, int> uses_;
  std::map<std::string, std::vector<size_t>> readers_;
  std::map<std::string, size_t> producer_;
};

struct Match {
  std::vector<size_t> remove;  // every node of the pattern but the last
  size_t last = 0;
  std::string x, out, type, approximate;
  std::vector<std::string> more;            // inputs after x
  std::optional<double> scale;              // attention
  std::optional<double> epsilon;            // norms
  std::vector<onnx::AttributeProto> attrs;  // copied from the pattern's nodes
  std::string note;                         // what the note calls the pattern, when not its type
};

// The tail shared by both GELU forms: from a = 1 + f(x) to 0.5 * x * a, in the three orders
// exporters write it. Fills `m.last`, `m.out` and the nodes it passes through.
bool gelu_tail(const Matcher& mt, const std::string& a, const std::string& x, Match& m) {
  const onnx::NodeProto* mul = mt.read_by(a, "Mul");
  if (!mul || !mt.inner(a)) return false;
  const std::string other = Matcher::other(*mul, a);
  auto finish = [&](const onnx::NodeProto* last) {
    m.last = mt.index(last);
    m.out = last->output(0);
    return true;
  };
  if (other == x) {  // (x * a) * 0.5
    const onnx::NodeProto* half = mt.read_by(mul->output(0), "Mul");
    if (!half || !mt.inner(mul->output(0)) || !mt.is(Matcher::other(*half, mul->output(0)), 0.5))
      return false;
    m.remove.push_back(mt.index(mul));
    return finish(half);
  }
  if (const auto* h = mt.made_by(other, "Mul"); h && mt.inner(other)) {  // (x * 0.5) * a
    if (!mt.is(Matcher::other(*h, x), 0.5)) return false;
    m.remove.push_back(mt.index(h));
    return finish(mul);
  }
  if (mt.is(other, 0.5)) {  // x * (a * 0.5)
    const onnx::NodeProto* last = mt.read_by(mul->output(0), "Mul");
    if (!last || !mt.inner(mul->output(0)) || Matcher::other(*last, mul->output(0)) != x)
      return false;
    m.remove.push_back(mt.index(mul));
    return finish(last);
  }
  return false;
}

// x * 0.5 * (1 + erf(x / sqrt(2)))
std::optional<Match> gelu_erf(const Matcher& mt, const onnx::NodeProto& erf) {
  Match m;
  const std::string& t = erf.input(0);
  if (!mt.inner(t)) return std::nullopt;
  if (const auto* d = mt.made_by(t, "Div"); d && mt.is(d->input(1), std::sqrt(2.0))) {
    m.x = d->input(0);
    m.remove.push_back(mt.index(d));
  } else if (const auto* s = mt.made_by(t, "Mul")) {
    for (int k = 0; k < 2 && m.x.empty(); ++k)
      if (mt.is(s->input(1 - k), std::sqrt(0.5))) m.x = s->input(k);
    if (m.x.empty()) return std::nullopt;
    m.remove.push_back(mt.index(s));
  } else {
    return std::nullopt;
  }
  m.remove.push_back(mt.index(&erf));
  const onnx::NodeProto* add = mt.read_by(erf.output(0), "Add");
  if (!add || !mt.inner(erf.output(0)) || !mt.is(Matcher::other(*add, erf.output(0)), 1.0))
    return std::nullopt;
  m.remove.push_back(mt.index(add));
  if (!gelu_tail(mt, add->output(0), m.x, m)) return std::nullopt;
  m.type = "Gelu";
  m.approximate = "none";
  return m;
}

// x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
std::optional<Match> gelu_tanh(const Matcher& mt, const onnx::NodeProto& tanh) {
  Match m;
  const std::string& u = tanh.input(0);
  const auto* scale = mt.made_by(u, "Mul");
  if (!scale || !mt.inner(u)) return std::nullopt;
  std::string v;
  for (int k = 0; k < 2 && v.empty(); ++k)
    if (mt.is(scale->input(1 - k), std::sqrt(2.0 / M_PI))) v = scale->input(k);
  const auto* add = v.empty() ? nullptr : mt.made_by(v, "Add");
  if (!add || !mt.inner(v)) return std::nullopt;
  // One operand of the add is x, the other 0.044715 * x^3.
  for (int k = 0; k < 2 && m.x.empty(); ++k) {
    const std::string& w = add->input(1 - k);
    const auto* cube_scale = mt.made_by(w, "Mul");
    if (!cube_scale || !mt.inner(w)) continue;
    std::string cube;
    for (int j = 0; j < 2 && cube.empty(); ++j)
      if (mt.is(cube_scale->input(1 - j), 0.044715)) cube = cube_scale->input(j);
    const std::string x = add->input(k);
    if (cube.empty() || !mt.inner(cube)) continue;
    if (const auto* p = mt.made_by(cube, "Pow"); p && p->input(0) == x && mt.is(p->input(1), 3)) {
      m.remove.push_back(mt.index(p));
    } else if (const auto* m2 = mt.made_by(cube, "Mul")) {  // x * (x * x)
      const std::string sq = Matcher::other(*m2, x);
      const auto* m1 = mt.made_by(sq, "Mul");
      if (!m1 || !mt.inner(sq) || m1->input(0) != x || m1->input(1) != x) continue;
      m.remove.push_back(mt.index(m1));
      m.remove.push_back(mt.index(m2));
    } else {
      continue;
    }
    m.remove.push_back(mt.index(cube_scale));
    m.x = x;
  }
  if (m.x.empty()) return std::nullopt;
  m.remove.push_back(mt.index(add));
  m.remove.push_back(mt.index(scale));
  m.remove.push_back(mt.index(&tanh));
  const onnx::NodeProto* one = mt.read_by(tanh.output(0), "Add");
  if (!one || !mt.inner(tanh.output(0)) || !mt.is(Matcher::other(*one, tanh.output(0)), 1.0))
    return std::nullopt;
  m.remove.push_back(mt.index(one));
  if (!gelu_tail(mt, one->output(0), m.x, m)) return std::nullopt;
  m.type = "Gelu";
  m.approximate = "tanh";
  return m;
}

// x * sigmoid(x)
std::optional<Match> silu(const Matcher& mt, const onnx::NodeProto& sig) {
  const std::string& s = sig.output(0);
  const onnx::NodeProto* mul = mt.read_by(s, "Mul");
  if (!mul || !mt.inner(s) || Matcher::other(*mul, s) != sig.input(0)) return std::nullopt;
  Match m;
  m.x = sig.input(0);
  m.remove = {mt.index(&sig)};
  m.last = mt.index(mul);
  m.out = mul->output(0);
  m.type = "Silu";
  return m;
}

// softmax(q @ kt * scale + mask) @ v, the scale (a Mul or a Div by a scalar) and the mask
// optional: duet's attention. Whether the shapes fit is decided when the node is mapped.
std::optional<Match> attention(const Matcher& mt, const onnx::NodeProto& softmax) {
  if (const auto* a = softmax.attribute_size() ? &softmax.attribute(0) : nullptr;
      a && (a->name() != "axis" || (a->i() != -1 && a->i() != 3)))
    return std::nullopt;
  Match m;
  const std::string& probs = softmax.output(0);
  const onnx::NodeProto* pv = mt.read_by(probs, "MatMul");
  if (!pv || !mt.inner(probs) || pv->input(0) != probs) return std::nullopt;
  std::string t = softmax.input(0), mask, cond, fill;
  // The scores come from a MatMul, maybe through a Mul or Div by a scalar.
  auto scores = [&](const std::string& v) {
    if (mt.made_by(v, "MatMul")) return true;
    const onnx::NodeProto* s = mt.made_by(v, "Mul");
    if (!s) s = mt.made_by(v, "Div");
    return s && (mt.made_by(s->input(0), "MatMul") || mt.made_by(s->input(1), "MatMul"));
  };
  // masked_fill(scores, cond, fill), as PyTorch exports it: Where(cond, fill, scores).
  if (const auto* w = mt.made_by(t, "Where"); w && mt.inner(t) && w->input_size() == 3) {
    if (!scores(w->input(2)) && !mt.made_by(w->input(2), "Add")) return std::nullopt;
    cond = w->input(0);
    fill = w->input(1);
    t = w->input(2);
    m.remove.push_back(mt.index(w));
  }
  if (const auto* add = mt.made_by(t, "Add"); add && mt.inner(t)) {
    for (int k = 0; k < 2 && mask.empty(); ++k)
      if (scores(add->input(k)) && !scores(add->input(1 - k))) {
        mask = add->input(1 - k);
        t = add->input(k);
      }
    if (mask.empty()) return std::nullopt;
    m.remove.push_back(mt.index(add));
  }
  if (const auto* mul = mt.made_by(t, "Mul"); mul && mt.inner(t)) {
    for (int k = 0; k < 2 && !m.scale; ++k)
      if (mt.made_by(mul->input(k), "MatMul")) {
        m.scale = mt.scalar(mul->input(1 - k));
        t = mul->input(k);
      }
    if (!m.scale) return std::nullopt;
    m.remove.push_back(mt.index(mul));
  } else if (const auto* div = mt.made_by(t, "Div"); div && mt.inner(t)) {
    const std::optional<double> c = mt.scalar(div->input(1));
    if (!c || *c == 0) return std::nullopt;
    m.scale = 1.0 / *c;
    t = div->input(0);
    m.remove.push_back(mt.index(div));
  }
  const onnx::NodeProto* qk = mt.made_by(t, "MatMul");
  if (!qk || !mt.inner(t)) return std::nullopt;
  m.remove.push_back(mt.index(qk));
  m.remove.push_back(mt.index(&softmax));
  m.x = qk->input(0);
  m.more = {qk->input(1), pv->input(1)};
  if (!mask.empty() || !cond.empty()) m.more.push_back(mask);
  if (!cond.empty()) {
    m.more.push_back(cond);
    m.more.push_back(fill);
  }
  m.last = mt.index(pv);
  m.out = pv->output(0);
  m.type = "Attention";
  return m;
}

// x - mean(x) over the last axis, then divided by sqrt(mean of its square + eps), then times w and
// plus b (each optional): LayerNormalization as exporters below opset 17 write it.
std::optional<Match> layer_norm(const Matcher& mt, const onnx::NodeProto& mean) {
  if (!mt.mean_of_last(mean)) return std::nullopt;
  Match m;
  m.x = mean.input(0);
  const onnx::NodeProto* sub = mt.read_by(mean.output(0), "Sub");
  if (!sub || !mt.inner(mean.output(0)) || sub->input(0) != m.x) return std::nullopt;
  const std::string& d = sub->output(0);
  // d is read twice: squared, and divided by the deviation.
  const std::vector<const onnx::NodeProto*> r = mt.readers(d);
  if (r.size() != 2 || mt.is_output(d)) return std::nullopt;
  const onnx::NodeProto* sq = nullptr;
  const onnx::NodeProto* div = nullptr;
  for (const onnx::NodeProto* n : r) {
    if ((n->op_type() == "Pow" && n->input(0) == d && mt.is(n->input(1), 2.0)) ||
        (n->op_type() == "Mul" && n->input(0) == d && n->input(1) == d))
      sq = n;
    if (n->op_type() == "Div" && n->input(0) == d) div = n;
  }
  if (!sq || !div || !mt.inner(sq->output(0))) return std::nullopt;
  const onnx::NodeProto* var = mt.read_by(sq->output(0), "ReduceMean");
  if (!var || !mt.mean_of_last(*var) || !mt.inner(var->output(0))) return std::nullopt;
  const onnx::NodeProto* add = mt.read_by(var->output(0), "Add");
  if (!add || !mt.inner(add->output(0))) return std::nullopt;
  m.epsilon = mt.scalar(Matcher::other(*add, var->output(0)));
  const onnx::NodeProto* sqrt = mt.read_by(add->output(0), "Sqrt");
  if (!m.epsilon || !(*m.epsilon > 0) || !sqrt || div->input(1) != sqrt->output(0) ||
      !mt.inner(sqrt->output(0)))
    return std::nullopt;
  m.remove = {mt.index(&mean), mt.index(sub), mt.index(sq),
              mt.index(var),   mt.index(add), mt.index(sqrt)};
  const onnx::NodeProto* last = div;
  if (const auto* mul = mt.read_by(div->output(0), "Mul"); mul && mt.inner(div->output(0))) {
    const std::string w = Matcher::other(*mul, div->output(0));
    if (mt.channel_vector(w)) {
      m.more.push_back(w);
      m.remove.push_back(mt.index(last));
      last = mul;
      if (const auto* plus = mt.read_by(mul->output(0), "Add"); plus && mt.inner(mul->output(0))) {
        const std::string b = Matcher::other(*plus, mul->output(0));
        if (mt.channel_vector(b)) {
          m.more.push_back(b);
          m.remove.push_back(mt.index(last));
          last = plus;
        }
      }
    }
  }
  m.last = mt.index(last);
  m.out = last->output(0);
  m.type = "LayerNormalization";
  return m;
}

// x / sqrt(mean(x^2) over the last axis + eps), as a Div or times a reciprocal, then times w
// (optional): RMSNorm as exporters write it.
std::optional<Match> rms_norm(const Matcher& mt, const onnx::NodeProto& sqrt) {
  Match m;
  const onnx::NodeProto* add = mt.made_by(sqrt.input(0), "Add");
  if (!add || !mt.inner(sqrt.input(0))) return std::nullopt;
  const onnx::NodeProto* var = nullptr;
  for (int k = 0; k < 2 && !var; ++k)
    if (const auto* v = mt.made_by(add->input(k), "ReduceMean"); v && mt.mean_of_last(*v)) {
      var = v;
      m.epsilon = mt.scalar(add->input(1 - k));
    }
  if (!var || !mt.inner(var->output(0)) || !m.epsilon || !(*m.epsilon > 0)) return std::nullopt;
  const std::string& p = var->input(0);
  if (const auto* pow = mt.made_by(p, "Pow"); pow && mt.is(pow->input(1), 2.0)) {
    m.x = pow->input(0);
    m.remove.push_back(mt.index(pow));
  } else if (const auto* sq = mt.made_by(p, "Mul"); sq && sq->input(0) == sq->input(1)) {
    m.x = sq->input(0);
    m.remove.push_back(mt.index(sq));
  }
  if (m.x.empty() || !mt.inner(p) || !mt.inner(sqrt.output(0))) return std::nullopt;
  m.remove.push_back(mt.index(var));
  m.remove.push_back(mt.index(add));
  m.remove.push_back(mt.index(&sqrt));
  // x / s, x * (1 / s) or x * reciprocal(s).
  const onnx::NodeProto* last = nullptr;
  const std::vector<const onnx::NodeProto*> r = mt.readers(sqrt.output(0));
  const onnx::NodeProto* inv = r.empty() ? nullptr : r[0];
  if (inv && inv->op_type() == "Div" && inv->input(0) == m.x) {
    last = inv;
  } else if (inv && ((inv->op_type() == "Div" && mt.is(inv->input(0), 1.0)) ||
                     inv->op_type() == "Reciprocal")) {
    const onnx::NodeProto* mul = mt.read_by(inv->output(0), "Mul");
    if (!mul || !mt.inner(inv->output(0)) || Matcher::other(*mul, inv->output(0)) != m.x)
      return std::nullopt;
    m.remove.push_back(mt.index(inv));
    last = mul;
  } else {
    return std::nullopt;
  }
  if (const auto* mul = mt.read_by(last->output(0), "Mul"); mul && mt.inner(last->output(0))) {
    const std::string w = Matcher::other(*mul, last->output(0));
    if (mt.channel_vector(w)) {
      m.more.push_back(w);
      m.remove.push_back(mt.index(last));
      last = mul;
    }
  }
  m.last = mt.index(last);
  m.out = last->output(0);
  m.type = "RmsNormalization";
  return m;
}

// A Conv whose output only a BatchNormalization reads: one node with the Conv's inputs (B
// maybe ""), then the norm's scale, bias, mean and var, the Conv's attributes and the norm's. The
// mapping folds the norm into the weights when its parameters are known.
std::optional<Match> conv_batch_norm(const Matcher& mt, const onnx::NodeProto& bn) {
  const onnx::NodeProto* conv = mt.made_by(bn.input(0), "Conv");
  if (!conv || !mt.inner(bn.input(0)) || bn.input_size() != 5 || conv->input_size() < 2)
    return std::nullopt;
  Match m;
  m.remove.push_back(mt.index(conv));
  m.last = mt.index(&bn);
  m.x = conv->input(0);
  m.more = {conv->input(1), conv->input_size() > 2 ? conv->input(2) : std::string()};
  for (int k = 1; k < 5; ++k) m.more.push_back(bn.input(k));
  m.out = bn.output(0);
  m.type = "ConvBatchNormalization";
  m.note = "Conv + BatchNormalization (the norm folded into the Conv's weights where known)";
  for (const auto* n : {conv, &bn})
    for (const auto& a : n->attribute()) m.attrs.push_back(a);
  return m;
}

}  // namespace

std::vector<onnx::NodeProto> fuse(onnx::GraphProto& g, int opset, const KnownLookup& known,
                                  std::vector<std::string>* notes) {
  std::vector<onnx::NodeProto> nodes;
  nodes.reserve(static_cast<size_t>(g.node_size()));
  for (auto& n : *g.mutable_node()) nodes.push_back(std::move(n));
  g.clear_node();

  std::vector<Match> found;
  {
    const Matcher mt(g, nodes, known);
    std::set<size_t> claimed;
    for (const auto& n : nodes) {
      if (!(n.domain().empty() || n.domain() == "ai.onnx") || n.output_size() != 1) continue;
      std::optional<Match> m;
      if (n.op_type() == "Softmax" && opset >= 13) m = attention(mt, n);
      if (n.op_type() == "ReduceMean") m = layer_norm(mt, n);
      if (n.op_type() == "Sqrt") m = rms_norm(mt, n);
      if (n.op_type() == "Erf") m = gelu_erf(mt, n);
      if (n.op_type() == "Tanh") m = gelu_tanh(mt, n);
      if (n.op_type() == "Sigmoid") m = silu(mt, n);
      if (n.op_type() == "BatchNormalization") m = conv_batch_norm(mt, n);
      if (!m) continue;
      bool overlaps = claimed.count(m->last) > 0;
      for (size_t r : m->remove) overlaps = overlaps || claimed.count(r) > 0;
      if (overlaps) continue;
      claimed.insert(m->remove.begin(), m->remove.end());
      claimed.insert(m->last);
      found.push_back(std::move(*m));
    }
  }
  if (found.empty()) return nodes;

  std::map<std::string, int> counts;
  std::set<size_t> drop;
  for (const Match& m : found) {
    onnx::NodeProto fused;
    fused.set_domain(kFusedDomain);
    fused.set_op_type(m.type);
    fused.set_name(nodes[m.last].name());
    fused.add_input(m.x);
    for (const std::string& in : m.more) fused.add_input(in);
    fused.add_output(m.out);
    for (const auto& [name, v] : {std::pair{"scale", m.scale}, std::pair{"epsilon", m.epsilon}})
      if (v) {
        auto* a = fused.add_attribute();
        a->set_name(name);
        a->set_type(onnx::AttributeProto::FLOAT);
        a->set_f(static_cast<float>(*v));
      }
    for (const auto& a : m.attrs) *fused.add_attribute() = a;
    if (!m.approximate.empty()) {
      auto* a = fused.add_attribute();
      a->set_name("approximate");
      a->set_type(onnx::AttributeProto::STRING);
      a->set_s(m.approximate);
    }
    nodes[m.last] = std::move(fused);
    drop.insert(m.remove.begin(), m.remove.end());
    const std::string form = m.approximate == "none" ? "erf" : m.approximate;
    ++counts[!m.note.empty() ? m.note : m.type + (form.empty() ? "" : " (" + form + " form)")];
  }
  std::vector<onnx::NodeProto> out;
  out.reserve(nodes.size() - drop.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!drop.count(i)) out.push_back(std::move(nodes[i]));
  if (notes)
    for (const auto& [what, n] : counts)
      notes->push_back("fused " + std::to_string(n) + " " + what +
                       (n == 1 ? " pattern" : " patterns") + " into one op each");
  return out;
}

}  // namespace duet::onnx_import
