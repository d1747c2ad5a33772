#include <gtest/gtest.h>

#include <numeric>

#include "duet/host_tensor.h"
#include "duet/tensor.h"

namespace duet {
namespace {

// Row-major values of a view over storage holding 0, 1, 2, ...
std::vector<double> values(const TensorDesc& d) {
  HostTensor base = HostTensor::empty(DType::f32, std::vector<int64_t>{d.storage_extent()});
  std::vector<double> iota(static_cast<size_t>(d.storage_extent()));
  std::iota(iota.begin(), iota.end(), 0.0);
  base.from_doubles(iota);
  return base.view(d)->to_doubles();
}

TEST(Tensor, ContiguousStridesAreRowMajor) {
  auto t = TensorDesc::contiguous(DType::f16, {2, 3, 4});
  EXPECT_EQ(t.strides[0], 12);
  EXPECT_EQ(t.strides[1], 4);
  EXPECT_EQ(t.strides[2], 1);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 48);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.str(), "f16[2,3,4]");
}

TEST(Tensor, TransposeSwapsWithoutCopy) {
  auto t = *transpose(TensorDesc::contiguous(DType::f32, {2, 3}), 0, 1);
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(values(t), (std::vector<double>{0, 3, 1, 4, 2, 5}));
}

TEST(Tensor, PermuteReordersDims) {
  auto t = *permute(TensorDesc::contiguous(DType::f32, {2, 3, 4}), std::vector<int>{2, 0, 1});
  EXPECT_EQ(t.shape_str(), "[4,2,3]");
  EXPECT_EQ(values(t)[1], 4.0);   // [0,0,1] reads storage [0,1,0]
  EXPECT_EQ(values(t)[3], 12.0);  // [0,1,0] reads storage [1,0,0]
  EXPECT_FALSE(permute(t, std::vector<int>{0, 0, 1}).ok());
}

TEST(Tensor, SliceWithStepAndNegativeBounds) {
  auto base = TensorDesc::contiguous(DType::f32, {2, 10});
  auto t = *slice(base, 1, -7, 10, 3);
  EXPECT_EQ(t.shape_str(), "[2,3]");
  EXPECT_EQ(values(t), (std::vector<double>{3, 6, 9, 13, 16, 19}));
  auto err = slice(base, 1, 5, 5);
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.status().message().find("start < stop"), std::string::npos)
      << err.status().message();
}

TEST(Tensor, ReshapeOfContiguousIsAView) {
  auto t = *reshape(TensorDesc::contiguous(DType::f32, {2, 3, 4}), std::vector<int64_t>{6, -1});
  EXPECT_EQ(t.shape_str(), "[6,4]");
  EXPECT_TRUE(t.is_contiguous());
}

TEST(Tensor, ReshapeSplitsAndMergesCompatibleStridedDims) {
  // A slice along dim 0 keeps rows contiguous: merging the inner dims is still a view.
  auto base = TensorDesc::contiguous(DType::f32, {4, 3, 5});
  auto s = *slice(base, 0, 1, 3);
  auto r = reshape(s, std::vector<int64_t>{2, 15});
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::vector<double> v = values(*r);
  EXPECT_EQ(v.front(), 15.0);
  EXPECT_EQ(v.back(), 44.0);
  auto split = reshape(*r, std::vector<int64_t>{2, 1, 3, 5});
  ASSERT_TRUE(split.ok());
  EXPECT_EQ(values(*split), v);
}

TEST(Tensor, ReshapeOfTransposedViewNeedsACopy) {
  auto t = *transpose(TensorDesc::contiguous(DType::f32, {2, 3}), 0, 1);
  auto r = reshape(t, std::vector<int64_t>{6});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("contiguous"), std::string::npos) << r.status().message();
  EXPECT_FALSE(reshape(t, std::vector<int64_t>{4, 2}).ok());
  EXPECT_FALSE(
      reshape(TensorDesc::contiguous(DType::f32, {2, 3}), std::vector<int64_t>{4, -1}).ok());
}

TEST(Tensor, ASizeOneDimDoesNotHideANonContiguousPair) {
  // [2, 6, 3] permuted from [2, 3, 6] and viewed as [2, 1, 6, 3]: dims 0 and 2 (strides 18 and 1)
  // are not contiguous, whatever stride the size-1 dim between them got, so [12, 3] needs a copy
  // (Resize of a one-channel batch of two read the wrong elements).
  auto p = *permute(TensorDesc::contiguous(DType::f32, {2, 3, 6}), std::vector<int>{0, 2, 1});
  auto v = reshape(p, std::vector<int64_t>{2, 1, 6, 3});
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(values(*v), values(p));
  EXPECT_FALSE(reshape(*v, std::vector<int64_t>{12, 3}).ok());
  auto rows = reshape(*v, std::vector<int64_t>{2, 6, 3});
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  EXPECT_EQ(values(*rows), values(p));
}

TEST(Tensor, BroadcastUsesZeroStrides) {
  auto t = *broadcast_to(TensorDesc::contiguous(DType::f32, {3, 1}), std::vector<int64_t>{2, 3, 4});
  EXPECT_EQ(t.strides[0], 0);
  EXPECT_EQ(t.strides[2], 0);
  EXPECT_EQ(values(t), (std::vector<double>{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2,
                                            0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2}));
  int rank = 0;
  auto err = broadcast_shapes(std::vector<int64_t>{2, 3}, std::vector<int64_t>{4}, &rank);
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.status().message().find("[2,3] and [4]"), std::string::npos);
}

TEST(Tensor, ValidateRejectsZeroAndNegativeDims) {
  TensorDesc t = TensorDesc::contiguous(DType::f32, {2, 0});
  Status s = validate(t);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("every dimension >= 1"), std::string::npos) << s.message();
  t.shape[1] = -3;
  EXPECT_FALSE(validate(t).ok());
}

TEST(Tensor, ValidateRejectsShapesWhoseSizeOverflows) {
  TensorDesc t = TensorDesc::contiguous(DType::f32, {1 << 20, 1 << 20, 1 << 20});
  Status s = validate(t);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("2^48 elements"), std::string::npos) << s.message();
  TensorDesc wide = TensorDesc::contiguous(DType::f32, {4, 4});
  wide.strides[0] = int64_t{1} << 62;
  EXPECT_FALSE(validate(wide).ok()) << "a stride that overflows the storage extent";
}

TEST(HostTensor, ViewOutsideStorageIsAnError) {
  HostTensor t = HostTensor::empty(DType::f32, std::vector<int64_t>{4});
  TensorDesc big = TensorDesc::contiguous(DType::f32, {5});
  EXPECT_FALSE(t.view(big).ok());
}

}  // namespace
}  // namespace duet
