// The Vulkan backend's selection rules: pure functions of a capability record, so the planner can
// explain them for profiles of GPUs that are not present. Each op family's choices are in its own
// file; each choice names its kernel (kernel.h) with the launch shape derived from the caps'
// limits (shared memory, workgroup size, subgroup size), which the device's recorder (ops/) reads.
#include "rules/rules.h"
#include "vulkan_backend.h"

namespace duet::vulkan {

namespace {

using namespace rules_detail;

class Rules final : public BackendRules {
 public:
  BackendKind backend() const override { return BackendKind::vulkan; }

  std::vector<KernelChoice> choices(const DeviceCaps& c, const OpDesc& op) const override {
    if (is_view(op.kind)) {
      KernelChoice k;
      k.tier = Tier::generic;
      k.reason = "views are resolved by the executor, not run as kernels";
      return {k};
    }
    if (quantized_input(op)) return quantized_choices(c, op);
    switch (op.kind) {
      case OpKind::cast:
      case OpKind::copy:
      case OpKind::concat:
      case OpKind::embedding:
        return {data_choice(c, op)};
      case OpKind::write_slice:
        return {write_slice_choice(c, op)};
      default:
        break;
    }
    std::vector<KernelChoice> out;
    for (DType t : {DType::f32, DType::f16, DType::bf16}) {
      std::vector<KernelChoice> at_t;
      if (op.kind == OpKind::matmul)
        at_t = matmul_choices(c, op, t);
      else if (op.kind == OpKind::attention)
        at_t = attention_choices(c, op, t);
      else
        at_t = {elementwise_choice(c, op, t)};
      for (KernelChoice& k : at_t) out.push_back(std::move(k));
    }
    return out;
  }
};

}  // namespace

const BackendRules& rules() {
  static const Rules r;
  return r;
}

}  // namespace duet::vulkan
