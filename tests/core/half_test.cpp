// Exhaustive checks of the 16-bit conversions: every one of the 65,536 patterns of each format.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "duet/half.h"

namespace duet {
namespace {

bool is_nan16(uint16_t h) {
  return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
}
bool is_nan_bf16(uint16_t h) {
  return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0;
}

// The value of an f16 pattern computed independently, from its definition.
double f16_value(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v = exp == 0 ? std::ldexp(man, -24) : std::ldexp(1024 + man, exp - 25);
  if (exp == 31)
    v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  return sign ? -v : v;
}

TEST(Half, F16ToF32MatchesTheDefinitionForEveryPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    const double want = f16_value(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(f), want) << std::hex << h;
      ASSERT_EQ(std::signbit(f), (h & 0x8000u) != 0) << std::hex << h;
    }
  }
}

TEST(Half, F16RoundTripsThroughF32ForEveryPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t back = f32_to_f16(f16_to_f32(static_cast<uint16_t>(h)));
    if (is_nan16(static_cast<uint16_t>(h))) {
      ASSERT_TRUE(is_nan16(back)) << std::hex << h;
      ASSERT_EQ(back & 0x8000u, h & 0x8000u) << "NaN keeps its sign " << std::hex << h;
    } else {
      ASSERT_EQ(back, h) << std::hex << h;
    }
  }
}

// For every pair of adjacent finite f16 values: the midpoint rounds to the even one, and values
// just inside either side of the midpoint round to the nearer one.
TEST(Half, F32ToF16RoundsToNearestEvenBetweenEveryAdjacentPair) {
  for (uint32_t h = 0; h < 0x7c00u; ++h) {
    for (uint32_t sign : {0u, 0x8000u}) {
      const uint16_t lo = static_cast<uint16_t>(h | sign),
                     hi = static_cast<uint16_t>((h + 1) | sign);
      const double a = f16_value(lo), b = f16_value(hi);  // b may be infinity for the top value
      const double mid = std::isinf(b) ? (sign ? -65520.0 : 65520.0) : (a + b) / 2;
      const float fm = static_cast<float>(mid);
      ASSERT_EQ(static_cast<double>(fm), mid) << "midpoint is exact in f32";
      const uint16_t even = (h & 1u) ? hi : lo;
      ASSERT_EQ(f32_to_f16(fm), even) << std::hex << h;
      ASSERT_EQ(f32_to_f16(std::nextafter(fm, static_cast<float>(a))), lo) << std::hex << h;
      ASSERT_EQ(f32_to_f16(std::nextafter(fm, sign ? -INFINITY : INFINITY)), hi) << std::hex << h;
    }
  }
}

TEST(Half, F32ToF16SpecialValues) {
  EXPECT_EQ(f32_to_f16(INFINITY), 0x7c00);
  EXPECT_EQ(f32_to_f16(-INFINITY), 0xfc00);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65519.996f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16(1e10f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000)
      << "half the smallest subnormal ties to zero";
  EXPECT_EQ(f32_to_f16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002) << "1.5 ulp ties to even (2)";
  EXPECT_EQ(f32_to_f16(1e-30f), 0x0000);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_TRUE(is_nan16(f32_to_f16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(is_nan16(f32_to_f16(std::numeric_limits<float>::signaling_NaN())));
  // A NaN whose payload sits only in the low bits must not become infinity.
  EXPECT_TRUE(is_nan16(f32_to_f16(bits_float(0x7f800001u))));
}

TEST(BFloat16, RoundTripsThroughF32ForEveryPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_to_f32(static_cast<uint16_t>(h));
    ASSERT_EQ(float_bits(f) >> 16, h);
    const uint16_t back = f32_to_bf16(f);
    if (is_nan_bf16(static_cast<uint16_t>(h))) {
      ASSERT_TRUE(is_nan_bf16(back)) << std::hex << h;
    } else {
      ASSERT_EQ(back, h) << std::hex << h;
    }
  }
}

TEST(BFloat16, F32ToBf16RoundsToNearestEvenBetweenEveryAdjacentPair) {
  for (uint32_t h = 0; h < 0x7f80u; ++h) {
    for (uint32_t sign : {0u, 0x8000u}) {
      const uint32_t lo = h | sign, hi = (h + 1) | sign;
      const uint32_t mid_bits = ((h << 16) | 0x8000u) | (sign << 16);  // exactly half way
      const uint32_t even = (h & 1u) ? hi : lo;
      ASSERT_EQ(f32_to_bf16(bits_float(mid_bits)), even) << std::hex << h;
      ASSERT_EQ(f32_to_bf16(bits_float(mid_bits - 1)), lo) << std::hex << h;
      ASSERT_EQ(f32_to_bf16(bits_float(mid_bits + 1)), hi) << std::hex << h;
    }
  }
}

TEST(BFloat16, SpecialValues) {
  EXPECT_EQ(f32_to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-INFINITY), 0xff80);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80) << "rounds up to infinity";
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_TRUE(is_nan_bf16(f32_to_bf16(bits_float(0x7f800001u))));
  EXPECT_TRUE(is_nan_bf16(f32_to_bf16(-std::numeric_limits<float>::quiet_NaN())));
}

TEST(Convert, IntegerTargetsRoundTowardZeroAndSaturate) {
  const float src[] = {-1000.5f, -128.9f, -1.7f, -0.2f, 0.7f, 126.9f, 300.0f, NAN};
  int8_t i8[8];
  convert(src, DType::f32, i8, DType::i8, 8);
  const int8_t want8[] = {-128, -128, -1, 0, 0, 126, 127, 0};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(i8[i], want8[i]) << i;
  const int32_t big[] = {16777217, -2147483647 - 1};
  float f[2];
  convert(big, DType::i32, f, DType::f32, 2);
  EXPECT_EQ(f[0], 16777216.0f) << "round to nearest even from i32";
  EXPECT_EQ(f[1], -2147483648.0f);
}

}  // namespace
}  // namespace duet
