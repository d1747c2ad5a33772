// Element loads and stores for every storage dtype, in plain integer and float C++ shared by the
// GPU and the emulator builds, so both round exactly as the CPU reference does (duet/half.h):
// f32 -> f16/bf16 round to nearest even; casts to integers truncate, saturate and map NaN to 0.
// No bf16 instruction is involved (bf16 <-> f32 is bit manipulation), so the generic kernels
// compile for sm_75 without any.
#pragma once

#include <cstdint>
#include <cstring>

#include "device/params.h"
#include "device/prim.h"

DUET_DEV_BEGIN

DUET_HD uint32_t fbits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
DUET_HD float ffrom(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

DUET_HD float h2f(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0) return ffrom(fbits(static_cast<float>(man) * (1.0f / 16777216.0f)) | sign);
  if (exp == 31) return ffrom(sign | 0x7f800000u | (man << 13));
  return ffrom(sign | ((exp + 112u) << 23) | (man << 13));
}

DUET_HD uint16_t f2h(float f) {
  const uint32_t x = fbits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {
    if (ax == 0x7f800000u) return sign | 0x7c00u;
    return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  }
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to infinity
  const uint32_t fexp = ax >> 23;
  if (fexp >= 113) {
    uint32_t h = ((fexp - 112u) << 10) | ((ax >> 13) & 0x3ffu);
    const uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  const uint32_t shift = 126u - fexp;
  if (shift > 24u) return sign;
  const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
  uint32_t k = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
  if (rem > halfway || (rem == halfway && (k & 1u))) ++k;
  return static_cast<uint16_t>(sign | k);
}

DUET_HD float b2f(uint16_t h) {
  return ffrom(static_cast<uint32_t>(h) << 16);
}

DUET_HD uint16_t f2b(float f) {
  uint32_t u = fbits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// The 16-bit tensor-core storage types.
DUET_HD float to_f32(uint16_t v, F16) {
  return h2f(v);
}
DUET_HD float to_f32(uint16_t v, Bf16) {
  return b2f(v);
}

DUET_HD float load_f32(const void* p, Elt t, int64_t i) {
  switch (t) {
    case Elt::f32:
      return static_cast<const float*>(p)[i];
    case Elt::f16:
      return h2f(static_cast<const uint16_t*>(p)[i]);
    case Elt::bf16:
      return b2f(static_cast<const uint16_t*>(p)[i]);
    case Elt::i8:
      return static_cast<float>(static_cast<const int8_t*>(p)[i]);
    case Elt::i32:
      return static_cast<float>(static_cast<const int32_t*>(p)[i]);
  }
  return 0.0f;
}

// Exact for every dtype (casts read through this).
DUET_HD double load_f64(const void* p, Elt t, int64_t i) {
  switch (t) {
    case Elt::i32:
      return static_cast<double>(static_cast<const int32_t*>(p)[i]);
    default:
      return static_cast<double>(load_f32(p, t, i));
  }
}

template <class I>
DUET_HD I saturate(double v, double lo, double hi) {
  if (v != v) return 0;  // NaN
  if (v <= lo) return static_cast<I>(lo);
  if (v >= hi) return static_cast<I>(hi);
  return static_cast<I>(v);  // truncates toward zero
}

// As the reference's store_from_double: floats through f32 (one rounding to f32, then to the
// 16-bit type), integers truncated and saturated.
DUET_HD void store_f64(void* p, Elt t, int64_t i, double v) {
  switch (t) {
    case Elt::f32:
      static_cast<float*>(p)[i] = static_cast<float>(v);
      return;
    case Elt::f16:
      static_cast<uint16_t*>(p)[i] = f2h(static_cast<float>(v));
      return;
    case Elt::bf16:
      static_cast<uint16_t*>(p)[i] = f2b(static_cast<float>(v));
      return;
    case Elt::i8:
      static_cast<int8_t*>(p)[i] = saturate<int8_t>(v, -128.0, 127.0);
      return;
    case Elt::i32:
      static_cast<int32_t*>(p)[i] = saturate<int32_t>(v, -2147483648.0, 2147483647.0);
      return;
  }
}

DUET_HD void store_f32(void* p, Elt t, int64_t i, float v) {
  switch (t) {
    case Elt::f32:
      static_cast<float*>(p)[i] = v;
      return;
    case Elt::f16:
      static_cast<uint16_t*>(p)[i] = f2h(v);
      return;
    case Elt::bf16:
      static_cast<uint16_t*>(p)[i] = f2b(v);
      return;
    default:
      store_f64(p, t, i, static_cast<double>(v));
      return;
  }
}

// Bit-exact copy of one element (copy and concat keep NaN payloads).
DUET_HD void copy_elem(void* dst, int64_t di, const void* src, int64_t si, int bytes) {
  memcpy(static_cast<unsigned char*>(dst) + di * bytes,
         static_cast<const unsigned char*>(src) + si * bytes, static_cast<size_t>(bytes));
}

// The storage offset of row-major linear index `i` of `shape` in a view with those dims.
DUET_HD int64_t offset_of(const Strided& v, const int64_t* shape, int64_t i) {
  int64_t off = 0;
  for (int d = 3; d >= 0; --d) {
    const int64_t n = shape[d];
    const int64_t idx = n == 1 ? 0 : i % n;
    i = n == 1 ? i : i / n;
    off += idx * v.stride[d];
  }
  return off;
}

// Whether v viewed with `shape` is dense and row-major: element i is at storage offset i, so a
// kernel can skip offset_of's divisions (most operands of element-wise ops and copies).
DUET_HD bool dense_in(const Strided& v, const int64_t* shape) {
  int64_t want = 1;
  for (int d = 3; d >= 0; --d) {
    if (shape[d] != 1 && v.stride[d] != want) return false;
    want *= shape[d];
  }
  return true;
}

DUET_HD int elt_bytes(Elt t) {
  return t == Elt::f32 || t == Elt::i32 ? 4 : t == Elt::i8 ? 1 : 2;
}

DUET_DEV_END
