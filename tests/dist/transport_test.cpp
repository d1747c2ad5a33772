// The transport over MPI with two ranks of this machine (tests/dist/ranks.cpp is each rank).
#include <gtest/gtest.h>

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
  EXPECT_NE(r.output.find("rank 0: start: rank 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1: start: rank 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("fingerprint another-graph"), std::string::npos) << r.output;
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
