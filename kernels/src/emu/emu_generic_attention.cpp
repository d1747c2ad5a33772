// The generic tier's SIMT attention kernels (flash for prefill, split-KV decode), compiled for the
// emulator.
#include "device/attention_simt.h"
#include "emu/run_kernel.h"
#include "host/runners.h"

namespace duet::kernels::emu_impl {

Status generic_attention(const detail::Call& c) {
  using detail::Kernel;
  if (c.kernel == Kernel::gen_flash) {
    if (c.head_dim == 64) return run_kernel(c, &dev::gen_flash_kernel<64, 64, 32>);
    if (c.head_dim == 128) return run_kernel(c, &dev::gen_flash_kernel<128, 32, 32>);
  } else if (c.kernel == Kernel::gen_decode) {
    // (head dims, rows a block): those shapes::gen_decode_rows gives
    switch (c.head_dim * 100 + c.block_rows) {
      case 6401:
        return run_kernel(c, &dev::gen_decode_kernel<64, 1>);
      case 6404:
        return run_kernel(c, &dev::gen_decode_kernel<64, 4>);
      case 6408:
        return run_kernel(c, &dev::gen_decode_kernel<64, 8>);
      case 12801:
        return run_kernel(c, &dev::gen_decode_kernel<128, 1>);
      case 12804:
        return run_kernel(c, &dev::gen_decode_kernel<128, 4>);
      case 12808:
        return run_kernel(c, &dev::gen_decode_kernel<128, 8>);
      case 25601:
        return run_kernel(c, &dev::gen_decode_kernel<256, 1>);
      case 25604:
        return run_kernel(c, &dev::gen_decode_kernel<256, 4>);
    }
  }
  return Status(Code::internal, c.name() + " has no generic attention instance");
}

}  // namespace duet::kernels::emu_impl
