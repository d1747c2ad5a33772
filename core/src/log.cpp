#include "duet/internal/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace duet {

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = spdlog::stderr_color_mt("duet");
    l->set_pattern("[%H:%M:%S.%e] [duet] [%^%l%$] %v");
    spdlog::level::level_enum level = spdlog::level::warn;
    bool bad = false;
    const char* env = std::getenv("DUET_LOG");
    if (env && *env) {
      auto parsed = spdlog::level::from_str(env);
      // from_str maps unknown text to "off"; only accept it when the user wrote "off".
      bad = parsed == spdlog::level::off && std::string_view(env) != "off";
      if (!bad) level = parsed;
    }
    l->set_level(level);
    if (bad)
      l->warn(
          "DUET_LOG='{}' is not a level (trace, debug, info, warn, error, critical, off); "
          "using warn",
          env);
    return l;
  }();
  return *logger;
}

}  // namespace duet
