// Capability profiles: JSON capability records of real device models (profiles/*.json, in the
// format of `duet devices --json`), so anyone can plan for a machine they do not have
// (docs/profiles.md). A profile is found by name ("rtx2080ti") in, in order: the folders of
// DUET_PROFILES (':'-separated), the installed profiles folder, and the source tree's profiles/.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "duet/device.h"
#include "duet/export.h"
#include "duet/status.h"

namespace duet {

// The folders searched, in order (only those that exist).
DUET_API std::vector<std::string> profile_dirs();
// Every profile name found (sorted, first folder wins for duplicates).
DUET_API std::vector<std::string> profile_names();
// By name ("t4") or by path to a .json file. The record must name its source.
DUET_API Result<DeviceCaps> load_profile(std::string_view name_or_path);
// A profile from JSON text; `what` names it in errors.
DUET_API Result<DeviceCaps> parse_profile(std::string_view json_text, std::string_view what);
// The record as profile JSON (what `duet devices --json` writes).
DUET_API std::string profile_json(const DeviceCaps& caps);

}  // namespace duet
