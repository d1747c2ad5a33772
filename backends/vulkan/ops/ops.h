// Turning a planned op into dispatches, one file per op family; what they share is here. Each
// tensor is bound as a window of its buffer (a storage buffer, or a uniform texel buffer for the
// kernels that read through texel views); when a window would exceed the device's limits the op
// is split along a dimension (rows, batch, heads, or the reduction dim of matmul, accumulating)
// until every window fits, so tensors larger than one binding still run. Which kernel runs is
// the rules' typed choice (kernel.h), read here, never parsed.
#pragma once

#include <array>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernel.h"
#include "vk_internal.h"

namespace duet::vulkan::ops {

// A view of a device buffer.
struct Arg {
  TensorDesc desc;
  VkBuf* buf = nullptr;
};

// "f16": shader names end in their dtypes.
std::string T(DType t);
int64_t elem_bytes(DType t);

// ---- storage-buffer windows (bind.cpp)

// The byte range [lo, hi) that a view touches, counted from the start of its VkBuffer.
std::pair<uint64_t, uint64_t> byte_range(const Arg& a);
// Whether `a` fits one window of the device's maxStorageBufferRange.
bool fits(VulkanDevice& dev, const Arg& a);
// Binds `a` as a window; its descriptor's offset is relative to the window start.
Result<std::pair<Window, GpuTensor>> bind(VulkanDevice& dev, const Arg& a, bool write,
                                          const std::string& name);

// ---- texel views (bind.cpp): the operands of the kernels that read through texel buffers

// Elements per vector texel (R32G32B32A32_UINT): 4 f32, or 8 16-bit values.
int64_t texel_vec(DType t);
// Whether `a` fits one texel view of the device.
bool texels_fit(VulkanDevice& dev, const Arg& a);
// Whether `a` can be read VEC elements per fetch along dimension `dim`: unit stride there, every
// other stride, the extent along `dim` and the start a multiple of the vector.
bool vector_ok(const Arg& a, int dim);
// Binds `a` as a uniform texel buffer view: vector texels or one element per texel.
Result<std::pair<TexelWindow, GpuTensor>> bind_texels(VulkanDevice& dev, const Arg& a, bool vec,
                                                      const std::string& name);

// ---- splitting and grids (bind.cpp)

TensorDesc slice_dim(const TensorDesc& d, int dim, int64_t s, int64_t e);
// Workgroup counts for `groups` workgroups: x up to 65535, the rest along y.
std::array<uint32_t, 3> grid(uint64_t groups);
// Grid-stride kernels: enough workgroups to cover n elements, capped (each loops).
std::array<uint32_t, 3> flat_grid(uint64_t n, int block);

using Emit = std::function<Status(const std::vector<Arg>&)>;
// Splits args[0..n_sliced) (all indexed like args[0], the output) along dims in `dims` until every
// arg fits in a window, then emits. Args past n_sliced are bound whole.
Status split_emit(VulkanDevice& dev, std::vector<Arg> args, size_t n_sliced,
                  const std::vector<int>& dims, const Emit& emit,
                  const std::function<bool(const std::vector<Arg>&)>& extra_fits = {});
// The dims of a rank-`rank` tensor but its last `keep_last`.
std::vector<int> leading_dims(int rank, int keep_last);

// One op being recorded: the device, the op, and the rules' choice with its kernel.
struct Ctx {
  VulkanDevice& dev;
  const OpDesc& op;
  const KernelChoice& choice;
  const Kernel& kernel;

  Status bind_into(Dispatch& d, int binding, int td, const Arg& a, bool write,
                   const std::string& name) const;
  Status bind_texels_into(Dispatch& d, int slot, int td, const Arg& a, bool vec,
                          const std::string& name) const;
  // Binds the op's run-time scalar (when it has one) and an error slot through which the shader
  // reports a bad value of it: the message names the op and the scalar, then `word` and the value,
  // then `suffix`.
  Status bind_scalar(Dispatch& d, const Arg* scalar, const std::string& word,
                     const std::string& suffix) const;
  int block() const { return choice.launch.block_threads > 0 ? choice.launch.block_threads : 64; }
};

// Whether an op over `p` (output first) runs as a *_vec shader (eltwise, softmax, norm, convert):
// on CPU devices, where a texel fetch of 16 bytes costs less than one storage-buffer element
// (docs/vulkan.md), when every tensor is dense and starts on 16 bytes, the length is whole texels
// and the output's offset in its window (`out_offset`, in elements) is too. Row ops also need
// rows of whole texels.
bool vector_path(const Ctx& c, const std::vector<Arg>& p, uint32_t out_offset);

// Where an embedding's shader reports a bad id.
Result<uint32_t> id_error_slot(const Ctx& c);

// ---- the op families, one file each

Status eltwise(const Ctx& c, const Arg& out, std::span<const Arg> in);  // elementwise.cpp
Status softmax(const Ctx& c, const Arg& out, std::span<const Arg> in);  // rows.cpp
Status norm(const Ctx& c, const Arg& out, std::span<const Arg> in);     // rows.cpp
// rows.cpp: the rmsnorm `c` of s = a + b (an add's output, written too; every tensor of one
// shape, each in one window), weight `w` or none: norm.comp's ADD variants.
Status norm_add(const Ctx& c, const Arg& y, const Arg& s, const Arg& a, const Arg& b, const Arg* w);
Status rope(const Ctx& c, const Arg& out, std::span<const Arg> in);  // rope.cpp
// rope.cpp: a write_slice in place of `x` into `cache` by the op of `c` (its run-time offset the
// rope's position).
struct CacheWrite {
  const Ctx* c = nullptr;
  Arg cache, x;
};
// The rope `c` (f32, rank 4, position `pos`, every tensor in one window) storing its output y
// and writing it into a KV cache (`k`: its x is y), with V's write `v` (or none) in the same
// dispatch: rope_write.comp.
Status rope_write(const Ctx& c, const Arg& y, const Arg& x, const Arg& pos, const CacheWrite& k,
                  const CacheWrite* v);
// data.cpp: the cast `c` of src (f32) to f16 or bf16 into `out`, and the write_slice `w` in
// place of `out` into `cache` (offset `pos`), in one dispatch: cast_write.comp.
Status cast_write(const Ctx& c, const Arg& out, const Arg& src, const Ctx& w, const Arg& cache,
                  const Arg& pos);
// data.cpp: what a write_slice's bad offset is said to do.
std::string write_slice_suffix(int64_t len, int64_t cap, int axis);
Status reduce(const Ctx& c, const Arg& out, std::span<const Arg> in);  // reduce.cpp
Status convert(const Ctx& c, const Arg& dst, const Arg& src,           // data.cpp
               const std::string& name);
Status concat(const Ctx& c, const Arg& out, std::span<const Arg> in);       // data.cpp
Status embedding(const Ctx& c, const Arg& out, std::span<const Arg> in);    // data.cpp
Status write_slice(const Ctx& c, const Arg& out, std::span<const Arg> in);  // data.cpp
Status matmul(const Ctx& c, const Arg& out, std::span<const Arg> in);       // matmul.cpp
Status attention(const Ctx& c, const Arg& out, std::span<const Arg> in);    // attention.cpp
// quantized.cpp: a matmul of a block-quantized weight; rows of a block-quantized table gathered
// by ids (embedding) or all of them in order (cast, `ids` null).
Status qmatmul(const Ctx& c, const Arg& out, std::span<const Arg> in);
Status qrows(const Ctx& c, const Arg& out, const Arg& table, const Arg* ids);
// Mat-vecs of block-quantized weights sharing their activations (group.cpp's may_group and
// joins_group said so) as one dispatch of matvec.comp's GROUP variant; each alone where a tensor
// needs more than one window or the grid would be too large.
Status qmatvec_group(VulkanDevice& dev, std::span<const HeldOp> held);

// ---- the GPU family's matmul kernels (gpu_matmul.cpp): the mat-vec (matvec.comp) and the
// cooperative-matrix GEMM (matmul_coopmat.comp), whose float and quantized recorders share these

// A storage-buffer window read as 16-byte vectors (uvec4 arrays): its range rounded up to whole
// vectors, which stays inside the allocation (256-byte granules).
void widen16(Window& w, const Arg& a);
// Whether `t` can be read VEC elements at a time along its last dim from a window: unit stride
// there, the extent, every other stride and the offset (from the window) multiples of VEC.
bool vec_rows(const GpuTensor& t, int64_t vec);
// The kernel's shader for a weight of dtype `weight` and its specialization (spec[1..3] left for
// the recorder: the vector read modes).
Dispatch gpu_matmul_dispatch(const Ctx& c, DType weight);
// Binds the activations a [b0, b1, M, K] at binding 2 and sets spec[avec] to whether they can be
// read 16 bytes at a time.
Status bind_vec_a(const Ctx& c, Dispatch& d, const Arg& a, size_t avec);
// Records the dispatch over y [b0, b1, M, N]: workgroups of the kernel's bm activation rows by
// bn weight rows, one batch entry each along z.
Status record_gpu_matmul(const Ctx& c, Dispatch& d, const Arg& y);

}  // namespace duet::vulkan::ops
