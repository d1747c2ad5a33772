// The module's devices: the process's shared registry, as duet::open_engine's.
#include "common.h"
#include "duet/builtin_engine.h"

namespace duetpy {

std::shared_ptr<duet::Registry> registry() {
  return duet::shared_registry();
}

void bind_registry(py::module_&) {}

}  // namespace duetpy
