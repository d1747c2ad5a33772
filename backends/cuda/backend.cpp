// The CUDA backend's factory in a build with CUDA: opens every device through the runtime.
// Options: see DeviceOptions::from (device.h).
#include "cuda_backend.h"
#include "device.h"
#include "runtime_driver.h"

namespace duet::cuda {

BackendFactory factory() {
  return {"cuda", [](const BackendOptions& o) -> Result<BackendOpenResult> {
            return open_backend(runtime_driver(), this_build(), DeviceOptions::from(o));
          }};
}

}  // namespace duet::cuda
