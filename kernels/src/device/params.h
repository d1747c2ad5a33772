// Kernel arguments: plain structs passed by value, filled on the host by host/launch_plan.cpp and
// read by the kernels in both builds. Strides and offsets are in elements.
#pragma once

#include <cstdint>

#include "duet/eltwise.h"

namespace duet::kernels::dev {

// The storage dtypes, numbered as duet::DType (checked in host/launch_plan.cpp).
enum class Elt : uint8_t { f32, f16, bf16, i8, i32 };

// A strided view with its rank padded to 4 (leading dims of size 1, stride 0). Broadcast dims
// have stride 0.
struct Strided {
  void* data = nullptr;
  Elt dtype = Elt::f32;
  int64_t shape[4] = {1, 1, 1, 1};
  int64_t stride[4] = {0, 0, 0, 0};
};

// ---- the TMA copy engine (sm_90): a tensor as cuTensorMapEncodeTiled is told it (GPU), and as
// the emulator's bulk tensor copies read it. Dims innermost first; the innermost is dense.
struct TmaDesc {
  const void* base = nullptr;
  int rank = 0;         // 1..5
  int elem_bytes = 2;   // 2: f16/bf16
  int swizzle = 0;      // bytes: 0 (none), 32, 64 or 128 (the box's inner dim spans exactly that)
  int64_t dim[5] = {};  // elements
  int64_t stride[5] = {};  // bytes (stride[0] = elem_bytes)
  int box[5] = {};         // elements copied per dim
};

// The tensor map a kernel receives by value (__grid_constant__): the driver's CUtensorMap on the
// GPU (128 opaque bytes, 128-byte aligned), a TmaDesc in the emulator.
struct alignas(128) TensorMap {
  unsigned char bytes[128];
};
static_assert(sizeof(TmaDesc) <= sizeof(TensorMap));

// ---- tensor-core attention (flash and tiled tiers)
struct AttnParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* mask = nullptr;  // additive, broadcast to [B, Hq, Lq, Lk] by `ms`; may be null
  void* out = nullptr;         // dense [B, Hq, Lq, D]
  float* part_o = nullptr;     // split-KV partials: [splits][B*Hq*Lq][D], normalised
  float* part_lse = nullptr;   // [splits][B*Hq*Lq], log2 domain; -inf where no key was seen
  int64_t qs[3] = {}, ks[3] = {}, vs[3] = {};  // batch, head, seq strides; the last dim is dense
  int64_t ms[4] = {};
  Elt mask_dtype = Elt::f32;
  int B = 0, Hq = 0, Hkv = 0, group = 1, Lq = 0, Lk = 0;
  float scale_log2 = 0;  // softmax scale * log2(e)
  int causal = 0;
  int splits = 1, tiles_per_split = 0;
  int stages = 1;  // 1, or 2 (double buffering of K/V tiles)
  // The run-time key count (keys j < *kv_len exist; null: Lk), and where a count outside
  // [0, Lk] is reported (it is then clamped).
  const int* kv_len = nullptr;
  unsigned long long* error = nullptr;
};

// The wgmma tier (attention_wgmma.h): the same arguments, and K and V described for the TMA.
// The planner fills `a` and the descriptions; the launcher turns each description into the map
// the kernel reads (the driver's encoding on the GPU, a copy in the emulator).
struct WgAttnParams {
  AttnParams a;
  TensorMap k_map, v_map;
  TmaDesc k_desc, v_desc;
};

struct CombineParams {
  const float* part_o = nullptr;
  const float* part_lse = nullptr;
  void* out = nullptr;
  Elt out_dtype = Elt::f16;
  int64_t rows = 0;
  int D = 0, splits = 0;
};

// ---- matmul: C[b][m][n] = sum_k A[b][m][k] * B[b][k][n], C dense
struct MatmulParams {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  Elt dtype = Elt::f32;  // of a, b and c
  int M = 0, N = 0, K = 0;
  int64_t a_m = 0, a_k = 0, b_k = 0, b_n = 0;  // strides of the logical A[m][k], B[k][n]
  int64_t a_batch[2] = {}, b_batch[2] = {};    // batch strides, outer then inner (0: broadcast)
  int batch_inner = 1;                         // blockIdx.z = outer * batch_inner + inner
  int warps_m = 2;                             // warp grid warps_m x (warps / warps_m)
  int stages = 1;
  int a_vec = 0, b_vec = 0;  // rows may be loaded as aligned 16-byte vectors
  int rpw = 1;               // mat-vec: rows of B a warp owns
  int kc = 0;                // mat-vec: elements of A's rows per shared-memory chunk
};
// The generic mat-vec (matvec.h): at most kMvRows rows of A per block, kMvMaxRows rows of B a
// warp.
inline constexpr int kMvRows = 8, kMvMaxRows = 4;

// ---- generic (SIMT, fp32 compute) kernels

struct Q8Block;

struct EltwiseParams {
  Strided a, b;  // broadcast to the output's shape; b unused by unary ops
  void* out = nullptr;
  Elt out_dtype = Elt::f32;
  int64_t shape[4] = {1, 1, 1, 1};
  int64_t n = 0;
  uint32_t op = DUET_EW_ADD;  // a function of duet/eltwise.h
  float alpha = 1;  // the op's float argument (eltwise_param: scale's factor, pow's exponent)
  // The function's output also quantized as q8_act_kernel would, for the int_dot mat-vecs that
  // read it (launch.h, fuses_eltwise; eltwise_q8_kernel): element i into block i / 32 (a dense
  // f32 output, n % 32 == 0; null: not fused).
  Q8Block* q8 = nullptr;
};

// Casts and copies, also each input of a concat (out is then a strided window of the output).
struct CopyParams {
  Strided x;  // viewed with the output's shape
  Strided out;
  int64_t shape[4] = {1, 1, 1, 1};
  int64_t n = 0;
  int raw = 0;  // same dtype: copy the bits
};

enum class RowOp : uint8_t { softmax, rmsnorm, layernorm };

// Elements of a row each thread of rows_kernel keeps in registers on its fast path (a dense row
// of float storage of at most kRowRegs * threads elements).
inline constexpr int kRowRegs = 8;

struct RowParams {
  Strided x;
  Strided mask;  // softmax: broadcast to x's shape (data null if absent)
  Strided w, b;  // norms: [n] weight and bias (data null if absent)
  void* out = nullptr;
  Elt out_dtype = Elt::f32;
  int64_t rows = 0, n = 0;
  float scale = 1, eps = 1e-5f;
  RowOp op = RowOp::softmax;
  // rmsnorm fused with the activation quantization of the int_dot mat-vecs that read its output
  // (launch.h, fuses_norm; rmsnorm_q8_kernel): row r's output also quantized as q8_act_kernel
  // would, into blocks r * n / 32 ... (an f32 output, n % 32 == 0, the row in registers; null:
  // not fused).
  Q8Block* q8 = nullptr;
  // rmsnorm_q8_kernel with the residual add before it folded in (launch.h, fuses_add): the row
  // is x + res (both f32, x's layout), normalized as x alone would be, and the sum is written
  // to `sum` (dense f32 rows, the add's output; null: no add).
  Strided res;
  float* sum = nullptr;
};

// reduce_*: out (dense, x's shape with the reduced dims 1) from x; bit d of `dims`: padded dim d
// of x is reduced.
struct ReduceParams {
  Strided x;
  void* out = nullptr;
  Elt out_dtype = Elt::f32;
  int64_t n = 0;      // output elements
  int64_t count = 0;  // elements per output element
  uint32_t dims = 0;
  uint32_t op = DUET_RED_SUM;  // a reduction of duet/eltwise.h
};

struct RopeParams {
  Strided x;  // [B, H, L, D]
  void* out = nullptr;
  Elt out_dtype = Elt::f32;
  int64_t rows = 0;  // B * H * L
  int L = 0, D = 0, rope_dims = 0;
  int neox = 1;
  int64_t offset = 0;
  float theta = 10000;
  const int* pos = nullptr;             // run-time position added to offset (may be null)
  unsigned long long* error = nullptr;  // a negative position is reported here (with pos)
};

struct GenAttnParams {
  Strided q, k, v;  // [B, H, L, D] views
  Strided mask;     // broadcast to [B, Hq, Lq, Lk]; data null if absent
  void* out = nullptr;
  Elt out_dtype = Elt::f32;
  int B = 0, Hq = 0, Hkv = 0, Lq = 0, Lk = 0, D = 0;
  float scale = 1;
  int causal = 0;
  const int* kv_len = nullptr;  // as in AttnParams
  unsigned long long* error = nullptr;
  // gen_decode_kernel: the keys split `splits` ways, keys_per_split each (blockIdx.y = split *
  // Hkv + kv head), partials as AttnParams'.
  int splits = 1, keys_per_split = 0;
  float* part_o = nullptr;
  float* part_lse = nullptr;
};

// write_slice: out (dense, seen as [outer, cap, inner]) gets x ([outer, len, inner], through its
// view, converted to out's dtype) at rows [s, s + len), s = start + *pos.
struct WriteParams {
  Strided x;  // padded to rank 4 over x's shape
  void* out = nullptr;
  Elt out_dtype = Elt::f32;
  int64_t n = 0;  // elements of x
  int64_t len = 0, cap = 0, inner = 0, start = 0;
  const int* pos = nullptr;
  unsigned long long* error = nullptr;  // an offset putting the slice outside [0, cap)
};

// A rope whose output a write_slice stores into a KV cache, and the write_slice of V after it,
// in one kernel (launch.h, launch_rope_write): the rotated rows go to the rope's output and to
// `k`'s cache rows (k.x unused: k reads the rope's dense output), V's rows to `v`'s (v.n 0: none).
struct RopeWriteParams {
  RopeParams rope;
  WriteParams k, v;
};

struct EmbedParams {
  Strided table;  // [V, D] padded to rank 4: rows are dim 2, columns dim 3
  Strided ids;    // i32, any shape (rank <= 3), padded to 4
  void* out = nullptr;
  Elt out_dtype = Elt::f32;
  int64_t n_ids = 0, D = 0, V = 0;
  int negative_ids = 0;                 // ids in [-V, 0) count from the end
  unsigned long long* error = nullptr;  // min over bad ids of (position << 32 | id as u32)
};

// ---- block-quantized weights (generic tier): formats numbered as duet::DType (checked in
// host/launch_plan.cpp), byte layouts in duet/block_layout.h
enum class QFmt : uint8_t { q8_0 = 5, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, q4_z };

// Format facts the host (planning) and the kernels both ask.
#if defined(__CUDACC__)
#define DUET_QFMT_HD __host__ __device__
#else
#define DUET_QFMT_HD
#endif

// Formats whose two halves of a group of 32 have their own scale (the int8_mma tier multiplies
// the halves separately).
DUET_QFMT_HD inline constexpr bool q_scales_per16(QFmt f) {
  return f == QFmt::q6_k || f == QFmt::q2_k || f == QFmt::q3_k;
}
// Formats whose elements have a float minimum (an offset term per half of 16); the others' zero
// points fold into the int8 weights (quant_words.h).
DUET_QFMT_HD inline constexpr bool q_has_min(QFmt f) {
  return f == QFmt::q4_1 || f == QFmt::q5_1 || f == QFmt::q2_k || f == QFmt::q4_k ||
         f == QFmt::q5_k;
}

// Activations quantized for the integer tiers (int_dot, int8_mma), 32 values a block:
// q = rint(x * 127 / amax), d = amax / 127, and d times the sum of q over each half of 16 (the
// offset terms of formats with a min or a zero point). 48 bytes, so blocks stay 16-byte aligned.
struct alignas(16) Q8Block {
  int8_t q[32];
  float d;
  float ds[2];
  float pad;
};
static_assert(sizeof(Q8Block) == 48);

// A[b][m][k] (any float dtype, strided, batch dims as QMatmulParams) into rows b * M + m of
// K / 32 blocks.
struct Q8ActParams {
  const void* a = nullptr;
  Elt a_dtype = Elt::f32;
  int M = 0, K = 0;
  int64_t a_m = 0, a_k = 0;
  int64_t a_batch[2] = {};
  int batch_inner = 1;
  int64_t rows = 0;  // batch * M
  Q8Block* out = nullptr;
};

// C[b][m][n] = sum_k A[b][m][k] * W[n][k], W in blocks (rows of K), C dense. Blocks of kQWarps
// warps, each a weight row for kQRows rows of A (generic) or kQIntRows (int_dot).
inline constexpr int kQRows = 4, kQWarps = 4, kQIntRows = 8;
// The int_dot mat-vec (quant_mv.h): blocks of kQMvWarps warps, each owning up to kQMvMaxRows
// weight rows. The int8_mma tier (quant_mmq.h): warps_m x warps_n warps of 32 x 64, K in steps
// of kQMmqKc groups of 32. host/shapes.h sizes both from the device's limits.
inline constexpr int kQMvWarps = 8, kQMvMaxRows = 4, kQMmqKc = 4;
struct QMatmulParams {
  const void* a = nullptr;
  const uint8_t* w = nullptr;  // row 0's first block
  void* c = nullptr;
  Elt a_dtype = Elt::f32, c_dtype = Elt::f32;
  QFmt fmt = QFmt::q8_0;
  int M = 0, N = 0, K = 0;
  int64_t a_m = 0, a_k = 0;  // strides of the logical A[m][k]
  int64_t a_batch[2] = {};   // batch strides, outer then inner (0: broadcast)
  int batch_inner = 1;       // blockIdx.z = outer * batch_inner + inner
  int64_t w_row_bytes = 0;   // from one weight row to the next
  // The integer tiers: A quantized by q8_act_kernel, rows b * M + m of K / 32 blocks.
  const Q8Block* qa = nullptr;
  int stages = 1;     // copies in flight: int8_mma 1 or 2 steps, int_dot 1 to 4 per warp
  int w_pitch = 0;    // bytes of shared memory per weight row and stage (quant_stage.h)
  int warps_m = 1;    // int8_mma: the warp grid is warps_m x (warps / warps_m)
  int rpw = 1;        // int_dot: weight rows a warp owns
  int kc = 32;        // int_dot: activation groups per shared-memory chunk (a multiple of 32)
  int act_rows = 1;   // int_dot: activation rows a block holds (min(M, kQIntRows))
  int act_fused = 0;  // int_dot: the block quantizes its rows of A itself (qa unused)
};

// The int_dot mat-vec (quant_mv.h) of up to kQMvGroup mat-vecs that read the same quantized
// activations (a decode step's q, k and v projections; gate and up), in one launch: the grid's
// blocks along x are the members' blocks one after the other, and each block reads its member's
// weight and writes its member's output. One member is an ordinary mat-vec.
inline constexpr int kQMvGroup = 4;
struct QMvOut {
  const uint8_t* w = nullptr;  // row 0's first block
  void* c = nullptr;           // C[b][m][n], dense
  int64_t w_row_bytes = 0;
  int N = 0;
  int first = 0;  // the member's first block along x
  Elt c_dtype = Elt::f32;
};
struct QMvParams {
  const Q8Block* qa = nullptr;  // rows b * M + m of K / 32 blocks (q8_act_kernel)
  QFmt fmt = QFmt::q8_0;        // every member's
  int M = 0, K = 0;
  int count = 1;  // members
  QMvOut out[kQMvGroup];
};

// Rows of a block-quantized [V, D] tensor dequantized into a dense [rows, D] output: by ids
// (embedding) or in order (cast, ids.data null).
struct QRowsParams {
  const uint8_t* table = nullptr;  // row 0's first block
  QFmt fmt = QFmt::q8_0;
  int64_t row_bytes = 0;
  Strided ids;
  void* out = nullptr;
  Elt out_dtype = Elt::f32;
  int64_t rows = 0, D = 0, V = 0;
  int negative_ids = 0;                 // as EmbedParams::negative_ids
  unsigned long long* error = nullptr;  // as EmbedParams::error
};

struct FillParams {
  unsigned long long* p = nullptr;
  unsigned long long v = 0;
};

}  // namespace duet::kernels::dev
