// This machine's backends and devices as JSON: what `duet devices --json` prints and
// duet_devices_json() returns. Devices that are one physical GPU seen through several APIs
// (same UUID, e.g. cuda:0 and vulkan:1) are grouped as one GPU with several routes.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "duet/registry.h"

namespace duet {

// Groups of two or more devices sharing a UUID.
std::vector<std::vector<Device*>> shared_gpus(const Registry& reg);
// {"backends": [...], "devices": [...], "gpus": [{"uuid", "routes"}]}
nlohmann::json devices_json(const Registry& reg);

}  // namespace duet
