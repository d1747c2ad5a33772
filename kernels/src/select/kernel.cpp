#include "duet/kernels/kernel.h"

namespace duet::kernels {

std::string Kernel::name() const {
  const std::string p(precision_name(precision));
  const std::string layout = b_nmajor ? "_bn" : "_bk";
  switch (family) {
    case Family::flash_attention:
      return "flash_attention_" + p + "_hd" + std::to_string(head_dim);
    case Family::tiled_attention:
      return "tiled_attention_" + p + "_hd" + std::to_string(head_dim);
    case Family::generic_attention:
      return "generic_attention";
    case Family::generic_flash_attention:
      return "generic_attention_flash";
    case Family::generic_decode_attention:
      return "generic_attention_decode";
    case Family::wgmma_attention:
      return "wgmma_attention_" + p + "_hd" + std::to_string(head_dim);
    case Family::pipelined_matmul:
      return "pipelined_matmul_" + p + layout;
    case Family::tiled_matmul:
      return "tiled_matmul_" + p + layout;
    case Family::generic_matmul:
      return "generic_matmul";
    case Family::generic_matvec:
      return "generic_matvec";
    case Family::generic_rows:
      return "generic_rows";
    case Family::generic_op:
      return "generic_" + std::string(op_name(op));
    case Family::int8_mma_qmatmul:
      return std::string("int8_mma_qmatmul_") + (k32 ? "m16n8k32" : "m8n8k16");
    case Family::int_dot_qmatvec:
      return "int_dot_qmatvec";
    case Family::generic_qmatmul:
      return "generic_qmatmul";
    case Family::generic_qrows:
      return "generic_qrows";
  }
  return "?";
}

// As the families are built: the tensor-core families fed by cp.async pipelines reach more of
// the peak than the sm_75 ones; int8 tensor cores run 4-8x the f32 peak, of which dequantizing
// the blocks costs most; dp4a and the SIMT families run at the f32 FMA rate at best.
double Kernel::efficiency() const {
  switch (family) {
    case Family::wgmma_attention:
      return 0.7;  // of the f16 peak, which counts Hopper's wgmma rate
    case Family::flash_attention:
    case Family::pipelined_matmul:
      return 0.6;
    case Family::tiled_attention:
    case Family::tiled_matmul:
      return 0.4;
    case Family::int8_mma_qmatmul:
      return 1.2;  // of the f32 peak
    case Family::int_dot_qmatvec:
      return 0.3;
    case Family::generic_attention:
    case Family::generic_flash_attention:
    case Family::generic_decode_attention:
    case Family::generic_matmul:
    case Family::generic_matvec:
    case Family::generic_rows:
    case Family::generic_op:
    case Family::generic_qmatmul:
    case Family::generic_qrows:
      return 0.15;
  }
  return 0.15;
}

}  // namespace duet::kernels
