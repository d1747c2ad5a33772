// Placeholder until the Vulkan backend lands: refuses every op with the reason.
#include "vulkan_backend.h"

namespace duet::vulkan {

namespace {
class Rules final : public BackendRules {
 public:
  BackendKind backend() const override { return BackendKind::vulkan; }
  std::vector<KernelChoice> choices(const DeviceCaps&, const OpDesc&) const override {
    KernelChoice c;
    c.tier = "generic";
    c.reason = "the Vulkan backend has no kernels in this build yet";
    return {c};
  }
};
}  // namespace

const BackendRules& rules() {
  static const Rules r;
  return r;
}

}  // namespace duet::vulkan
