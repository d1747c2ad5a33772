// Shape and dtype inference, and the error a user gets for each kind of bad input.
#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "duet/eltwise.h"
#include "duet/graph_file.h"
#include "duet/op.h"

namespace duet {
namespace {

TensorDesc T(DType t, std::initializer_list<int64_t> s) {
  return TensorDesc::contiguous(t, s);
}
TensorDesc F(std::initializer_list<int64_t> s) {
  return T(DType::f32, s);
}

// The error message of a make_op call that must fail.
std::string error_of(OpKind k, std::vector<TensorDesc> in, OpAttrs a = {}) {
  auto r = make_op(k, std::move(a), std::move(in), {}, "n1");
  EXPECT_FALSE(r.ok()) << "expected an error";
  return r.ok() ? std::string() : r.status().message();
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST(Op, NamesRoundTrip) {
  for (int i = 0; i < kNumOpKinds; ++i) {
    auto k = static_cast<OpKind>(i);
    EXPECT_EQ(parse_op(op_name(k)), k);
  }
  EXPECT_FALSE(parse_op("conv2d"));
}

// Every op kind has its row of facts; every element-wise op a function code of its own, known to
// the kernels, and a float64 definition; no other op has either.
TEST(Op, EveryKindHasItsFactsAndEveryElementwiseOpItsCode) {
  std::set<uint32_t> codes;
  for (int i = 0; i < kNumOpKinds; ++i) {
    const auto k = static_cast<OpKind>(i);
    EXPECT_NE(op_name(k), "?") << i;
    EXPECT_FALSE(op_inputs(k).empty()) << op_name(k);
    OpDesc op;
    op.kind = k;
    const bool ew = op_class(k) == OpClass::elementwise;
    EXPECT_EQ(eltwise_code(op).has_value(), ew) << op_name(k);
    EXPECT_EQ(eltwise_reference(k) != nullptr, ew) << op_name(k);
    if (!ew) continue;
    EXPECT_EQ(is_binary_elementwise(k), op_inputs(k).size() == 2) << op_name(k);
    const uint32_t code = *eltwise_code(op);
    EXPECT_LT(code, DUET_EW_COUNT) << op_name(k);
    EXPECT_EQ(code < DUET_EW_BINARY_END, is_binary_elementwise(k)) << op_name(k);
    EXPECT_TRUE(codes.insert(code).second) << op_name(k) << " shares code " << code;
  }
  OpDesc gelu;
  gelu.kind = OpKind::gelu;
  gelu.attrs.gelu_approx = GeluApprox::tanh;
  EXPECT_EQ(eltwise_code(gelu), DUET_EW_GELU_TANH);
  EXPECT_EQ(op_input_range(OpKind::div, 1), InputRange::positive);
  EXPECT_EQ(op_input_range(OpKind::div, 0), InputRange::any);
}

// Every op kind's row documents it (docs/ops.md is printed from the rows): a line per input, an
// example graph that loads and uses the op, and attributes whose stated default is the default
// (a graph file omits an attribute at its default when written back).
TEST(Op, EveryKindIsDocumentedWithAnExampleThatLoads) {
  for (int i = 0; i < kNumOpKinds; ++i) {
    const auto k = static_cast<OpKind>(i);
    const OpDoc& d = op_doc(k);
    EXPECT_FALSE(d.summary.empty()) << op_name(k);
    EXPECT_FALSE(d.semantics.empty()) << op_name(k);
    EXPECT_EQ(d.inputs.size(), op_inputs(k).size()) << op_name(k);
    auto g = graph_from_json(d.example);
    ASSERT_TRUE(g.ok()) << op_name(k) << ": " << g.status().message();
    bool uses = false;
    for (const auto& n : g->nodes()) uses |= n.op.kind == k;
    EXPECT_TRUE(uses) << op_name(k) << "'s example does not use it";
    for (const OpAttrDoc& a : d.attrs) {
      auto value = nlohmann::json::parse(a.default_value, nullptr, false);
      if (value.is_discarded() || a.name == "scale") continue;  // "1/sqrt(D)"; scale is optional
      nlohmann::json file = nlohmann::json::parse(d.example);
      for (auto& n : file["nodes"])
        if (n["op"] == op_name(k)) n["attrs"][std::string(a.name)] = value;
      auto with_default = graph_from_json(file.dump());
      if (!with_default.ok()) continue;  // a default that is no valid value (slice's stop)
      const auto written = nlohmann::json::parse(graph_to_json(*with_default));
      for (const auto& n : written["nodes"])
        if (n["op"] == op_name(k))
          EXPECT_FALSE(n.contains("attrs") && n["attrs"].contains(std::string(a.name)))
              << op_name(k) << "." << a.name << " documented default " << a.default_value
              << " is not the default";
    }
  }
}

TEST(Op, MatmulBroadcastsBatchAndHonoursTranspose) {
  OpAttrs a;
  a.transpose_b = true;
  auto op = make_op(OpKind::matmul, a, {T(DType::bf16, {2, 1, 5, 7}), T(DType::bf16, {3, 4, 7})});
  ASSERT_TRUE(op.ok()) << op.status().message();
  EXPECT_EQ(op->output.str(), "bf16[2,3,5,4]");
  EXPECT_DOUBLE_EQ(op_flops(*op), 2.0 * 2 * 3 * 5 * 4 * 7);
}

TEST(Op, MatmulWithMismatchedInnerDimsNamesTheTensorAndSizes) {
  std::string m = error_of(OpKind::matmul, {F({3, 64}), F({32, 5})});
  EXPECT_HAS(m, "matmul 'n1'");
  EXPECT_HAS(m, "tensor 'b'");
  EXPECT_HAS(m, "K = 64");
  EXPECT_HAS(m, "got 32");
}

TEST(Op, MatmulOfMixedDtypesIsRefused) {
  std::string m = error_of(OpKind::matmul, {F({3, 4}), T(DType::f16, {4, 5})});
  EXPECT_HAS(m, "expected f32 like 'a'");
}

TEST(Op, UnsupportedDtypeIsRefused) {
  EXPECT_HAS(error_of(OpKind::silu, {T(DType::i32, {4})}), "a float dtype");
  EXPECT_HAS(error_of(OpKind::embedding, {F({10, 4}), F({3})}), "i32 ids");
}

TEST(Op, BinaryOpsBroadcastLikeNumpy) {
  auto op = make_op(OpKind::add, {}, {F({2, 1, 5}), F({3, 1})});
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op->output.shape_str(), "[2,3,5]");
  EXPECT_HAS(error_of(OpKind::mul, {F({2, 3}), F({4})}), "broadcasts with [2,3]");
}

TEST(Op, ZeroAndNegativeDimsAreRefused) {
  EXPECT_HAS(error_of(OpKind::relu, {F({3, 0})}), "every dimension >= 1");
  TensorDesc neg = F({3, 2});
  neg.shape[0] = -1;
  EXPECT_HAS(error_of(OpKind::relu, {neg}), "tensor 'x'");
}

TEST(Op, AttentionSupportsGqaAndDecode) {
  OpAttrs a;
  a.causal = true;
  auto op = make_op(OpKind::attention, a,
                    {F({1, 32, 1, 128}), F({1, 8, 4000, 128}), F({1, 8, 4000, 128})});
  ASSERT_TRUE(op.ok()) << op.status().message();
  EXPECT_EQ(op->output.shape_str(), "[1,32,1,128]");
  // One query against 4000 keys, all visible under end-aligned causal masking.
  EXPECT_DOUBLE_EQ(op_flops(*op), 4.0 * 32 * 4000 * 128);
}

TEST(Op, AttentionWithHqNotAMultipleOfHkvIsRefused) {
  std::string m =
      error_of(OpKind::attention, {F({1, 6, 4, 16}), F({1, 4, 4, 16}), F({1, 4, 4, 16})});
  EXPECT_HAS(m, "Hkv dividing Hq = 6");
  EXPECT_HAS(m, "Hkv = 4");
}

TEST(Op, AttentionMaskOfTheWrongShapeIsRefused) {
  std::string m = error_of(OpKind::attention,
                           {F({1, 2, 4, 16}), F({1, 2, 6, 16}), F({1, 2, 6, 16}), F({4, 5})});
  EXPECT_HAS(m, "tensor 'mask'");
  EXPECT_HAS(m, "broadcasts to [1,2,4,6]");
  EXPECT_HAS(m, "f32[4,5]");
}

TEST(Op, AttentionHeadDimMismatchIsRefused) {
  EXPECT_HAS(error_of(OpKind::attention, {F({1, 2, 4, 16}), F({1, 2, 6, 8}), F({1, 2, 6, 8})}),
             "tensor 'k'");
  EXPECT_HAS(error_of(OpKind::attention, {F({1, 2, 4, 16}), F({1, 2, 6, 16}), F({1, 2, 5, 16})}),
             "tensor 'v'");
}

TEST(Op, SoftmaxMaskMustBroadcast) {
  auto ok = make_op(OpKind::softmax, {}, {F({2, 3, 7}), F({3, 7})});
  EXPECT_TRUE(ok.ok());
  EXPECT_HAS(error_of(OpKind::softmax, {F({2, 3, 7}), F({2, 7})}), "broadcasts to [2,3,7]");
}

TEST(Op, NormWeightsMustMatchTheLastDim) {
  EXPECT_HAS(error_of(OpKind::rmsnorm, {F({3, 8}), F({7})}), "shape [8]");
  OpAttrs a;
  a.eps = 0;
  EXPECT_HAS(error_of(OpKind::layernorm, {F({3, 8})}, a), "eps > 0");
}

TEST(Op, RopeNeedsAnEvenRotatedWidth) {
  OpAttrs a;
  a.rope_dims = 7;
  EXPECT_HAS(error_of(OpKind::rope, {F({1, 2, 3, 16})}, a), "even number of rotated dims");
  EXPECT_HAS(error_of(OpKind::rope, {F({2, 3, 16})}), "rank 4");
}

TEST(Op, ConcatChecksEveryOtherDim) {
  OpAttrs a;
  a.axis = 1;
  auto op = make_op(OpKind::concat, a, {F({2, 3}), F({2, 5})});
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op->output.shape_str(), "[2,8]");
  EXPECT_HAS(error_of(OpKind::concat, {F({2, 3}), F({3, 3})}, a), "except on axis 1");
}

TEST(Op, WrongInputCountIsRefused) {
  EXPECT_HAS(error_of(OpKind::matmul, {F({2, 2})}), "inputs (a, b)");
  EXPECT_HAS(error_of(OpKind::layernorm, {F({2, 2}), F({2}), F({2}), F({2})}), "x, weight?, bias?");
}

TEST(Op, ViewsAliasTheirInput) {
  OpAttrs a;
  a.perm = {0, 2, 1, 3};
  auto op = make_op(OpKind::permute, a, {F({1, 4, 8, 16})});
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op->output.shape_str(), "[1,8,4,16]");
  EXPECT_FALSE(op->output.is_contiguous());
  OpAttrs r;
  r.shape = {8, 64};
  EXPECT_HAS(error_of(OpKind::reshape, {op->output}, r), "contiguous");
}

}  // namespace
}  // namespace duet
