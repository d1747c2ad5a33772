// Pieces shared by the `duet` subcommands.
#pragma once

#include <string>
#include <vector>

#include "duet/registry.h"

namespace duet::cli {

// The devices named by `ids` (all devices when empty), or an error naming the unknown id.
Result<std::vector<Device*>> select_devices(const Registry& reg,
                                            const std::vector<std::string>& ids);
// An error naming the first unknown op or dtype.
Status validate_ops(const std::vector<std::string>& ops);
Status validate_dtypes(const std::vector<std::string>& dtypes);
// Writes `content` to a temporary file beside `path` and renames it into place, so a failure
// never leaves a partial file that looks complete.
Status write_file_atomically(const std::string& path, const std::string& content);
// Whether `list` is empty (no filter) or contains `value`.
bool selected(const std::vector<std::string>& list, std::string_view value);

}  // namespace duet::cli
