#include "duet/dtype.h"

#include "duet/block_layout.h"

namespace duet {

namespace {

// clang-format off
constexpr DTypeInfo kInfos[] = {
    {DType::f32,  "f32",  1, 4, 1, 0,  "IEEE binary32"},
    {DType::f16,  "f16",  1, 2, 1, 1,  "IEEE binary16"},
    {DType::bf16, "bf16", 1, 2, 1, 30, "bfloat16"},
    {DType::i8,   "i8",   1, 1, 1, 24, "int8"},
    {DType::i32,  "i32",  1, 4, 1, 26, "int32"},
    {DType::q8_0, "q8_0", DUET_Q8_0_ELEMS, DUET_Q8_0_BYTES, 32, 8,
     "32 int8 with an f16 scale (8.5 bits per weight)"},
    {DType::q4_0, "q4_0", DUET_Q4_0_ELEMS, DUET_Q4_0_BYTES, 32, 2,
     "32 4-bit ints offset by 8 with an f16 scale (4.5 bits per weight)"},
    {DType::q4_1, "q4_1", DUET_Q4_1_ELEMS, DUET_Q4_1_BYTES, 32, 3,
     "32 4-bit ints with an f16 scale and f16 min (5 bits per weight)"},
    {DType::q5_0, "q5_0", DUET_Q5_0_ELEMS, DUET_Q5_0_BYTES, 32, 6,
     "32 5-bit ints offset by 16 with an f16 scale (5.5 bits per weight)"},
    {DType::q5_1, "q5_1", DUET_Q5_1_ELEMS, DUET_Q5_1_BYTES, 32, 7,
     "32 5-bit ints with an f16 scale and f16 min (6 bits per weight)"},
    {DType::q2_k, "q2_k", DUET_Q2_K_ELEMS, DUET_Q2_K_BYTES, 16, 10,
     "256 2-bit ints, 4-bit scales and mins per 16, f16 super-scales (2.625 bits per weight)"},
    {DType::q3_k, "q3_k", DUET_Q3_K_ELEMS, DUET_Q3_K_BYTES, 16, 11,
     "256 3-bit ints, 6-bit scales per 16, an f16 super-scale (3.4375 bits per weight)"},
    {DType::q4_k, "q4_k", DUET_Q4_K_ELEMS, DUET_Q4_K_BYTES, 32, 12,
     "256 4-bit ints, 6-bit scales and mins per 32, f16 super-scales (4.5 bits per weight)"},
    {DType::q5_k, "q5_k", DUET_Q5_K_ELEMS, DUET_Q5_K_BYTES, 32, 13,
     "256 5-bit ints, 6-bit scales and mins per 32, f16 super-scales (5.5 bits per weight)"},
    {DType::q6_k, "q6_k", DUET_Q6_K_ELEMS, DUET_Q6_K_BYTES, 16, 14,
     "256 6-bit ints offset by 32, int8 scales per 16, an f16 super-scale (6.5625 bits per weight)"},
    {DType::q4_z, "q4_z", DUET_Q4_Z_ELEMS, DUET_Q4_Z_BYTES, 32, -1,
     "32 4-bit ints with an f16 scale and a 4-bit zero point (5 bits per weight; GPTQ, AWQ)"},
};
// clang-format on

static_assert(std::size(kInfos) == static_cast<size_t>(kNumDTypes));
constexpr bool in_order() {
  for (size_t i = 0; i < std::size(kInfos); ++i)
    if (static_cast<size_t>(kInfos[i].dtype) != i) return false;
  return true;
}
static_assert(in_order(), "kInfos lists every dtype in DType order");

}  // namespace

const DTypeInfo& dtype_info(DType t) {
  const size_t i = static_cast<size_t>(t);
  return kInfos[i < std::size(kInfos) ? i : 0];
}

std::span<const DTypeInfo> all_dtype_infos() {
  return kInfos;
}

std::string_view dtype_name(DType t) {
  const size_t i = static_cast<size_t>(t);
  return i < std::size(kInfos) ? kInfos[i].name : std::string_view("?");
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (const DTypeInfo& d : kInfos)
    if (d.name == name) return d.dtype;
  // Common spellings from other frameworks and from safetensors headers.
  if (name == "float32" || name == "F32") return DType::f32;
  if (name == "float16" || name == "half" || name == "F16") return DType::f16;
  if (name == "bfloat16" || name == "BF16") return DType::bf16;
  if (name == "int8" || name == "I8") return DType::i8;
  if (name == "int32" || name == "I32") return DType::i32;
  // ggml's upper-case K ("q4_K"), as llama.cpp prints it.
  if (name.size() == 4 && name[0] == 'q' && name[2] == '_' && name[3] == 'K') {
    const char lower[] = {'q', name[1], '_', 'k'};
    return parse_dtype(std::string_view(lower, 4));
  }
  return std::nullopt;
}

std::optional<DType> dtype_of_ggml_type(int ggml_type) {
  for (const DTypeInfo& d : kInfos)
    if (d.ggml_type >= 0 && d.ggml_type == ggml_type) return d.dtype;
  return std::nullopt;
}

int64_t dtype_block_elems(DType t) {
  return dtype_info(t).block_elems;
}

int64_t dtype_block_bytes(DType t) {
  return dtype_info(t).block_bytes;
}

int64_t dtype_bytes(DType t, int64_t n) {
  const DTypeInfo& d = dtype_info(t);
  return (n + d.block_elems - 1) / d.block_elems * d.block_bytes;
}

bool is_float(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16;
}
bool is_integer(DType t) {
  return t == DType::i8 || t == DType::i32;
}
bool is_quantized(DType t) {
  return dtype_info(t).block_elems > 1;
}

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::f32:
      return "f32";
    case Precision::f16:
      return "f16";
    case Precision::bf16:
      return "bf16";
    case Precision::f64:
      return "f64";
  }
  return "?";
}

std::optional<Precision> parse_precision(std::string_view name) {
  for (Precision p : {Precision::f32, Precision::f16, Precision::bf16, Precision::f64})
    if (precision_name(p) == name) return p;
  return std::nullopt;
}

DType precision_storage(Precision p) {
  switch (p) {
    case Precision::f16:
      return DType::f16;
    case Precision::bf16:
      return DType::bf16;
    default:
      return DType::f32;
  }
}

Precision precision_of(DType t) {
  switch (t) {
    case DType::f16:
      return Precision::f16;
    case DType::bf16:
      return Precision::bf16;
    default:
      return Precision::f32;
  }
}

int significant_bits(Precision p) {
  switch (p) {
    case Precision::bf16:
      return 8;
    case Precision::f16:
      return 11;
    case Precision::f32:
      return 24;
    case Precision::f64:
      break;
  }
  return 53;
}

namespace {
// Significand bits and exponent bits of what a precision multiplies.
struct Format {
  int significand = 0, exponent = 0;
};
Format format_of(Precision p) {
  switch (p) {
    case Precision::f64:
      return {52, 11};
    case Precision::f32:
      return {23, 8};
    case Precision::f16:
      return {10, 5};
    case Precision::bf16:
      return {7, 8};
  }
  return {};
}
}  // namespace

bool covers(Precision p, Precision floor) {
  const Format a = format_of(p), b = format_of(floor);
  return a.significand >= b.significand && a.exponent >= b.exponent;
}

bool holds(DType storage, DType value) {
  if (storage == value) return true;
  return is_float(storage) && is_float(value) && covers(precision_of(storage), precision_of(value));
}

}  // namespace duet
