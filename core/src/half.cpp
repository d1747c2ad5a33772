#include "duet/half.h"

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <vector>

#include "duet/quantize.h"

namespace duet {

float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: man * 2^-24 is exact in f32.
    float mag = static_cast<float>(man) * (1.0f / 16777216.0f);
    return bits_float(float_bits(mag) | sign);
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (man << 13));  // inf, or NaN with payload
  return bits_float(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t f32_to_f16(float f) {
  uint32_t x = float_bits(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {
    if (ax == 0x7f800000u) return sign | 0x7c00u;
    return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));  // quiet NaN
  }
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to infinity
  uint32_t fexp = ax >> 23;
  if (fexp >= 113) {
    // Normal half: rebias the exponent, round the 13 dropped mantissa bits to nearest even.
    uint32_t h = ((fexp - 112u) << 10) | ((ax >> 13) & 0x3ffu);
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry moves into the exponent
    return static_cast<uint16_t>(sign | h);
  }
  // Subnormal half (or zero): value = mant * 2^(fexp-150); half units are 2^-24.
  uint32_t shift = 126u - fexp;  // >= 14
  if (shift > 24u) return sign;  // below half the smallest subnormal: rounds to zero
  uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
  uint32_t k = mant >> shift;
  uint32_t rem = mant & ((1u << shift) - 1u);
  uint32_t halfway = 1u << (shift - 1u);
  if (rem > halfway || (rem == halfway && (k & 1u))) ++k;  // may become the smallest normal
  return static_cast<uint16_t>(sign | k);
}

namespace {

template <class I>
I saturate_to(double v) {
  if (std::isnan(v)) return 0;
  double t = std::trunc(v);
  if (t <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (t >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(t);
}

}  // namespace

namespace {

// One element of type t widened to F (double or float); i32 goes through double so that values
// beyond 2^24 round once.
// Element i of an array of T at base, and its store, through memcpy: a tensor may sit at any byte
// offset of a file or a borrowed buffer (a misaligned f32 weight is legal data, not UB).
template <class T>
T load_elem(const void* base, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const std::byte*>(base) + i * static_cast<int64_t>(sizeof(T)),
              sizeof(T));
  return v;
}
template <class T>
void store_elem(void* base, int64_t i, T v) {
  std::memcpy(static_cast<std::byte*>(base) + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

template <class F>
F load_as(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::f32:
      return static_cast<F>(load_elem<float>(base, i));
    case DType::f16:
      return static_cast<F>(f16_to_f32(load_elem<uint16_t>(base, i)));
    case DType::bf16:
      return static_cast<F>(bf16_to_f32(load_elem<uint16_t>(base, i)));
    case DType::i8:
      return static_cast<F>(static_cast<const int8_t*>(base)[i]);
    case DType::i32:
      return static_cast<F>(static_cast<double>(load_elem<int32_t>(base, i)));
    default:
      break;
  }
  // A block format: decode the block holding element i (slow; bulk code uses dequantize()).
  if (!is_quantized(t)) return F(0);
  const int64_t be = dtype_block_elems(t);
  UnpackedBlock u;
  unpack_block(t, static_cast<const std::byte*>(base) + i / be * dtype_block_bytes(t), &u);
  const int e = static_cast<int>(i % be), s = e / dtype_info(t).sub_elems;
  return static_cast<F>(u.scale[s] * (u.q[e] - u.zero[s]) + u.offset[s]);
}

template <class F>
void store_as(void* base, DType t, int64_t i, F v) {
  switch (t) {
    case DType::f32:
      store_elem(base, i, static_cast<float>(v));
      return;
    // From double through f32 first: that can double-round, but only for values within 2^-29
    // relative of a half-way point, far below any tolerance used in the project.
    case DType::f16:
      store_elem(base, i, f32_to_f16(static_cast<float>(v)));
      return;
    case DType::bf16:
      store_elem(base, i, f32_to_bf16(static_cast<float>(v)));
      return;
    case DType::i8:
      static_cast<int8_t*>(base)[i] = saturate_to<int8_t>(v);
      return;
    case DType::i32:
      store_elem(base, i, saturate_to<int32_t>(v));
      return;
    default:
      return;  // block formats are written a block at a time (quantize())
  }
}

}  // namespace

double load_as_double(const void* base, DType t, int64_t i) {
  return load_as<double>(base, t, i);
}
float load_as_float(const void* base, DType t, int64_t i) {
  return load_as<float>(base, t, i);
}
void store_from_double(void* base, DType t, int64_t i, double v) {
  store_as(base, t, i, v);
}
void store_from_float(void* base, DType t, int64_t i, float v) {
  store_as(base, t, i, v);
}

void convert(const void* src, DType src_type, void* dst, DType dst_type, int64_t n) {
  if (src_type == dst_type) {
    std::memcpy(dst, src, static_cast<size_t>(dtype_bytes(src_type, n)));
    return;
  }
  if (is_quantized(src_type)) {
    // Whole blocks, dequantized exactly and rounded once to the destination.
    std::vector<double> v(static_cast<size_t>(n));
    dequantize(src_type, src, v.data(), n);
    for (int64_t i = 0; i < n; ++i) store_from_double(dst, dst_type, i, v[static_cast<size_t>(i)]);
    return;
  }
  if (is_quantized(dst_type)) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = load_as_float(src, src_type, i);
    (void)quantize(dst_type, v.data(), dst, n);  // non-finite values leave the blocks unspecified
    return;
  }
  if (src_type == DType::i32 || dst_type == DType::i32) {
    // i32 does not fit f32 exactly beyond 2^24: go through double.
    for (int64_t i = 0; i < n; ++i)
      store_from_double(dst, dst_type, i, load_as_double(src, src_type, i));
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    store_from_float(dst, dst_type, i, load_as_float(src, src_type, i));
}

}  // namespace duet
