// Placeholder until the CUDA backend lands: refuses every op with the reason.
#include "cuda_backend.h"

namespace duet::cuda {

namespace {
class Rules final : public BackendRules {
 public:
  BackendKind backend() const override { return BackendKind::cuda; }
  std::vector<KernelChoice> choices(const DeviceCaps&, const OpDesc&) const override {
    KernelChoice c;
    c.tier = "generic";
    c.reason = "the CUDA backend has no kernels in this build yet";
    return {c};
  }
};
}  // namespace

const BackendRules& rules() {
  static const Rules r;
  return r;
}

}  // namespace duet::cuda
