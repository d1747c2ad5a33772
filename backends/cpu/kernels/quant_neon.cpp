// Quantized-weight kernels on 64-bit ARM (Advanced SIMD, present in every ARMv8-A CPU). Bytes
// are multiplied as int8 by smull (int16 products, exact: |w|, |x| <= 128) and summed pairwise
// into int32 by sadalp. Every weight byte is below 128 (q8_0 is read as int8), so one signed
// product serves every format.
//
// Every block format has one register decoder here, read by the row dots (decode) and by the
// unpacking of the interleaved tiles that the NEON tile product reads (prefill).
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

// sum over 16 bytes of w * x, exact in int32 lanes.
inline int32x4_t dot16(int8x16_t w, const int8_t* x) {
  const int8x16_t xv = vld1q_s8(x);
  return vpadalq_s16(vpaddlq_s16(vmull_s8(vget_low_s8(w), vget_low_s8(xv))), vmull_high_s8(w, xv));
}

// ---- block decoders, one per format: a group is one block (32 or 256 weights) of sub-blocks of
// kSub (16 or 32) weights; chunk(p, c) gives weights [32c, 32c + 32) as int8 in two registers
// (u, below 128, or q8_0's signed value), and scales(p, sc, of) per sub-block s the scale and
// offset with which each weight is sc[s] * u + of[s] (the integers of duet::unpack_block; the
// scales rounded to f32).

// Bit e of `bits` (e < 16) as byte e: `value` where set, else 0.
inline uint8x16_t bits_to_bytes(uint32_t bits, uint8_t value) {
  const uint8x16_t b = vcombine_u8(vdup_n_u8(static_cast<uint8_t>(bits)),
                                   vdup_n_u8(static_cast<uint8_t>(bits >> 8)));
  static constexpr uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  return vandq_u8(vtstq_u8(b, vld1q_u8(kBit)), vdupq_n_u8(value));
}

// 16 bytes of nibbles: elements 0-15 in the low nibbles, 16-31 in the high.
inline void nibbles(const uint8_t* q, uint8x16_t& lo, uint8x16_t& hi) {
  const uint8x16_t b = vld1q_u8(q);
  lo = vandq_u8(b, vdupq_n_u8(0x0F));
  hi = vshrq_n_u8(b, 4);
}

inline void as_s8(uint8x16_t a, uint8x16_t b, int8x16_t& w0, int8x16_t& w1) {
  w0 = vreinterpretq_s8_u8(a);
  w1 = vreinterpretq_s8_u8(b);
}

// Bytes [32 (c / 4), + 32) of 2-bit fields shifted down by 2 (c % 4), masked to 2 bits.
inline void crumbs(const uint8_t* q, int c, uint8x16_t& a, uint8x16_t& b) {
  const int8x16_t sh = vdupq_n_s8(static_cast<int8_t>(-2 * (c % 4)));
  a = vandq_u8(vshlq_u8(vld1q_u8(q + 32 * (c / 4)), sh), vdupq_n_u8(3));
  b = vandq_u8(vshlq_u8(vld1q_u8(q + 32 * (c / 4) + 16), sh), vdupq_n_u8(3));
}

// Bit `bit` of 32 bytes, moved to bit `to`.
inline void bit_of(const uint8_t* q, int bit, int to, uint8x16_t& a, uint8x16_t& b) {
  const int8x16_t sh = vdupq_n_s8(static_cast<int8_t>(to - bit));
  const uint8x16_t m = vdupq_n_u8(static_cast<uint8_t>(1u << to));
  a = vandq_u8(vshlq_u8(vld1q_u8(q), sh), m);
  b = vandq_u8(vshlq_u8(vld1q_u8(q + 16), sh), m);
}

struct Q8_0 {
  static constexpr int kElems = 32, kBytes = DUET_Q8_0_BYTES, kSub = 32;
  static void chunk(const uint8_t* p, int, int8x16_t& w0, int8x16_t& w1) {
    w0 = vld1q_s8(reinterpret_cast<const int8_t*>(p + DUET_Q8_0_QS));
    w1 = vld1q_s8(reinterpret_cast<const int8_t*>(p + DUET_Q8_0_QS + 16));
  }
  static void scales(const uint8_t* p, float* sc, float* of) {
    sc[0] = f16_at(p + DUET_Q8_0_D);
    of[0] = 0.0f;
  }
};

// Nibbles and, where kQh >= 0, fifth bits; w = d * u + m (kM >= 0) or d * (u - kZero).
template <int kB, int kD, int kM, int kQs, int kQh, int kZero>
struct Nib32 {
  static constexpr int kElems = 32, kBytes = kB, kSub = 32;
  static void chunk(const uint8_t* p, int, int8x16_t& w0, int8x16_t& w1) {
    uint8x16_t lo, hi;
    nibbles(p + kQs, lo, hi);
    if constexpr (kQh >= 0) {
      const uint32_t qh = static_cast<uint32_t>(load_i32(p + kQh));
      lo = vorrq_u8(lo, bits_to_bytes(qh, 0x10));
      hi = vorrq_u8(hi, bits_to_bytes(qh >> 16, 0x10));
    }
    as_s8(lo, hi, w0, w1);
  }
  static void scales(const uint8_t* p, float* sc, float* of) {
    sc[0] = f16_at(p + kD);
    of[0] = kM >= 0 ? f16_at(p + kM) : -static_cast<float>(kZero) * sc[0];
  }
};
using Q4_0 = Nib32<DUET_Q4_0_BYTES, DUET_Q4_0_D, -1, DUET_Q4_0_QS, -1, 8>;
using Q4_1 = Nib32<DUET_Q4_1_BYTES, DUET_Q4_1_D, DUET_Q4_1_M, DUET_Q4_1_QS, -1, 0>;
using Q5_0 = Nib32<DUET_Q5_0_BYTES, DUET_Q5_0_D, -1, DUET_Q5_0_QS, DUET_Q5_0_QH, 16>;
using Q5_1 = Nib32<DUET_Q5_1_BYTES, DUET_Q5_1_D, DUET_Q5_1_M, DUET_Q5_1_QS, DUET_Q5_1_QH, 0>;

// q4_z: w = d * (u - z), z per block.
struct Q4_Z {
  static constexpr int kElems = 32, kBytes = DUET_Q4_Z_BYTES, kSub = 32;
  static void chunk(const uint8_t* p, int, int8x16_t& w0, int8x16_t& w1) {
    uint8x16_t lo, hi;
    nibbles(p + DUET_Q4_Z_QS, lo, hi);
    as_s8(lo, hi, w0, w1);
  }
  static void scales(const uint8_t* p, float* sc, float* of) {
    sc[0] = f16_at(p + DUET_Q4_Z_D);
    of[0] = -sc[0] * static_cast<float>(p[DUET_Q4_Z_Z] & 0x0F);
  }
};

// q4_k and q5_k: chunk c is the low (c even) or high nibbles of bytes [32 (c / 2), +32), with
// (q5_k) bit c of qh[l] as the fifth; w = d * sc * u - dmin * m per 32.
template <int kB, int kD, int kDmin, int kScales, int kQs, int kQh>
struct K45 {
  static constexpr int kElems = 256, kBytes = kB, kSub = 32;
  static void chunk(const uint8_t* p, int c, int8x16_t& w0, int8x16_t& w1) {
    const uint8_t* q = p + kQs + 32 * (c / 2);
    uint8x16_t a = vld1q_u8(q), b = vld1q_u8(q + 16);
    if (c & 1) {
      a = vshrq_n_u8(a, 4);
      b = vshrq_n_u8(b, 4);
    } else {
      a = vandq_u8(a, vdupq_n_u8(0x0F));
      b = vandq_u8(b, vdupq_n_u8(0x0F));
    }
    if constexpr (kQh >= 0) {
      uint8x16_t ha, hb;
      bit_of(p + kQh, c, 4, ha, hb);
      a = vorrq_u8(a, ha);
      b = vorrq_u8(b, hb);
    }
    as_s8(a, b, w0, w1);
  }
  static void scales(const uint8_t* p, float* sc, float* of) {
    const uint8_t* s = p + kScales;
#define DUET_B(i) s[i]
    const float d = f16_at(p + kD), dmin = f16_at(p + kDmin);
    for (int j = 0; j < 8; ++j) {
      sc[j] = d * static_cast<float>(DUET_Q4_K_SCALE(DUET_B, j));
      of[j] = -dmin * static_cast<float>(DUET_Q4_K_MIN(DUET_B, j));
    }
#undef DUET_B
  }
};
using Q4_K = K45<DUET_Q4_K_BYTES, DUET_Q4_K_D, DUET_Q4_K_DMIN, DUET_Q4_K_SCALES, DUET_Q4_K_QS, -1>;
using Q5_K =
    K45<DUET_Q5_K_BYTES, DUET_Q5_K_D, DUET_Q5_K_DMIN, DUET_Q5_K_SCALES, DUET_Q5_K_QS, DUET_Q5_K_QH>;

// q2_k: u = (qs[32h + l] >> 2j) & 3 for chunk c = 4h + j; w = d sc u - dmin m per 16.
struct Q2_K {
  static constexpr int kElems = 256, kBytes = DUET_Q2_K_BYTES, kSub = 16;
  static void chunk(const uint8_t* p, int c, int8x16_t& w0, int8x16_t& w1) {
    uint8x16_t a, b;
    crumbs(p + DUET_Q2_K_QS, c, a, b);
    as_s8(a, b, w0, w1);
  }
  static void scales(const uint8_t* p, float* sc, float* of) {
    const float d = f16_at(p + DUET_Q2_K_D), dmin = f16_at(p + DUET_Q2_K_DMIN);
    for (int s = 0; s < 16; ++s) {
      sc[s] = d * static_cast<float>(p[DUET_Q2_K_SCALES + s] & 0x0F);
      of[s] = -dmin * static_cast<float>(p[DUET_Q2_K_SCALES + s] >> 4);
    }
  }
};

// q3_k: u = q2 | hbit << 2 (0..7), hbit = bit c of hmask[l]; w = d (sc - 32) (u - 4) per 16.
struct Q3_K {
  static constexpr int kElems = 256, kBytes = DUET_Q3_K_BYTES, kSub = 16;
  static void chunk(const uint8_t* p, int c, int8x16_t& w0, int8x16_t& w1) {
    uint8x16_t a, b, ha, hb;
    crumbs(p + DUET_Q3_K_QS, c, a, b);
    bit_of(p + DUET_Q3_K_HMASK, c, 2, ha, hb);
    as_s8(vorrq_u8(a, ha), vorrq_u8(b, hb), w0, w1);
  }
  static void scales(const uint8_t* p, float* sc, float* of) {
    const uint8_t* s = p + DUET_Q3_K_SCALES;
#define DUET_B(i) s[i]
    const float d = f16_at(p + DUET_Q3_K_D);
    for (int j = 0; j < 16; ++j) {
      sc[j] = d * static_cast<float>(DUET_Q3_K_SCALE(DUET_B, j) - 32);
      of[j] = -4.0f * sc[j];
    }
#undef DUET_B
  }
};

// q6_k: chunk c = 4h + j: the low (j < 2) or high nibbles of ql[64h + 32 (j % 2) + l] and bits
// 2j, 2j + 1 of qh[32h + l] above them; w = d sc (u - 32) per 16.
struct Q6_K {
  static constexpr int kElems = 256, kBytes = DUET_Q6_K_BYTES, kSub = 16;
  static void chunk(const uint8_t* p, int c, int8x16_t& w0, int8x16_t& w1) {
    const int h = c / 4, j = c % 4;
    const uint8_t* ql = p + DUET_Q6_K_QL + 64 * h + 32 * (j % 2);
    uint8x16_t a = vld1q_u8(ql), b = vld1q_u8(ql + 16);
    if (j >= 2) {
      a = vshrq_n_u8(a, 4);
      b = vshrq_n_u8(b, 4);
    } else {
      a = vandq_u8(a, vdupq_n_u8(0x0F));
      b = vandq_u8(b, vdupq_n_u8(0x0F));
    }
    uint8x16_t ha, hb;
    crumbs(p + DUET_Q6_K_QH, c, ha, hb);
    as_s8(vorrq_u8(a, vshlq_n_u8(ha, 4)), vorrq_u8(b, vshlq_n_u8(hb, 4)), w0, w1);
  }
  static void scales(const uint8_t* p, float* sc, float* of) {
    const float d = f16_at(p + DUET_Q6_K_D);
    for (int s = 0; s < 16; ++s) {
      sc[s] = d * static_cast<float>(static_cast<int8_t>(p[DUET_Q6_K_SCALES + s]));
      of[s] = -32.0f * sc[s];
    }
  }
};

// Weight rows through few activation rows: per block the scales once, per 32-weight chunk one
// integer product per activation row and sub-block (one of 32, or two of 16), scaled by the
// sub-block's scale times the activation block's, plus the offset times the activation
// sub-block's scaled sum.
template <typename F, int M>
void row_dot_m(const uint8_t* w, int64_t row_bytes, int rows, int64_t k, const Q8Rows& x,
               float* out, int64_t ldo, bool accumulate) {
  constexpr int kChunks = F::kElems / 32, kSubs = F::kElems / F::kSub;
  const int64_t blocks = k / F::kElems;
  for (int r = 0; r < rows; ++r) {
    const uint8_t* wr = w + r * row_bytes;
    float acc[M] = {}, off[M] = {};
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* p = wr + b * F::kBytes;
      float sc[kSubs], of[kSubs];
      F::scales(p, sc, of);
      for (int i = 0; i < M; ++i)
        for (int s = 0; s < kSubs; ++s) off[i] += of[s] * x.dxs[i * x.lds + b * kSubs + s];
      for (int c = 0; c < kChunks; ++c) {
        int8x16_t w0, w1;
        F::chunk(p, c, w0, w1);
        for (int i = 0; i < M; ++i) {
          const int8_t* xc = x.xq + i * x.ldq + b * F::kElems + 32 * c;
          const float* ds = x.dsub + i * x.lds + b * kSubs;
          const int32x4_t d0 = dot16(w0, xc), d1 = dot16(w1, xc + 16);
          if constexpr (F::kSub == 32) {
            acc[i] += sc[c] * ds[c] * static_cast<float>(vaddvq_s32(vaddq_s32(d0, d1)));
          } else {
            acc[i] += sc[2 * c] * ds[2 * c] * static_cast<float>(vaddvq_s32(d0)) +
                      sc[2 * c + 1] * ds[2 * c + 1] * static_cast<float>(vaddvq_s32(d1));
          }
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

// Unpacks a tile of 4 lanes (weight rows) through the same decoders: 32 weights of a row go to
// their 8 places of the interleaved layout (4 bytes every 16), the scales to their lane.
template <typename F>
void unpack(const uint8_t* w, int64_t rb, int rows, int64_t b0, int64_t b1, const QTile& t, int g) {
  constexpr int kChunks = F::kElems / 32, kSubs = F::kElems / F::kSub;
  const int64_t k4 = t.k / 4, subs = t.k / t.sub;
  uint8_t* ug = t.u + g * k4 * 16;
  float* tsc = t.scale + g * subs * 4;
  float* tof = t.off + g * subs * 4;
  for (int lane = 0; lane < 4; ++lane)
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t k0 = (b - b0) * F::kElems;
      float sc[kSubs] = {}, of[kSubs] = {};
      const uint8_t* p = w + lane * rb + b * F::kBytes;
      if (lane < rows) F::scales(p, sc, of);
      for (int c = 0; c < kChunks; ++c) {
        alignas(16) uint8_t v[32] = {};
        if (lane < rows) {
          int8x16_t w0, w1;
          F::chunk(p, c, w0, w1);
          vst1q_s8(reinterpret_cast<int8_t*>(v), w0);
          vst1q_s8(reinterpret_cast<int8_t*>(v + 16), w1);
        }
        uint8_t* d = ug + (k0 + 32 * c) / 4 * 16 + lane * 4;
        for (int i = 0; i < 8; ++i) __builtin_memcpy(d + 16 * i, v + 4 * i, 4);
      }
      for (int s = 0; s < kSubs; ++s) {
        tsc[(k0 / F::kSub + s) * 4 + lane] = sc[s];
        tof[(k0 / F::kSub + s) * 4 + lane] = of[s];
      }
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

template <typename F>
constexpr void set_format(QuantKernels& q, QSlot slot) {
  q.row_dot[static_cast<int>(slot)] = row_dot<F>;
  q.unpack[static_cast<int>(slot)] = unpack<F>;
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
  set_format<Q8_0>(q, QSlot::q8_0);
  set_format<Q4_0>(q, QSlot::q4_0);
  set_format<Q4_1>(q, QSlot::q4_1);
  set_format<Q5_0>(q, QSlot::q5_0);
  set_format<Q5_1>(q, QSlot::q5_1);
  set_format<Q2_K>(q, QSlot::q2_k);
  set_format<Q3_K>(q, QSlot::q3_k);
  set_format<Q4_K>(q, QSlot::q4_k);
  set_format<Q5_K>(q, QSlot::q5_k);
  set_format<Q6_K>(q, QSlot::q6_k);
  set_format<Q4_Z>(q, QSlot::q4_z);
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
