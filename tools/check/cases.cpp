#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

#include "check/check.h"
#include "duet/half.h"
#include "duet/quantize.h"

namespace duet::check {

namespace {

using Shape = std::vector<int64_t>;

TensorDesc dense(DType t, const Shape& s) {
  return TensorDesc::contiguous(t, s);
}

TensorDesc transposed(DType t, Shape s) {
  return transposed_view(t, std::move(s));
}
TensorDesc strided(DType t, Shape s) {
  return strided_view(t, std::move(s));
}

std::string dims_str(const TensorDesc& d) {
  std::string s;
  for (int i = 0; i < d.rank; ++i)
    s += (i ? "x" : "") + std::to_string(d.shape[static_cast<size_t>(i)]);
  if (!d.is_contiguous()) s += "~";
  return s;
}

class Builder {
 public:
  explicit Builder(bool full) : full_(full) {}
  std::vector<Case> done() { return std::move(out_); }

  void add(OpKind k, DType t, std::vector<TensorDesc> in, std::vector<Fill> fills, OpAttrs a = {},
           std::string tag = {}, bool full_only = false) {
    added_ = !full_only || full_;
    if (!added_) return;
    Case c;
    c.kind = k;
    c.attrs = std::move(a);
    c.name = std::string(op_name(k)) + "/" + std::string(dtype_name(t)) + "/";
    for (size_t i = 0; i < in.size(); ++i) c.name += (i ? "," : "") + dims_str(in[i]);
    if (!tag.empty()) c.name += "." + tag;
    c.inputs = std::move(in);
    c.fills = std::move(fills);
    c.full_only = full_only;
    out_.push_back(std::move(c));
  }
  // Set on the case just added (nothing when it was left out).
  void ids_range(int64_t v) {
    if (added_) out_.back().ids_range = v;
  }
  void scalar(int64_t v) {
    if (added_) out_.back().scalar = v;
  }

 private:
  bool full_;
  bool added_ = false;
  std::vector<Case> out_;
};

constexpr DType kFloats[] = {DType::f32, DType::f16, DType::bf16};

void matmul_cases(Builder& b, DType t) {
  struct M {
    Shape a, bb;
    bool ta, tb;
    bool full;
  };
  const M ms[] = {
      {{1, 1}, {1, 1}, false, false, false},           {{3, 17}, {17, 5}, false, false, false},
      {{17, 33}, {9, 33}, false, true, false},         {{33, 17}, {33, 9}, true, false, false},
      {{2, 3, 17, 33}, {33, 19}, false, false, false},  // batched, broadcast weight
      {{2, 1, 5, 7}, {3, 7, 4}, false, false, false},   // batch broadcast both ways
      {{67, 130}, {130, 97}, false, false, false},     {{257, 257}, {129, 257}, false, true, true},
      {{4, 128, 512}, {512, 384}, false, false, true},
  };
  for (const M& m : ms) {
    OpAttrs a;
    a.transpose_a = m.ta;
    a.transpose_b = m.tb;
    b.add(OpKind::matmul, t, {dense(t, m.a), dense(t, m.bb)}, {Fill::unit, Fill::unit}, a,
          std::string(m.ta ? "ta" : "") + (m.tb ? "tb" : ""), m.full);
  }
  // A strided (transposed-view) operand.
  b.add(OpKind::matmul, t, {dense(t, {19, 23}), transposed(t, {23, 13})}, {Fill::unit, Fill::unit},
        {}, "view");
}

}  // namespace

Fill fill_for(OpKind k, size_t input) {
  switch (op_input_range(k, input)) {
    case InputRange::positive:
      return Fill::positive;
    case InputRange::steps:
      return Fill::steps;
    case InputRange::above_one:
      return Fill::above_one;
    case InputRange::open_unit:
      return Fill::open_unit;
    case InputRange::any:
      break;
  }
  return Fill::unit;
}

namespace {

// Every element-wise op of the op set (duet/op.h), by its arity: a new one gets these cases.
void elementwise_cases(Builder& b, DType t) {
  for (int i = 0; i < kNumOpKinds; ++i) {
    const OpKind k = static_cast<OpKind>(i);
    if (!is_binary_elementwise(k)) continue;
    const Fill f1 = fill_for(k, 0), f2 = fill_for(k, 1);
    b.add(k, t, {dense(t, {3, 17}), dense(t, {17})}, {f1, f2});
    b.add(k, t, {dense(t, {2, 1, 5}), dense(t, {3, 1})}, {f1, f2});
    b.add(k, t, {dense(t, {257}), dense(t, {257})}, {f1, f2});
    b.add(k, t, {transposed(t, {5, 33}), dense(t, {5, 33})}, {f1, f2}, {}, "view");
    b.add(k, t, {dense(t, {2, 3, 64, 129}), dense(t, {3, 1, 129})}, {f1, f2}, {}, "", true);
  }
  for (int i = 0; i < kNumOpKinds; ++i) {
    const OpKind k = static_cast<OpKind>(i);
    if (!is_unary_elementwise(k)) continue;
    OpAttrs a;
    a.alpha = 0.37f;
    const Fill f = fill_for(k, 0);
    b.add(k, t, {dense(t, {1})}, {f}, a);
    b.add(k, t, {dense(t, {3, 17})}, {f}, a);
    b.add(k, t, {strided(t, {2, 3, 257})}, {f}, a, "view");
    if (k == OpKind::gelu) {
      a.gelu_approx = GeluApprox::tanh;
      b.add(k, t, {dense(t, {3, 17})}, {f}, a, "tanh");
    }
  }
  b.add(OpKind::exp, t, {dense(t, {4, 1000})}, {Fill::wide}, {}, "", true);
  // Unit inputs (above) reach both sides of tanh's and erf's polynomial thresholds; wide ones
  // saturate.
  for (OpKind k : {OpKind::sigmoid, OpKind::tanh, OpKind::erf})
    b.add(k, t, {dense(t, {4, 1000})}, {Fill::wide}, {}, "wide");
  for (float e : {2.0f, 3.0f, 0.5f, -1.0f, 1.7f, -2.5f}) {
    OpAttrs a;
    a.exponent = e;
    const bool integral = e == 2.0f || e == 3.0f || e == -1.0f;
    char name[16];
    std::snprintf(name, sizeof name, "e%g", static_cast<double>(e));
    b.add(OpKind::pow, t, {dense(t, {3, 17})}, {integral ? Fill::unit : Fill::positive}, a, name);
  }
}

void row_cases(Builder& b, DType t) {
  OpAttrs sm;
  b.add(OpKind::softmax, t, {dense(t, {3, 17})}, {Fill::unit}, sm);
  sm.scale = 0.5f;
  b.add(OpKind::softmax, t, {dense(t, {2, 4, 5, 257}), dense(DType::f32, {5, 257})},
        {Fill::unit, Fill::mask}, sm, "mask");
  b.add(OpKind::softmax, t, {transposed(t, {6, 33}), dense(t, {6, 33})}, {Fill::unit, Fill::mask},
        sm, "view");
  b.add(OpKind::softmax, t, {dense(t, {8, 4096})}, {Fill::wide}, {}, "", true);

  OpAttrs n;
  n.eps = 1e-6f;
  b.add(OpKind::rmsnorm, t, {dense(t, {3, 17}), dense(t, {17})}, {Fill::unit, Fill::positive}, n);
  b.add(OpKind::rmsnorm, t, {dense(t, {2, 257})}, {Fill::unit}, n);
  b.add(OpKind::rmsnorm, t, {strided(t, {5, 64}), dense(t, {64})}, {Fill::unit, Fill::positive}, n,
        "view");
  b.add(OpKind::layernorm, t, {dense(t, {3, 17}), dense(t, {17}), dense(t, {17})},
        {Fill::unit, Fill::positive, Fill::unit}, n);
  b.add(OpKind::layernorm, t, {dense(t, {5, 257}), dense(t, {257})}, {Fill::unit, Fill::positive},
        n);
  b.add(OpKind::layernorm, t, {dense(t, {1, 7})}, {Fill::unit}, n);
  b.add(OpKind::rmsnorm, t, {dense(t, {16, 4096}), dense(t, {4096})}, {Fill::unit, Fill::positive},
        n, "", true);

  OpAttrs r;
  b.add(OpKind::rope, t, {dense(t, {1, 2, 3, 16})}, {Fill::unit}, r, "neox");
  r.rope_mode = RopeMode::gptj;
  r.rope_offset = 5;
  b.add(OpKind::rope, t, {dense(t, {2, 3, 17, 64})}, {Fill::unit}, r, "gptj.off5");
  r.rope_mode = RopeMode::neox;
  r.rope_dims = 32;
  r.rope_offset = 1000;
  b.add(OpKind::rope, t, {dense(t, {1, 2, 9, 64})}, {Fill::unit}, r, "neox.partial.off1000");
  r.rope_mode = RopeMode::gptj;
  b.add(OpKind::rope, t, {transposed(t, {1, 4, 64, 128})}, {Fill::unit}, r, "gptj.partial.view",
        true);
  // Positions at run time: decoding one row at a far position, a few rows after an offset.
  const TensorDesc pos = dense(DType::i32, {1});
  OpAttrs rp;
  b.add(OpKind::rope, t, {dense(t, {1, 4, 1, 64}), pos}, {Fill::unit, Fill::scalar}, rp,
        "neox.pos");
  b.scalar(70001);
  rp.rope_mode = RopeMode::gptj;
  rp.rope_offset = 3;
  rp.rope_dims = 16;
  b.add(OpKind::rope, t, {strided(t, {2, 3, 5, 32}), pos}, {Fill::unit, Fill::scalar}, rp,
        "gptj.partial.off3.pos");
  b.scalar(258);
}

// Each reduction over the last dim, over dims apart and over a strided view's dims; the sum also
// over a transposed view's leading dim and over every dim.
void reduce_cases(Builder& b, DType t) {
  struct R {
    TensorDesc x;
    std::vector<int> axes;
    const char* tag;
  };
  const R every[] = {
      {dense(t, {3, 17}), {-1}, "last"},
      {dense(t, {2, 3, 5, 7}), {0, 2}, "a0.2"},
      {strided(t, {2, 3, 33}), {1, 2}, "view.a1.2"},
  };
  const R sum_only[] = {
      {transposed(t, {5, 33}), {0}, "view.a0"},
      {dense(t, {4, 6}), {1, 0}, "all"},
  };
  for (OpKind k : {OpKind::reduce_sum, OpKind::reduce_mean, OpKind::reduce_max, OpKind::reduce_min,
                   OpKind::reduce_prod})
    for (const R& r : every) {
      OpAttrs a;
      a.axes = r.axes;
      b.add(k, t, {r.x}, {Fill::unit}, a, r.tag);
    }
  for (const R& r : sum_only) {
    OpAttrs a;
    a.axes = r.axes;
    b.add(OpKind::reduce_sum, t, {r.x}, {Fill::unit}, a, r.tag);
  }
  OpAttrs wide;
  wide.axes = {-1};
  b.add(OpKind::reduce_mean, t, {dense(t, {8, 4096})}, {Fill::unit}, wide, "", true);
}

void attention_cases(Builder& b, DType t) {
  struct A {
    int64_t B, Hq, Hkv, Lq, Lk, D;
    bool causal, mask, full;
    const char* tag;
  };
  const A as[] = {
      {1, 2, 2, 17, 17, 16, false, false, false, "self"},
      {2, 4, 2, 33, 33, 64, true, false, false, "gqa.causal"},
      {1, 8, 1, 1, 257, 64, false, false, false, "mqa.decode"},
      {1, 4, 2, 1, 300, 128, true, false, false, "decode.causal"},
      {1, 2, 1, 5, 37, 64, true, true, false, "causal.mask.lq<lk"},
      {1, 2, 2, 19, 7, 16, true, false, false, "causal.lq>lk"},
      {1, 2, 2, 65, 65, 80, false, true, false, "hd80.mask"},
      {1, 2, 1, 40, 40, 96, true, false, true, "hd96.causal"},
      {1, 4, 2, 23, 31, 32, true, true, true, "hd32.causal.mask"},
      {1, 2, 2, 33, 70, 256, false, false, true, "hd256"},
      {1, 16, 16, 256, 256, 64, true, false, true, "prefill"},
      {1, 64, 8, 1, 4096, 128, false, false, true, "decode.long"},
      {1, 12, 4, 33, 33, 64, true, false, true, "gqa3.causal"},
      {2, 8, 2, 17, 40, 128, true, true, true, "gqa4.causal.mask"},
  };
  for (const A& a : as) {
    OpAttrs at;
    at.causal = a.causal;
    std::vector<TensorDesc> in = {dense(t, {a.B, a.Hq, a.Lq, a.D}),
                                  dense(t, {a.B, a.Hkv, a.Lk, a.D}),
                                  dense(t, {a.B, a.Hkv, a.Lk, a.D})};
    std::vector<Fill> f = {Fill::unit, Fill::unit, Fill::unit};
    if (a.mask) {
      in.push_back(dense(DType::f32, {a.Lq, a.Lk}));
      f.push_back(Fill::mask);
    }
    b.add(OpKind::attention, t, in, f, at, a.tag, a.full);
  }
  OpAttrs s;
  s.scale = 0.3f;
  b.add(OpKind::attention, t,
        {transposed(t, {1, 2, 9, 16}), dense(t, {1, 1, 11, 16}), dense(t, {1, 1, 11, 16})},
        {Fill::unit, Fill::unit, Fill::unit}, s, "view.scale");

  // A KV cache of capacity Lk holding n keys (kv_len, at run time): only those may be read.
  struct C {
    int64_t B, Hq, Hkv, Lq, cap, n, D;
    bool causal, mask, full;
    const char* tag;
  };
  const C cs[] = {
      {1, 4, 2, 1, 300, 37, 64, true, false, false, "cache.decode.causal"},
      {1, 8, 1, 1, 257, 256, 128, false, false, false, "cache.mqa.decode"},
      {1, 2, 2, 5, 40, 12, 16, true, true, false, "cache.prefill.causal.mask"},
      {2, 4, 4, 3, 16, 0, 32, false, false, false, "cache.empty"},
      {1, 32, 8, 1, 4096, 1000, 128, true, false, true, "cache.decode.long"},
  };
  for (const C& a : cs) {
    OpAttrs at;
    at.causal = a.causal;
    std::vector<TensorDesc> in = {dense(t, {a.B, a.Hq, a.Lq, a.D}),
                                  dense(t, {a.B, a.Hkv, a.cap, a.D}),
                                  dense(t, {a.B, a.Hkv, a.cap, a.D})};
    std::vector<Fill> f = {Fill::unit, Fill::cache, Fill::cache};
    if (a.mask) {
      in.push_back(dense(DType::f32, {a.Lq, a.cap}));
      f.push_back(Fill::mask);
    }
    in.push_back(dense(DType::i32, {1}));
    f.push_back(Fill::scalar);
    b.add(OpKind::attention, t, in, f, at, a.tag, a.full);
    b.scalar(a.n);
  }
}

void data_cases(Builder& b, DType t) {
  OpAttrs c;
  for (DType to : kElementDTypes) {
    if (to == t) continue;
    c.to = to;
    b.add(OpKind::cast, t, {dense(t, {3, 67})}, {is_integer(to) ? Fill::wide : Fill::unit}, c,
          std::string("to.") + std::string(dtype_name(to)));
  }
  c.to = DType::f32;
  b.add(OpKind::cast, t, {transposed(t, {9, 17})}, {Fill::unit}, c, "view");
  b.add(OpKind::copy, t, {transposed(t, {2, 17, 33})}, {Fill::unit});
  b.add(OpKind::copy, t, {strided(t, {3, 257})}, {Fill::unit});
  // Dense, and a byte count that is not a multiple of 16: the GPUs' 16-byte copy and its tail.
  b.add(OpKind::copy, t, {dense(t, {3, 67})}, {Fill::unit});
  OpAttrs cat;
  cat.axis = 1;
  b.add(OpKind::concat, t, {dense(t, {2, 3, 5}), dense(t, {2, 1, 5}), transposed(t, {2, 4, 5})},
        {Fill::unit, Fill::unit, Fill::unit}, cat);
  cat.axis = -1;
  b.add(OpKind::concat, t, {dense(t, {3, 17}), dense(t, {3, 1})}, {Fill::unit, Fill::unit}, cat);
  b.add(OpKind::embedding, t, {dense(t, {257, 17}), dense(DType::i32, {3, 5})},
        {Fill::unit, Fill::ids});
  b.ids_range(257);
  b.add(OpKind::embedding, t, {transposed(t, {11, 64}), dense(DType::i32, {7})},
        {Fill::unit, Fill::ids}, {}, "view");
  b.ids_range(11);
  OpAttrs neg;
  neg.negative_ids = true;  // ONNX's Gather: ids in [-V, 0) count from the end
  b.add(OpKind::embedding, t, {dense(t, {37, 17}), dense(DType::i32, {2, 9})},
        {Fill::unit, Fill::signed_ids}, neg, "negative");
  b.ids_range(37);
}

void write_cases(Builder& b, DType t) {
  const TensorDesc pos = dense(DType::i32, {1});
  OpAttrs w;
  w.axis = 2;  // K and V appended to a cache at a run-time position
  b.add(OpKind::write_slice, t, {dense(t, {1, 2, 17, 16}), dense(t, {1, 2, 1, 16}), pos},
        {Fill::unit, Fill::unit, Fill::scalar}, w, "append");
  b.scalar(16);
  b.add(OpKind::write_slice, t, {dense(t, {2, 3, 33, 8}), strided(t, {2, 3, 5, 8}), pos},
        {Fill::unit, Fill::unit, Fill::scalar}, w, "view");
  b.scalar(7);
  // A state of t written from another float dtype (rounded once), at start + pos.
  const DType other = t == DType::f32 ? DType::f16 : DType::f32;
  w.axis = 0;
  w.start = 2;
  b.add(OpKind::write_slice, t, {dense(t, {9, 5}), dense(other, {3, 5}), pos},
        {Fill::unit, Fill::wide, Fill::scalar}, w, "from." + std::string(dtype_name(other)));
  b.scalar(4);
  OpAttrs fixed;  // no run-time offset
  fixed.axis = 1;
  fixed.start = 3;
  b.add(OpKind::write_slice, t, {dense(t, {4, 6}), dense(t, {4, 2})}, {Fill::unit, Fill::unit},
        fixed, "static");
}

void integer_cases(Builder& b) {
  OpAttrs c;
  for (DType from : {DType::i32, DType::i8}) {
    for (DType to : kElementDTypes) {
      if (to == from) continue;
      c.to = to;
      b.add(OpKind::cast, from, {dense(from, {3, 67})}, {Fill::wide}, c,
            std::string("to.") + std::string(dtype_name(to)));
    }
    b.add(OpKind::copy, from, {transposed(from, {5, 9})}, {Fill::wide});
  }
  OpAttrs w;
  w.axis = 1;
  b.add(OpKind::write_slice, DType::i32,
        {dense(DType::i32, {3, 10}), dense(DType::i32, {3, 4}), dense(DType::i32, {1})},
        {Fill::wide, Fill::wide, Fill::scalar}, w, "tokens");
  b.scalar(6);
}

// Block formats: every weight format beside every activation dtype, odd N, K at block multiples,
// one row (decode), a few (batched decode) and many (prefill); embedding and cast out of each.
void quantized_cases(Builder& b) {
  OpAttrs tb;
  tb.transpose_b = true;
  for (DType q : kQuantizedDTypes) {
    const int64_t be = dtype_block_elems(q);
    const int64_t k = be == 32 ? 96 : 512;
    for (DType t : kFloats) {
      b.add(OpKind::matmul, t, {dense(t, {1, k}), dense(q, {33, k})}, {Fill::unit, Fill::unit}, tb,
            std::string(dtype_name(q)) + ".decode");
      b.add(OpKind::matmul, t, {dense(t, {3, k}), dense(q, {17, k})}, {Fill::unit, Fill::blocks},
            tb, std::string(dtype_name(q)) + ".random");
    }
    b.add(OpKind::matmul, DType::f32, {dense(DType::f32, {2, 19, k}), dense(q, {45, k})},
          {Fill::unit, Fill::unit}, tb, std::string(dtype_name(q)) + ".prefill");
    b.add(OpKind::matmul, DType::f32, {dense(DType::f32, {64, 2 * k}), dense(q, {130, 2 * k})},
          {Fill::unit, Fill::blocks}, tb, std::string(dtype_name(q)) + ".prefill.random", true);
    // A transposed activation and a weight that is a slice of a larger one (rows 2..),
    b.add(OpKind::matmul, DType::f16,
          {transposed(DType::f16, {5, k}), *slice(dense(q, {20, k}), 0, 2, 20)},
          {Fill::unit, Fill::unit}, tb, std::string(dtype_name(q)) + ".views");
    b.add(OpKind::embedding, DType::f32, {dense(q, {37, k}), dense(DType::i32, {2, 5})},
          {Fill::blocks, Fill::ids}, {}, std::string(dtype_name(q)));
    b.ids_range(37);
    if (q == DType::q8_0 || q == DType::q4_k) {
      OpAttrs neg;
      neg.negative_ids = true;
      b.add(OpKind::embedding, DType::f32, {dense(q, {37, k}), dense(DType::i32, {7})},
            {Fill::blocks, Fill::signed_ids}, neg, std::string(dtype_name(q)) + ".negative");
      b.ids_range(37);
    }
    for (DType to : {DType::f32, DType::bf16}) {
      OpAttrs c;
      c.to = to;
      b.add(OpKind::cast, DType::f32, {dense(q, {3, k})}, {Fill::unit}, c,
            std::string(dtype_name(q)) + ".to." + std::string(dtype_name(to)));
    }
  }
}

// Random block bytes whose f16 fields (scales, mins) are finite: +-[2^-9, 2^-3].
void random_blocks(DType q, std::byte* p, int64_t blocks, std::mt19937_64& rng) {
  std::vector<int> f16_fields;
  switch (q) {
    case DType::q4_1:
    case DType::q5_1:
    case DType::q4_k:
    case DType::q5_k:
      f16_fields = {0, 2};
      break;
    case DType::q2_k:
      f16_fields = {80, 82};
      break;
    case DType::q3_k:
      f16_fields = {108};
      break;
    case DType::q6_k:
      f16_fields = {208};
      break;
    default:
      f16_fields = {0};
  }
  std::uniform_real_distribution<double> e(-9.0, -3.0);
  const int64_t bb = dtype_block_bytes(q);
  for (int64_t b = 0; b < blocks; ++b) {
    std::byte* blk = p + b * bb;
    for (int64_t i = 0; i < bb; ++i) blk[i] = static_cast<std::byte>(rng());
    for (int off : f16_fields) {
      const float v = static_cast<float>((rng() & 1 ? -1.0 : 1.0) * std::exp2(e(rng)));
      const uint16_t h = f32_to_f16(v);
      std::memcpy(blk + off, &h, 2);
    }
  }
}

uint64_t hash_name(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (char ch : s) h = (h ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
  return h;
}

}  // namespace

TensorDesc transposed_view(DType t, std::vector<int64_t> s) {
  std::swap(s[s.size() - 1], s[s.size() - 2]);
  return *transpose(TensorDesc::contiguous(t, s), -1, -2);
}

TensorDesc strided_view(DType t, std::vector<int64_t> s) {
  std::vector<int64_t> wide = s;
  wide.back() = 2 * s.back() + 1;
  return *slice(TensorDesc::contiguous(t, wide), -1, 1, wide.back(), 2);
}

std::vector<Case> cases(bool full) {
  Builder b(full);
  for (DType t : kFloats) {
    matmul_cases(b, t);
    elementwise_cases(b, t);
    row_cases(b, t);
    reduce_cases(b, t);
    attention_cases(b, t);
    data_cases(b, t);
    write_cases(b, t);
  }
  integer_cases(b);
  quantized_cases(b);
  return b.done();
}

Result<OpDesc> case_op(const Case& c) {
  return make_op(c.kind, c.attrs, c.inputs, {}, c.name);
}

std::vector<HostTensor> case_inputs(const Case& c, uint64_t seed) {
  std::mt19937_64 rng(hash_name(c.name) ^ seed);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  std::vector<HostTensor> out;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const TensorDesc& d = c.inputs[i];
    const Fill f = i < c.fills.size() ? c.fills[i] : Fill::unit;
    const int64_t n = d.storage_extent();
    HostTensor t = *HostTensor::with_storage(d, static_cast<uint64_t>(dtype_bytes(d.dtype, n)));
    if (is_quantized(d.dtype)) {
      const int64_t blocks = n / dtype_block_elems(d.dtype);
      if (f == Fill::blocks) {
        random_blocks(d.dtype, t.storage(), blocks, rng);
      } else {  // the quantizer's blocks for unit values
        std::vector<float> v(static_cast<size_t>(n));
        for (float& x : v)
          x = static_cast<float>((u01(rng) < 0.5 ? -1 : 1) * (0.05 + 0.95 * u01(rng)));
        (void)quantize(d.dtype, v.data(), t.storage(), n);
      }
      out.push_back(std::move(t));
      continue;
    }
    for (int64_t e = 0; e < n; ++e) {
      const double sign = u01(rng) < 0.5 ? -1.0 : 1.0;
      double v = 0;
      switch (f) {
        case Fill::unit:
          v = sign * (0.05 + 0.95 * u01(rng));
          break;
        case Fill::positive:
          v = 0.5 + 1.5 * u01(rng);
          break;
        case Fill::steps:
          v = sign * std::ldexp(1.0, -static_cast<int>(u01(rng) * 3.0));
          break;
        case Fill::above_one:
          v = 1.0 + 2.0 * u01(rng);
          break;
        case Fill::open_unit:
          v = sign * (0.05 + 0.85 * u01(rng));
          break;
        case Fill::wide:
          v = sign * (0.05 + 299.95 * u01(rng));
          break;
        case Fill::mask:
          v = u01(rng) < 0.125 ? -std::numeric_limits<double>::infinity() : -2.0 * u01(rng) - 1e-3;
          break;
        case Fill::ids:
          v = std::floor(u01(rng) * static_cast<double>(c.ids_range));
          break;
        case Fill::signed_ids:
          v = std::floor((2.0 * u01(rng) - 1.0) * static_cast<double>(c.ids_range));
          break;
        case Fill::scalar:
          v = static_cast<double>(c.scalar);
          break;
        case Fill::cache: {
          // Row along dim 2 of element e (dense: the cache cases are dense).
          const int64_t row = d.rank == 4 ? (e / d.strides[2]) % d.shape[2] : 0;
          v = row < c.scalar ? sign * (0.05 + 0.95 * u01(rng))
                             : std::numeric_limits<double>::quiet_NaN();
          break;
        }
        case Fill::blocks:  // on an element dtype: unit values
          v = sign * (0.05 + 0.95 * u01(rng));
          break;
      }
      store_from_double(t.storage(), d.dtype, e, v);
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace duet::check
