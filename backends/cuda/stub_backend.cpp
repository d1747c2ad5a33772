// Built when the CUDA backend is not: the factory says why.
#include "cuda_backend.h"

namespace duet::cuda {

BackendFactory factory() {
  return {"cuda", [](const BackendOptions&) -> Result<BackendOpenResult> {
            return Status(Code::unsupported, DUET_CUDA_STUB_REASON);
          }};
}

}  // namespace duet::cuda
