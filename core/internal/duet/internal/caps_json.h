// Capability records as JSON: `duet devices --json` writes them and profiles/*.json are read
// back through the same field names (`duet devices --profile ID` writes one that loads as is).
#pragma once

#include <nlohmann/json.hpp>

#include "duet/device.h"

namespace duet {

nlohmann::json caps_to_json(const DeviceCaps& caps);
// Unknown fields are errors (a typo in a profile must not silently mean "absent").
Result<DeviceCaps> caps_from_json(const nlohmann::json& j);

}  // namespace duet
