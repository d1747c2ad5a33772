// The pipelined-tier matmul, f16 and bf16 (built for sm_80+ images only).
#include "device/instances.h"
#include "gpu/gpu_launch.h"
#include "host/runners.h"

namespace duet::kernels::gpu_impl {

Status pipelined_matmul(const detail::Call& c, void* stream) {
  auto go = [&](auto kernel) { return launch_on_gpu(c, kernel, stream); };
  if (c.bf16) return dev::matmul_instance<dev::Bf16, dev::Sm80Arch>(c.b_nmajor, go);
  return dev::matmul_instance<dev::F16, dev::Sm80Arch>(c.b_nmajor, go);
}

}  // namespace duet::kernels::gpu_impl
