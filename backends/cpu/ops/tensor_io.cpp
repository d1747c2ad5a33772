#include "ops/tensor_io.h"

#include <cstring>

#include "duet/half.h"

namespace duet::cpu {

namespace {
size_t u(int64_t i) {
  return static_cast<size_t>(i);
}
constexpr int64_t kConvertGrain = 1 << 15;
}  // namespace

HostArg host_arg(const TensorRef& ref) {
  return HostArg{ref.desc, static_cast<std::byte*>(ref.buffer->host_ptr())};
}

void convert_parallel(const void* src, DType src_type, void* dst, DType dst_type, int64_t n,
                      ThreadPool& pool) {
  const size_t ss = dtype_size(src_type), ds = dtype_size(dst_type);
  pool.parallel_for(n, kConvertGrain, [&](int64_t b, int64_t e) {
    convert(static_cast<const std::byte*>(src) + u(b) * ss, src_type,
            static_cast<std::byte*>(dst) + u(b) * ds, dst_type, e - b);
  });
}

F32In::F32In(const HostArg& arg, ThreadPool& pool)
    : dense_(TensorDesc::contiguous(DType::f32, arg.desc.dims())) {
  const TensorDesc& d = arg.desc;
  if (d.dtype == DType::f32 && d.is_contiguous()) {
    ptr_ = static_cast<const float*>(arg.elem0());
    return;
  }
  buf_.resize(u(d.numel()));
  if (d.is_contiguous()) {
    convert_parallel(arg.elem0(), d.dtype, buf_.data(), DType::f32, d.numel(), pool);
  } else {
    // Strided gather, row by row over the last dim.
    const int64_t inner = d.rank ? d.dim(-1) : 1;
    const int64_t rows = d.numel() / inner;
    const int64_t istride = d.rank ? d.stride(-1) : 1;
    pool.parallel_for(rows, 64, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        int64_t off = d.offset, rem = r;
        for (int k = d.rank - 2; k >= 0; --k) {
          off += (rem % d.shape[u(k)]) * d.strides[u(k)];
          rem /= d.shape[u(k)];
        }
        float* dst = buf_.data() + r * inner;
        for (int64_t i = 0; i < inner; ++i)
          dst[i] = load_as_float(arg.base, d.dtype, off + i * istride);
      }
    });
  }
  ptr_ = buf_.data();
}

F32Out::F32Out(const HostArg& arg) : arg_(arg) {
  if (arg.desc.dtype == DType::f32) {
    ptr_ = static_cast<float*>(arg.elem0());
  } else {
    buf_.resize(u(arg.desc.numel()));
    ptr_ = buf_.data();
  }
}

void F32Out::finish(ThreadPool& pool) {
  if (buf_.empty()) return;
  convert_parallel(buf_.data(), DType::f32, arg_.elem0(), arg_.desc.dtype, arg_.desc.numel(), pool);
}

Dims broadcast_strides(const TensorDesc& dense_in, const TensorDesc& out_shape) {
  Dims s{};
  const int lead = out_shape.rank - dense_in.rank;
  for (int d = 0; d < dense_in.rank; ++d)
    s[u(d + lead)] = dense_in.shape[u(d)] == 1 ? 0 : dense_in.strides[u(d)];
  return s;
}

}  // namespace duet::cpu
