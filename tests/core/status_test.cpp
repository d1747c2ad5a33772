#include <gtest/gtest.h>

#include "duet/status.h"

namespace duet {
namespace {

TEST(Status, ErrBuildsTheStandardSentence) {
  Status s = Err(Code::invalid_argument)
                 .op("matmul", "proj")
                 .tensor("b")
                 .device("cuda:1")
                 .expected("K = 64")
                 .got("32");
  EXPECT_EQ(s.message(), "matmul 'proj': tensor 'b' on cuda:1: expected K = 64, got 32");
  EXPECT_EQ(s.to_string(),
            "invalid_argument: matmul 'proj': tensor 'b' on cuda:1: expected K = 64, got 32");
}

TEST(Status, ContextPrefixesErrorsOnly) {
  EXPECT_TRUE(Status().with_context("graph").ok());
  EXPECT_EQ(Status(Code::not_found, "x").with_context("graph 'g'").message(), "graph 'g': x");
}

Result<int> half_of(int x) {
  if (x % 2) return Err(Code::invalid_argument).expected("an even number").got(std::to_string(x));
  return x / 2;
}

Result<int> quarter(int x) {
  DUET_ASSIGN_OR_RETURN(int h, half_of(x));
  DUET_ASSIGN_OR_RETURN(int q, half_of(h));
  return q;
}

TEST(Status, ResultPropagatesThroughMacros) {
  EXPECT_EQ(*quarter(8), 2);
  auto r = quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "expected an even number, got 3");
}

}  // namespace
}  // namespace duet
