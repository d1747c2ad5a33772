// emu::launch and launch_group: the same launches as the GPU's, run by the host emulator.
#include <atomic>

#include "host/launch_plan.h"
#include "host/runners.h"

namespace duet::kernels::emu {

namespace {

std::atomic<uint64_t> g_kernels_run{0};

Status run_calls(const std::vector<detail::Call>& calls) {
  for (const detail::Call& c : calls) {
    g_kernels_run.fetch_add(1, std::memory_order_relaxed);
    switch (c.kernel) {
      case detail::Kernel::attention_tc:
        DUET_TRY(c.tier == Tier::flash ? emu_impl::attention_flash(c)
                                       : emu_impl::attention_tiled(c));
        break;
      case detail::Kernel::attention_wgmma:
        DUET_TRY(emu_impl::attention_wgmma(c));
        break;
      case detail::Kernel::gen_flash:
      case detail::Kernel::gen_decode:
        DUET_TRY(emu_impl::generic_attention(c));
        break;
      case detail::Kernel::matmul_tc:
        DUET_TRY(emu_impl::matmul_tc(c));
        break;
      case detail::Kernel::q8_act:
      case detail::Kernel::qmv:
      case detail::Kernel::mmq:
        DUET_TRY(emu_impl::quant_int(c));
        break;
      case detail::Kernel::matvec:
      case detail::Kernel::qdequant:
        DUET_TRY(emu_impl::matvec(c));
        break;
      default:
        DUET_TRY(emu_impl::generic(c));
        break;
    }
  }
  return {};
}

}  // namespace

Status launch(Tier tier, const OpDesc& op, std::span<const View> inputs, const View& output,
              const Launch& launch) {
  DUET_ASSIGN_OR_RETURN(std::vector<detail::Call> calls,
                        detail::plan(tier, op, inputs, output, launch, "emulator"));
  DUET_TRY(run_calls(calls));
  if (error_bytes(op))
    return launch_result(
        op, launch.error ? static_cast<const void*>(launch.error) : launch.workspace, "emulator");
  return {};
}

Status launch_group(Tier tier, std::span<const GroupMember> members, const Launch& launch,
                    const GroupMember* norm, const GroupMember* add) {
  DUET_ASSIGN_OR_RETURN(std::vector<detail::Call> calls,
                        detail::plan_group(tier, members, launch, "emulator", norm, add));
  return run_calls(calls);
}

uint64_t kernels_run() {
  return g_kernels_run.load(std::memory_order_relaxed);
}

Status launch_rope_write(std::span<const FusedOp> ops, const Launch& launch) {
  DUET_ASSIGN_OR_RETURN(std::vector<detail::Call> calls,
                        detail::plan_rope_write(ops, launch, "emulator"));
  return run_calls(calls);
}

}  // namespace duet::kernels::emu
