// 64-bit ARM kernels (Advanced SIMD, which every ARMv8-A CPU has, so they need no flag and no
// run-time check): 4-lane float32x4_t vectors, fused multiply-add, and f16 widened by the
// base ISA's fcvtl. Register tile 8 x 8: sixteen accumulators of the 32 vector registers.
#include <arm_neon.h>

#include "kernels/kernels.h"

namespace duet::cpu::kernels::neon {
namespace {

using V = float32x4_t;
constexpr int W = 4;
constexpr Isa kIsa = Isa::neon;
constexpr int kMR = 8, kNV = 2;
constexpr int kKC = 256, kMC = 64, kNC = 512;
constexpr int kGemvAcc = 16;  // accumulators of the decode kernels (half the register file)

inline V vzero() {
  return vdupq_n_f32(0.0f);
}
inline V vset1(float x) {
  return vdupq_n_f32(x);
}
inline V vload(const float* p) {
  return vld1q_f32(p);
}
inline void vstore(float* p, V v) {
  vst1q_f32(p, v);
}
inline V vload_n(const float* p, int n) {
  float t[4] = {0, 0, 0, 0};
  for (int i = 0; i < n; ++i) t[i] = p[i];
  return vld1q_f32(t);
}
inline void vstore_n(float* p, V v, int n) {
  float t[4];
  vst1q_f32(t, v);
  for (int i = 0; i < n; ++i) p[i] = t[i];
}
inline V vadd(V a, V b) {
  return vaddq_f32(a, b);
}
inline V vsub(V a, V b) {
  return vsubq_f32(a, b);
}
inline V vdiv(V a, V b) {
  return vdivq_f32(a, b);
}
inline V vmul(V a, V b) {
  return vmulq_f32(a, b);
}
inline V vmax(V a, V b) {
  return vmaxq_f32(a, b);
}
inline V vsqrt(V a) {
  return vsqrtq_f32(a);
}
inline V vmin(V a, V b) {
  return vminq_f32(a, b);
}
inline V vfma(V a, V b, V c) {
  return vfmaq_f32(c, a, b);
}
inline float vhsum(V v) {
  return vaddvq_f32(v);
}
inline void vhsum4(V a, V b, V c, V d, float* out) {
  vst1q_f32(out, vpaddq_f32(vpaddq_f32(a, b), vpaddq_f32(c, d)));
}
inline float vhmax(V v) {
  return vmaxvq_f32(v);
}
inline V vround(V x) {
  return vrndnq_f32(x);
}
inline V vpow2i(V n) {
  const int32x4_t e = vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127));
  return vreinterpretq_f32_s32(vshlq_n_s32(e, 23));
}
inline V vldexp(V p, V n) {
  return vmul(p, vpow2i(vmin(n, vset1(127.0f))));
}
inline V vzero_below(V x, float t, V r) {
  return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(r), vcltq_f32(x, vdupq_n_f32(t))));
}
inline V vblend_eq(V x, V t, V a, V b) {
  return vbslq_f32(vceqq_f32(x, t), a, b);
}

#include "kernels/half_scalar.inc"

// 4 f16 or bf16 values widened in registers for arithmetic (fcvtl quiets signalling NaNs,
// which no arithmetic result can tell apart).
inline V vload_h(const uint16_t* p) {
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}
inline V vload_b(const uint16_t* p) {
  return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}

// f16 -> f32 by fcvtl; NaN lanes are rebuilt in integers because fcvtl quiets signalling NaNs
// and the scalar definition keeps the payload as it is.
void f16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const uint16x4_t h = vld1_u16(src + i);
    float32x4_t f = vcvt_f32_f16(vreinterpret_f16_u16(h));
    const uint32x4_t w = vmovl_u16(h);
    const uint32x4_t nan = vcgtq_u32(vandq_u32(w, vdupq_n_u32(0x7fff)), vdupq_n_u32(0x7c00));
    if (vmaxvq_u32(nan)) {
      const uint32x4_t bits =
          vorrq_u32(vorrq_u32(vshlq_n_u32(vandq_u32(w, vdupq_n_u32(0x8000)), 16),
                              vshlq_n_u32(vandq_u32(w, vdupq_n_u32(0x3ff)), 13)),
                    vdupq_n_u32(0x7f800000));
      f = vbslq_f32(nan, vreinterpretq_f32_u32(bits), f);
    }
    vst1q_f32(dst + i, f);
  }
  for (; i < n; ++i) dst[i] = h2f(src[i]);
}

void bf16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    vst1q_f32(dst + i, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(src + i), 16)));
  for (; i < n; ++i) dst[i] = b2f(src[i]);
}

// f32 -> f16 by fcvtn (round to nearest even, as the scalar conversion) where no lane is NaN;
// NaN lanes go through the scalar definition (fcvtn quiets and may change the payload).
void f32_to_f16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t f = vld1q_f32(src + i);
    if (vminvq_u32(vceqq_f32(f, f)) == 0) {
      for (int j = 0; j < 4; ++j) dst[i + j] = f2h(src[i + j]);
      continue;
    }
    vst1_u16(dst + i, vreinterpret_u16_f16(vcvt_f16_f32(f)));
  }
  for (; i < n; ++i) dst[i] = f2h(src[i]);
}

void f32_to_bf16(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f2b(src[i]);
}

}  // namespace

#include "kernels/impl.inc"

}  // namespace duet::cpu::kernels::neon

namespace duet::cpu::kernels {
const Kernels& neon_kernels() {
  return neon::kTable;
}
}  // namespace duet::cpu::kernels
