// The GPU family's matmul kernels, for a float or a block-quantized weight alike: the mat-vec
// (matvec.comp) and the cooperative-matrix GEMM (matmul_coopmat.comp). What their float
// (matmul.cpp) and quantized (quantized.cpp) recorders share: the shader and its specialization,
// activations read 16 bytes at a time, and the grid.
#include <algorithm>

#include "ops/ops.h"

namespace duet::vulkan::ops {

void widen16(Window& w, const Arg& a) {
  const uint64_t end = a.buf->base() + (a.buf->size() + 255) / 256 * 256;
  w.range = std::min((w.range + 15) / 16 * 16, end - w.offset);
}

bool vec_rows(const GpuTensor& t, int64_t vec) {
  const uint32_t v = static_cast<uint32_t>(vec);
  if (t.shape[3] % v || (t.shape[3] > 1 && t.stride[3] != 1) || t.offset % v) return false;
  for (int i = 0; i < 3; ++i)
    if (t.shape[static_cast<size_t>(i)] > 1 && t.stride[static_cast<size_t>(i)] % v) return false;
  return true;
}

Dispatch gpu_matmul_dispatch(const Ctx& c, DType weight) {
  const Kernel& k = c.kernel;
  Dispatch d;
  const std::string types = T(c.choice.input_dtypes[0]) + "_" + T(weight);
  if (k.family == Family::matvec) {
    d.shader = std::string(k.shared_sum ? "matvec_smem_" : "matvec_") + types;
    // The most subgroups a workgroup can have: its size over the device's smallest subgroup
    // (the size it may compile a shader for), which sizes the shared memory their sums meet in.
    const uint32_t wg = static_cast<uint32_t>(c.choice.launch.block_threads);
    const uint32_t sg_min = static_cast<uint32_t>(std::max(c.dev.caps().subgroup_min, 1));
    d.spec = {wg, static_cast<uint32_t>(k.bn), 0u,
              0u, static_cast<uint32_t>(k.bm), k.shared_sum ? 1u : (wg + sg_min - 1) / sg_min};
  } else {
    d.shader = "matmul_coopmat_" + std::to_string(k.bm) + "_" + types;
    d.spec = {static_cast<uint32_t>(c.choice.launch.block_threads), 0u, 0u};
  }
  return d;
}

Status bind_vec_a(const Ctx& c, Dispatch& d, const Arg& a, size_t avec) {
  DUET_TRY(c.bind_into(d, 2, 1, a, false, c.op.input_name(0)));
  widen16(d.bind[2], a);
  d.spec[avec] = vec_rows(d.params.td[1], texel_vec(a.desc.dtype)) ? 1u : 0u;
  return {};
}

Status record_gpu_matmul(const Ctx& c, Dispatch& d, const Arg& y) {
  const int64_t M = y.desc.dim(2), N = y.desc.dim(3);
  const int64_t rows = c.kernel.bm, cols = c.kernel.bn;
  const uint64_t batches = static_cast<uint64_t>(y.desc.dim(0) * y.desc.dim(1));
  if ((N + cols - 1) / cols > 65535 || (M + rows - 1) / rows > 65535 || batches > 65535)
    return Err(Code::unsupported)
        .op("matmul", c.op.name)
        .device(c.dev.id())
        .expected("at most 65535 workgroups along weight rows, activation rows and batch entries")
        .got(describe(c.op));
  d.groups = {static_cast<uint32_t>((N + cols - 1) / cols),
              static_cast<uint32_t>((M + rows - 1) / rows), static_cast<uint32_t>(batches)};
  return c.dev.recorder().record(d);
}

}  // namespace duet::vulkan::ops
