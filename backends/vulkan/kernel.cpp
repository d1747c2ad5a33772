#include "kernel.h"

namespace duet::vulkan {

std::string Kernel::name() const {
  auto x = [](int a, int b) { return std::to_string(a) + "x" + std::to_string(b); };
  switch (family) {
    case Family::flat:
      return "flat";
    case Family::rows:
      return "row";
    case Family::convert:
      return "convert";
    case Family::embedding:
      return "embedding";
    case Family::write_slice:
      return "write_slice";
    case Family::dequantize_rows:
      return "dequantize_rows";
    case Family::gemm_tiled:
      return "tiled_" + x(tm, tn);
    case Family::gemm_blocked:
      return "blocked_" + x(tm, tn);
    case Family::attention_flash:
      return split_keys ? "flash_splitk" : "flash";
    case Family::attention_blocked:
      return "blocked_" + x(query_rows, row_lanes);
    case Family::qgemm_tiled:
      return "qtiled_" + x(bm, bn) + "_" + x(tm, tn);
    case Family::qgemm_blocked:
      return "q_" + x(tm, tn);
    case Family::qgemm_dot:
      return "qdot_" + x(tm, tn) + (swar ? "_swar" : "");
    case Family::matvec:
      return "matvec_" + x(bm, bn) + (shared_sum ? "_smem" : "");
    case Family::gemm_coopmat:
      return "coopmat_" + std::to_string(bm);
    case Family::attention_decode:
      return "decode_" + std::to_string(bm) + (split_keys ? "_splitk" : "");
  }
  return "?";
}

}  // namespace duet::vulkan
