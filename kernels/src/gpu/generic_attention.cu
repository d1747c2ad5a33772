// The generic tier's SIMT attention kernels (flash for prefill, split-KV decode), built for every
// architecture of the list.
#include "device/attention_simt.h"
#include "gpu/gpu_launch.h"
#include "host/runners.h"

namespace duet::kernels::gpu_impl {

Status generic_attention(const detail::Call& c, void* stream) {
  using detail::Kernel;
  if (c.kernel == Kernel::gen_flash) {
    if (c.head_dim == 64) return launch_on_gpu(c, &dev::gen_flash_kernel<64, 64, 32>, stream);
    if (c.head_dim == 128) return launch_on_gpu(c, &dev::gen_flash_kernel<128, 32, 32>, stream);
  } else if (c.kernel == Kernel::gen_decode) {
    // (head dims, rows a block): those shapes::gen_decode_rows gives
    switch (c.head_dim * 100 + c.block_rows) {
      case 6401:
        return launch_on_gpu(c, &dev::gen_decode_kernel<64, 1>, stream);
      case 6404:
        return launch_on_gpu(c, &dev::gen_decode_kernel<64, 4>, stream);
      case 6408:
        return launch_on_gpu(c, &dev::gen_decode_kernel<64, 8>, stream);
      case 12801:
        return launch_on_gpu(c, &dev::gen_decode_kernel<128, 1>, stream);
      case 12804:
        return launch_on_gpu(c, &dev::gen_decode_kernel<128, 4>, stream);
      case 12808:
        return launch_on_gpu(c, &dev::gen_decode_kernel<128, 8>, stream);
      case 25601:
        return launch_on_gpu(c, &dev::gen_decode_kernel<256, 1>, stream);
      case 25604:
        return launch_on_gpu(c, &dev::gen_decode_kernel<256, 4>, stream);
    }
  }
  return Status(Code::internal, c.name() + " has no generic attention instance");
}

}  // namespace duet::kernels::gpu_impl
