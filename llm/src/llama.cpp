#include "duet/llama.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "duet/quantize.h"

namespace duet::llama {
namespace {

Status bad(const std::string& what, const std::string& key, const std::string& expected,
           const std::string& got) {
  return Err(Code::invalid_argument)
      .tensor(key)
      .expected(expected)
      .got(got)
      .note("llama GGUF '" + what + "'");
}

Result<int64_t> int_key(const GgufFile& f, const std::string& key, std::optional<int64_t> dflt) {
  const GgufValue* v = f.find_metadata(key);
  if (!v) {
    if (dflt) return *dflt;
    return bad(f.what, key, "an integer metadata key", "none");
  }
  auto i = v->as_int();
  if (!i || *i <= 0 || *i > (int64_t{1} << 40))
    return bad(f.what, key, "a positive integer", v->str());
  return *i;
}

Result<double> float_key(const GgufFile& f, const std::string& key, double dflt) {
  const GgufValue* v = f.find_metadata(key);
  if (!v) return dflt;
  double x = 0;
  if (!v->is_array() && !v->floats.empty())
    x = v->floats[0];
  else if (auto i = v->as_int())
    x = static_cast<double>(*i);
  else
    return bad(f.what, key, "a number", v->str());
  if (!(x > 0) || !std::isfinite(x)) return bad(f.what, key, "a positive number", v->str());
  return x;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? "," : "") + std::to_string(s[i]);
  return o + "]";
}

// A tensor of the file that must exist with this duet shape.
Status expect_shape(const GgufFile& f, const std::string& name, std::vector<int64_t> shape) {
  const GgufTensorInfo* t = f.find(name);
  if (!t) return bad(f.what, name, "a tensor " + shape_str(shape), "none");
  if (t->shape() != shape)
    return bad(f.what, name, "shape " + shape_str(shape), "shape " + shape_str(t->shape()));
  if (!t->dtype)
    return bad(f.what, name, "a type duet computes with", ggml_type_name(t->ggml_type));
  return {};
}

}  // namespace

Result<Config> read_config(const GgufFile& f) {
  Config c;
  if (const GgufValue* a = f.find_metadata("general.architecture"))
    if (auto s = a->as_string()) c.arch = *s;
  // Llama and the architectures that share its graph (names of the keys differ only by prefix).
  if (c.arch != "llama" && c.arch != "mistral" && c.arch != "qwen2")
    return bad(f.what, "general.architecture", "llama (or mistral, qwen2)", c.arch);
  const std::string p = c.arch + ".";
  DUET_ASSIGN_OR_RETURN(c.layers, int_key(f, p + "block_count", std::nullopt));
  DUET_ASSIGN_OR_RETURN(c.embd, int_key(f, p + "embedding_length", std::nullopt));
  DUET_ASSIGN_OR_RETURN(c.ff, int_key(f, p + "feed_forward_length", std::nullopt));
  DUET_ASSIGN_OR_RETURN(c.heads, int_key(f, p + "attention.head_count", std::nullopt));
  DUET_ASSIGN_OR_RETURN(c.kv_heads, int_key(f, p + "attention.head_count_kv", c.heads));
  if (c.embd % c.heads != 0)
    return bad(f.what, p + "attention.head_count",
               "a divisor of embedding_length " + std::to_string(c.embd), std::to_string(c.heads));
  if (c.heads % c.kv_heads != 0)
    return bad(f.what, p + "attention.head_count_kv",
               "a divisor of head_count " + std::to_string(c.heads), std::to_string(c.kv_heads));
  c.head_dim = c.embd / c.heads;
  DUET_ASSIGN_OR_RETURN(int64_t rd, int_key(f, p + "rope.dimension_count", c.head_dim));
  if (rd > c.head_dim || rd % 2 != 0)
    return bad(f.what, p + "rope.dimension_count",
               "an even count <= head_dim " + std::to_string(c.head_dim), std::to_string(rd));
  c.rope_dims = static_cast<int>(rd);
  DUET_ASSIGN_OR_RETURN(double theta, float_key(f, p + "rope.freq_base", 10000.0));
  DUET_ASSIGN_OR_RETURN(double eps, float_key(f, p + "attention.layer_norm_rms_epsilon", 1e-5));
  c.rope_theta = static_cast<float>(theta);
  c.eps = static_cast<float>(eps);
  if (f.find_metadata(p + "context_length")) {
    DUET_ASSIGN_OR_RETURN(c.context, int_key(f, p + "context_length", std::nullopt));
  }
  // llama.cpp rotates adjacent pairs for llama and mistral (their Q and K weights are permuted
  // by the converter to match), halves for qwen2 (NeoX).
  c.rope_mode = c.arch == "qwen2" ? RopeMode::neox : RopeMode::gptj;

  const GgufTensorInfo* emb = f.find("token_embd.weight");
  if (!emb || emb->shape().size() != 2)
    return bad(f.what, "token_embd.weight", "a tensor [vocab, embedding_length]",
               emb ? shape_str(emb->shape()) : "none");
  c.vocab = emb->shape()[0];
  DUET_TRY(expect_shape(f, "token_embd.weight", {c.vocab, c.embd}));
  c.tied_output = f.find("output.weight") == nullptr;
  if (!c.tied_output) DUET_TRY(expect_shape(f, "output.weight", {c.vocab, c.embd}));
  DUET_TRY(expect_shape(f, "output_norm.weight", {c.embd}));
  const int64_t kv = c.kv_heads * c.head_dim;
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    DUET_TRY(expect_shape(f, b + "attn_norm.weight", {c.embd}));
    DUET_TRY(expect_shape(f, b + "attn_q.weight", {c.embd, c.embd}));
    DUET_TRY(expect_shape(f, b + "attn_k.weight", {kv, c.embd}));
    DUET_TRY(expect_shape(f, b + "attn_v.weight", {kv, c.embd}));
    DUET_TRY(expect_shape(f, b + "attn_output.weight", {c.embd, c.embd}));
    DUET_TRY(expect_shape(f, b + "ffn_norm.weight", {c.embd}));
    DUET_TRY(expect_shape(f, b + "ffn_gate.weight", {c.ff, c.embd}));
    DUET_TRY(expect_shape(f, b + "ffn_up.weight", {c.ff, c.embd}));
    DUET_TRY(expect_shape(f, b + "ffn_down.weight", {c.embd, c.ff}));
  }
  return c;
}

Result<Graph> build_graph(const GgufFile& f, const Config& c, const BuildOptions& o, int64_t rows) {
  if (o.max_context < 1)
    return bad(f.what, "max_context", "a positive cache capacity", std::to_string(o.max_context));
  GraphBuilder b(c.arch);
  Status err;  // the first tensor that could not be read
  std::map<std::string, ValueId> loaded;
  auto weight = [&](const std::string& name) -> ValueId {
    if (auto it = loaded.find(name); it != loaded.end()) return it->second;
    if (o.declare_weights) {  // read_config checked that it exists with a dtype
      const GgufTensorInfo* info = f.find(name);
      if (!info || !info->dtype) {
        if (err.ok()) err = bad(f.what, name, "a tensor of a type duet computes with", "none");
        return ValueId{};
      }
      const DType d = is_quantized(*info->dtype) && o.dequantize ? DType::f32 : *info->dtype;
      return loaded[name] = b.constant(name, d, info->shape());
    }
    auto t = f.tensor(name);
    if (!t.ok()) {
      if (err.ok()) err = t.status();
      return ValueId{};
    }
    if (is_quantized(t->dtype()) && o.dequantize) {
      auto f32 = dequantize(*t, DType::f32);
      if (!f32.ok()) {
        if (err.ok()) err = f32.status().with_context("tensor '" + name + "'");
        return ValueId{};
      }
      t = std::move(f32);
    }
    ValueId w = b.constant(name, std::move(*t));
    return loaded[name] = w;
  };
  // Norm weights in f32 (the residual stream's dtype).
  auto norm_weight = [&](const std::string& name) {
    ValueId w = weight(name);
    const TensorDesc* d = b.desc(w);
    return d && d->dtype != DType::f32 ? b.cast(w, DType::f32) : w;
  };
  // x [rows, K] (f32) times a [N, K] weight: f32 and block formats take x as it is; f16 and bf16
  // weights take x in their dtype and give f32 back; dequantized weights are f32 at load time.
  auto linear = [&](ValueId x, const std::string& name) {
    ValueId w = weight(name);
    const TensorDesc* d = b.desc(w);
    if (!d) return w;
    if (d->dtype == DType::f16 || d->dtype == DType::bf16)
      return b.cast(b.matmul(b.cast(x, d->dtype), w, true), DType::f32);
    return b.matmul(x, w, true);
  };
  ValueId tokens = b.input("tokens", DType::i32, {rows});
  ValueId pos = b.input("pos", DType::i32, {1});
  ValueId len = b.input("len", DType::i32, {1});
  ValueId table = weight("token_embd.weight");
  ValueId x = b.embedding(table, tokens, "embd");
  if (const TensorDesc* xd = b.desc(x); xd && xd->dtype != DType::f32) x = b.cast(x, DType::f32);

  OpAttrs rope;
  rope.rope_mode = c.rope_mode;
  rope.rope_theta = c.rope_theta;
  rope.rope_dims = c.rope_dims == c.head_dim ? 0 : c.rope_dims;
  OpAttrs attn;
  attn.causal = true;
  auto heads = [&](ValueId t, int64_t n) {  // [rows, n*hd] -> [1, n, rows, hd]
    return b.permute(b.reshape(t, {1, -1, n, c.head_dim}), {0, 2, 1, 3});
  };
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    ValueId h = b.rmsnorm(x, norm_weight(p + "attn_norm.weight"), c.eps);
    ValueId q = heads(linear(h, p + "attn_q.weight"), c.heads);
    ValueId k = heads(linear(h, p + "attn_k.weight"), c.kv_heads);
    ValueId v = heads(linear(h, p + "attn_v.weight"), c.kv_heads);
    q = b.op(OpKind::rope, {q, pos}, rope);
    k = b.op(OpKind::rope, {k, pos}, rope);
    const std::vector<int64_t> cache = {1, c.kv_heads, o.max_context, c.head_dim};
    ValueId kc = b.state("k_cache." + std::to_string(l), o.cache_dtype, cache);
    ValueId vc = b.state("v_cache." + std::to_string(l), o.cache_dtype, cache);
    ValueId kw = b.write_slice(kc, k, pos, 2, p + "k_write");
    ValueId vw = b.write_slice(vc, v, pos, 2, p + "v_write");
    if (o.cache_dtype != DType::f32) q = b.cast(q, o.cache_dtype);
    ValueId a = b.op(OpKind::attention, {q, kw, vw, len}, attn, p + "attention");
    // [1, heads, rows, hd] -> [rows, heads * hd]: the cast back to f32 (or else a copy) is what
    // makes the permuted view dense, one kernel for both.
    a = b.permute(a, {0, 2, 1, 3});
    a = o.cache_dtype != DType::f32 ? b.cast(a, DType::f32) : b.copy(a);
    a = b.reshape(a, {-1, c.embd});
    x = b.add(x, linear(a, p + "attn_output.weight"));
    h = b.rmsnorm(x, norm_weight(p + "ffn_norm.weight"), c.eps);
    ValueId g =
        b.op(OpKind::silu_mul, {linear(h, p + "ffn_gate.weight"), linear(h, p + "ffn_up.weight")});
    x = b.add(x, linear(g, p + "ffn_down.weight"), p + "out");
  }
  // The last row (of any row count the graph is re-planned for).
  if (!o.all_logits) x = b.slice(x, 0, -1, std::numeric_limits<int64_t>::max());
  x = b.rmsnorm(x, norm_weight("output_norm.weight"), c.eps);
  ValueId logits = linear(x, c.tied_output ? "token_embd.weight" : "output.weight");
  // The output keeps its name whatever the last op was.
  b.output(b.copy(logits, "logits"));
  if (!err.ok()) return err;
  return b.build();
}

Result<std::unique_ptr<Model>> Model::open(const std::string& path, std::vector<Device*> devices,
                                           BuildOptions opts, Policy policy) {
  DUET_ASSIGN_OR_RETURN(GgufFile file, read_gguf(path));
  return open(std::move(file), std::move(devices), opts, std::move(policy));
}

Status bind_weights(const GgufFile& f, Graph& graph, const BuildOptions& o) {
  for (const std::string& name : graph.unbound_constants()) {
    DUET_ASSIGN_OR_RETURN(HostTensor t, f.tensor(name));
    if (is_quantized(t.dtype()) && o.dequantize) {
      auto f32 = dequantize(t, DType::f32);
      if (!f32.ok()) return f32.status().with_context("tensor '" + name + "'");
      t = std::move(*f32);
    }
    DUET_TRY(graph.bind_constant(name, std::move(t)));
  }
  return {};
}

namespace {

// The decoder on this process's devices.
class EngineRunner final : public Runner {
 public:
  explicit EngineRunner(std::unique_ptr<Engine> e) : e_(std::move(e)) {}
  Result<std::map<std::string, HostTensor>> run(
      const std::map<std::string, HostTensor>& inputs) override {
    return e_->run(inputs);
  }
  Status reset_states() override { return e_->reset_states(); }
  std::string explain() const override { return e_->explain(); }
  Engine* engine() { return e_.get(); }

 private:
  std::unique_ptr<Engine> e_;
};

}  // namespace

Result<std::unique_ptr<Model>> Model::open(GgufFile file, std::vector<Device*> devices,
                                           BuildOptions opts, Policy policy) {
  Engine* made = nullptr;
  auto m = open(
      std::move(file),
      [&](const GgufFile& f, const Config& c,
          const BuildOptions& o) -> Result<std::unique_ptr<Runner>> {
        DUET_ASSIGN_OR_RETURN(Graph g, build_graph(f, c, o, 1));
        DUET_ASSIGN_OR_RETURN(auto e, Engine::create(std::move(g), devices, policy));
        auto r = std::make_unique<EngineRunner>(std::move(e));
        made = r->engine();
        return std::unique_ptr<Runner>(std::move(r));
      },
      opts);
  if (m.ok()) (*m)->engine_ = made;
  return m;
}

Result<std::unique_ptr<Model>> Model::open(GgufFile file, const RunnerFactory& runner,
                                           BuildOptions opts) {
  auto m = std::unique_ptr<Model>(new Model());
  m->file_ = std::move(file);
  DUET_ASSIGN_OR_RETURN(m->cfg_, read_config(m->file_));
  if (const GgufValue* t = m->file_.find_metadata("tokenizer.ggml.tokens"))
    if (t->is_array() && t->value_type() == GgufType::string) m->vocab_ = t->strings;
  if (opts.prefill_chunk < 0)
    return bad(m->file_.what, "prefill_chunk", "a row count >= 0",
               std::to_string(opts.prefill_chunk));
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto e = runner(m->file_, m->cfg_, opts);
    if (e.ok()) {
      m->runner_ = std::move(*e);
      m->opts_ = opts;
      return m;
    }
    bool quantized = false;
    for (const GgufTensorInfo& t : m->file_.tensors)
      quantized = quantized || (t.dtype && is_quantized(*t.dtype));
    if (opts.dequantize || !quantized) return e.status();
    m->note_ = e.status().message();
    opts.dequantize = true;
  }
  return Status(Code::internal, "llama: unreachable");
}

Result<HostTensor> Model::forward(std::span<const int32_t> tokens) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return bad(file_.what, "tokens", "at least one token", "none");
  if (pos_ + n > opts_.max_context)
    return bad(file_.what, "tokens",
               "at most " + std::to_string(opts_.max_context - pos_) +
                   " more tokens (the cache holds " + std::to_string(opts_.max_context) + ")",
               std::to_string(n));
  for (int32_t t : tokens)
    if (t < 0 || t >= cfg_.vocab)
      return bad(file_.what, "tokens", "ids in [0, " + std::to_string(cfg_.vocab) + ")",
                 std::to_string(t));
  const int64_t chunk = opts_.prefill_chunk > 0 ? opts_.prefill_chunk : n;
  std::vector<std::map<std::string, HostTensor>> runs;
  for (int64_t at = 0; at < n; at += chunk) {
    const int64_t rows = std::min(chunk, n - at);
    HostTensor ids = HostTensor::empty(DType::i32, std::vector<int64_t>{rows});
    std::copy(tokens.begin() + at, tokens.begin() + at + rows, ids.data<int32_t>());
    HostTensor p = HostTensor::empty(DType::i32, std::vector<int64_t>{1});
    HostTensor l = HostTensor::empty(DType::i32, std::vector<int64_t>{1});
    p.data<int32_t>()[0] = static_cast<int32_t>(pos_ + at);
    l.data<int32_t>()[0] = static_cast<int32_t>(pos_ + at + rows);
    runs.push_back({{"tokens", ids}, {"pos", p}, {"len", l}});
  }
  // The chunks in one call: a runner over pipeline stages overlaps them.
  Result<std::vector<std::map<std::string, HostTensor>>> outs =
      std::vector<std::map<std::string, HostTensor>>{};
  if (runs.size() == 1) {
    auto one = runner_->run(runs[0]);
    if (!one.ok()) return one.status();
    outs->push_back(std::move(*one));
  } else {
    outs = runner_->run_all(runs);
  }
  if (!outs.ok()) return outs.status();
  pos_ += n;
  std::vector<HostTensor> parts;
  for (auto& out : *outs) parts.push_back(std::move(out.at("logits")));
  if (!opts_.all_logits) parts.erase(parts.begin(), parts.end() - 1);  // only the last row
  if (parts.size() == 1) return std::move(parts[0]);
  // Every row's logits, the chunks' rows one after another.
  const int64_t vocab = parts[0].desc().dim(-1);
  HostTensor all = HostTensor::empty(DType::f32, std::vector<int64_t>{n, vocab});
  float* dst = all.data<float>();
  for (const HostTensor& t : parts) {
    const int64_t count = t.desc().numel();
    std::copy(t.data<float>(), t.data<float>() + count, dst);
    dst += count;
  }
  return all;
}

Result<std::vector<int32_t>> Model::generate(std::span<const int32_t> prompt, int n, int32_t eos,
                                             StepStats* stats) {
  using clock = std::chrono::steady_clock;
  std::vector<int32_t> out;
  StepStats s;
  auto t0 = clock::now();
  DUET_ASSIGN_OR_RETURN(HostTensor logits, forward(prompt));
  s.prefill_s = std::chrono::duration<double>(clock::now() - t0).count();
  s.tokens = static_cast<int64_t>(prompt.size());
  for (int i = 0; i < n; ++i) {
    const int32_t next = argmax(logits, logits.desc().dim(0) - 1);
    out.push_back(next);
    if (next == eos || i + 1 == n) break;
    t0 = clock::now();
    DUET_ASSIGN_OR_RETURN(logits, forward(std::span<const int32_t>(&out.back(), 1)));
    s.decode_s += std::chrono::duration<double>(clock::now() - t0).count();
    ++s.decode_steps;
  }
  if (stats) *stats = s;
  return out;
}

Status Model::reset() {
  pos_ = 0;
  return runner_->reset_states();
}

int32_t argmax(const HostTensor& logits, int64_t row) {
  const int64_t vocab = logits.desc().dim(-1);
  const float* first = logits.data<float>() + row * vocab;
  return static_cast<int32_t>(std::max_element(first, first + vocab) - first);
}

}  // namespace duet::llama
