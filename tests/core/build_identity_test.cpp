// The build identity (duet/build_identity.h) that the ranks of a distributed run compare.
#include "duet/build_identity.h"

#include <gtest/gtest.h>

#include "duet/version.h"

namespace {
using duet::BuildIdentity;

BuildIdentity sample() {
  BuildIdentity b;
  b.version = "0.1.0";
  b.revision = "30e0be5ca0d1e1de5b8e0d1d3dd2c9f35c1cbd20";
  b.compiler = "GNU 12.2.0";
  b.build_type = "Release";
  b.flags = "-O3 -DNDEBUG";
  return b;
}

TEST(BuildIdentity, ThisBuildSaysItsVersionRevisionAndCompiler) {
  const BuildIdentity& b = duet::build_identity();
  EXPECT_EQ(b.version, DUET_VERSION_STRING);
  EXPECT_FALSE(b.compiler.empty());
  // A commit (hex), or why there is none.
  if (b.revision.empty()) {
    EXPECT_FALSE(b.unknown_because.empty());
  } else {
    EXPECT_EQ(b.revision.find_first_not_of("0123456789abcdef"), std::string::npos) << b.revision;
    EXPECT_GE(b.revision.size(), 40u) << b.revision;
  }
  EXPECT_EQ(b.text().rfind("duet " DUET_VERSION_STRING ", ", 0), 0u) << b.text();
}

TEST(BuildIdentity, TextNamesTheCommitOrWhyItIsUnknown) {
  BuildIdentity b = sample();
  EXPECT_EQ(b.text(), "duet 0.1.0, commit 30e0be5ca0d1, GNU 12.2.0, Release (-O3 -DNDEBUG)");
  b.dirty = true;
  EXPECT_EQ(b.text(),
            "duet 0.1.0, commit 30e0be5ca0d1 with uncommitted changes, GNU 12.2.0, "
            "Release (-O3 -DNDEBUG)");
  b.revision.clear();
  b.unknown_because = "the sources are not a git checkout";
  EXPECT_EQ(b.text(),
            "duet 0.1.0, source revision unknown (the sources are not a git checkout), "
            "GNU 12.2.0, Release (-O3 -DNDEBUG)");
}

TEST(BuildIdentity, SerializedItReadsBackAndAnythingElseDoesNot) {
  BuildIdentity b = sample();
  b.dirty = true;
  auto back = BuildIdentity::parse(b.serialize());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->text(), b.text());
  EXPECT_TRUE(back->difference(b).empty());
  // What an older duet sent: its version alone.
  EXPECT_FALSE(BuildIdentity::parse("0.1.0").has_value());
  EXPECT_FALSE(BuildIdentity::parse("").has_value());
}

TEST(BuildIdentity, DifferenceNamesWhatDiffersAndLeavesOutAnUnknownRevision) {
  const BuildIdentity a = sample();
  BuildIdentity b = a;
  EXPECT_EQ(a.difference(b), "");
  b.revision[0] = 'f';
  EXPECT_EQ(a.difference(b), "the source revision");
  b = a;
  b.dirty = true;
  EXPECT_EQ(a.difference(b), "the source (one has uncommitted changes)");
  b = a;
  b.version = "0.2.0";
  b.compiler = "Clang 17.0.6";
  EXPECT_EQ(a.difference(b), "the version and the compiler");
  b = a;
  b.flags = "-O2";
  EXPECT_EQ(a.difference(b), "the build type or flags");
  // Unknown on one side: the rest is compared.
  b = a;
  b.revision.clear();
  EXPECT_EQ(a.difference(b), "");
  EXPECT_EQ(b.difference(a), "");
  b.build_type = "Debug";
  EXPECT_EQ(b.difference(a), "the build type or flags");
}
}  // namespace
