// Element types. Every type is described by a block: plain types are blocks of one element, and
// the block-quantized weight formats are blocks of many elements sharing scales (byte layouts in
// duet/block_layout.h, quantization and dequantization in duet/quantize.h). Code that sizes
// buffers goes through dtype_bytes(); the facts of every type live in one table (dtype_info).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "duet/export.h"

namespace duet {

enum class DType : uint8_t {
  // Element types.
  f32,
  f16,
  bf16,
  i8,
  i32,
  // Block-quantized weight formats: ggml's (as GGUF stores them), then duet's own.
  q8_0,
  q4_0,
  q4_1,
  q5_0,
  q5_1,
  q2_k,
  q3_k,
  q4_k,
  q5_k,
  q6_k,
  q4_z,  // int4 with an f16 scale and an integer zero point per 32: GPTQ and AWQ, exactly
};
inline constexpr int kNumDTypes = static_cast<int>(DType::q4_z) + 1;
inline constexpr DType kElementDTypes[] = {DType::f32, DType::f16, DType::bf16, DType::i8,
                                           DType::i32};
inline constexpr DType kQuantizedDTypes[] = {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0,
                                             DType::q5_1, DType::q2_k, DType::q3_k, DType::q4_k,
                                             DType::q5_k, DType::q6_k, DType::q4_z};

// The facts of one dtype.
struct DUET_API DTypeInfo {
  DType dtype;
  std::string_view name;  // as in JSON and on the command line: "f32", "q4_k"
  int64_t block_elems;    // 1 for element types
  int64_t block_bytes;
  int sub_elems;          // elements sharing one scale (quantized formats; else 1)
  int ggml_type;          // the ggml / GGUF type id, -1 where ggml has none
  std::string_view what;  // one line for listings and docs
};
DUET_API const DTypeInfo& dtype_info(DType t);
DUET_API std::span<const DTypeInfo> all_dtype_infos();  // in DType order

DUET_API std::string_view dtype_name(DType t);
DUET_API std::optional<DType> parse_dtype(std::string_view name);
// The dtype of a ggml / GGUF type id, when duet has it.
DUET_API std::optional<DType> dtype_of_ggml_type(int ggml_type);

// Elements per block and bytes per block (1 and sizeof for the element types).
DUET_API int64_t dtype_block_elems(DType t);
DUET_API int64_t dtype_block_bytes(DType t);
// Bytes of one element; only meaningful for the element types (block of one element).
inline size_t dtype_size(DType t) {
  return static_cast<size_t>(dtype_block_bytes(t));
}
// Bytes needed to store n elements (whole blocks).
DUET_API int64_t dtype_bytes(DType t, int64_t n);

DUET_API bool is_float(DType t);      // f32, f16, bf16
DUET_API bool is_integer(DType t);    // i8, i32
DUET_API bool is_quantized(DType t);  // the block formats

// The compute precision of a kernel: the type its multiplications read. Accumulation is always
// f32 (f64 for the reference). f64 exists only as the CPU reference precision.
enum class Precision : uint8_t { f32, f16, bf16, f64 };
DUET_API std::string_view precision_name(Precision p);
DUET_API std::optional<Precision> parse_precision(std::string_view name);
// The storage type a kernel of this precision reads its floating-point inputs in.
DUET_API DType precision_storage(Precision p);
// The precision a floating-point dtype asks for (f32 -> f32, f16 -> f16, bf16 -> bf16).
DUET_API Precision precision_of(DType t);
// Significant bits of the values a kernel of this precision multiplies (bf16 8, f16 11, f32 24,
// f64 53): how precisions order (bf16 keeps f32's range, not f16's bits).
DUET_API int significant_bits(Precision p);

// Whether computing in `p` keeps everything `floor` keeps: at least its significand bits and its
// exponent range (f64 >= f32 >= f16 and bf16; f16 and bf16 do not cover each other: f16 has the
// bits, bf16 the range). The planner treats the precision an op asks for as a floor.
DUET_API bool covers(Precision p, Precision floor);
// Whether storing a value of dtype `value` as `storage` is exact (f32 holds f16 and bf16; every
// dtype holds itself).
DUET_API bool holds(DType storage, DType value);

}  // namespace duet
