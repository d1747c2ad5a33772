// Which duet build this is: its version, the source revision it was built from, and what changes
// its numerics from one build to another (compiler, build type and flags). The ranks of a
// distributed run compare them at start (docs/distributed.md); `duet --version` prints them.
//
// Not part of it: the backends built (a rank without CUDA may join a rank with it: which devices
// a rank has is its own) and the CPU's instruction set (chosen at run time on every rank).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "duet/export.h"

namespace duet {

struct BuildIdentity {
  std::string version;          // the project's, "0.1.0"
  std::string revision;         // the git commit built (hex); "" where unknown
  bool dirty = false;           // tracked files differed from that commit when it was built
  std::string unknown_because;  // why the revision is unknown ("the sources are not a git ...")
  std::string compiler;         // "GNU 12.2.0"
  std::string build_type;       // "Release"
  std::string flags;            // the C++ flags of that build type, "-O3 -DNDEBUG"

  // "duet 0.1.0, commit 30e0be5ca0d1 with uncommitted changes, GNU 12.2.0, Release (-O3
  // -DNDEBUG)"; the revision unknown: "duet 0.1.0, source revision unknown (the sources are not a
  // git checkout), ...".
  std::string text() const;
  // One line that parse() reads back (sent between ranks).
  std::string serialize() const;
  static std::optional<BuildIdentity> parse(std::string_view line);
  // What makes `other` another build, in words ("the source revision", "the compiler"; several
  // joined by " and "), or "" when they are the same build. A revision unknown on either side is
  // not compared; the rest is. Two builds of one commit with uncommitted changes compare equal
  // (the changes themselves are not identified).
  std::string difference(const BuildIdentity& other) const;
};

// This build's.
DUET_API const BuildIdentity& build_identity();

}  // namespace duet
