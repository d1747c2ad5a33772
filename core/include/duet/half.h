// IEEE binary16 and bfloat16 conversions, round-to-nearest-even, with NaN, infinities and
// subnormals handled exactly. Scalar and portable: these are the definitions every backend's
// results are compared against. Bulk converters are here too for host-side data movement.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "duet/dtype.h"
#include "duet/export.h"

namespace duet {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float bf16_to_f32(uint16_t h) {
  return bits_float(static_cast<uint32_t>(h) << 16);
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    // NaN: keep sign and the top payload bits, force a quiet NaN so it cannot become infinity.
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  }
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;  // round to nearest, ties to even; overflow carries into infinity
  return static_cast<uint16_t>(u >> 16);
}

DUET_API float f16_to_f32(uint16_t h);
DUET_API uint16_t f32_to_f16(float f);

// Reads element i of a buffer of type t as double / writes it from double (rounding once).
// For integer types the write rounds toward zero and saturates; NaN becomes 0. Block formats
// read by decoding the element's block (exactly) and are not written element by element (the
// store does nothing; quantize whole blocks with duet/quantize.h).
DUET_API double load_as_double(const void* base, DType t, int64_t i);
DUET_API void store_from_double(void* base, DType t, int64_t i, double v);
DUET_API float load_as_float(const void* base, DType t, int64_t i);
DUET_API void store_from_float(void* base, DType t, int64_t i, float v);

// Converts n contiguous elements. Float to f16/bf16 rounds to nearest even. With a block
// format on either side n is a whole number of blocks: dequantized exactly and rounded once, or
// quantized (duet/quantize.h).
DUET_API void convert(const void* src, DType src_type, void* dst, DType dst_type, int64_t n);

}  // namespace duet
