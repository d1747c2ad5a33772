// The CUDA backend's entry points: a factory that opens its devices (or says why it cannot), and
// its selection rules, which work on capability records alone (real devices or profiles).
#pragma once

#include "duet/registry.h"

namespace duet::cuda {

BackendFactory factory();
const BackendRules& rules();

}  // namespace duet::cuda
