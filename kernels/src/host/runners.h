// The launchers of each tier, defined once for the GPU (kernels/src/gpu/*.cu, built only when
// CUDA is) and once for the emulator (kernels/src/emu/*.cpp).
#pragma once

#include "host/launch_plan.h"

namespace duet::kernels {

namespace gpu_impl {
Status flash_attention_f16(const detail::Call& c, void* stream);
Status flash_attention_bf16(const detail::Call& c, void* stream);
Status tiled_attention(const detail::Call& c, void* stream);
Status pipelined_matmul(const detail::Call& c, void* stream);
Status tiled_matmul(const detail::Call& c, void* stream);
Status generic(const detail::Call& c, void* stream);
Status matvec(const detail::Call& c, void* stream);
Status quant_cast(const detail::Call& c, void* stream);
Status generic_attention(const detail::Call& c, void* stream);  // gen_flash, gen_decode
Status int_dot_qmatvec(const detail::Call& c, void* stream);    // q8_act and the mat-vec (sm_61+)
Status int8_mma_qmatmul(const detail::Call& c, void* stream);   // sm_75+
Status wgmma_attention(const detail::Call& c, void* stream);    // sm_90a
}  // namespace gpu_impl

namespace emu_impl {
Status attention_flash(const detail::Call& c);
Status attention_tiled(const detail::Call& c);
Status attention_wgmma(const detail::Call& c);
Status matmul_tc(const detail::Call& c);
Status generic(const detail::Call& c);
Status generic_attention(const detail::Call& c);
Status quant_int(const detail::Call& c);  // q8_act, the int_dot mat-vec and int8 mma
Status matvec(const detail::Call& c);     // and the staged cast of block formats
}  // namespace emu_impl

}  // namespace duet::kernels
