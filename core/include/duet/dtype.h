// Element types. Every type is described by a block: plain types are blocks of one element, and
// block-quantized weight formats (later) are blocks of many elements sharing a scale. Code that
// sizes buffers goes through dtype_bytes() so those formats fit without changes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "duet/export.h"

namespace duet {

enum class DType : uint8_t { f32, f16, bf16, i8, i32 };
inline constexpr int kNumDTypes = 5;
inline constexpr DType kAllDTypes[kNumDTypes] = {DType::f32, DType::f16, DType::bf16, DType::i8,
                                                 DType::i32};

DUET_API std::string_view dtype_name(DType t);
DUET_API std::optional<DType> parse_dtype(std::string_view name);

// Elements per block and bytes per block (1 and sizeof for the plain types).
DUET_API int64_t dtype_block_elems(DType t);
DUET_API int64_t dtype_block_bytes(DType t);
// Bytes of one element; only meaningful for the plain types (block of one element).
inline size_t dtype_size(DType t) {
  return static_cast<size_t>(dtype_block_bytes(t));
}
// Bytes needed to store n elements.
DUET_API int64_t dtype_bytes(DType t, int64_t n);

DUET_API bool is_float(DType t);    // f32, f16, bf16
DUET_API bool is_integer(DType t);  // i8, i32

// The compute precision of a kernel: the type its multiplications read. Accumulation is always
// f32 (f64 for the reference). f64 exists only as the CPU reference precision.
enum class Precision : uint8_t { f32, f16, bf16, f64 };
DUET_API std::string_view precision_name(Precision p);
DUET_API std::optional<Precision> parse_precision(std::string_view name);
// The storage type a kernel of this precision reads its floating-point inputs in.
DUET_API DType precision_storage(Precision p);
// The precision a floating-point dtype asks for (f32 -> f32, f16 -> f16, bf16 -> bf16).
DUET_API Precision precision_of(DType t);

}  // namespace duet
