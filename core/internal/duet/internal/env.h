// Settings from environment variables, read the same way everywhere: a value that cannot be
// used is never silently ignored; it is reported once per variable (a warning through the
// logger, saying what is used instead) and the default applies.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace duet {

// A whole number in [min, max] from `name`; nullopt when unset or empty, and when the value is
// anything else (after a warning naming the variable, the value, what was expected and
// `instead`, the words for what is used: "every core").
std::optional<int64_t> env_int(const char* name, int64_t min, int64_t max,
                               std::string_view instead);
// A switch from `name`: 1, true, on, yes or 0, false, off, no (any case). `fallback` when unset
// or empty, and after a warning for any other word.
bool env_switch(const char* name, bool fallback);
// Warns once per `name` (for variables read elsewhere): "<name>='<value>' <problem>; <instead>".
void env_warn_once(const char* name, std::string_view value, std::string_view problem,
                   std::string_view instead);

}  // namespace duet
