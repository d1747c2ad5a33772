#include "duet/profiles.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <dlfcn.h>

#include "duet/internal/caps_json.h"
#include "duet/internal/env.h"
#include "duet/internal/files.h"
#include "duet/internal/json.h"

#ifndef DUET_PROFILES_INSTALL_DIR
#define DUET_PROFILES_INSTALL_DIR ""
#endif
#ifndef DUET_PROFILES_RELATIVE_DIR
#define DUET_PROFILES_RELATIVE_DIR "share/duet/profiles"
#endif
#ifndef DUET_PROFILES_SOURCE_DIR
#define DUET_PROFILES_SOURCE_DIR ""
#endif

namespace duet {

namespace fs = std::filesystem;

namespace {
// <prefix>/share/duet/profiles for the prefix holding the file this code was loaded from
// (libduet.so in <prefix>/lib, or the duet binary in <prefix>/bin), so an installed tree finds
// its profiles even after it was moved.
std::string profiles_beside_this_binary() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&profile_dirs), &info) == 0 || !info.dli_fname) return {};
  std::error_code ec;
  const fs::path self = fs::canonical(info.dli_fname, ec);
  if (ec) return {};
  return (self.parent_path().parent_path() / DUET_PROFILES_RELATIVE_DIR).string();
}
}  // namespace

std::vector<std::string> profile_dirs() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("DUET_PROFILES"); env && *env) {
    std::string s(env);
    size_t start = 0;
    for (size_t i = 0; i <= s.size(); ++i)
      if (i == s.size() || s[i] == ':') {
        if (i > start) {
          candidates.push_back(s.substr(start, i - start));
          std::error_code ec;
          if (!fs::is_directory(candidates.back(), ec))
            env_warn_once("DUET_PROFILES", s,
                          "names '" + candidates.back() + "', which is not a folder",
                          "it is skipped");
        }
        start = i + 1;
      }
  }
  candidates.push_back(profiles_beside_this_binary());
  candidates.emplace_back(DUET_PROFILES_INSTALL_DIR);
  candidates.emplace_back(DUET_PROFILES_SOURCE_DIR);
  std::vector<std::string> out;
  for (const std::string& c : candidates) {
    std::error_code ec;
    if (!c.empty() && fs::is_directory(c, ec) && std::find(out.begin(), out.end(), c) == out.end())
      out.push_back(c);
  }
  return out;
}

std::vector<std::string> profile_names() {
  std::set<std::string> names;
  for (const std::string& dir : profile_dirs()) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".json") names.insert(e.path().stem().string());
  }
  return {names.begin(), names.end()};
}

Result<DeviceCaps> parse_profile(std::string_view text, std::string_view what) {
  auto j = parse_json(text);
  if (!j.ok()) return j.status().with_context("profile '" + std::string(what) + "'");
  auto caps = caps_from_json(*j);
  if (!caps.ok()) return caps.status().with_context("profile '" + std::string(what) + "'");
  if (caps->source.empty() || caps->source == "probed")
    return at("profile '" + std::string(what) + "': field 'source'",
              Err(Code::parse_error)
                  .expected("where the values come from (a specification; `duet devices "
                            "--profile ID` fills it in for a device of this machine)")
                  .got(caps->source.empty() ? "none" : "'" + caps->source + "'"));
  return caps;
}

Result<DeviceCaps> load_profile(std::string_view name_or_path) {
  std::string path;
  const std::string name(name_or_path);
  std::error_code ec;
  if (name.find('/') != std::string::npos || fs::path(name).extension() == ".json") {
    path = name;
  } else {
    for (const std::string& dir : profile_dirs()) {
      const fs::path p = fs::path(dir) / (name + ".json");
      if (fs::is_regular_file(p, ec)) {
        path = p.string();
        break;
      }
    }
    if (path.empty()) {
      std::string known;
      for (const std::string& n : profile_names()) known += (known.empty() ? "" : ", ") + n;
      std::string dirs;
      for (const std::string& d : profile_dirs()) dirs += (dirs.empty() ? "" : ", ") + d;
      return at("profile '" + name + "'",
                Err(Code::not_found)
                    .expected("one of " + (known.empty() ? std::string("(none found)") : known) +
                              ", or a path to a .json record")
                    .got("none such in " + (dirs.empty() ? std::string("any folder") : dirs) +
                         " (DUET_PROFILES adds folders)"));
    }
  }
  DUET_ASSIGN_OR_RETURN(std::string text, read_whole_file(path, kProfileMaxBytes, "profile"));
  return parse_profile(text, path);
}

std::string profile_json(const DeviceCaps& caps) {
  return caps_to_json(caps).dump(2) + "\n";
}

}  // namespace duet
