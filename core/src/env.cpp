#include "duet/internal/env.h"

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

#include "duet/internal/log.h"

namespace duet {

void env_warn_once(const char* name, std::string_view value, std::string_view problem,
                   std::string_view instead) {
  static std::mutex m;
  static std::set<std::string> warned;
  {
    std::lock_guard<std::mutex> g(m);
    if (!warned.insert(name).second) return;
  }
  log().warn("{}='{}' {}; {}", name, value, problem, instead);
}

std::optional<int64_t> env_int(const char* name, int64_t min, int64_t max,
                               std::string_view instead) {
  const char* e = std::getenv(name);
  if (!e || !*e) return std::nullopt;
  const std::string_view s(e);
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc() && end == s.data() + s.size() && v >= min && v <= max) return v;
  env_warn_once(name, s,
                "is not a whole number from " + std::to_string(min) + " to " + std::to_string(max),
                "using " + std::string(instead));
  return std::nullopt;
}

bool env_switch(const char* name, bool fallback) {
  const char* e = std::getenv(name);
  if (!e || !*e) return fallback;
  std::string s(e);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s == "1" || s == "true" || s == "on" || s == "yes") return true;
  if (s == "0" || s == "false" || s == "off" || s == "no") return false;
  env_warn_once(name, e, "is not a switch (1, true, on, yes or 0, false, off, no)",
                std::string("using the default, ") + (fallback ? "on" : "off"));
  return fallback;
}

}  // namespace duet
