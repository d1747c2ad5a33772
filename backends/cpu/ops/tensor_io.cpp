#include "ops/tensor_io.h"

#include <algorithm>
#include <cstring>

#include "duet/half.h"
#include "duet/internal/index.h"
#include "kernels/isa.h"

namespace duet::cpu {

namespace {
constexpr int64_t kConvertGrain = 1 << 15;
}  // namespace

HostArg host_arg(const TensorRef& ref) {
  return HostArg{ref.desc, static_cast<std::byte*>(ref.buffer->host_ptr())};
}

void convert_fast(const void* src, DType src_type, void* dst, DType dst_type, int64_t n) {
  const kernels::Kernels& k = kernels::active_kernels();
  const auto* h = static_cast<const uint16_t*>(src);
  auto* hd = static_cast<uint16_t*>(dst);
  if (src_type == DType::f16 && dst_type == DType::f32)
    return k.f16_to_f32(h, static_cast<float*>(dst), n);
  if (src_type == DType::bf16 && dst_type == DType::f32)
    return k.bf16_to_f32(h, static_cast<float*>(dst), n);
  if (src_type == DType::f32 && dst_type == DType::f16)
    return k.f32_to_f16(static_cast<const float*>(src), hd, n);
  if (src_type == DType::f32 && dst_type == DType::bf16)
    return k.f32_to_bf16(static_cast<const float*>(src), hd, n);
  if ((src_type == DType::f16 && dst_type == DType::bf16) ||
      (src_type == DType::bf16 && dst_type == DType::f16)) {
    // Through f32 (exact for both widenings), in chunks that stay in L1.
    float tmp[1024];
    for (int64_t i = 0; i < n; i += 1024) {
      const int64_t c = std::min<int64_t>(1024, n - i);
      (src_type == DType::f16 ? k.f16_to_f32 : k.bf16_to_f32)(h + i, tmp, c);
      (dst_type == DType::f16 ? k.f32_to_f16 : k.f32_to_bf16)(tmp, hd + i, c);
    }
    return;
  }
  convert(src, src_type, dst, dst_type, n);
}

void convert_parallel(const void* src, DType src_type, void* dst, DType dst_type, int64_t n,
                      ThreadPool& pool) {
  const size_t ss = dtype_size(src_type), ds = dtype_size(dst_type);
  pool.parallel_for(n, kConvertGrain, [&](int64_t b, int64_t e) {
    convert_fast(static_cast<const std::byte*>(src) + u(b) * ss, src_type,
                 static_cast<std::byte*>(dst) + u(b) * ds, dst_type, e - b);
  });
}

F32In::F32In(const HostArg& arg, ThreadPool& pool, Scratch& scratch)
    : dense_(TensorDesc::contiguous(DType::f32, arg.desc.dims())) {
  const TensorDesc& d = arg.desc;
  if (d.dtype == DType::f32 && d.is_contiguous()) {
    ptr_ = static_cast<const float*>(arg.elem0());
    return;
  }
  if (!scratch.grow(buf_, d.numel(), "an input converted to f32")) return;
  if (d.is_contiguous()) {
    convert_parallel(arg.elem0(), d.dtype, buf_.data(), DType::f32, d.numel(), pool);
  } else {
    // Strided gather, row by row over the last dim.
    const int64_t inner = d.rank ? d.dim(-1) : 1;
    const int64_t rows = d.numel() / inner;
    const int64_t istride = d.rank ? d.stride(-1) : 1;
    const kernels::Kernels& k = kernels::active_kernels();
    const kernels::Elem t = to_elem(d.dtype);
    const int64_t esize = static_cast<int64_t>(dtype_size(d.dtype));
    pool.parallel_for(rows, 64, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        int64_t off = d.offset, rem = r;
        for (int j = d.rank - 2; j >= 0; --j) {
          off += (rem % d.shape[u(j)]) * d.strides[u(j)];
          rem /= d.shape[u(j)];
        }
        float* dst = buf_.data() + r * inner;
        if (is_float(d.dtype)) {
          k.load_line(arg.base + off * esize, t, istride, inner, dst);
        } else {
          for (int64_t i = 0; i < inner; ++i)
            dst[i] = load_as_float(arg.base, d.dtype, off + i * istride);
        }
      }
    });
  }
  ptr_ = buf_.data();
}

F32Out::F32Out(const HostArg& arg, Scratch& scratch) : arg_(arg) {
  if (arg.desc.dtype == DType::f32)
    ptr_ = static_cast<float*>(arg.elem0());
  else
    ptr_ = scratch.grow(buf_, arg.desc.numel(), "the output in f32");
}

void F32Out::finish(ThreadPool& pool) {
  if (buf_.empty() || !ptr_) return;
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
