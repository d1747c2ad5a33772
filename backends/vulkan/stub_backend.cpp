// Built when the Vulkan backend is not: the factory says why.
#include "vulkan_backend.h"

namespace duet::vulkan {

BackendFactory factory() {
  return {"vulkan", [](const BackendOptions&) -> Result<BackendOpenResult> {
            return Status(Code::unsupported, DUET_VULKAN_STUB_REASON);
          }};
}

}  // namespace duet::vulkan
