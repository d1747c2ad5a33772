// The CUDA backend's entry points: a factory that opens its devices (or says why it cannot), and
// its selection rules, which work on capability records alone (real devices or profiles).
#pragma once

#include "duet/registry.h"

namespace duet::cuda {

BackendFactory factory();
const BackendRules& rules();
// The rules of a default CUDA 13 build (kernels::default_build()), for the reference docs.
const BackendRules& default_build_rules();

}  // namespace duet::cuda
