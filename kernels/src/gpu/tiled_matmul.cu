// Tiled-tier matmul, f16 (built for every architecture of the list).
#include "device/instances.h"
#include "gpu/gpu_launch.h"
#include "host/runners.h"

namespace duet::kernels::gpu_impl {

Status tiled_matmul(const detail::Call& c, void* stream) {
  return dev::matmul_instance<dev::F16, dev::Sm75Arch>(
      c.b_nmajor, [&](auto kernel) { return launch_on_gpu(c, kernel, stream); });
}

}  // namespace duet::kernels::gpu_impl
