#include "duet/op.h"

#include <algorithm>
#include <cmath>

namespace duet {

namespace {

size_t u(int i) {
  return static_cast<size_t>(i);
}

struct OpTableEntry {
  OpKind kind;
  std::string_view name;
  std::span<const InputSpec> inputs;
};

constexpr InputSpec kX[] = {{"x", false}};
constexpr InputSpec kAB[] = {{"a", false}, {"b", false}};
constexpr InputSpec kSoftmax[] = {{"x", false}, {"mask", true}};
constexpr InputSpec kRms[] = {{"x", false}, {"weight", true}};
constexpr InputSpec kLayer[] = {{"x", false}, {"weight", true}, {"bias", true}};
constexpr InputSpec kAttn[] = {{"q", false}, {"k", false}, {"v", false}, {"mask", true}};
constexpr InputSpec kEmb[] = {{"table", false}, {"ids", false}};

constexpr OpTableEntry kOps[kNumOpKinds] = {
    {OpKind::matmul, "matmul", kAB},    {OpKind::add, "add", kAB},
    {OpKind::sub, "sub", kAB},          {OpKind::mul, "mul", kAB},
    {OpKind::div, "div", kAB},          {OpKind::scale, "scale", kX},
    {OpKind::silu, "silu", kX},         {OpKind::gelu, "gelu", kX},
    {OpKind::relu, "relu", kX},         {OpKind::exp, "exp", kX},
    {OpKind::sigmoid, "sigmoid", kX},   {OpKind::tanh, "tanh", kX},
    {OpKind::erf, "erf", kX},           {OpKind::sqrt, "sqrt", kX},
    {OpKind::pow, "pow", kX},           {OpKind::softmax, "softmax", kSoftmax},
    {OpKind::rmsnorm, "rmsnorm", kRms}, {OpKind::layernorm, "layernorm", kLayer},
    {OpKind::rope, "rope", kX},         {OpKind::attention, "attention", kAttn},
    {OpKind::cast, "cast", kX},         {OpKind::copy, "copy", kX},
    {OpKind::concat, "concat", kX},     {OpKind::embedding, "embedding", kEmb},
    {OpKind::reshape, "reshape", kX},   {OpKind::transpose, "transpose", kX},
    {OpKind::permute, "permute", kX},   {OpKind::slice, "slice", kX},
};

const OpTableEntry& entry(OpKind k) {
  return kOps[static_cast<size_t>(k)];
}

// Collects the context of one make_op call so every check reads as one line.
class Check {
 public:
  explicit Check(const OpDesc& op) : op_(op) {}

  Err fail(size_t input) const {
    Err e(Code::invalid_argument);
    e.op(op_name(op_.kind), op_.name);
    if (input < op_.inputs.size()) e.tensor(op_.input_name(input));
    return e;
  }
  Err fail_attr() const {
    Err e(Code::invalid_argument);
    e.op(op_name(op_.kind), op_.name);
    return e;
  }

  Status rank(size_t i, int lo, int hi) const {
    const TensorDesc& t = op_.inputs[i];
    if (t.rank >= lo && t.rank <= hi) return {};
    std::string want = lo == hi ? "rank " + std::to_string(lo)
                                : "rank " + std::to_string(lo) + " to " + std::to_string(hi);
    return fail(i).expected(want).got(t.str());
  }
  Status float_dtype(size_t i) const {
    if (is_float(op_.inputs[i].dtype)) return {};
    return fail(i)
        .expected(is_quantized(op_.inputs[i].dtype)
                      ? "a float dtype (f32, f16, bf16): a quantized tensor is read by matmul "
                        "(as 'b'), embedding (as the table) and cast (to a float dtype)"
                      : "a float dtype (f32, f16, bf16)")
        .got(op_.inputs[i].str());
  }
  Status not_quantized(size_t i) const {
    if (!is_quantized(op_.inputs[i].dtype)) return {};
    return fail(i)
        .expected(
            "an element dtype: a quantized tensor is read by matmul (as 'b'), embedding (as "
            "the table) and cast (to a float dtype)")
        .got(op_.inputs[i].str());
  }
  Status same_dtype(size_t i, size_t j) const {
    if (op_.inputs[i].dtype == op_.inputs[j].dtype) return {};
    return fail(j)
        .expected(std::string(dtype_name(op_.inputs[i].dtype)) + " like '" + op_.input_name(i) +
                  "'")
        .got(op_.inputs[j].str());
  }
  // A mask must be f32 or the dtype of input `like`, and broadcast to `target`.
  Status mask(size_t i, size_t like, std::span<const int64_t> target) const {
    const TensorDesc& m = op_.inputs[i];
    if (m.dtype != DType::f32 && m.dtype != op_.inputs[like].dtype)
      return fail(i)
          .expected("f32 or " + std::string(dtype_name(op_.inputs[like].dtype)))
          .got(m.str());
    if (!broadcast_to(m, target).ok()) {
      std::string want = "a shape that broadcasts to [";
      for (size_t d = 0; d < target.size(); ++d) want += (d ? "," : "") + std::to_string(target[d]);
      return fail(i).expected(want + "]").got(m.str());
    }
    return {};
  }
  // A per-channel vector of the last dim's size.
  Status channel_vector(size_t i, int64_t n, size_t like) const {
    const TensorDesc& w = op_.inputs[i];
    if (w.rank != 1 || w.shape[0] != n)
      return fail(i).expected("shape [" + std::to_string(n) + "]").got(w.str());
    return same_dtype(like, i);
  }

 private:
  const OpDesc& op_;
};

// A quantized 'b' is a weight as checkpoints store it: [N, K] with rows of K (transpose_b), read
// by the kernel block by block; 'a' is a float activation whose dtype the output takes.
Status check_quantized_b(const Check& c, const OpDesc& op) {
  const TensorDesc& b = op.inputs[1];
  DUET_TRY(c.rank(1, 2, 2));
  if (!op.attrs.transpose_b)
    return c.fail(1)
        .expected("a quantized weight stored [N, K] with transpose_b (rows of K in " +
                  std::string(dtype_name(b.dtype)) + " blocks)")
        .got(b.str() + " without transpose_b");
  return {};
}

Status infer_matmul(const Check& c, OpDesc& op) {
  DUET_TRY(c.rank(0, 2, 4));
  DUET_TRY(c.rank(1, 2, 4));
  if (is_quantized(op.inputs[0].dtype))
    return c.fail(0)
        .expected(
            "a float activation (a quantized weight goes in 'b', stored [N, K] with "
            "transpose_b)")
        .got(op.inputs[0].str());
  DUET_TRY(c.float_dtype(0));
  if (is_quantized(op.inputs[1].dtype))
    DUET_TRY(check_quantized_b(c, op));
  else
    DUET_TRY(c.same_dtype(0, 1));
  const TensorDesc& a = op.inputs[0];
  const TensorDesc& b = op.inputs[1];
  int64_t m = op.attrs.transpose_a ? a.dim(-1) : a.dim(-2);
  int64_t ka = op.attrs.transpose_a ? a.dim(-2) : a.dim(-1);
  int64_t kb = op.attrs.transpose_b ? b.dim(-1) : b.dim(-2);
  int64_t n = op.attrs.transpose_b ? b.dim(-2) : b.dim(-1);
  if (ka != kb)
    return c.fail(1)
        .expected("K = " + std::to_string(ka) + " (the contraction size of 'a')")
        .got(std::to_string(kb) + " in " + b.str() + (op.attrs.transpose_b ? " (transposed)" : ""));
  int brank = 0;
  auto batch =
      broadcast_shapes(a.dims().first(u(a.rank - 2)), b.dims().first(u(b.rank - 2)), &brank);
  if (!batch.ok()) return c.fail(1).expected("batch dims that broadcast with 'a'").got(b.str());
  std::vector<int64_t> out(batch->begin(), batch->begin() + brank);
  out.push_back(m);
  out.push_back(n);
  op.output = TensorDesc::contiguous(a.dtype, out);
  return {};
}

Status infer_binary(const Check& c, OpDesc& op) {
  DUET_TRY(c.float_dtype(0));
  DUET_TRY(c.same_dtype(0, 1));
  int rank = 0;
  auto shape = broadcast_shapes(op.inputs[0].dims(), op.inputs[1].dims(), &rank);
  if (!shape.ok())
    return c.fail(1)
        .expected("a shape that broadcasts with " + op.inputs[0].shape_str())
        .got(op.inputs[1].str());
  op.output = TensorDesc::contiguous(op.inputs[0].dtype, std::span(shape->data(), u(rank)));
  return {};
}

Status infer_softmax(const Check& c, OpDesc& op) {
  DUET_TRY(c.rank(0, 1, 4));
  DUET_TRY(c.float_dtype(0));
  if (op.has_input(1)) DUET_TRY(c.mask(1, 0, op.inputs[0].dims()));
  op.output = TensorDesc::contiguous(op.inputs[0].dtype, op.inputs[0].dims());
  return {};
}

Status infer_norm(const Check& c, OpDesc& op) {
  DUET_TRY(c.rank(0, 1, 4));
  DUET_TRY(c.float_dtype(0));
  if (!(op.attrs.eps > 0.0f) || !std::isfinite(op.attrs.eps))
    return c.fail_attr().expected("eps > 0").got("eps " + std::to_string(op.attrs.eps));
  for (size_t i = 1; i < op.inputs.size(); ++i)
    DUET_TRY(c.channel_vector(i, op.inputs[0].dim(-1), 0));
  op.output = TensorDesc::contiguous(op.inputs[0].dtype, op.inputs[0].dims());
  return {};
}

Status infer_rope(const Check& c, OpDesc& op) {
  DUET_TRY(c.rank(0, 4, 4));
  DUET_TRY(c.float_dtype(0));
  const int64_t d = op.inputs[0].dim(-1);
  const int64_t rd = op.attrs.rope_dims == 0 ? d : op.attrs.rope_dims;
  if (rd <= 0 || rd > d || rd % 2 != 0)
    return c.fail(0)
        .expected("an even number of rotated dims <= D = " + std::to_string(d))
        .got("rope_dims " + std::to_string(op.attrs.rope_dims));
  if (op.attrs.rope_offset < 0)
    return c.fail_attr().expected("rope_offset >= 0").got(std::to_string(op.attrs.rope_offset));
  if (!(op.attrs.rope_theta > 0.0f))
    return c.fail_attr().expected("rope_theta > 0").got(std::to_string(op.attrs.rope_theta));
  op.output = TensorDesc::contiguous(op.inputs[0].dtype, op.inputs[0].dims());
  return {};
}

Status infer_attention(const Check& c, OpDesc& op) {
  for (size_t i = 0; i < 3; ++i) {
    DUET_TRY(c.rank(i, 4, 4));
    DUET_TRY(c.float_dtype(i));
    if (i) DUET_TRY(c.same_dtype(0, i));
  }
  const TensorDesc &q = op.inputs[0], &k = op.inputs[1], &v = op.inputs[2];
  const int64_t B = q.dim(0), Hq = q.dim(1), Lq = q.dim(2), D = q.dim(3);
  const int64_t Hkv = k.dim(1), Lk = k.dim(2);
  if (k.dim(0) != B || k.dim(3) != D)
    return c.fail(1)
        .expected("[" + std::to_string(B) + ", Hkv, Lk, " + std::to_string(D) +
                  "] (batch and head dim of q)")
        .got(k.str());
  if (!v.same_shape(k)) return c.fail(2).expected("the shape of k " + k.shape_str()).got(v.str());
  if (Hq % Hkv != 0)
    return c.fail(1)
        .expected("Hkv dividing Hq = " + std::to_string(Hq) + " (GQA/MQA)")
        .got("Hkv = " + std::to_string(Hkv));
  if (op.has_input(3)) {
    const int64_t target[4] = {B, Hq, Lq, Lk};
    DUET_TRY(c.mask(3, 0, target));
  }
  if (op.attrs.scale && !std::isfinite(*op.attrs.scale))
    return c.fail_attr().expected("a finite scale").got(std::to_string(*op.attrs.scale));
  op.output = TensorDesc::contiguous(q.dtype, {B, Hq, Lq, D});
  return {};
}

Status infer_concat(const Check& c, OpDesc& op) {
  const TensorDesc& x0 = op.inputs[0];
  int axis = op.attrs.axis < 0 ? op.attrs.axis + x0.rank : op.attrs.axis;
  if (x0.rank == 0 || axis < 0 || axis >= x0.rank)
    return c.fail_attr()
        .expected("axis within rank " + std::to_string(x0.rank))
        .got("axis " + std::to_string(op.attrs.axis));
  Dims out = x0.shape;
  out[u(axis)] = 0;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const TensorDesc& t = op.inputs[i];
    DUET_TRY(c.not_quantized(i));
    DUET_TRY(c.same_dtype(0, i));
    bool ok = t.rank == x0.rank;
    for (int d = 0; ok && d < t.rank; ++d) ok = d == axis || t.shape[u(d)] == x0.shape[u(d)];
    if (!ok)
      return c.fail(i)
          .expected("the shape of '" + op.input_name(0) + "' " + x0.shape_str() +
                    " except on axis " + std::to_string(axis))
          .got(t.str());
    out[u(axis)] += t.shape[u(axis)];
  }
  op.attrs.axis = axis;
  op.output = TensorDesc::contiguous(x0.dtype, std::span(out.data(), u(x0.rank)));
  return {};
}

Status infer_embedding(const Check& c, OpDesc& op) {
  DUET_TRY(c.rank(0, 2, 2));
  const bool quantized = is_quantized(op.inputs[0].dtype);
  if (!quantized) DUET_TRY(c.float_dtype(0));
  DUET_TRY(c.rank(1, 1, 3));
  if (op.inputs[1].dtype != DType::i32)
    return c.fail(1).expected("i32 ids").got(op.inputs[1].str());
  std::vector<int64_t> out(op.inputs[1].dims().begin(), op.inputs[1].dims().end());
  out.push_back(op.inputs[0].dim(1));
  // Rows of a quantized table come out dequantized, in f32.
  op.output = TensorDesc::contiguous(quantized ? DType::f32 : op.inputs[0].dtype, out);
  return {};
}

Status infer_view(const Check& c, OpDesc& op) {
  Result<TensorDesc> r = Status(Code::internal, "unreachable");
  const TensorDesc& x = op.inputs[0];
  switch (op.kind) {
    case OpKind::reshape:
      r = reshape(x, op.attrs.shape);
      break;
    case OpKind::transpose:
      r = transpose(x, op.attrs.dim0, op.attrs.dim1);
      break;
    case OpKind::permute:
      r = permute(x, op.attrs.perm);
      break;
    case OpKind::slice:
      r = slice(x, op.attrs.axis, op.attrs.start, op.attrs.stop, op.attrs.step);
      break;
    default:
      break;
  }
  if (!r.ok()) {
    // The view functions name themselves ("reshape: ..."); restate it with the node and tensor.
    std::string m = r.status().message();
    const std::string self = std::string(op_name(op.kind)) + ": ";
    if (m.rfind(self, 0) == 0) m = m.substr(self.size());
    return Status(r.status().code(), m)
        .with_context(std::string(op_name(op.kind)) +
                      (op.name.empty() ? "" : " '" + op.name + "'") + ": tensor '" +
                      op.input_name(0) + "'");
  }
  if (Status s = validate(*r); !s.ok())  // a view that splits or transposes blocks
    return s.with_context(std::string(op_name(op.kind)) +
                          (op.name.empty() ? "" : " '" + op.name + "'") + ": tensor '" +
                          op.input_name(0) + "'");
  (void)c;
  op.output = *r;
  return {};
}

Status infer(OpDesc& op) {
  Check c(op);
  switch (op.kind) {
    case OpKind::matmul:
      return infer_matmul(c, op);
    case OpKind::add:
    case OpKind::sub:
    case OpKind::mul:
    case OpKind::div:
      return infer_binary(c, op);
    case OpKind::scale:
    case OpKind::silu:
    case OpKind::gelu:
    case OpKind::relu:
    case OpKind::exp:
    case OpKind::sigmoid:
    case OpKind::tanh:
    case OpKind::erf:
    case OpKind::sqrt:
    case OpKind::pow:
      DUET_TRY(c.float_dtype(0));
      if (op.kind == OpKind::scale && !std::isfinite(op.attrs.alpha))
        return c.fail_attr().expected("a finite alpha").got(std::to_string(op.attrs.alpha));
      if (op.kind == OpKind::pow && !std::isfinite(op.attrs.exponent))
        return c.fail_attr().expected("a finite exponent").got(std::to_string(op.attrs.exponent));
      op.output = TensorDesc::contiguous(op.inputs[0].dtype, op.inputs[0].dims());
      return {};
    case OpKind::softmax:
      return infer_softmax(c, op);
    case OpKind::rmsnorm:
    case OpKind::layernorm:
      return infer_norm(c, op);
    case OpKind::rope:
      return infer_rope(c, op);
    case OpKind::attention:
      return infer_attention(c, op);
    case OpKind::cast:
      if (is_quantized(op.attrs.to))
        return c.fail_attr()
            .expected(
                "a float or integer 'to' (quantize weights with duet::quantize or "
                "duet quantize, not in a graph)")
            .got("to " + std::string(dtype_name(op.attrs.to)));
      if (is_quantized(op.inputs[0].dtype) && !is_float(op.attrs.to))
        return c.fail_attr()
            .expected("a float 'to' (f32, f16, bf16) for the quantized '" + op.input_name(0) + "'")
            .got("to " + std::string(dtype_name(op.attrs.to)));
      op.output = TensorDesc::contiguous(op.attrs.to, op.inputs[0].dims());
      return {};
    case OpKind::copy:
      DUET_TRY(c.not_quantized(0));
      op.output = TensorDesc::contiguous(op.inputs[0].dtype, op.inputs[0].dims());
      return {};
    case OpKind::concat:
      return infer_concat(c, op);
    case OpKind::embedding:
      return infer_embedding(c, op);
    case OpKind::reshape:
    case OpKind::transpose:
    case OpKind::permute:
    case OpKind::slice:
      return infer_view(c, op);
  }
  return Status(Code::internal, "unknown op kind");
}

}  // namespace

std::string_view op_name(OpKind k) {
  size_t i = static_cast<size_t>(k);
  return i < u(kNumOpKinds) ? kOps[i].name : std::string_view("?");
}

std::optional<OpKind> parse_op(std::string_view name) {
  for (const auto& e : kOps)
    if (e.name == name) return e.kind;
  return std::nullopt;
}

bool is_view(OpKind k) {
  return k == OpKind::reshape || k == OpKind::transpose || k == OpKind::permute ||
         k == OpKind::slice;
}
bool is_unary_elementwise(OpKind k) {
  switch (k) {
    case OpKind::scale:
    case OpKind::silu:
    case OpKind::gelu:
    case OpKind::relu:
    case OpKind::exp:
    case OpKind::sigmoid:
    case OpKind::tanh:
    case OpKind::erf:
    case OpKind::sqrt:
    case OpKind::pow:
      return true;
    default:
      return false;
  }
}
bool is_binary_elementwise(OpKind k) {
  return k == OpKind::add || k == OpKind::sub || k == OpKind::mul || k == OpKind::div;
}

std::string_view rope_mode_name(RopeMode m) {
  return m == RopeMode::neox ? "neox" : "gptj";
}
std::string_view gelu_approx_name(GeluApprox a) {
  return a == GeluApprox::tanh ? "tanh" : "none";
}

std::span<const InputSpec> op_inputs(OpKind k) {
  return entry(k).inputs;
}
bool op_is_variadic(OpKind k) {
  return k == OpKind::concat;
}

std::string OpDesc::input_name(size_t i) const {
  if (i < input_names.size() && !input_names[i].empty()) return input_names[i];
  auto specs = op_inputs(kind);
  if (op_is_variadic(kind)) return std::string(specs[0].name) + std::to_string(i);
  return i < specs.size() ? std::string(specs[i].name) : "input" + std::to_string(i);
}

Result<OpDesc> make_op(OpKind kind, OpAttrs attrs, std::vector<TensorDesc> inputs,
                       std::vector<std::string> input_names, std::string name) {
  OpDesc op;
  op.kind = kind;
  op.attrs = std::move(attrs);
  op.inputs = std::move(inputs);
  op.input_names = std::move(input_names);
  op.name = std::move(name);
  if (static_cast<int>(kind) >= kNumOpKinds)
    return Status(Code::invalid_argument,
                  "unknown op kind " + std::to_string(static_cast<int>(kind)));

  auto specs = op_inputs(kind);
  size_t required = 0;
  for (const auto& s : specs) required += s.optional ? 0 : 1;
  const size_t most = op_is_variadic(kind) ? 64 : specs.size();
  if (op.inputs.size() < required || op.inputs.size() > most) {
    std::string want;
    for (size_t i = 0; i < specs.size(); ++i)
      want += (i ? ", " : "") + std::string(specs[i].name) + (specs[i].optional ? "?" : "");
    if (op_is_variadic(kind)) want = "1 to 64 inputs";
    return Err(Code::invalid_argument)
        .op(op_name(kind), op.name)
        .expected("inputs (" + want + ")")
        .got(std::to_string(op.inputs.size()) + " inputs");
  }
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    Status s = validate(op.inputs[i]);
    if (!s.ok())
      return Status(s.code(), s.message())
          .with_context(std::string(op_name(kind)) + (op.name.empty() ? "" : " '" + op.name + "'") +
                        ": tensor '" + op.input_name(i) + "'");
  }
  DUET_TRY(infer(op));
  return op;
}

float attention_scale(const OpDesc& op) {
  if (op.attrs.scale) return *op.attrs.scale;
  return 1.0f / std::sqrt(static_cast<float>(op.inputs[0].dim(-1)));
}

float softmax_scale(const OpDesc& op) {
  return op.attrs.scale.value_or(1.0f);
}

int rope_dims(const OpDesc& op) {
  return op.attrs.rope_dims == 0 ? static_cast<int>(op.inputs[0].dim(-1)) : op.attrs.rope_dims;
}

double op_flops(const OpDesc& op) {
  const double n = static_cast<double>(op.output.numel());
  switch (op.kind) {
    case OpKind::matmul: {
      const TensorDesc& a = op.inputs[0];
      double k = static_cast<double>(op.attrs.transpose_a ? a.dim(-2) : a.dim(-1));
      return 2.0 * n * k;
    }
    case OpKind::attention: {
      const TensorDesc& q = op.inputs[0];
      double lq = static_cast<double>(q.dim(2)), lk = static_cast<double>(op.inputs[1].dim(2));
      double pairs = lq * lk;
      if (op.attrs.causal) {
        // Visible (query, key) pairs under end-aligned causal masking.
        double shift = lk - lq, vis = 0;
        for (int64_t i = 0; i < q.dim(2); ++i)
          vis += std::clamp(static_cast<double>(i) + shift + 1.0, 0.0, lk);
        pairs = vis;
      }
      return 4.0 * static_cast<double>(q.dim(0) * q.dim(1)) * pairs * static_cast<double>(q.dim(3));
    }
    case OpKind::softmax:
      return 5.0 * n;
    case OpKind::rmsnorm:
      return 4.0 * n;
    case OpKind::layernorm:
      return 7.0 * n;
    case OpKind::rope:
      return 6.0 * n;
    case OpKind::gelu:
      return 12.0 * n;
    case OpKind::silu:
      return 6.0 * n;
    case OpKind::exp:
    case OpKind::sqrt:
      return 4.0 * n;
    case OpKind::sigmoid:
    case OpKind::tanh:
      return 6.0 * n;
    case OpKind::erf:
    case OpKind::pow:
      return 12.0 * n;
    default:
      return is_view(op.kind) ? 0.0 : n;
  }
}

double op_bytes(const OpDesc& op) {
  if (is_view(op.kind)) return 0.0;
  double b = static_cast<double>(op.output.nbytes());
  if (op.kind == OpKind::embedding) return 2.0 * b + static_cast<double>(op.inputs[1].nbytes());
  for (const auto& t : op.inputs) b += static_cast<double>(t.nbytes());
  return b;
}

std::string describe(const OpDesc& op) {
  std::string s(op_name(op.kind));
  if (!op.name.empty() && op.name != s) s += " '" + op.name + "'";
  s += " (";
  for (size_t i = 0; i < op.inputs.size(); ++i) s += (i ? ", " : "") + op.inputs[i].str();
  return s + " -> " + op.output.str() + ")";
}

}  // namespace duet
