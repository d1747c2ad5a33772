// Tiled-tier attention, f16, every head dim (built for every architecture of the list).
#include "device/instances.h"
#include "gpu/gpu_launch.h"
#include "host/runners.h"

namespace duet::kernels::gpu_impl {

Status tiled_attention(const detail::Call& c, void* stream) {
  return dev::attention_instance<dev::F16, dev::Sm75Arch>(
      c.head_dim, [&](auto kernel) { return launch_on_gpu(c, kernel, stream); });
}

}  // namespace duet::kernels::gpu_impl
