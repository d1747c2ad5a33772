#include "duet/internal/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace duet {

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = spdlog::stderr_color_mt("duet");
    l->set_pattern("[%H:%M:%S.%e] [duet] [%^%l%$] %v");
    spdlog::level::level_enum level = spdlog::level::warn;
    if (const char* env = std::getenv("DUET_LOG")) {
      auto parsed = spdlog::level::from_str(env);
      // from_str maps unknown text to "off"; only accept it when the user wrote "off".
      if (parsed != spdlog::level::off || std::string_view(env) == "off") level = parsed;
    }
    l->set_level(level);
    return l;
  }();
  return *logger;
}

}  // namespace duet
