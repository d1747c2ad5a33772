// The CPU backend's kernels for block-quantized weights, one table per instruction set
// (quant_avx512.cpp with AVX-512 VNNI, quant_avx2.cpp, quant_portable.cpp), chosen at run time
// like the float kernels (quant_isa.cpp). Same rule as kernels.h: this header is included by the
// ISA translation units, so it defines no inline function and includes no library header.
//
// Activations are quantized on the fly to 8 bits per 32 (Q8Rows), as ggml does. Weights stay in
// their blocks: decode streams them once, prefill unpacks a tile of rows at a time into an L2
// buffer reused by every activation row. Every weight element of
// a sub-block s (16 or 32 weights sharing a scale) is scale[s] * u + off[s] with u unsigned
// (the format's zero point folded into off), so a dot product over a sub-block is
//   scale * dx * sum(u * xq) + off * dx * sum(xq)
// with the integer sum done by vpdpbusd (AVX-512 VNNI) or vpmaddubsw (AVX2).
#pragma once

#include <cstdint>

#include "kernels/kernels.h"

namespace duet::cpu::kernels {

// Activations in 8 bits, as the products read them: row r holds xq[r * ldq + k]; per sub-block s
// of the weight format (16 or 32 elements) dsub[r * lds + s] is the scale of the activation's
// block holding it (32 elements, or 256: QuantKernels::act_block) and dxs[r * lds + s] that
// scale times the sub-block's sum of xq; s16[r * (ldq / 16) + k / 16] are the sums of xq per 16.
struct Q8Rows {
  const int8_t* xq = nullptr;
  const float* dsub = nullptr;
  const float* dxs = nullptr;
  const int16_t* s16 = nullptr;
  int64_t ldq = 0, lds = 0;
};

// A tile of weight rows unpacked for the integer GEMM: rows in groups of `lanes` (the int32
// lanes of the ISA's vectors), k elements each. Per group and per 4 consecutive k, lanes x 4
// bytes: u[((g * k / 4) + k4) * lanes * 4 + lane * 4 + i] is weight (g * lanes + lane, 4 k4 + i),
// unsigned unless signed_bytes (then int8; the AVX2 product needs bytes below 128 as its
// unsigned operand, so q8_0 is kept signed there). Weight = scale * u + off, per group and
// sub-block `lanes` floats: scale[(g * k / sub + s) * lanes + lane].
struct QTile {
  uint8_t* u = nullptr;
  float* scale = nullptr;
  float* off = nullptr;
  int64_t k = 0;
  int sub = 32;
  int lanes = 16;
  bool signed_bytes = false;
  // How many consecutive 4-k steps of one row may sum their byte-pair products in int16 (the
  // AVX2 product's vpmaddubsw) before widening: 2 * steps * largest byte * 127 < 2^15.
  int i16_steps = 1;
};

// The tables' per-format slots, numbered as duet::DType (checked in quant_isa.cpp; the ISA units
// cannot include duet/dtype.h).
enum class QSlot : uint8_t {
  q8_0 = 5,
  q4_0 = 6,
  q4_1,
  q5_0,
  q5_1,
  q2_k,
  q3_k,
  q4_k,
  q5_k,
  q6_k,
  q4_z
};
inline constexpr int kFormatSlots = 32;

// Quantized-weight kernels for one ISA.
struct QuantKernels {
  Isa isa;
  int lanes;          // weight rows per GEMM register tile (int32 lanes of a vector)
  int mr;             // activation rows per GEMM register tile
  bool signed_bytes;  // the tile product reads q8_0 weights as int8 (QTile::signed_bytes)
  int row_dot_rows;   // the most activation rows the row dots take

  // x[0..k) (k a multiple of `block`, 32 or 256) to 8 bits: xq = round(x * 127 / amax), amax
  // per `block`; d per 32 (amax / 127, repeated through a block of 256), s16 the sums of xq
  // per 16.
  void (*quantize_q8)(const float* x, int64_t k, int block, int8_t* xq, float* d, int16_t* s16);

  // The GEMM register tile: c[i * ldc + j] (+)= sum over the tile's k of w(j) . x(i) for
  // i < m <= mr activation rows and j < n <= lanes weight rows of lane group `g` of the tile,
  // over sub-blocks [s0, s1) of the tile. `x` is positioned at the tile's first k (and its first
  // sub-block).
  void (*qgemm_tile)(const QTile& t, int g, int64_t s0, int64_t s1, const Q8Rows& x, int m,
                     float* c, int64_t ldc, int n, bool accumulate);

  // Dot products of rows of blocks with few activation rows (decode): out[i * ldo + r] (+)=
  // dot(weight row r, x row i) for r < rows, i < m <= row_dot_rows; k elements per row (a
  // whole number of blocks), `row_bytes` apart.
  // One entry per block format, indexed by its DType number; nullptr where this ISA has none
  // (the tile GEMM is used instead).
  using RowDot = void (*)(const uint8_t* w, int64_t row_bytes, int rows, int64_t k, const Q8Rows& x,
                          int m, float* out, int64_t ldo, bool accumulate);
  RowDot row_dot[kFormatSlots];
  // Per format, the activation elements per scale its row dots read: 256 where a k-quant row dot
  // sums a whole super-block in integers and so needs one activation scale for it (as ggml's
  // q8_K), else 32 (0 reads as 32). The tile product always gets scales per 32.
  int16_t act_block[kFormatSlots];

  // Unpacks `rows` (<= t.lanes) weight rows of one lane group into the tile, blocks [b0, b1) of
  // each row; w points at the group's first row, rows `row_bytes` apart. One entry per format;
  // nullptr: the generic unpacker (through duet::unpack_block).
  using Unpack = void (*)(const uint8_t* w, int64_t row_bytes, int rows, int64_t b0, int64_t b1,
                          const QTile& t, int g);
  Unpack unpack[kFormatSlots];
};

// The table for an ISA the CPU runs (isa.h); for avx512 the CPU must have VNNI, BW, VL and DQ
// too, else AVX2's table is returned.
const QuantKernels& quant_kernels_for(Isa isa);

const QuantKernels& portable_quant_kernels();
const QuantKernels& avx2_quant_kernels();
const QuantKernels& avx512_quant_kernels();  // needs AVX-512 F, BW, VL and VNNI
const QuantKernels& neon_quant_kernels();    // aarch64 builds

}  // namespace duet::cpu::kernels
