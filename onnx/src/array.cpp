#include "array.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "duet/half.h"

namespace duet::onnx_import {

namespace {

size_t z(int64_t i) {
  return static_cast<size_t>(i);
}

template <class T>
T load(const std::string& b, int64_t i) {
  T v;
  std::memcpy(&v, b.data() + z(i) * sizeof(T), sizeof(T));
  return v;
}

template <class T>
void store(std::string& b, int64_t i, T v) {
  std::memcpy(b.data() + z(i) * sizeof(T), &v, sizeof(T));
}

// Float to integer as ONNX Cast does it: truncation toward zero; out of range and NaN saturate
// here (the standard leaves them undefined).
int64_t truncate(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (v <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

}  // namespace

std::string elem_name(int elem) {
  switch (elem) {
    case kFloat:
      return "float";
    case kUint8:
      return "uint8";
    case kInt8:
      return "int8";
    case kUint16:
      return "uint16";
    case kInt16:
      return "int16";
    case kInt32:
      return "int32";
    case kInt64:
      return "int64";
    case kString:
      return "string";
    case kBool:
      return "bool";
    case kFloat16:
      return "float16";
    case kDouble:
      return "double";
    case kUint32:
      return "uint32";
    case kUint64:
      return "uint64";
    case kComplex64:
      return "complex64";
    case kComplex128:
      return "complex128";
    case kBfloat16:
      return "bfloat16";
    default:
      return "type " + std::to_string(elem);
  }
}

int elem_size(int elem) {
  switch (elem) {
    case kUint8:
    case kInt8:
    case kBool:
      return 1;
    case kUint16:
    case kInt16:
    case kFloat16:
    case kBfloat16:
      return 2;
    case kFloat:
    case kInt32:
    case kUint32:
      return 4;
    case kInt64:
    case kDouble:
    case kUint64:
      return 8;
    default:
      return 0;
  }
}

bool elem_is_float(int elem) {
  return elem == kFloat || elem == kFloat16 || elem == kBfloat16 || elem == kDouble;
}

Result<DType> runtime_dtype(int elem) {
  switch (elem) {
    case kFloat:
      return DType::f32;
    case kFloat16:
      return DType::f16;
    case kBfloat16:
      return DType::bf16;
    case kInt8:
    case kBool:  // 0 or 1 in one byte, as ONNX stores it
      return DType::i8;
    case kInt32:
    case kInt64:
      return DType::i32;
    case kDouble:
      return Status(Code::unsupported, "double tensors: duet computes in f32, f16 and bf16");
    default:
      return Status(Code::unsupported,
                    elem_name(elem) +
                        " tensors: duet holds float32/16, bfloat16, int8 and int32 "
                        "(int64 converted) at run time");
  }
}

int elem_of(DType t) {
  switch (t) {
    case DType::f32:
      return kFloat;
    case DType::f16:
      return kFloat16;
    case DType::bf16:
      return kBfloat16;
    case DType::i8:
      return kInt8;
    case DType::i32:
      return kInt32;
    default:
      break;  // block formats have no ONNX element type
  }
  return kUndefined;
}

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

Result<int64_t> count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return Status(Code::invalid_argument, "negative dimension in " + dims_str(dims));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      return Status(Code::invalid_argument, "element count of " + dims_str(dims) + " overflows");
    n *= d;
  }
  return n;
}

Result<Array> Array::from_bytes(int elem, std::vector<int64_t> dims, std::string bytes) {
  const int es = elem_size(elem);
  if (es == 0) return Status(Code::unsupported, elem_name(elem) + " tensors are not read");
  DUET_ASSIGN_OR_RETURN(int64_t n, count(dims));
  if (n > static_cast<int64_t>(bytes.size()) / es || n * es != static_cast<int64_t>(bytes.size()))
    return Status(Code::parse_error, elem_name(elem) + dims_str(dims) + " needs " +
                                         std::to_string(n) + " x " + std::to_string(es) +
                                         " bytes, the data has " + std::to_string(bytes.size()));
  Array a;
  a.elem_ = elem;
  a.dims_ = std::move(dims);
  a.numel_ = n;
  a.bytes_ = std::move(bytes);
  return a;
}

Array Array::of_ints(int elem, std::vector<int64_t> dims, const std::vector<int64_t>& values) {
  Array a;
  a.elem_ = elem;
  a.dims_ = std::move(dims);
  a.numel_ = static_cast<int64_t>(values.size());
  a.bytes_.assign(values.size() * z(elem_size(elem)), '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t v = values[i];
    const auto k = static_cast<int64_t>(i);
    switch (elem) {
      case kInt64:
        store<int64_t>(a.bytes_, k, v);
        break;
      case kInt32:
        store<int32_t>(a.bytes_, k, static_cast<int32_t>(v));
        break;
      case kInt16:
        store<int16_t>(a.bytes_, k, static_cast<int16_t>(v));
        break;
      case kInt8:
        store<int8_t>(a.bytes_, k, static_cast<int8_t>(v));
        break;
      case kUint8:
        store<uint8_t>(a.bytes_, k, static_cast<uint8_t>(v));
        break;
      case kUint16:
        store<uint16_t>(a.bytes_, k, static_cast<uint16_t>(v));
        break;
      case kUint32:
        store<uint32_t>(a.bytes_, k, static_cast<uint32_t>(v));
        break;
      case kUint64:
        store<uint64_t>(a.bytes_, k, static_cast<uint64_t>(v));
        break;
      case kBool:
        store<uint8_t>(a.bytes_, k, v != 0);
        break;
      default:
        return of_reals(elem, a.dims_, std::vector<double>(values.begin(), values.end()));
    }
  }
  return a;
}

Array Array::of_reals(int elem, std::vector<int64_t> dims, const std::vector<double>& values) {
  if (!elem_is_float(elem)) {
    std::vector<int64_t> ints(values.size());
    for (size_t i = 0; i < values.size(); ++i) ints[i] = truncate(values[i]);
    return of_ints(elem, std::move(dims), ints);
  }
  Array a;
  a.elem_ = elem;
  a.dims_ = std::move(dims);
  a.numel_ = static_cast<int64_t>(values.size());
  a.bytes_.assign(values.size() * z(elem_size(elem)), '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    const auto k = static_cast<int64_t>(i);
    const double v = values[i];
    switch (elem) {
      case kFloat:
        store<float>(a.bytes_, k, static_cast<float>(v));
        break;
      case kDouble:
        store<double>(a.bytes_, k, v);
        break;
      case kFloat16:
        store<uint16_t>(a.bytes_, k, f32_to_f16(static_cast<float>(v)));
        break;
      default:
        store<uint16_t>(a.bytes_, k, f32_to_bf16(static_cast<float>(v)));
        break;
    }
  }
  return a;
}

int64_t Array::int_at(int64_t i) const {
  switch (elem_) {
    case kInt64:
      return load<int64_t>(bytes_, i);
    case kInt32:
      return load<int32_t>(bytes_, i);
    case kInt16:
      return load<int16_t>(bytes_, i);
    case kInt8:
      return load<int8_t>(bytes_, i);
    case kUint8:
    case kBool:
      return load<uint8_t>(bytes_, i);
    case kUint16:
      return load<uint16_t>(bytes_, i);
    case kUint32:
      return load<uint32_t>(bytes_, i);
    case kUint64:
      return static_cast<int64_t>(load<uint64_t>(bytes_, i));
    default:
      return truncate(real_at(i));
  }
}

double Array::real_at(int64_t i) const {
  switch (elem_) {
    case kFloat:
      return load<float>(bytes_, i);
    case kDouble:
      return load<double>(bytes_, i);
    case kFloat16:
      return f16_to_f32(load<uint16_t>(bytes_, i));
    case kBfloat16:
      return bf16_to_f32(load<uint16_t>(bytes_, i));
    case kUint64:
      return static_cast<double>(load<uint64_t>(bytes_, i));
    default:
      return static_cast<double>(int_at(i));
  }
}

std::vector<int64_t> Array::ints() const {
  std::vector<int64_t> v(z(numel_));
  for (int64_t i = 0; i < numel_; ++i) v[z(i)] = int_at(i);
  return v;
}

std::vector<double> Array::reals() const {
  std::vector<double> v(z(numel_));
  for (int64_t i = 0; i < numel_; ++i) v[z(i)] = real_at(i);
  return v;
}

Array Array::reshaped(std::vector<int64_t> dims) const {
  Array a = *this;
  a.dims_ = std::move(dims);
  return a;
}

Array Array::cast(int to) const {
  if (to == elem_) return *this;
  if (to == kBool) {
    std::vector<int64_t> v(z(numel_));
    for (int64_t i = 0; i < numel_; ++i) v[z(i)] = real_at(i) != 0.0;
    return of_ints(to, dims_, v);
  }
  if (elem_is_float(to)) return of_reals(to, dims_, reals());
  if (elem_is_float(elem_)) {
    std::vector<int64_t> v(z(numel_));
    for (int64_t i = 0; i < numel_; ++i) v[z(i)] = truncate(real_at(i));
    return of_ints(to, dims_, v);
  }
  return of_ints(to, dims_, ints());
}

Result<DType> Array::host_dtype(std::string_view name) const {
  auto fail = [&](const std::string& why) {
    return Status(Code::unsupported, "tensor '" + std::string(name) + "' (" + elem_name(elem_) +
                                         dims_str(dims_) + "): " + why);
  };
  auto dtype = runtime_dtype(elem_);
  if (!dtype.ok()) return fail(dtype.status().message());
  if (dims_.size() > static_cast<size_t>(kMaxRank))
    return fail("duet tensors have rank <= " + std::to_string(kMaxRank));
  if (numel_ == 0) return fail("duet tensors have no zero-sized dimensions");
  if (elem_ == kInt64)
    for (int64_t i = 0; i < numel_; ++i) {
      const int64_t v = load<int64_t>(bytes_, i);
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
        return Status(Code::invalid_argument, "tensor '" + std::string(name) + "': int64 value " +
                                                  std::to_string(v) + " at element " +
                                                  std::to_string(i) +
                                                  " does not fit the int32 duet holds it in");
    }
  return *dtype;
}

Result<HostTensor> Array::to_host(std::string_view name) const {
  DUET_ASSIGN_OR_RETURN(DType dtype, host_dtype(name));
  HostTensor t = HostTensor::empty(dtype, dims_);
  if (elem_ == kInt64) {
    auto* out = t.data<int32_t>();
    for (int64_t i = 0; i < numel_; ++i) out[i] = static_cast<int32_t>(load<int64_t>(bytes_, i));
  } else if (elem_ == kBool) {
    auto* out = t.data<int8_t>();
    for (int64_t i = 0; i < numel_; ++i) out[i] = bytes_[static_cast<size_t>(i)] != 0 ? 1 : 0;
  } else {
    std::memcpy(t.storage(), bytes_.data(), bytes_.size());
  }
  return t;
}

}  // namespace duet::onnx_import
