// Strided-to-strided element conversion: cast, copy, and each part of concat (the destination is
// a slice of the output). S_<dtype> and D_<dtype> pick the source and destination types. Floats
// round to nearest even; float -> int truncates toward zero and saturates, NaN -> 0; int -> float
// goes through f32 as the reference does.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;

#if defined(S_f32)
#define S_STORE float
#define S_FLOAT
#elif defined(S_f16) || defined(S_bf16)
#define S_STORE uint16_t
#define S_FLOAT
#elif defined(S_i8)
#define S_STORE int8_t
#else
#define S_STORE int
#endif

#if defined(D_f32)
#define D_STORE float
#define D_FLOAT
#elif defined(D_f16) || defined(D_bf16)
#define D_STORE uint16_t
#define D_FLOAT
#elif defined(D_i8)
#define D_STORE int8_t
#else
#define D_STORE int
#endif

layout(std430, set = 0, binding = 1) writeonly buffer Dst { D_STORE dst[]; };
layout(std430, set = 0, binding = 2) readonly buffer Src { S_STORE src[]; };

// An int converted to the nearest f32 (ties to even), exactly, whatever the driver's mode.
float int_to_f32(int v) {
  uint a = uint(abs(v));
  if (v == int(0x80000000u)) a = 0x80000000u;
  int msb = findMSB(a);
  float r;
  if (msb <= 23) {
    r = float(a);
  } else {
    uint shift = uint(msb - 23);
    uint mant = a >> shift;
    uint rem = a & ((1u << shift) - 1u);
    uint halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (mant & 1u) != 0u)) mant++;
    r = float(mant) * exp2(float(shift));
  }
  return v < 0 ? -r : r;
}

int f32_to_int(float f, float lo, float hi, int ilo, int ihi) {
  if (isnan(f)) return 0;
  if (f >= hi) return ihi;
  if (f <= lo) return ilo;
  return int(trunc(f));
}

void main() {
  uint n = P.td[0].numel;
  uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x;
  for (uint i = GROUP_INDEX * gl_WorkGroupSize.x + gl_LocalInvocationID.x; i < n; i += stride) {
    uint si = toff(1, i);
    uint o = toff(0, i);
#if (defined(S_f32) && defined(D_f32)) || (defined(S_f16) && defined(D_f16)) || \
    (defined(S_bf16) && defined(D_bf16)) || (defined(S_i8) && defined(D_i8)) || \
    (defined(S_i32) && defined(D_i32))
    dst[o] = src[si];  // a copy moves the bits
#else
    // To f32 (exact from every float type and from i8).
#if defined(S_f32)
    float f = src[si];
#elif defined(S_f16)
    float f = f16_to_f32(uint(src[si]));
#elif defined(S_bf16)
    float f = bf16_to_f32(uint(src[si]));
#elif defined(S_i8)
    int iv = int(src[si]);
    float f = float(iv);
#else
    int iv = src[si];
    float f = int_to_f32(iv);
#endif
    // From f32, or straight between the integer types.
#if defined(D_f32)
    dst[o] = f;
#elif defined(D_f16)
    dst[o] = uint16_t(f32_to_f16(f));
#elif defined(D_bf16)
    dst[o] = uint16_t(f32_to_bf16(f));
#elif defined(D_i8)
#if defined(S_FLOAT)
    dst[o] = int8_t(f32_to_int(f, -128.0, 127.0, -128, 127));
#else
    dst[o] = int8_t(clamp(iv, -128, 127));
#endif
#else
#if defined(S_FLOAT)
    dst[o] = f32_to_int(f, -2147483648.0, 2147483648.0, int(0x80000000u), 0x7fffffff);
#else
    dst[o] = iv;
#endif
#endif
#endif
  }
}
