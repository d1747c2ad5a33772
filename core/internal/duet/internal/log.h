// The engine's one logger ("duet"). Quiet by default (warnings and errors); DUET_LOG sets the
// level: trace, debug, info, warn, error, critical, off.
#pragma once

#include <spdlog/spdlog.h>

namespace duet {

spdlog::logger& log();

}  // namespace duet
