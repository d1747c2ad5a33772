#include <cstdlib>

#include "cpu/cpu_backend.h"
#include "cuda/cuda_backend.h"
#include "duet/backends.h"
#include "vulkan/vulkan_backend.h"

namespace duet {

std::vector<BackendFactory> builtin_backends() {
  return {cuda::factory(), vulkan::factory(), cpu::factory()};
}

Registry open_registry(const BackendOptions& options) {
  return Registry::open(builtin_backends(), options);
}

const BackendRules& builtin_rules(BackendKind backend) {
  switch (backend) {
    case BackendKind::cuda:
      return cuda::rules();
    case BackendKind::vulkan:
      return vulkan::rules();
    case BackendKind::cpu:
      break;
  }
  return cpu::rules();
}

const BackendRules& default_build_rules(BackendKind backend) {
  return backend == BackendKind::cuda ? cuda::default_build_rules() : builtin_rules(backend);
}

}  // namespace duet
