// Flash-tier attention, f16, every head dim (built for sm_80+ images only).
#include "device/instances.h"
#include "gpu/gpu_launch.h"
#include "host/runners.h"

namespace duet::kernels::gpu_impl {

Status flash_attention_f16(const detail::Call& c, void* stream) {
  return dev::attention_instance<dev::F16, dev::Sm80Arch>(
      c.head_dim, [&](auto kernel) { return launch_on_gpu(c, kernel, stream); });
}

}  // namespace duet::kernels::gpu_impl
