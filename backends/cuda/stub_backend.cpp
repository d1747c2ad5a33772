// Built when the CUDA backend is not: the factory says why (DUET_CUDA_REASON from CMake). The
// rules still answer (rules.cpp), so planning for CUDA profiles works in this build too.
#include "cuda_backend.h"

namespace duet::cuda {

BackendFactory factory() {
  return {"cuda", [](const BackendOptions&) -> Result<BackendOpenResult> {
            return Status(Code::unsupported, DUET_CUDA_STUB_REASON);
          }};
}

}  // namespace duet::cuda
