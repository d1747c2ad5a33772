// Quantized-weight kernels on 64-bit ARM (Advanced SIMD, present in every ARMv8-A CPU). Bytes
// are multiplied as int8 by smull (int16 products, exact: |w|, |x| <= 128) and summed pairwise
// into int32 by sadalp. Every weight byte is below 128 (q8_0 is read as int8), so one signed
// product serves every format.
//
// Row dots (decode) decode q8_0, q4_0 and q4_k blocks in registers; the other formats, and
// every tile (prefill), are unpacked by the portable unpacker into the interleaved tile that the
// NEON tile product reads.
#include <arm_neon.h>

#include "duet/block_layout.h"
#include "kernels/quant.h"

namespace duet::cpu::kernels::quant_neon {
namespace {

float f16_at(const uint8_t* p) {
  uint16_t h;
  __builtin_memcpy(&h, p, 2);
  return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

int32_t load_i32(const void* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return v;
}

void quantize_q8(const float* x, int64_t k, int block, int8_t* xq, float* d, int16_t* s16) {
  for (int64_t b0 = 0; b0 < k / 32; b0 += block / 32) {
    const int64_t b1 = b0 + block / 32;
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int64_t b = b0; b < b1; ++b)
      for (int i = 0; i < 8; ++i) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + b * 32 + 4 * i)));
    const float amax = vmaxvq_f32(m);
    const float id = amax > 0 ? 127.0f / amax : 0.0f;
    for (int64_t b = b0; b < b1; ++b) {
      d[b] = amax / 127.0f;
      int32x4_t q[8];
      // Round to nearest, ties to even, as the portable quantizer's nearbyint.
      for (int i = 0; i < 8; ++i)
        q[i] = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + b * 32 + 4 * i), id));
      for (int h = 0; h < 2; ++h) {
        const int16x8_t a = vcombine_s16(vmovn_s32(q[4 * h]), vmovn_s32(q[4 * h + 1]));
        const int16x8_t c = vcombine_s16(vmovn_s32(q[4 * h + 2]), vmovn_s32(q[4 * h + 3]));
        vst1q_s8(xq + b * 32 + 16 * h, vcombine_s8(vmovn_s16(a), vmovn_s16(c)));
        s16[2 * b + h] = static_cast<int16_t>(vaddvq_s16(vaddq_s16(a, c)));
      }
    }
  }
}

// sum over 32 bytes of w * x, exact in int32.
inline int32_t dot32(int8x16_t w0, int8x16_t w1, const int8_t* x) {
  const int8x16_t x0 = vld1q_s8(x), x1 = vld1q_s8(x + 16);
  int32x4_t a = vpaddlq_s16(vmull_s8(vget_low_s8(w0), vget_low_s8(x0)));
  a = vpadalq_s16(a, vmull_high_s8(w0, x0));
  a = vpadalq_s16(a, vmull_s8(vget_low_s8(w1), vget_low_s8(x1)));
  a = vpadalq_s16(a, vmull_high_s8(w1, x1));
  return vaddvq_s32(a);
}

// ---- block decoders: a group is one block (32 or 256 weights) of sub-blocks of 32; chunk c
// holds weights [32c, 32c + 32) as int8 (u, or q8_0's signed value), its sub-block's weight is
// scale * u + off.

struct Q8_0 {
  static constexpr int kElems = 32, kBytes = DUET_Q8_0_BYTES;
  static void chunk(const uint8_t* p, int, int8x16_t& w0, int8x16_t& w1) {
    w0 = vld1q_s8(reinterpret_cast<const int8_t*>(p + DUET_Q8_0_QS));
    w1 = vld1q_s8(reinterpret_cast<const int8_t*>(p + DUET_Q8_0_QS + 16));
  }
  static void scales(const uint8_t* p, float* sc, float* of) {
    sc[0] = f16_at(p + DUET_Q8_0_D);
    of[0] = 0.0f;
  }
};

struct Q4_0 {
  static constexpr int kElems = 32, kBytes = DUET_Q4_0_BYTES;
  static void chunk(const uint8_t* p, int, int8x16_t& w0, int8x16_t& w1) {
    const uint8x16_t b = vld1q_u8(p + DUET_Q4_0_QS);
    w0 = vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(0x0F)));
    w1 = vreinterpretq_s8_u8(vshrq_n_u8(b, 4));
  }
  static void scales(const uint8_t* p, float* sc, float* of) {
    sc[0] = f16_at(p + DUET_Q4_0_D);
    of[0] = -8.0f * sc[0];
  }
};

struct Q4_K {
  static constexpr int kElems = 256, kBytes = DUET_Q4_K_BYTES;
  // Chunk c: the low (c even) or high nibbles of bytes [32 (c / 2), +32).
  static void chunk(const uint8_t* p, int c, int8x16_t& w0, int8x16_t& w1) {
    const uint8_t* q = p + DUET_Q4_K_QS + 32 * (c / 2);
    uint8x16_t a = vld1q_u8(q), b = vld1q_u8(q + 16);
    if (c & 1) {
      a = vshrq_n_u8(a, 4);
      b = vshrq_n_u8(b, 4);
    } else {
      a = vandq_u8(a, vdupq_n_u8(0x0F));
      b = vandq_u8(b, vdupq_n_u8(0x0F));
    }
    w0 = vreinterpretq_s8_u8(a);
    w1 = vreinterpretq_s8_u8(b);
  }
  // The 6-bit scales and mins of the eight sub-blocks.
  static void scales(const uint8_t* p, float* sc, float* of) {
    const uint8_t* s = p + DUET_Q4_K_SCALES;
    const float d = f16_at(p + DUET_Q4_K_D), dmin = f16_at(p + DUET_Q4_K_DMIN);
    for (int j = 0; j < 8; ++j) {
      int scale, min;
      if (j < 4) {
        scale = s[j] & 63;
        min = s[j + 4] & 63;
      } else {
        scale = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
        min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
      }
      sc[j] = d * static_cast<float>(scale);
      of[j] = -dmin * static_cast<float>(min);
    }
  }
};

// Weight rows through few activation rows: per block the scales once, per 32-weight chunk one
// integer product per activation row, scaled by the sub-block's scale times the activation
// block's, plus the offset times the activation block's scaled sum.
template <typename F, int M>
void row_dot_m(const uint8_t* w, int64_t row_bytes, int rows, int64_t k, const Q8Rows& x,
               float* out, int64_t ldo, bool accumulate) {
  constexpr int kChunks = F::kElems / 32;
  const int64_t blocks = k / F::kElems;
  for (int r = 0; r < rows; ++r) {
    const uint8_t* wr = w + r * row_bytes;
    float acc[M] = {}, off[M] = {};
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* p = wr + b * F::kBytes;
      float sc[kChunks], of[kChunks];
      F::scales(p, sc, of);
      for (int c = 0; c < kChunks; ++c) {
        int8x16_t w0, w1;
        F::chunk(p, c, w0, w1);
        const int64_t s = b * kChunks + c;  // sub-block of 32 (one per chunk)
        for (int i = 0; i < M; ++i) {
          const int32_t dot = dot32(w0, w1, x.xq + i * x.ldq + 32 * s);
          acc[i] += sc[c] * x.dsub[i * x.lds + s] * static_cast<float>(dot);
          off[i] += of[c] * x.dxs[i * x.lds + s];
        }
      }
    }
    for (int i = 0; i < M; ++i) {
      const float v = acc[i] + off[i];
      out[i * ldo + r] = accumulate ? out[i * ldo + r] + v : v;
    }
  }
}

template <typename F>
void row_dot(const uint8_t* w, int64_t rb, int rows, int64_t k, const Q8Rows& x, int m, float* out,
             int64_t ldo, bool accumulate) {
  switch (m) {
    case 1:
      return row_dot_m<F, 1>(w, rb, rows, k, x, out, ldo, accumulate);
    case 2:
      return row_dot_m<F, 2>(w, rb, rows, k, x, out, ldo, accumulate);
    case 3:
      return row_dot_m<F, 3>(w, rb, rows, k, x, out, ldo, accumulate);
    default:
      return row_dot_m<F, 4>(w, rb, rows, k, x, out, ldo, accumulate);
  }
}

// The tile product over 4 lanes (weight rows): per 4-k step 16 weight bytes (4 per lane)
// against the activation row's 4 bytes repeated, pairwise sums giving each lane's int32.
template <int M>
void tile_m(const QTile& t, int g, int64_t s0, int64_t s1, const Q8Rows& x, float* c, int64_t ldc,
            int n, bool accumulate) {
  const int64_t k4 = t.k / 4, subs = t.k / t.sub;
  const int8_t* u = reinterpret_cast<const int8_t*>(t.u) + g * k4 * 16;
  const float* sc = t.scale + g * subs * 4;
  const float* of = t.off + g * subs * 4;
  const int steps = t.sub / 4;
  float32x4_t f[M];
  for (int i = 0; i < M; ++i) f[i] = vdupq_n_f32(0.0f);
  for (int64_t s = s0; s < s1; ++s) {
    int32x4_t lo[M], hi[M];  // lanes 0-1 and 2-3, as pairs of partial sums
    for (int i = 0; i < M; ++i) lo[i] = hi[i] = vdupq_n_s32(0);
    const int8_t* us = u + s * steps * 16;
    const int8_t* xs = x.xq + s * t.sub;
    for (int st = 0; st < steps; ++st) {
      const int8x16_t wv = vld1q_s8(us + st * 16);
      for (int i = 0; i < M; ++i) {
        const int8x16_t xv = vreinterpretq_s8_s32(vdupq_n_s32(load_i32(xs + i * x.ldq + st * 4)));
        lo[i] = vpadalq_s16(lo[i], vmull_s8(vget_low_s8(wv), vget_low_s8(xv)));
        hi[i] = vpadalq_s16(hi[i], vmull_high_s8(wv, xv));
      }
    }
    const float32x4_t vs = vld1q_f32(sc + s * 4), vo = vld1q_f32(of + s * 4);
    for (int i = 0; i < M; ++i) {
      const int32x4_t a = vpaddq_s32(lo[i], hi[i]);
      f[i] = vfmaq_f32(f[i], vcvtq_f32_s32(a), vmulq_n_f32(vs, x.dsub[i * x.lds + s]));
      f[i] = vfmaq_n_f32(f[i], vo, x.dxs[i * x.lds + s]);
    }
  }
  for (int i = 0; i < M; ++i) {
    float r[4];
    vst1q_f32(r, f[i]);
    for (int j = 0; j < n; ++j) c[i * ldc + j] = accumulate ? c[i * ldc + j] + r[j] : r[j];
  }
}

void qgemm_tile(const QTile& t, int g, int64_t s0, int64_t s1, const Q8Rows& x, int m, float* c,
                int64_t ldc, int n, bool accumulate) {
  switch (m) {
    case 1:
      return tile_m<1>(t, g, s0, s1, x, c, ldc, n, accumulate);
    case 2:
      return tile_m<2>(t, g, s0, s1, x, c, ldc, n, accumulate);
    case 3:
      return tile_m<3>(t, g, s0, s1, x, c, ldc, n, accumulate);
    default:
      return tile_m<4>(t, g, s0, s1, x, c, ldc, n, accumulate);
  }
}

constexpr QuantKernels make_table() {
  QuantKernels q{};
  q.isa = Isa::neon;
  q.lanes = 4;
  q.mr = 4;
  q.signed_bytes = true;
  q.row_dot_rows = 4;
  q.quantize_q8 = quantize_q8;
  q.qgemm_tile = qgemm_tile;
  q.row_dot[static_cast<int>(QSlot::q8_0)] = row_dot<Q8_0>;
  q.row_dot[static_cast<int>(QSlot::q4_0)] = row_dot<Q4_0>;
  q.row_dot[static_cast<int>(QSlot::q4_k)] = row_dot<Q4_K>;
  return q;
}

constexpr QuantKernels kTable = make_table();

}  // namespace
}  // namespace duet::cpu::kernels::quant_neon

namespace duet::cpu::kernels {
const QuantKernels& neon_quant_kernels() {
  return quant_neon::kTable;
}
}  // namespace duet::cpu::kernels
