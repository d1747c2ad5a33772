// The CPU kernels' bulk f16/bf16 <-> f32 conversions, for every ISA this machine runs, against
// the scalar definitions in duet/half.h: bit for bit, NaN payloads included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "duet/half.h"
#include "kernels/isa.h"

namespace duet::cpu::kernels {
// Names the ISA in gtest's messages.
inline void PrintTo(Isa isa, std::ostream* os) {
  *os << isa_name(isa);
}

namespace {

std::vector<Isa> supported_isas() {
  std::vector<Isa> v;
  for (Isa i : {Isa::generic, Isa::avx2, Isa::avx512, Isa::neon})
    if (isa_supported(i)) v.push_back(i);
  return v;
}

std::string isa_param_name(const testing::TestParamInfo<Isa>& info) {
  return std::string(isa_name(info.param));
}

class BulkConversion : public testing::TestWithParam<Isa> {
 protected:
  const Kernels& k() const { return kernels_for(GetParam()); }
};

std::vector<uint16_t> every_16bit_pattern() {
  std::vector<uint16_t> v(65536);
  for (uint32_t i = 0; i < 65536; ++i) v[i] = static_cast<uint16_t>(i);
  return v;
}

// f32 inputs that probe every rounding decision of a 16-bit target: for each 16-bit result r,
// the f32 value of r, the exact midpoint to the next pattern, and one f32 ulp either side of it.
// `widen` maps a 16-bit pattern to f32 bits, `step` is the f32-bit distance between neighbours.
std::vector<float> rounding_probes(uint32_t (*widen)(uint16_t)) {
  std::vector<float> out;
  out.reserve(65536 * 5);
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint32_t lo = widen(static_cast<uint16_t>(h));
    const uint32_t hi = widen(static_cast<uint16_t>(h + 1 == 65536 ? h : h + 1));
    const float a = bits_float(lo), b = bits_float(hi);
    out.push_back(a);
    if (std::isfinite(a) && std::isfinite(b) && (lo >> 31) == (hi >> 31)) {
      const float mid = static_cast<float>((static_cast<double>(a) + static_cast<double>(b)) / 2);
      const uint32_t m = float_bits(mid);
      out.push_back(mid);
      out.push_back(bits_float(m + 1));
      out.push_back(bits_float(m - 1));
    }
  }
  // Overflow and underflow edges, extremes and subnormal f32 inputs, both signs.
  for (float x : {65504.0f, 65519.0f, 65519.996f, 65520.0f, 65536.0f, 5.9604645e-8f, 2.9802322e-8f,
                  2.9802326e-8f, 4.4703484e-8f, 3.4028235e38f, 1.1754944e-38f, 1e-45f, 1e-40f, 0.0f,
                  __builtin_inff()}) {
    out.push_back(x);
    out.push_back(-x);
  }
  out.push_back(bits_float(0x7f7fffffu));
  out.push_back(bits_float(0x007fffffu));
  return out;
}

uint32_t widen_f16(uint16_t h) {
  return float_bits(f16_to_f32(h));
}
uint32_t widen_bf16(uint16_t h) {
  return static_cast<uint32_t>(h) << 16;
}

std::vector<float> random_floats(size_t n) {
  std::mt19937 rng(7);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t bits = rng();
    v[i] = bits_float(bits);
  }
  // Ordinary magnitudes too, where most real data lives.
  std::uniform_real_distribution<float> u(-70000.0f, 70000.0f);
  for (size_t i = 0; i < n / 4; ++i) v[i] = u(rng);
  std::uniform_real_distribution<float> s(-1e-4f, 1e-4f);
  for (size_t i = n / 4; i < n / 2; ++i) v[i] = s(rng);
  return v;
}

// Converts through the kernel at an odd offset and in odd lengths, so that the vector body,
// the tail and unaligned accesses all run.
template <class Src, class Dst>
std::vector<Dst> convert_in_pieces(void (*f)(const Src*, Dst*, int64_t),
                                   const std::vector<Src>& in) {
  std::vector<Src> src(in.size() + 1);
  std::copy(in.begin(), in.end(), src.begin() + 1);
  std::vector<Dst> dst(in.size() + 1);
  size_t done = 0, piece = 1;
  while (done < in.size()) {
    const size_t n = std::min(piece, in.size() - done);
    f(src.data() + 1 + done, dst.data() + 1 + done, static_cast<int64_t>(n));
    done += n;
    piece = piece * 3 + 1;
    if (piece > 40000) piece = 37;
  }
  return {dst.begin() + 1, dst.end()};
}

TEST_P(BulkConversion, F16ToF32MatchesTheScalarOnEveryPattern) {
  const auto in = every_16bit_pattern();
  const auto out = convert_in_pieces(k().f16_to_f32, in);
  for (size_t i = 0; i < in.size(); ++i)
    ASSERT_EQ(float_bits(out[i]), float_bits(f16_to_f32(in[i]))) << "f16 0x" << std::hex << in[i];
}

TEST_P(BulkConversion, Bf16ToF32MatchesTheScalarOnEveryPattern) {
  const auto in = every_16bit_pattern();
  const auto out = convert_in_pieces(k().bf16_to_f32, in);
  for (size_t i = 0; i < in.size(); ++i)
    ASSERT_EQ(float_bits(out[i]), float_bits(bf16_to_f32(in[i]))) << "bf16 0x" << std::hex << in[i];
}

TEST_P(BulkConversion, F32ToF16RoundsLikeTheScalarAtEveryBoundary) {
  auto in = rounding_probes(widen_f16);
  const auto rnd = random_floats(1 << 20);
  in.insert(in.end(), rnd.begin(), rnd.end());
  const auto out = convert_in_pieces(k().f32_to_f16, in);
  for (size_t i = 0; i < in.size(); ++i)
    ASSERT_EQ(out[i], f32_to_f16(in[i])) << "f32 0x" << std::hex << float_bits(in[i]);
}

TEST_P(BulkConversion, F32ToBf16RoundsLikeTheScalarAtEveryBoundary) {
  auto in = rounding_probes(widen_bf16);
  const auto rnd = random_floats(1 << 20);
  in.insert(in.end(), rnd.begin(), rnd.end());
  const auto out = convert_in_pieces(k().f32_to_bf16, in);
  for (size_t i = 0; i < in.size(); ++i)
    ASSERT_EQ(out[i], f32_to_bf16(in[i])) << "f32 0x" << std::hex << float_bits(in[i]);
}

TEST_P(BulkConversion, NaNPayloadsSurviveBothWays) {
  // Signalling and quiet NaNs of both signs with assorted payloads, as f32.
  std::vector<float> in;
  for (uint32_t sign : {0u, 0x80000000u})
    for (uint32_t payload : {1u, 2u, 0x1fffu, 0x2000u, 0x3fffffu, 0x400000u, 0x400001u, 0x7fffffu})
      in.push_back(bits_float(sign | 0x7f800000u | payload));
  const auto h = convert_in_pieces(k().f32_to_f16, in);
  const auto b = convert_in_pieces(k().f32_to_bf16, in);
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(h[i], f32_to_f16(in[i])) << std::hex << float_bits(in[i]);
    EXPECT_EQ(b[i], f32_to_bf16(in[i])) << std::hex << float_bits(in[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryIsaThisCpuRuns, BulkConversion, testing::ValuesIn(supported_isas()),
                         isa_param_name);

TEST(Isa, DetectedIsSupportedAndGenericAlwaysIs) {
  EXPECT_TRUE(isa_supported(detected_isa()));
  EXPECT_TRUE(isa_supported(Isa::generic));
  EXPECT_EQ(parse_isa("avx2"), Isa::avx2);
  EXPECT_EQ(parse_isa("neon"), Isa::neon);
#if defined(__aarch64__)
  EXPECT_EQ(detected_isa(), Isa::neon);
  EXPECT_FALSE(isa_supported(Isa::avx2));
#else
  EXPECT_FALSE(isa_supported(Isa::neon));
#endif
  EXPECT_FALSE(parse_isa("sse9").has_value());
}

}  // namespace
}  // namespace duet::cpu::kernels
