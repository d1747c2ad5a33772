// Host-side views of kernel arguments for the CPU ops, and staging to and from dense f32
// (the CPU computes every float op in f32, rounding to the output dtype once at the end).
#pragma once

#include <cstddef>
#include <vector>

#include "duet/device.h"
#include "kernels/kernels.h"
#include "scratch.h"
#include "thread_pool.h"

namespace duet::cpu {

// A tensor argument in host memory: `base` is the storage start, `desc.offset` counts from it.
struct HostArg {
  TensorDesc desc;
  std::byte* base = nullptr;

  void* elem0() const { return base + desc.offset * static_cast<int64_t>(dtype_size(desc.dtype)); }
};
HostArg host_arg(const TensorRef& ref);

// An input as dense row-major f32 over its own shape. Borrows the memory when it already is;
// otherwise the copy is scratch, and data() is null when `scratch` could not give it.
class F32In {
 public:
  F32In(const HostArg& arg, ThreadPool& pool, Scratch& scratch);
  const float* data() const { return ptr_; }
  const TensorDesc& desc() const { return dense_; }  // dense f32 over data()

 private:
  std::vector<float> buf_;
  const float* ptr_ = nullptr;
  TensorDesc dense_;
};

// An output as dense f32. Writes in place for f32 outputs; otherwise computes into a scratch
// buffer that finish() rounds into the output dtype (data() is null when `scratch` could not
// give it).
class F32Out {
 public:
  F32Out(const HostArg& arg, Scratch& scratch);
  float* data() { return ptr_; }
  void finish(ThreadPool& pool);

 private:
  HostArg arg_;
  std::vector<float> buf_;
  float* ptr_ = nullptr;
};

// The kernels' element type of a float dtype (f32, f16, bf16).
inline kernels::Elem to_elem(DType t) {
  return t == DType::f16    ? kernels::Elem::f16
         : t == DType::bf16 ? kernels::Elem::bf16
                            : kernels::Elem::f32;
}

// Converts n contiguous elements on the calling thread: the SIMD kernels of the active ISA for
// f32 <-> f16/bf16 (exact, as duet/half.h), duet::convert for the rest.
void convert_fast(const void* src, DType src_type, void* dst, DType dst_type, int64_t n);

// Converts n contiguous elements, in parallel chunks.
void convert_parallel(const void* src, DType src_type, void* dst, DType dst_type, int64_t n,
                      ThreadPool& pool);

// Strides (in elements of a dense f32 copy of `in`) that read `in` broadcast to `out_shape`.
Dims broadcast_strides(const TensorDesc& dense_in, const TensorDesc& out_shape);

}  // namespace duet::cpu
