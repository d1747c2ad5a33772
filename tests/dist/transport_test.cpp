// The transport over MPI with two ranks of this machine (tests/dist/ranks.cpp is each rank).
#include <gtest/gtest.h>

#include "duet/version.h"
#include "mpirun.h"

namespace {
using duet::test::mpirun;

TEST(Transport, TwoRanksExchangeMessagesAfterAgreeingOnStart) {
  auto r = mpirun(2, DUET_DIST_RANKS, "pingpong");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("exchanged with rank 1, blob of 12345 bytes"), std::string::npos)
      << r.output;
}

TEST(Transport, AnotherGraphOnOneRankIsRefusedOnEveryRank) {
  auto r = mpirun(2, DUET_DIST_RANKS, "mismatch");
  EXPECT_NE(r.exit_code, 0) << r.output;
  // Both ranks say it, naming the rank that differs.
  EXPECT_NE(r.output.find("rank 0: start refused: rank 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1: start refused: rank 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("fingerprint another-graph"), std::string::npos) << r.output;
}

TEST(Transport, AnotherBuildOnOneRankIsRefusedOnEveryRankNamingBoth) {
  auto r = mpirun(2, DUET_DIST_RANKS, "other-build");
  EXPECT_NE(r.exit_code, 0) << r.output;
  // Every rank says it, with both ranks and both builds.
  for (const char* rank : {"rank 0: ", "rank 1: "}) {
    const std::string line = std::string(rank) + "start refused: rank 1 (";
    const size_t at = r.output.find(line);
    ASSERT_NE(at, std::string::npos) << r.output;
    const std::string said = r.output.substr(at, r.output.find('\n', at) - at);
    EXPECT_NE(said.find(") runs duet " DUET_VERSION_STRING ", commit f0e0be5ca0d1, "),
              std::string::npos)
        << said;
    EXPECT_NE(said.find("; rank 0 ("), std::string::npos) << said;
    EXPECT_NE(said.find(") runs duet " DUET_VERSION_STRING ", commit 30e0be5ca0d1, "),
              std::string::npos)
        << said;
    EXPECT_NE(said.find(": the source revision differs, and every rank must run the same duet "
                        "build"),
              std::string::npos)
        << said;
  }
}

TEST(Transport, AnUnknownRevisionIsLeftOutAndTheRestCompared) {
  // Same version, compiler and flags, one revision unknown: the same build as far as can be told
  // (BuildIdentity's tests refuse the rest differing).
  auto same = mpirun(2, DUET_DIST_RANKS, "unknown-revision");
  EXPECT_EQ(same.exit_code, 0) << same.output;
  EXPECT_NE(same.output.find("rank 1: agreed with rank 1's revision unknown"), std::string::npos)
      << same.output;
}

TEST(Transport, StalledRankEndsEveryRankWithItsNameAndTheStep) {
  auto r = mpirun(2, DUET_DIST_RANKS, "stall 1");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("step 'receive x+1': receiving 'x+1' from rank 1: nothing after 1.0 s"),
            std::string::npos)
      << r.output;
  EXPECT_LT(r.seconds, 300) << "rank 1 sleeps 600 s: the run must end at the timeout";
}

TEST(Transport, KilledRankEndsTheOthers) {
  auto r = mpirun(2, DUET_DIST_RANKS, "killed 5");
  EXPECT_NE(r.exit_code, 0) << r.output;
  // mpirun ends the job when a rank dies and names it; were it not to, rank 0's wait would
  // time out naming rank 1.
  EXPECT_NE(r.output.find("rank 1"), std::string::npos) << r.output;
  EXPECT_LT(r.seconds, 300) << r.output;
}
}  // namespace
