// Elementwise ops over broadcast, strided inputs; dense output. The op is a specialization
// constant, so each op gets its own pipeline with the other branches folded away.
//
// With VECTOR (variant eltwise_vec_*, used on CPU devices when every tensor is dense and 16-byte
// aligned): each invocation handles one 16-byte texel, 4 f32 or 8 16-bit values, reading the
// inputs through uniform texel buffers (bindings 7, 8) and writing one 16-byte store.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "duet/eltwise.h"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint OP = 0u;  // a DUET_EW_* function code (duet/eltwise.h)

#ifdef VECTOR
#include "texel.glsl"
layout(std430, set = 0, binding = 1) writeonly buffer BufV1 { uvec4 yv[]; };
TEXELS(7, ta)
TEXELS(8, tb)
#else
TENSOR(1, writeonly, y)
TENSOR(2, readonly, a)
TENSOR(3, readonly, b)
#endif

// 1 + erf(z) from erfc(|z|) = t exp(-z^2 + P(t)), t = 1 / (1 + |z|/2) (a Chebyshev fit good to
// 1.2e-7 relative): 2 - erfc(|z|) for z >= 0, erfc(|z|) below, so that the negative side keeps
// its relative precision instead of cancelling.
float one_plus_erf(float z) {
  float a = abs(z);
  float t = 1.0 / (1.0 + 0.5 * a);
  float r = t * exp(-a * a - 1.26551223 +
                    t * (1.00002368 +
                         t * (0.37409196 +
                              t * (0.09678418 +
                                   t * (-0.18628806 +
                                        t * (0.27886807 +
                                             t * (-1.13520398 +
                                                  t * (1.48851587 +
                                                       t * (-0.82215223 + t * 0.17087277)))))))));
  return z >= 0.0 ? 2.0 - r : r;
}

// erf: its Taylor series to x^13 below |x| = 0.5, above it 1 - erfc(|x|) with x's sign (no
// cancellation either side).
float erf_of(float x) {
  float a = abs(x);
  if (a < 0.5) {
    float z = x * x;
    float p = 1.0 / 9360.0;
    p = p * z - 1.0 / 1320.0;
    p = p * z + 1.0 / 216.0;
    p = p * z - 1.0 / 42.0;
    p = p * z + 0.1;
    p = p * z - 1.0 / 3.0;
    p = p * z + 1.0;
    return 1.1283791670955126 * x * p;
  }
  float r = 2.0 - one_plus_erf(a);
  return x < 0.0 ? r - 1.0 : 1.0 - r;
}

// x ^ e as C's pow: a negative base with an integral exponent keeps its sign rule; the squares
// and roots models use are exact operations.
float pow_of(float x, float e) {
  if (e == 2.0) return x * x;
  if (e == 1.0) return x;
  if (e == 0.5) return sqrt(x);
  if (e == -1.0) return 1.0 / x;
  if (e == 0.0) return 1.0;
  float r = exp2(e * log2(abs(x)));
  if (x < 0.0) {
    if (floor(e) != e) return uintBitsToFloat(0x7fc00000u);  // NaN
    if (mod(e, 2.0) == 1.0) r = -r;
  }
  return x == 0.0 ? (e > 0.0 ? 0.0 : uintBitsToFloat(0x7f800000u)) : r;
}

// The inverse and hyperbolic functions from exp, log and sqrt (which drivers give to about an
// ulp), not the driver's own: Vulkan leaves their precision to the driver, and some lower them
// with errors near 1e-4, or cancel near 0. Series only where they converge to f32's precision.

// atan for |t| <= tan(pi/12): its Taylor series to t^17 (the next term is below 2^-32 of t).
float atan_small(float t) {
  float z = t * t;
  float p = -1.0 / 17.0;
  p = p * z + 1.0 / 15.0;
  p = p * z - 1.0 / 13.0;
  p = p * z + 1.0 / 11.0;
  p = p * z - 1.0 / 9.0;
  p = p * z + 1.0 / 7.0;
  p = p * z - 1.0 / 5.0;
  p = p * z + 1.0 / 3.0;
  return t - t * z * p;
}

// atan(x): |x| > 1 as pi/2 - atan(1/|x|) (an infinite x gives pi/2), then above tan(pi/12) as
// pi/6 + atan((sqrt(3) a - 1) / (a + sqrt(3))).
float atan_of(float x) {
  float a = abs(x);
  bool inverted = a > 1.0;
  if (inverted) a = 1.0 / a;
  float r;
  if (a > 0.26794919243112270) {
    r = 0.52359877559829887 + atan_small((1.7320508075688772 * a - 1.0) / (a + 1.7320508075688772));
  } else {
    r = atan_small(a);
  }
  if (inverted) r = 1.5707963267948966 - r;
  return x < 0.0 ? -r : r;
}

// asin(x) = atan(x / sqrt((1 - x)(1 + x))); acos(x) = 2 atan(sqrt((1 - x) / (1 + x))): 1 - x is
// exact where it cancels, and both are exact at -1, 0 and 1 (NaN outside [-1, 1]).
float asin_of(float x) {
  if (abs(x) > 1.0) return uintBitsToFloat(0x7fc00000u);
  return atan_of(x / sqrt((1.0 - x) * (1.0 + x)));
}
float acos_of(float x) {
  if (abs(x) > 1.0) return uintBitsToFloat(0x7fc00000u);
  return 2.0 * atan_of(sqrt((1.0 - x) / (1.0 + x)));
}

// log(1 + u) for u >= -0.5 without the rounding of 1 + u: log(w) * u / (w - 1), w = 1 + u (the
// classic correction; u itself where w rounds to 1).
float log1p_of(float u) {
  float w = 1.0 + u;
  if (w == 1.0) return u;
  float r = log(w) * (u / (w - 1.0));
  return isinf(u) ? u : r;
}

// sinh: its Taylor series to x^15 below 1 (no cancellation of e^x - e^-x near 0), else
// (e^|x| - e^-|x|) / 2 with x's sign.
float sinh_of(float x) {
  float a = abs(x);
  float r;
  if (a < 1.0) {
    float z = a * a;
    float p = 1.0 / 1307674368000.0;
    p = p * z + 1.0 / 6227020800.0;
    p = p * z + 1.0 / 39916800.0;
    p = p * z + 1.0 / 362880.0;
    p = p * z + 1.0 / 5040.0;
    p = p * z + 1.0 / 120.0;
    p = p * z + 1.0 / 6.0;
    r = a + a * z * p;
  } else {
    float e = exp(a);
    r = 0.5 * e - 0.5 / e;
  }
  return x < 0.0 ? -r : r;
}
float cosh_of(float x) {
  float e = exp(abs(x));
  return 0.5 * e + 0.5 / e;
}
// asinh(x) = log1p(|x| + x^2 / (1 + sqrt(1 + x^2))) with x's sign; above 2^60 ln 2 + ln |x| (x^2
// would overflow).
float asinh_of(float x) {
  float a = abs(x);
  float r = a > 1.152921504606847e18 ? 0.69314718055994531 + log(a)
                                     : log1p_of(a + a * a / (1.0 + sqrt(1.0 + a * a)));
  return x < 0.0 ? -r : r;
}
// acosh(x) = log1p((x - 1) + sqrt((x - 1)(x + 1))) (NaN below 1), ln 2 + ln x above 2^60.
float acosh_of(float x) {
  if (x < 1.0) return uintBitsToFloat(0x7fc00000u);
  if (x > 1.152921504606847e18) return 0.69314718055994531 + log(x);
  float d = x - 1.0;
  return log1p_of(d + sqrt(d * (x + 1.0)));
}
// atanh(x) = log1p(2|x| / (1 - |x|)) / 2 with x's sign: infinite at 1, NaN beyond.
float atanh_of(float x) {
  float a = abs(x);
  if (a > 1.0) return uintBitsToFloat(0x7fc00000u);
  float r = a == 1.0 ? uintBitsToFloat(0x7f800000u) : 0.5 * log1p_of(2.0 * a / (1.0 - a));
  return x < 0.0 ? -r : r;
}

// C's fmod, exactly, by long division in binary: y scaled by a power of two to the largest
// multiple not above the remainder r (t <= r < 2t) and subtracted, which is exact (Sterbenz)
// and at least halves r, so at most one step per binade between r and |y|. Not x - y trunc(x/y),
// whose rounded quotient is off by one near integers and off by far more beyond 2^24.
float fmod_of(float x, float y) {
  float ay = abs(y);
  if (isnan(x) || isnan(y) || isinf(x) || ay == 0.0) return uintBitsToFloat(0x7fc00000u);
  float r = abs(x);
  if (isinf(ay)) return x;
  while (r >= ay) {
    int er, ey;
    frexp(r, er);
    frexp(ay, ey);
    float t = ldexp(ay, er - ey);
    if (t > r) t = ldexp(ay, er - ey - 1);
    r -= t;
  }
  return (floatBitsToUint(x) & 0x80000000u) != 0u ? -r : r;  // x's sign, -0 too
}

float apply(float x, float z) {
  switch (OP) {
    case DUET_EW_ADD: return x + z;
    case DUET_EW_SUB: return x - z;
    case DUET_EW_MUL: return x * z;
    case DUET_EW_DIV: return x / z;
    case DUET_EW_SILU_MUL: return x / (1.0 + exp(-x)) * z;
    case DUET_EW_LESS: return x < z ? 1.0 : 0.0;
    case DUET_EW_LESS_EQUAL: return x <= z ? 1.0 : 0.0;
    case DUET_EW_EQUAL: return x == z ? 1.0 : 0.0;
    case DUET_EW_FMOD: return fmod_of(x, z);
    case DUET_EW_SCALE: return x * P.f.x;
    case DUET_EW_SILU: return x / (1.0 + exp(-x));
    case DUET_EW_GELU: return 0.5 * x * one_plus_erf(x * 0.70710678118654752);
    // 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)): no cancellation for negative x.
    case DUET_EW_GELU_TANH: return x / (1.0 + exp(-1.5957691216057307 * (x + 0.044715 * x * x * x)));
    case DUET_EW_RELU: return max(x, 0.0);
    case DUET_EW_EXP: return exp(x);
    case DUET_EW_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case DUET_EW_TANH: return tanh(clamp(x, -10.0, 10.0));  // tanh(10) rounds to 1; exp would overflow
    case DUET_EW_ERF: return erf_of(x);
    case DUET_EW_SQRT: return sqrt(x);
    case DUET_EW_POW: return pow_of(x, P.f.x);
    case DUET_EW_ABS: return abs(x);
    case DUET_EW_LOG: return log(x);
    case DUET_EW_SIN: return sin(x);
    case DUET_EW_COS: return cos(x);
    case DUET_EW_TAN: return tan(x);
    case DUET_EW_ASIN: return asin_of(x);
    case DUET_EW_ACOS: return acos_of(x);
    case DUET_EW_ATAN: return atan_of(x);
    case DUET_EW_SINH: return sinh_of(x);
    case DUET_EW_COSH: return cosh_of(x);
    case DUET_EW_ASINH: return asinh_of(x);
    case DUET_EW_ACOSH: return acosh_of(x);
    case DUET_EW_ATANH: return atanh_of(x);
    default: return uintBitsToFloat(0x7fc00000u);  // never another function: NaN
  }
}

#ifdef VECTOR
void main() {
  uint n = P.td[0].numel / VEC;  // texels
  uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x;
  for (uint i = GROUP_INDEX * gl_WorkGroupSize.x + gl_LocalInvocationID.x; i < n; i += stride) {
    float x[VEC], z[VEC];
    FETCH_VEC(ta, P.td[1].offset + i * VEC, x);
    if (OP < DUET_EW_BINARY_END) {
      FETCH_VEC(tb, P.td[2].offset + i * VEC, z);
    } else {
      [[unroll]] for (uint k = 0u; k < VEC; ++k) z[k] = 0.0;
    }
    [[unroll]] for (uint k = 0u; k < VEC; ++k) x[k] = apply(x[k], z[k]);
    yv[P.td[0].offset / VEC + i] = pack_vec(x);
  }
}
#else
void main() {
  uint n = P.td[0].numel;
  uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x;
  for (uint i = GROUP_INDEX * gl_WorkGroupSize.x + gl_LocalInvocationID.x; i < n; i += stride) {
    float x = LOADF(a[toff(1, i)]);
    float z = OP < DUET_EW_BINARY_END ? LOADF(b[toff(2, i)]) : 0.0;
    y[toff(0, i)] = STOREF(apply(x, z));
  }
}
#endif
