#include "duet/dtype.h"

namespace duet {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::i8:
      return "i8";
    case DType::i32:
      return "i32";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType t : kAllDTypes)
    if (dtype_name(t) == name) return t;
  // Common spellings from other frameworks and from safetensors headers.
  if (name == "float32" || name == "F32") return DType::f32;
  if (name == "float16" || name == "half" || name == "F16") return DType::f16;
  if (name == "bfloat16" || name == "BF16") return DType::bf16;
  if (name == "int8" || name == "I8") return DType::i8;
  if (name == "int32" || name == "I32") return DType::i32;
  return std::nullopt;
}

int64_t dtype_block_elems(DType) {
  return 1;
}

int64_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::f32:
      return 4;
    case DType::f16:
      return 2;
    case DType::bf16:
      return 2;
    case DType::i8:
      return 1;
    case DType::i32:
      return 4;
  }
  return 0;
}

int64_t dtype_bytes(DType t, int64_t n) {
  int64_t be = dtype_block_elems(t);
  return (n + be - 1) / be * dtype_block_bytes(t);
}

bool is_float(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16;
}
bool is_integer(DType t) {
  return t == DType::i8 || t == DType::i32;
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

}  // namespace duet
