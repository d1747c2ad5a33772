// The backends this build contains, and their selection rules. Linking `duet` (or its
// duet_backends target) brings these in; the core itself knows no backend.
#pragma once

#include <vector>

#include "duet/registry.h"

namespace duet {

// Factories for every backend in the build, in preference order (cuda, vulkan, cpu). A backend
// left out at build time is still listed and reports why when opened.
DUET_API std::vector<BackendFactory> builtin_backends();

// Opens the registry with the built-in backends. Options also come from the environment:
// DUET_CPU_THREADS, DUET_VULKAN_VALIDATION, ... (the Configuration table of README.md).
DUET_API Registry open_registry(const BackendOptions& options = {});

// The selection rules of a backend, for planning against capability profiles. Usable whether or
// not the backend was built or has a device.
DUET_API const BackendRules& builtin_rules(BackendKind backend);
// The same for a default build (CUDA: the architecture list of a default CUDA 13 build, whatever
// this one carries): what the reference documentation (`duet ops --markdown`) describes.
DUET_API const BackendRules& default_build_rules(BackendKind backend);

}  // namespace duet
