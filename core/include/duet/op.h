// The op set (v1): kinds, attributes, and shape/dtype inference with validation.
//
// Semantics every backend implements (the CPU float64 reference is the definition):
//   matmul(a, b)          a[..., M, K] @ b[..., K, N] -> [..., M, N]; transpose_a / transpose_b
//                         mean the operand is stored [..., K, M] / [..., N, K]. Batch dims
//                         broadcast (numpy). f32/f16/bf16 inputs of one dtype, f32 accumulation,
//                         output in the input dtype. A quantized b (a block format, duet/
//                         quantize.h) is a weight [N, K] read with transpose_b, the product
//                         taken with its exact dequantization; the output has a's float dtype.
//                         A kernel may quantize a's rows to 8 bits per 32 (as ggml does).
//   add/sub/mul/div(a, b) numpy broadcasting, one float dtype.
//   silu_mul(a, b)        silu(a) * b with numpy broadcasting, one float dtype: the gated unit of
//                         SwiGLU feed-forward blocks in one kernel.
//   scale(x)              x * alpha
//   silu, relu, exp, gelu elementwise; gelu uses erf unless gelu_approx is tanh.
//   sigmoid, tanh, erf, sqrt
//                         elementwise: 1 / (1 + exp(-x)), tanh(x), erf(x), sqrt(x) (NaN below 0).
//   pow(x)                x ^ exponent, elementwise (C's pow: a negative base needs an integral
//                         exponent, else NaN).
//   abs, log              elementwise: |x|, ln(x) (NaN below 0, -inf at 0).
//   less, less_equal, equal(a, b)
//                         comparisons with numpy broadcasting, one float dtype: 1 where a < b,
//                         a <= b, a == b, else 0 (NaN compares false), in a's dtype. Booleans
//                         at run time are these 0/1 values (the ONNX importer holds them as i8).
//   fmod(a, b)            C's fmod with numpy broadcasting, one float dtype: a - b * trunc(a / b),
//                         exactly (the remainder has a's sign; NaN where b is 0 or a infinite, a
//                         where b is infinite).
//   sin, cos, tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh
//                         elementwise, as C's functions (NaN outside the domain of asin, acos,
//                         acosh and atanh).
//   softmax(x[, mask])    softmax over the last dim of x * scale + mask; mask broadcasts to x.
//   rmsnorm(x[, w])       x / sqrt(mean(x^2) + eps) * w over the last dim.
//   layernorm(x[, w[, b]]) (x - mean) / sqrt(var + eps) * w + b over the last dim.
//   rope(x[, pos])        x[B, H, L, D]; position of row l is rope_offset + pos + l, with pos a
//                         run-time scalar (0 when absent); frequencies theta^(-2i/rope_dims) for
//                         pair i; dims past rope_dims pass through. neox pairs (i, i +
//                         rope_dims/2), gptj pairs (2i, 2i+1). A negative position is an error of
//                         the backend.
//   reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod (x)
//                         the sum, mean, largest or smallest value, or the product, over the dims
//                         in attrs.axes (any of x's dims, negative counting from the end, each at
//                         most once); the output keeps x's rank with the reduced dims of size 1 (a
//                         reshape view drops them). f32 accumulation in the kernels.
//   attention(q, k, v[, mask][, kv_len])
//                         q[B, Hq, Lq, D], k/v[B, Hkv, Lk, D]; Hq a multiple of Hkv (query head
//                         h reads kv head h / (Hq/Hkv)); out[B, Hq, Lq, D]. scores = q k^T * scale
//                         (+ mask, broadcast to [B, Hq, Lq, Lk]). kv_len, a run-time scalar, is
//                         the number n of valid keys (a KV cache of capacity Lk holding n): only
//                         keys j < n exist and are read; without it n = Lk; n > Lk is an error
//                         of the backend. Causal masking is aligned to the END of the valid keys,
//                         so decoding against a KV cache works: query i sees keys
//                         j <= i + (n - Lq). Queries that see no key (n = 0, or Lq > n) give 0.
//                         scale defaults to 1/sqrt(D). The 4th input is the mask when it is a
//                         float tensor and kv_len when it is i32.
//   cast(x)               to attrs.to; float -> int rounds toward zero and saturates, NaN -> 0.
//                         A quantized x casts to a float dtype only (its exact dequantization,
//                         rounded once); nothing casts to a block format.
//   copy(x)               a dense row-major copy (makes a view contiguous).
//   concat(x0, x1, ...)   along attrs.axis; same dtype, equal other dims.
//   embedding(table, ids) table[V, D], ids i32 of any shape (rank <= 3) -> ids.shape + [D].
//                         An id outside [0, V) is an error reported by the backend; with
//                         attrs.negative_ids an id in [-V, 0) counts from the end (id + V, as
//                         ONNX's Gather and numpy read them) and the error is outside [-V, V). A
//                         quantized table gives its rows dequantized, in f32.
//   write_slice(state, x[, pos])
//                         state with the slice [s, s + x.shape[axis]) along attrs.axis replaced by
//                         x, s = attrs.start + pos (pos a run-time scalar, 0 when absent). x has
//                         the state's shape except along the axis and its dtype, or any float
//                         dtype for a float state (rounded once, as cast does). A slice outside
//                         the state (s < 0, or past its end) is an error of the backend. When
//                         `state` is a graph state (duet/graph.h) the output is that state,
//                         written in place: appending K and V to a cache at position p.
//   reshape/transpose/permute/slice
//                         views: no kernel, the output aliases the input's storage.
//
// Run-time scalars (rope's pos, attention's kv_len, write_slice's pos) are i32 tensors of one
// element that the kernels read when they run, so a new position or cache length reuses the plan,
// its buffers and its pipelines: give them as graph inputs and change their value per run.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "duet/export.h"
#include "duet/status.h"
#include "duet/tensor.h"

namespace duet {

enum class OpKind : uint8_t {
  matmul,
  add,
  sub,
  mul,
  div,
  silu_mul,
  scale,
  silu,
  gelu,
  relu,
  exp,
  sigmoid,
  tanh,
  erf,
  sqrt,
  pow,
  abs,
  log,
  less,
  less_equal,
  equal,
  fmod,
  sin,
  cos,
  tan,
  asin,
  acos,
  atan,
  sinh,
  cosh,
  asinh,
  acosh,
  atanh,
  softmax,
  rmsnorm,
  layernorm,
  rope,
  reduce_sum,
  reduce_mean,
  reduce_max,
  reduce_min,
  reduce_prod,
  attention,
  cast,
  copy,
  concat,
  embedding,
  write_slice,
  reshape,
  transpose,
  permute,
  slice,
};
inline constexpr int kNumOpKinds = static_cast<int>(OpKind::slice) + 1;

DUET_API std::string_view op_name(OpKind k);
DUET_API std::optional<OpKind> parse_op(std::string_view name);

// The kind of work an op is, for what treats ops by their class rather than by name: the
// planner (data movement has no arithmetic precision), checks (tolerances), kernels.
enum class OpClass : uint8_t {
  elementwise,    // y[i] = f(x[i]) or f(a[i], b[i]) with broadcasting: add ... exp
  rows,           // along the last dim, row by row: softmax, rmsnorm, layernorm, rope; and the
                  // reductions over any dims (reduce_sum ... reduce_min)
  contraction,    // sums of products: matmul, attention
  data_movement,  // moves or converts stored values exactly: cast, copy, concat, embedding
  view,           // no kernel, the output aliases the input: reshape, transpose, permute, slice
};
DUET_API OpClass op_class(OpKind k);
DUET_API bool is_view(OpKind k);
// scale, silu, gelu, relu, exp, sigmoid, tanh, erf, sqrt, pow, abs, log
DUET_API bool is_unary_elementwise(OpKind k);
DUET_API bool is_binary_elementwise(OpKind k);  // add, sub, mul, div, silu_mul
DUET_API bool is_reduction(
    OpKind k);  // reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod

enum class GeluApprox : uint8_t { none, tanh };  // none = the exact erf form
enum class RopeMode : uint8_t { neox, gptj };
DUET_API std::string_view rope_mode_name(RopeMode m);
DUET_API std::string_view gelu_approx_name(GeluApprox a);

// Every attribute of every op, in one flat struct: small, copyable, trivially serialised.
// Each op reads only its own fields (listed beside them).
struct DUET_API OpAttrs {
  bool transpose_a = false;                   // matmul
  bool transpose_b = false;                   // matmul
  float alpha = 1.0f;                         // scale
  float exponent = 1.0f;                      // pow
  std::optional<float> scale;                 // softmax (default 1), attention (default 1/sqrt(D))
  float eps = 1e-5f;                          // rmsnorm, layernorm
  bool causal = false;                        // attention
  GeluApprox gelu_approx = GeluApprox::none;  // gelu
  RopeMode rope_mode = RopeMode::neox;        // rope
  int64_t rope_offset = 0;                    // rope: position of the first row
  float rope_theta = 10000.0f;                // rope
  int rope_dims = 0;                          // rope: rotated dims, 0 = all of D
  DType to = DType::f32;                      // cast
  int axis = 0;                               // concat, slice, write_slice
  int64_t start = 0, stop = 0, step = 1;      // slice; write_slice: start
  int dim0 = 0, dim1 = 1;                     // transpose
  std::vector<int64_t> shape;                 // reshape (one entry may be -1)
  std::vector<int> perm;                      // permute
  std::vector<int> axes;                      // reduce_*: the reduced dims
  bool negative_ids = false;                  // embedding: ids in [-V, 0) count from the end

  bool operator==(const OpAttrs&) const = default;
};

// The names of an op kind's inputs, in order; optional ones are marked.
struct InputSpec {
  std::string_view name;
  bool optional;
};
DUET_API std::span<const InputSpec> op_inputs(OpKind k);  // concat: one variadic entry "x"
DUET_API bool op_is_variadic(OpKind k);

// What a user writing graphs needs to know of an op, from its row of facts (core/src/ops/):
// `duet ops --markdown` prints docs/ops.md from it. Markdown text; `inputs` runs parallel to
// op_inputs(k); `example` is a duet-graph JSON file that `duet run` runs as it is.
struct OpAttrDoc {
  std::string_view name;           // the OpAttrs field, as graph files spell it
  std::string_view type;           // "bool", "float", "int", "string", "dtype", "array of int"
  std::string_view default_value;  // as a graph file would write it
  std::string_view allowed;        // the values accepted
  std::string_view meaning;
};
struct OpDoc {
  std::string_view summary;                  // one line
  std::span<const std::string_view> inputs;  // per input: shape and meaning
  std::string_view output;                   // dtype and shape
  std::span<const OpAttrDoc> attrs;          // the attributes the op reads
  std::string_view semantics;                // in words, with the formula
  std::string_view example;                  // a whole graph file
};
DUET_API const OpDoc& op_doc(OpKind k);

// One op application with its inputs' descriptors and the inferred output. `name` is the
// graph node's name (for messages); `input_names` are the graph tensors' names.
struct DUET_API OpDesc {
  OpKind kind = OpKind::copy;
  OpAttrs attrs;
  std::string name;
  std::vector<TensorDesc> inputs;
  std::vector<std::string> input_names;
  TensorDesc output;

  // The name used in messages for input i (the graph name if known, else the op's input name).
  std::string input_name(size_t i) const;
  // Whether input i is present (optional inputs may be absent at the end).
  bool has_input(size_t i) const { return i < inputs.size(); }
};

// Validates inputs and attributes and fills `output` (dense, except views which alias).
// Input names, when given, are used in error messages.
DUET_API Result<OpDesc> make_op(OpKind kind, OpAttrs attrs, std::vector<TensorDesc> inputs,
                                std::vector<std::string> input_names = {}, std::string name = {});

// Element-wise ops: the function code every backend's kernels switch on (DUET_EW_* of
// duet/eltwise.h; gelu's two forms have one each), nullopt for any other op; the float argument
// the kernels receive with it (scale's alpha, pow's exponent; 0 where the function has none); and
// the float64 definition, y = f(x, z) with z unused by unary functions (nullptr for other ops).
DUET_API std::optional<uint32_t> eltwise_code(const OpDesc& op);
DUET_API float eltwise_param(const OpDesc& op);
using EltwiseReference = double (*)(double x, double z, const OpAttrs& attrs);
DUET_API EltwiseReference eltwise_reference(OpKind k);

// Reductions: the function code every backend's reduce kernel switches on (DUET_RED_* of
// duet/eltwise.h), nullopt for any other op; and the reduced dims of a valid op as a bit mask
// over x's dims (bit d: dim d, counted from the first).
DUET_API std::optional<uint32_t> reduce_code(const OpDesc& op);
DUET_API uint32_t reduce_dims_mask(const OpDesc& op);

// Where an input's values must lie for the op to be well defined and conditioned (a divisor is
// positive): checks draw their random inputs from it.
// Where checks draw an op's inputs from: any sign, positive ([0.5, 2]), a few values so that
// comparisons meet ties (steps), at least 1 (acosh), strictly inside (-1, 1) (atanh).
enum class InputRange : uint8_t { any, positive, steps, above_one, open_unit };
DUET_API InputRange op_input_range(OpKind k, size_t input);

// The index of the op's run-time scalar input (rope's pos, attention's kv_len, write_slice's
// pos), and of attention's mask; -1 when absent.
DUET_API int scalar_input(const OpDesc& op);
DUET_API int attention_mask_input(const OpDesc& op);
// The ids an embedding accepts, for messages: "ids in [0, V)" or, with negative_ids,
// "ids in [-V, V)".
DUET_API std::string embedding_id_range(const OpDesc& op);
// Whether an input is a run-time scalar: i32 with one element.
DUET_API bool is_runtime_scalar(const TensorDesc& t);

// Attention's effective scale, softmax's effective scale.
DUET_API float attention_scale(const OpDesc& op);
DUET_API float softmax_scale(const OpDesc& op);
// rope_dims resolved against D.
DUET_API int rope_dims(const OpDesc& op);

// Work estimates, for the cost model and benchmarks: floating-point operations (a multiply-add
// counts 2; attention counts the full, non-causal QK^T and PV unless causal) and bytes moved
// (inputs read once, output written once).
DUET_API double op_flops(const OpDesc& op);
DUET_API double op_bytes(const OpDesc& op);

// "matmul 'proj' (f16[1,32,64] x f16[64,128] -> f16[1,32,128])"
DUET_API std::string describe(const OpDesc& op);

}  // namespace duet
