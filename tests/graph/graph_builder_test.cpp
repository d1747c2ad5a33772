// Building graphs: validation as ops are added, shape inference, and the errors users get.
#include <gtest/gtest.h>

#include "duet/graph.h"

namespace duet {
namespace {

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST(GraphBuilder, InfersShapesThroughAnMlp) {
  GraphBuilder b("mlp");
  ValueId x = b.input("x", DType::f16, {8, 64});
  ValueId w1 = b.constant("w1", DType::f16, {64, 128});
  ValueId w2 = b.constant("w2", DType::f16, {128, 64});
  ValueId h = b.silu(b.matmul(x, w1, false, "up"), "act");
  b.output(b.matmul(h, w2, false, "down"));
  auto g = b.build();
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->nodes().size(), 3u);
  EXPECT_EQ(g->value(*g->find("act")).desc.str(), "f16[8,128]");
  EXPECT_EQ(g->value(g->outputs()[0]).desc.str(), "f16[8,64]");
  EXPECT_EQ(g->inputs().size(), 1u);
  EXPECT_EQ(g->constants().size(), 2u);
  EXPECT_EQ(g->unbound_constants(), (std::vector<std::string>{"w1", "w2"}));
}

TEST(GraphBuilder, AShapeMismatchNamesTheNodeAndTensor) {
  GraphBuilder b("bad");
  ValueId x = b.input("x", DType::f32, {8, 64});
  ValueId w = b.constant("w", DType::f32, {32, 16});
  ValueId y = b.matmul(x, w, false, "proj");
  b.output(b.relu(y));  // ignored after the first error
  auto g = b.build();
  ASSERT_FALSE(g.ok());
  EXPECT_HAS(g.status().message(), "graph 'bad'");
  EXPECT_HAS(g.status().message(), "matmul 'proj'");
  EXPECT_HAS(g.status().message(), "tensor 'w'");
  EXPECT_HAS(g.status().message(), "K = 64");
}

TEST(GraphBuilder, DuplicateNamesAreRefused) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::f32, {4});
  b.relu(x, "x");
  auto g = b.build();
  ASSERT_FALSE(g.ok());
  EXPECT_HAS(g.status().message(), "tensor 'x'");
  EXPECT_HAS(g.status().message(), "a name not used before");
}

TEST(GraphBuilder, MixedDtypesAreRefusedWithBothNames) {
  GraphBuilder b;
  ValueId a = b.input("a", DType::f16, {4});
  ValueId c = b.input("c", DType::bf16, {4});
  b.output(b.add(a, c, "sum"));
  auto g = b.build();
  ASSERT_FALSE(g.ok());
  EXPECT_HAS(g.status().message(), "add 'sum'");
  EXPECT_HAS(g.status().message(), "f16 like 'a'");
}

TEST(GraphBuilder, AGraphNeedsAnOutput) {
  GraphBuilder b("empty");
  b.relu(b.input("x", DType::f32, {4}));
  auto g = b.build();
  ASSERT_FALSE(g.ok());
  EXPECT_HAS(g.status().message(), "at least one output");
}

TEST(GraphBuilder, AnInputCannotBeAnOutput) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::f32, {4});
  b.output(x);
  ASSERT_FALSE(b.build().ok());
  EXPECT_HAS(b.status().message(), "an output computed by a node");
}

TEST(GraphBuilder, HandlesFromNowhereAreErrorsNotCrashes) {
  GraphBuilder b;
  b.relu(ValueId{42});
  ASSERT_FALSE(b.build().ok());
  EXPECT_HAS(b.status().message(), "handle 42");
  GraphBuilder b2;
  b2.relu(ValueId{});
  EXPECT_HAS(b2.status().message(), "invalid handle");
}

TEST(GraphBuilder, RankAndZeroSizesAreChecked) {
  GraphBuilder b;
  b.input("x", DType::f32, {1, 2, 3, 4, 5});
  EXPECT_HAS(b.status().message(), "rank <= 4");
  GraphBuilder b2;
  b2.input("x", DType::f32, {3, 0});
  EXPECT_FALSE(b2.status().ok());
}

TEST(GraphBuilder, ViewsAliasAndKeepStrides) {
  GraphBuilder b("views");
  ValueId x = b.input("x", DType::f32, {2, 3, 4});
  ValueId t = b.transpose(x, 1, 2, "t");
  ValueId s = b.slice(t, 2, 1, 3, 1, "s");
  b.output(b.copy(s, "dense"));
  auto g = b.build();
  ASSERT_TRUE(g.ok()) << g.status().message();
  const TensorDesc& sd = g->value(*g->find("s")).desc;
  EXPECT_EQ(sd.shape_str(), "[2,4,2]");
  EXPECT_FALSE(sd.is_contiguous());
  EXPECT_EQ(sd.offset, 4);
}

TEST(Graph, BindConstantChecksTypeAndShape) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::f32, {2});
  ValueId w = b.constant("w", DType::f32, {2});
  b.output(b.mul(x, w));
  Graph g = *b.build();
  Status s = g.bind_constant("w", HostTensor::empty(DType::f16, std::vector<int64_t>{2}));
  EXPECT_HAS(s.message(), "tensor 'w'");
  EXPECT_HAS(s.message(), "expected f32[2]");
  EXPECT_FALSE(g.bind_constant("x", HostTensor::empty(DType::f32, std::vector<int64_t>{2})).ok());
  EXPECT_TRUE(g.bind_constant("w", HostTensor::empty(DType::f32, std::vector<int64_t>{2})).ok());
  EXPECT_TRUE(g.unbound_constants().empty());
}

TEST(Graph, NewInputShapesReinferEveryOp) {
  GraphBuilder b("seq");
  ValueId x = b.input("x", DType::f32, {1, 2, 8, 16});
  ValueId r = b.reshape(x, {1, 2, -1}, "flat");
  b.output(b.softmax(r, "p"));
  Graph g = *b.build();
  auto g2 = g.with_input_shapes({{"x", TensorDesc::contiguous(DType::f32, {1, 2, 5, 16})}});
  ASSERT_TRUE(g2.ok()) << g2.status().message();
  EXPECT_EQ(g2->value(*g2->find("p")).desc.str(), "f32[1,2,80]");
  // A dtype change is refused: shapes change, types do not.
  auto g3 = g.with_input_shapes({{"x", TensorDesc::contiguous(DType::f16, {1, 2, 5, 16})}});
  EXPECT_FALSE(g3.ok());
}

TEST(Graph, NewInputShapesAnOpRefusesAreAnErrorEvenWithConstantsAfterIt) {
  // Importers add constants between nodes; a failed re-inference must not reach past them.
  GraphBuilder b("fixed");
  ValueId x = b.input("x", DType::f32, {2, 8});
  ValueId r = b.reshape(x, {4, 4}, "square");
  ValueId w = b.constant("w", HostTensor::empty(DType::f32, std::vector<int64_t>{4}));
  b.output(b.mul(r, w, "y"));
  Graph g = *b.build();
  auto g2 = g.with_input_shapes({{"x", TensorDesc::contiguous(DType::f32, {3, 8})}});
  ASSERT_FALSE(g2.ok());
  EXPECT_HAS(g2.status().message(), "square");
}

}  // namespace
}  // namespace duet
