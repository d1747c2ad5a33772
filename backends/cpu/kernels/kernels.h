// The CPU backend's SIMD kernels, one table per instruction set. Each table is compiled in its
// own translation unit with that ISA's flags (kernels_avx512.cpp, kernels_avx2.cpp,
// kernels_portable.cpp); the drivers (gemm.cpp, ops/attention.cpp, ops/tensor_io.cpp) are
// compiled for the baseline and only call through the table chosen at run time (isa.h).
//
// This header is included by the ISA translation units, so it must define no inline function
// and pull in no library header with inline code: an inline function compiled with -mavx512f
// could be picked by the linker for every caller, and crash a CPU without AVX-512.
#pragma once

#include <cstdint>

namespace duet::cpu::kernels {

// The x86 levels are ordered: each includes the one below. generic is no SIMD extension (the
// portable kernels, namespace portable; DUET_CPU_ISA=generic); avx512bf16 is avx512 plus
// AVX512-BF16 dot products (vdpbf16ps) for matmuls computed in bf16. neon is 64-bit ARM's
// Advanced SIMD (every ARMv8-A CPU), beside generic only.
enum class Isa : uint8_t { generic, avx2, avx512, avx512bf16, neon };

// Element types the kernels read (a subset of duet::DType, kept separate so this header has no
// dependencies).
enum class Elem : uint8_t { f32, f16, bf16 };

struct Kernels {
  Isa isa;
  // The register tile: mr rows of C (each broadcast from A) by nr columns (nr / lanes vectors).
  int mr, nr, lanes;
  // GEMM blocking defaults for this ISA (see gemm.cpp and docs/cpu-backend.md): kc deep A and B
  // panels, row blocks of about mc rows per task, column blocks of nc for the L2-resident B.
  int kc, mc, nc;

  // c[i*ldc + j] (+)= sum_k a[k*lda + i] * b[k*ldb + j] for i < m <= mr, j < n <= nr. a and b
  // are read for all mr rows and nr columns (padding included); only the m x n corner of c is
  // read or written. accumulate adds to c, otherwise c is overwritten.
  void (*tile)(int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
               int64_t ldc, int m, int n, bool accumulate);

  // Products with few rows (decode), B read in place and widened in registers, never packed.
  // skinny: rows of B contiguous (B [K, N] row-major), streamed four at a time over C:
  //   c[r * ldc + j] = sum_k a[r * lda + k] * b[k * ldb + j] for r < rows (1, 2 or 4), j < n.
  void (*skinny)(const float* a, int64_t lda, int rows, const void* b, Elem bt, int64_t ldb,
                 int64_t k, int64_t n, float* c, int64_t ldc);
  // gemv: rows of B^T contiguous (a weight stored [N, K], as checkpoints store it), several
  // weight rows streamed at once, each against every row of a:
  //   c[r * ldc + j] = sum_k a[r * lda + k] * w[j * ldw + k] for r < rows (1, 2, 4 or 8), j < n.
  void (*gemv)(const float* a, int64_t lda, int rows, const void* w, Elem wt, int64_t ldw,
               int64_t k, int64_t n, float* c, int64_t ldc);

  // dst[i] = src[i * stride] as f32, for i < n (src in elements of `type`).
  void (*load_line)(const void* src, Elem type, int64_t stride, int64_t n, float* dst);
  // Packs a panel for tile(): dst[k * width + l] = scale * src[l * lane_stride + k * k_stride]
  // for l < lanes, k < depth; lanes <= l < width are zero. `scratch` holds depth floats.
  void (*pack)(const void* src, Elem type, int64_t lane_stride, int64_t k_stride, int lanes,
               int width, int64_t depth, float scale, float* dst, float* scratch);

  // Bulk conversions, exact as the scalar ones in duet/half.h (round to nearest even, NaN, Inf
  // and subnormals included).
  void (*f16_to_f32)(const uint16_t* src, float* dst, int64_t n);
  void (*bf16_to_f32)(const uint16_t* src, float* dst, int64_t n);
  void (*f32_to_f16)(const float* src, uint16_t* dst, int64_t n);
  void (*f32_to_bf16)(const float* src, uint16_t* dst, int64_t n);

  // bf16 dot products (vdpbf16ps), null where the ISA has none (a matmul computed in bf16 then
  // runs in f32, which is more precise). Operands are packed in pairs of k: a 32-bit word holds
  // the bf16 values of k = 2p (low half) and 2p + 1 (high half).
  //   c[i * ldc + j] (+)= sum_p a[p * mr + i] . b[p * nr + j]  for i < m <= mr, j < n <= nr,
  // each word pair contributing both products, accumulated in f32.
  void (*tile_bf16)(int64_t pairs, const void* a, const void* b, float* c, int64_t ldc, int m,
                    int n, bool accumulate);
  // Packs a panel for tile_bf16: word p of lane l holds src(l, 2p) and src(l, 2p + 1), where
  // src(l, k) = src[l * lane_stride + k * k_stride], rounded to bf16 (nearest even); words of
  // lanes >= `lanes` and halves with k >= depth are zero. `scratch` holds 2 * (depth + width) + 8
  // floats. Present in every table (the GEMM packs with it only where tile_bf16 exists).
  void (*pack_bf16)(const void* src, Elem type, int64_t lane_stride, int64_t k_stride, int lanes,
                    int width, int64_t depth, void* dst, float* scratch);

  // Attention, queries in vector lanes. s is a block of scores [keys][ld] for `cols` queries,
  // processed in whole vectors (cols rounded up to lanes must fit in ld, and m, l, corr hold as
  // many). Per query column: the running max m and sum l are
  // updated, corr receives exp(m_old - m_new), and s is replaced by exp(s - m_new). A column
  // whose scores are all -inf keeps m = -inf, gets p = 0 and corr = 1.
  void (*softmax_cols)(float* s, int64_t ld, int64_t keys, int cols, float* m, float* l,
                       float* corr);
  // Attention, keys in a row: p[j] = exp(s[j] - m_new) for j < n where m_new = max(*m, max s),
  // *l = *l * exp(*m - m_new) + sum p, *m = m_new; returns exp(m_old - m_new) (1 when every
  // score is -inf, which leaves p = 0).
  float (*softmax_row)(float* s, int64_t n, float* m, float* l);
  // y[i] = exp(x[i]) for i < n (about 1 ulp; NaN stays NaN, past the float range +inf); returns
  // the sum of y. x may equal y.
  float (*exp)(const float* x, float* y, int64_t n);
  // y[i] = x[i] / (1 + exp(-x[i])). x may equal y.
  void (*silu)(const float* x, float* y, int64_t n);
  // gelu, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). x may equal y.
  void (*gelu_tanh)(const float* x, float* y, int64_t n);
  // gelu, erf form: 0.5 x (1 + erf(x / sqrt(2))), erf to about 1.2e-7. x may equal y.
  void (*gelu_erf)(const float* x, float* y, int64_t n);
  // y[i] = sigmoid, tanh, erf, sqrt of x[i] (NaN stays NaN). x may equal y.
  void (*sigmoid)(const float* x, float* y, int64_t n);
  void (*tanh)(const float* x, float* y, int64_t n);
  void (*erf)(const float* x, float* y, int64_t n);
  void (*sqrt)(const float* x, float* y, int64_t n);
  // y[i] = y[i] * a + x[i] * b.
  void (*scale_add)(float* y, float a, const float* x, float b, int64_t n);
  // s[r * lds + j] = scale * dot(q + r * ldq, k + j * ldk) over d elements, for r < rows,
  // j < keys. k (elements of kt, unit stride along d) is widened in registers.
  void (*dots)(const float* q, int64_t ldq, int rows, const void* k, Elem kt, int64_t ldk,
               int64_t keys, int64_t d, float scale, float* s, int64_t lds);
  // o[r * ldo + i] = o[r * ldo + i] * corr[r] + sum_j p[r * ldp + j] * v[j * ldv + i], for
  // r < rows, i < d. v (elements of vt, unit stride along d) is widened in registers.
  void (*pv_rows)(const float* p, int64_t ldp, int rows, const void* v, Elem vt, int64_t ldv,
                  int64_t keys, int64_t d, const float* corr, float* o, int64_t ldo);
};

// The table for one ISA; every x86 table exists in every x86-64 build (use isa.h to pick one the
// CPU runs), the neon table in every aarch64 build, the portable table everywhere.
const Kernels& portable_kernels();
const Kernels& avx2_kernels();
const Kernels& avx512_kernels();
const Kernels& avx512bf16_kernels();
const Kernels& neon_kernels();

// The AVX512-BF16 register tile (kernels_avx512bf16.cpp, compiled with -mavx512bf16): the
// AVX-512 tile shape, 14 x 32. Only reached through avx512bf16_kernels().
namespace avx512bf16 {
void tile_bf16(int64_t pairs, const void* a, const void* b, float* c, int64_t ldc, int m, int n,
               bool accumulate);
}

}  // namespace duet::cpu::kernels
