// The int8_mma tier: m16n8k32 (sm_80+) and m8n8k16 (sm_75) instances, one per kind of format
// (scales per 16 or per 32, with or without a minimum), built for the architectures >= sm_75 of
// the list; the m16n8k32 instructions are emitted only into sm_80+ code.
#include "device/quant_mmq.h"
#include "gpu/gpu_launch.h"
#include "host/runners.h"

namespace duet::kernels::gpu_impl {

namespace {

template <class Arch>
Status mmq(const detail::Call& c, void* stream) {
  const dev::QFmt f = std::get<dev::QMatmulParams>(c.params).fmt;
  const bool per16 = dev::q_scales_per16(f), min = dev::q_has_min(f);
  if (per16 && min) return launch_on_gpu(c, &dev::mmq_kernel<Arch, true, true>, stream);
  if (per16) return launch_on_gpu(c, &dev::mmq_kernel<Arch, true, false>, stream);
  if (min) return launch_on_gpu(c, &dev::mmq_kernel<Arch, false, true>, stream);
  return launch_on_gpu(c, &dev::mmq_kernel<Arch, false, false>, stream);
}

}  // namespace

Status int8_mma_qmatmul(const detail::Call& c, void* stream) {
  if (c.kernel != detail::Kernel::mmq)
    return Status(Code::internal, c.name() + " is not an int8_mma kernel");
  return c.sm80 ? mmq<dev::Sm80Arch>(c, stream) : mmq<dev::Sm75Arch>(c, stream);
}

}  // namespace duet::kernels::gpu_impl
