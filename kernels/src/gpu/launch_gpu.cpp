// gpu::launch and launch_group: plan the launches (host/launch_plan.cpp) and hand each to its
// tier's launcher.
#include "host/launch_plan.h"
#include "host/runners.h"

namespace duet::kernels::gpu {

namespace {

Status run_calls(const std::vector<detail::Call>& planned, const Launch& launch) {
  const bool programmatic = launch.programmatic && launch.sm >= 90;
  for (const detail::Call& p : planned) {
    detail::Call c = p;
    c.programmatic = programmatic;
    switch (c.kernel) {
      case detail::Kernel::attention_tc:
        if (c.tier == Tier::tiled) {
          DUET_TRY(gpu_impl::tiled_attention(c, launch.stream));
          break;
        }
#ifdef DUET_KERNELS_HAVE_SM80
        DUET_TRY(c.bf16 ? gpu_impl::flash_attention_bf16(c, launch.stream)
                        : gpu_impl::flash_attention_f16(c, launch.stream));
        break;
#else
        return Status(Code::unsupported,
                      "flash attention: this build has no sm_80+ architecture (DUET_CUDA_ARCHS)");
#endif
      case detail::Kernel::gen_flash:
      case detail::Kernel::gen_decode:
        DUET_TRY(gpu_impl::generic_attention(c, launch.stream));
        break;
      case detail::Kernel::attention_wgmma:
#ifdef DUET_KERNELS_HAVE_SM90A
        DUET_TRY(gpu_impl::wgmma_attention(c, launch.stream));
        break;
#else
        return Status(Code::unsupported,
                      "wgmma attention: this build has no sm_90a image (add 90a to "
                      "DUET_CUDA_ARCHS)");
#endif
      case detail::Kernel::matmul_tc:
        if (c.tier == Tier::tiled) {
          DUET_TRY(gpu_impl::tiled_matmul(c, launch.stream));
          break;
        }
#ifdef DUET_KERNELS_HAVE_SM80
        DUET_TRY(gpu_impl::pipelined_matmul(c, launch.stream));
        break;
#else
        return Status(Code::unsupported,
                      "pipelined matmul: this build has no sm_80+ architecture (DUET_CUDA_ARCHS)");
#endif
      case detail::Kernel::matvec:
        DUET_TRY(gpu_impl::matvec(c, launch.stream));
        break;
      case detail::Kernel::qdequant:
        DUET_TRY(gpu_impl::quant_cast(c, launch.stream));
        break;
      case detail::Kernel::q8_act:
      case detail::Kernel::qmv:
#ifdef DUET_KERNELS_HAVE_DP4A
        DUET_TRY(gpu_impl::int_dot_qmatvec(c, launch.stream));
        break;
#else
        return Status(Code::unsupported,
                      "int_dot: this build has no sm_61+ architecture (DUET_CUDA_ARCHS)");
#endif
      case detail::Kernel::mmq:
#ifdef DUET_KERNELS_HAVE_SM75
        DUET_TRY(gpu_impl::int8_mma_qmatmul(c, launch.stream));
        break;
#else
        return Status(Code::unsupported,
                      "int8_mma: this build has no sm_75+ architecture (DUET_CUDA_ARCHS)");
#endif
      default:
        DUET_TRY(gpu_impl::generic(c, launch.stream));
        break;
    }
  }
  return {};
}

}  // namespace

Status launch(Tier tier, const OpDesc& op, std::span<const View> inputs, const View& output,
              const Launch& launch) {
  DUET_ASSIGN_OR_RETURN(std::vector<detail::Call> calls,
                        detail::plan(tier, op, inputs, output, launch, "cuda"));
  return run_calls(calls, launch);
}

Status launch_group(Tier tier, std::span<const GroupMember> members, const Launch& launch,
                    const GroupMember* norm, const GroupMember* add) {
  DUET_ASSIGN_OR_RETURN(std::vector<detail::Call> calls,
                        detail::plan_group(tier, members, launch, "cuda", norm, add));
  return run_calls(calls, launch);
}

Status launch_rope_write(std::span<const FusedOp> ops, const Launch& launch) {
  DUET_ASSIGN_OR_RETURN(std::vector<detail::Call> calls,
                        detail::plan_rope_write(ops, launch, "cuda"));
  return run_calls(calls, launch);
}

}  // namespace duet::kernels::gpu
