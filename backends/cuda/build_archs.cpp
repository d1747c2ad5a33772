// The kernel images of this build, passed in by CMake (DUET_CUDA_ARCHS, DUET_CUDA_PTX_ARCH).
#include "rules.h"

#ifndef DUET_CUDA_BUILD_CUBINS
#error "DUET_CUDA_BUILD_CUBINS must be defined by backends/cuda/CMakeLists.txt"
#endif

namespace duet::cuda {

BuildArchs this_build() {
  static const BuildArchs archs = parse_build_archs(DUET_CUDA_BUILD_CUBINS, DUET_CUDA_BUILD_PTX);
  return archs;
}

bool backend_built() {
  return DUET_CUDA_BACKEND_BUILT != 0;
}

}  // namespace duet::cuda
