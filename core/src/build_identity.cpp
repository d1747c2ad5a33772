#include "duet/build_identity.h"

#include <vector>

namespace duet {

// The generated source of the duet_revision target (cmake/DuetRevision.cmake).
namespace build_revision {
extern const char* const kCommit;
extern const bool kDirty;
extern const char* const kUnknownBecause;
}  // namespace build_revision

namespace {
// Fields of serialize()'s line; the unit separator appears in none of them.
constexpr char kSep = '\x1f';
constexpr size_t kFields = 7;

std::vector<std::string> split(std::string_view line) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= line.size(); ++i)
    if (i == line.size() || line[i] == kSep) {
      parts.emplace_back(line.substr(start, i - start));
      start = i + 1;
    }
  return parts;
}
}  // namespace

std::string BuildIdentity::text() const {
  std::string s = "duet " + version + ", ";
  if (revision.empty())
    s += "source revision unknown (" +
         (unknown_because.empty() ? std::string("not recorded") : unknown_because) + ")";
  else
    s += "commit " + revision.substr(0, 12) + (dirty ? " with uncommitted changes" : "");
  s += ", " + compiler + ", " + (build_type.empty() ? std::string("no build type") : build_type);
  if (!flags.empty()) s += " (" + flags + ")";
  return s;
}

std::string BuildIdentity::serialize() const {
  std::string s;
  for (const std::string* f :
       {&version, &revision, &unknown_because, &compiler, &build_type, &flags}) {
    s += *f;
    s += kSep;
  }
  s += dirty ? "dirty" : "clean";
  return s;
}

std::optional<BuildIdentity> BuildIdentity::parse(std::string_view line) {
  const std::vector<std::string> p = split(line);
  if (p.size() != kFields || (p[6] != "dirty" && p[6] != "clean")) return std::nullopt;
  BuildIdentity b;
  b.version = p[0];
  b.revision = p[1];
  b.unknown_because = p[2];
  b.compiler = p[3];
  b.build_type = p[4];
  b.flags = p[5];
  b.dirty = p[6] == "dirty";
  return b;
}

std::string BuildIdentity::difference(const BuildIdentity& o) const {
  std::vector<std::string> what;
  if (version != o.version) what.emplace_back("the version");
  if (!revision.empty() && !o.revision.empty()) {
    if (revision != o.revision)
      what.emplace_back("the source revision");
    else if (dirty != o.dirty)
      what.emplace_back("the source (one has uncommitted changes)");
  }
  if (compiler != o.compiler) what.emplace_back("the compiler");
  if (build_type != o.build_type || flags != o.flags) what.emplace_back("the build type or flags");
  std::string s;
  for (size_t i = 0; i < what.size(); ++i) s += (i == 0 ? "" : " and ") + what[i];
  return s;
}

const BuildIdentity& build_identity() {
  static const BuildIdentity b = [] {
    BuildIdentity out;
    out.version = DUET_BUILD_VERSION;
    out.revision = build_revision::kCommit;
    out.dirty = build_revision::kDirty;
    out.unknown_because = build_revision::kUnknownBecause;
    out.compiler = DUET_BUILD_COMPILER;
    out.build_type = DUET_BUILD_TYPE;
    out.flags = DUET_BUILD_FLAGS;
    return out;
  }();
  return b;
}

}  // namespace duet
