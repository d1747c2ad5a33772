// TEMPORARY: placeholders until the kernels land (issue 4). They refuse everything with a reason.
#include "duet/kernels/launch.h"
#include "duet/kernels/select.h"

namespace duet::kernels {

std::vector<KernelChoice> choices(const DeviceCaps&, const OpDesc&) {
  KernelChoice c;
  c.tier = "generic";
  c.reason = "no CUDA kernels in this build yet";
  return {c};
}

uint64_t workspace_bytes(Tier, const OpDesc&, const LaunchConfig&) {
  return 0;
}

namespace emu {
Status launch(Tier, const OpDesc& op, std::span<const View>, const View&, const Launch&) {
  return Err(Code::unsupported)
      .op(op_name(op.kind), op.name)
      .device("emulator")
      .note("no kernels yet");
}
}  // namespace emu

}  // namespace duet::kernels
