// The matmul -> cuBLASLt GEMM mapping, checked against the float64 reference by running the
// GEMM exactly as cuBLASLt defines it on the host.
#include <gtest/gtest.h>

#include "check/check.h"
#include "fake_driver.h"
#include "gemm.h"
#include "reference/reference.h"

namespace duet::cuda {
namespace {

using testing::host_gemm;

const void* elem0(const HostTensor& t) {
  return t.storage() + t.desc().offset * static_cast<int64_t>(dtype_size(t.dtype()));
}

// Plans and runs `op` on `inputs`; returns the check outcome message, "" when it matches.
std::string run(const OpDesc& op, const std::vector<HostTensor>& inputs) {
  Result<GemmCall> g = plan_gemm(op);
  if (!g.ok()) return "refused: " + g.status().message();
  HostTensor out = HostTensor::empty(op.output);
  host_gemm(*g, elem0(inputs[static_cast<size_t>(g->a_input)]),
            elem0(inputs[static_cast<size_t>(g->b_input)]), out.storage());
  auto ref = reference::evaluate(op, inputs);
  if (!ref.ok()) return ref.status().message();
  std::vector<double> want = *ref;
  HostTensor rounded = HostTensor::empty(op.output);
  rounded.from_doubles(want);
  want = rounded.to_doubles();
  check::Metrics m = check::compare(out.to_doubles(), want, false);
  check::Tolerance tol = check::tolerance(op, precision_of(op.output.dtype));
  if (!check::passes(m, tol)) return "nmse " + std::to_string(m.nmse) + " > " + tol.str();
  return "";
}

OpDesc matmul(TensorDesc a, TensorDesc b, bool ta = false, bool tb = false) {
  OpAttrs attrs;
  attrs.transpose_a = ta;
  attrs.transpose_b = tb;
  auto op = make_op(OpKind::matmul, attrs, {a, b}, {"a", "b"}, "mm");
  EXPECT_TRUE(op.ok()) << op.status().message();
  return *op;
}

std::vector<HostTensor> random_inputs(const OpDesc& op) {
  check::Case c;
  c.name = describe(op);
  c.kind = op.kind;
  c.attrs = op.attrs;
  c.inputs = op.inputs;
  c.fills = {check::Fill::unit, check::Fill::unit};
  return check::case_inputs(c);
}

TEST(CublasGemm, EveryPlannableMatmulCaseMatchesTheReference) {
  int planned = 0, refused = 0;
  for (const check::Case& c : check::cases(false)) {
    if (c.kind != OpKind::matmul) continue;
    auto op = check::case_op(c);
    ASSERT_TRUE(op.ok()) << c.name;
    if (is_quantized(op->inputs[1].dtype)) {  // block formats: never cuBLAS's
      EXPECT_EQ(run(*op, check::case_inputs(c)).rfind("refused", 0), 0u) << c.name;
      continue;
    }
    const std::string r = run(*op, check::case_inputs(c));
    if (r.rfind("refused", 0) == 0) {
      ++refused;
      continue;
    }
    ++planned;
    EXPECT_EQ(r, "") << c.name;
  }
  EXPECT_GT(planned, 0);
  EXPECT_GT(planned, refused) << "most matmul layouts should map onto one GEMM";
}

TEST(CublasGemm, TransposedOperandsAndEdgeShapes) {
  const DType t = DType::f32;
  const OpDesc ops[] = {
      matmul(TensorDesc::contiguous(t, {17, 33}), TensorDesc::contiguous(t, {33, 9})),
      matmul(TensorDesc::contiguous(t, {33, 17}), TensorDesc::contiguous(t, {33, 9}), true),
      matmul(TensorDesc::contiguous(t, {17, 33}), TensorDesc::contiguous(t, {9, 33}), false, true),
      matmul(TensorDesc::contiguous(t, {33, 17}), TensorDesc::contiguous(t, {9, 33}), true, true),
      matmul(TensorDesc::contiguous(t, {1, 64}), TensorDesc::contiguous(t, {64, 50})),  // decode
      matmul(TensorDesc::contiguous(t, {20, 64}), TensorDesc::contiguous(t, {64, 1})),
      matmul(TensorDesc::contiguous(t, {20, 1}), TensorDesc::contiguous(t, {1, 30})),  // K = 1
      matmul(*transpose(TensorDesc::contiguous(t, {33, 17}), 0, 1),
             TensorDesc::contiguous(t, {33, 9})),
  };
  for (const OpDesc& op : ops) EXPECT_EQ(run(op, random_inputs(op)), "") << describe(op);
}

TEST(CublasGemm, BatchesCollapseIntoOneStrideOrBroadcast) {
  const DType t = DType::f16;
  OpDesc shared_b =
      matmul(TensorDesc::contiguous(t, {2, 3, 5, 16}), TensorDesc::contiguous(t, {16, 7}));
  Result<GemmCall> g = plan_gemm(shared_b);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->batch, 6);
  EXPECT_EQ(g->stride_a, 0) << "b is the GEMM's A and is shared by every batch";
  EXPECT_EQ(g->stride_b, 5 * 16);
  EXPECT_EQ(g->stride_d, 5 * 7);
  EXPECT_EQ(run(shared_b, random_inputs(shared_b)), "");

  OpDesc both =
      matmul(TensorDesc::contiguous(t, {4, 5, 16}), TensorDesc::contiguous(t, {4, 16, 7}));
  EXPECT_EQ(run(both, random_inputs(both)), "");
  OpDesc ones =
      matmul(TensorDesc::contiguous(t, {1, 4, 5, 16}), TensorDesc::contiguous(t, {1, 4, 16, 7}));
  EXPECT_EQ(run(ones, random_inputs(ones)), "");
}

TEST(CublasGemm, LayoutsWithoutOneStrideAreRefusedWithTheReason) {
  const DType t = DType::f32;
  // b repeats along the outer batch dim only: its batch is periodic, not strided.
  OpDesc outer =
      matmul(TensorDesc::contiguous(t, {2, 3, 5, 16}), TensorDesc::contiguous(t, {1, 3, 16, 7}));
  Result<GemmCall> g = plan_gemm(outer);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("do not collapse"), std::string::npos);
  // Every other column of a wider matrix: no unit stride in either matrix dim.
  TensorDesc wide = TensorDesc::contiguous(t, {5, 33});
  OpDesc strided = matmul(*slice(wide, 1, 0, 32, 2), TensorDesc::contiguous(t, {16, 7}));
  g = plan_gemm(strided);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("no unit stride"), std::string::npos) << g.status().message();
}

}  // namespace
}  // namespace duet::cuda
