// The block formats: the table of facts, dequantization by the book for every bit pattern, the
// quantizer's error, and quantized host tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "duet/block_layout.h"
#include "duet/half.h"
#include "duet/op.h"
#include "duet/quantize.h"

namespace duet {

// Names a dtype in gtest's messages.
inline void PrintTo(DType t, std::ostream* os) {
  *os << dtype_name(t);
}

namespace {

// ---- The book: ggml's dequantize_row_* loops (ggml-quants.c), in double, written in their
// own loop structure rather than from duet's per-element layout formulas.

double h(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return static_cast<double>(f16_to_f32(v));
}

void book_q4_0(const uint8_t* b, double* y) {
  const double d = h(b);
  for (int j = 0; j < 16; ++j) {
    y[j] = ((b[2 + j] & 0x0F) - 8) * d;
    y[j + 16] = ((b[2 + j] >> 4) - 8) * d;
  }
}
void book_q4_1(const uint8_t* b, double* y) {
  const double d = h(b), m = h(b + 2);
  for (int j = 0; j < 16; ++j) {
    y[j] = (b[4 + j] & 0x0F) * d + m;
    y[j + 16] = (b[4 + j] >> 4) * d + m;
  }
}
void book_q5(const uint8_t* b, bool with_min, double* y) {
  const double d = h(b), m = with_min ? h(b + 2) : 0;
  const uint8_t* qhp = b + (with_min ? 4 : 2);
  const uint8_t* qs = qhp + 4;
  uint32_t qh;
  std::memcpy(&qh, qhp, 4);
  for (int j = 0; j < 16; ++j) {
    const int xh0 = ((qh >> j) << 4) & 0x10, xh1 = (qh >> (j + 12)) & 0x10;
    const int x0 = (qs[j] & 0x0F) | xh0, x1 = (qs[j] >> 4) | xh1;
    y[j] = with_min ? x0 * d + m : (x0 - 16) * d;
    y[j + 16] = with_min ? x1 * d + m : (x1 - 16) * d;
  }
}
void book_q8_0(const uint8_t* b, double* y) {
  const double d = h(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<int8_t>(b[2 + j]) * d;
}
void book_q4_z(const uint8_t* b, double* y) {
  const double d = h(b);
  const int z = b[2] & 0xF;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * ((b[4 + j] & 0x0F) - z);
    y[j + 16] = d * ((b[4 + j] >> 4) - z);
  }
}
void book_scale_min_k4(int j, const uint8_t* q, int* d, int* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
  }
}
void book_q2_k(const uint8_t* b, double* y) {
  const uint8_t* scales = b;
  const uint8_t* q = b + 16;
  const double d = h(b + 80), mn = h(b + 82);
  int is = 0;
  for (int n = 0; n < 256; n += 128) {
    int shift = 0;
    for (int j = 0; j < 4; ++j) {
      uint8_t sc = scales[is++];
      double dl = d * (sc & 0xF), ml = mn * (sc >> 4);
      for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l] >> shift) & 3) - ml;
      sc = scales[is++];
      dl = d * (sc & 0xF), ml = mn * (sc >> 4);
      for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l + 16] >> shift) & 3) - ml;
      shift += 2;
    }
    q += 32;
  }
}
void book_q3_k(const uint8_t* b, double* y) {
  const uint8_t* hm = b;
  const uint8_t* q = b + 32;
  const double d_all = h(b + 108);
  uint32_t aux[4];
  std::memcpy(aux, b + 96, 12);
  const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f, tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  int8_t scales[16];
  std::memcpy(scales, aux, 16);
  int is = 0;
  uint8_t m = 1;
  for (int n = 0; n < 256; n += 128) {
    int shift = 0;
    for (int j = 0; j < 4; ++j) {
      double dl = d_all * (scales[is++] - 32);
      for (int l = 0; l < 16; ++l) *y++ = dl * (((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
      dl = d_all * (scales[is++] - 32);
      for (int l = 0; l < 16; ++l)
        *y++ = dl * (((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4));
      shift += 2;
      m <<= 1;
    }
    q += 32;
  }
}
void book_q45_k(const uint8_t* b, bool five, double* y) {
  const double d = h(b), mn = h(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* q = b + (five ? 48 : 16);
  int is = 0;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0; j < 256; j += 64) {
    int sc, m;
    book_scale_min_k4(is + 0, scales, &sc, &m);
    const double d1 = d * sc, m1 = mn * m;
    book_scale_min_k4(is + 1, scales, &sc, &m);
    const double d2 = d * sc, m2 = mn * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * ((q[l] & 0xF) + (five && (qh[l] & u1) ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * ((q[l] >> 4) + (five && (qh[l] & u2) ? 16 : 0)) - m2;
    q += 32;
    is += 2;
    u1 <<= 2;
    u2 <<= 2;
  }
}
void book_q6_k(const uint8_t* b, double* y) {
  const double d = h(b + 208);
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  for (int n = 0; n < 256; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l + 0] = d * sc[is + 0] * q1;
      y[l + 32] = d * sc[is + 2] * q2;
      y[l + 64] = d * sc[is + 4] * q3;
      y[l + 96] = d * sc[is + 6] * q4;
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

void book(DType t, const uint8_t* b, double* y) {
  switch (t) {
    case DType::q8_0:
      return book_q8_0(b, y);
    case DType::q4_0:
      return book_q4_0(b, y);
    case DType::q4_1:
      return book_q4_1(b, y);
    case DType::q5_0:
      return book_q5(b, false, y);
    case DType::q5_1:
      return book_q5(b, true, y);
    case DType::q2_k:
      return book_q2_k(b, y);
    case DType::q3_k:
      return book_q3_k(b, y);
    case DType::q4_k:
      return book_q45_k(b, false, y);
    case DType::q5_k:
      return book_q45_k(b, true, y);
    case DType::q6_k:
      return book_q6_k(b, y);
    case DType::q4_z:
      return book_q4_z(b, y);
    default:
      FAIL() << "no book for " << dtype_name(t);
  }
}

std::string name_of(const testing::TestParamInfo<DType>& i) {
  return std::string(dtype_name(i.param));
}

class Formats : public testing::TestWithParam<DType> {};

TEST_P(Formats, TheTableAgreesWithTheLayoutHeader) {
  const DType t = GetParam();
  const DTypeInfo& info = dtype_info(t);
  EXPECT_TRUE(is_quantized(t));
  EXPECT_FALSE(is_float(t));
  EXPECT_EQ(parse_dtype(info.name), t);
  EXPECT_EQ(info.block_elems % info.sub_elems, 0);
  EXPECT_LE(info.block_elems / info.sub_elems, kMaxSubBlocks);
  EXPECT_LE(info.block_elems, kMaxBlockElems);
  if (info.ggml_type >= 0) {
    EXPECT_EQ(dtype_of_ggml_type(info.ggml_type), t);
  }
  // Bits per weight, as each line of the table says.
  const double bpw =
      8.0 * static_cast<double>(info.block_bytes) / static_cast<double>(info.block_elems);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g bits per weight", bpw);
  EXPECT_NE(std::string(info.what).find(buf), std::string::npos) << info.what << " vs " << buf;
  EXPECT_EQ(dtype_bytes(t, 3 * info.block_elems), 3 * info.block_bytes);
}

// Random bytes, every pattern allowed (NaN and infinite scales too): duet's decoding equals the
// book's, element for element (NaN where the book gives NaN).
TEST_P(Formats, EveryBitPatternDequantizesByTheBook) {
  const DType t = GetParam();
  const int64_t be = dtype_block_elems(t), bb = dtype_block_bytes(t);
  std::mt19937_64 rng(static_cast<uint64_t>(t) * 7919u);
  const int blocks = 2000;
  std::vector<uint8_t> bytes(static_cast<size_t>(bb * blocks));
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  // Some blocks with all-ones and all-zero bytes, and f16 fields at the extremes.
  std::memset(bytes.data(), 0xFF, static_cast<size_t>(bb));
  std::memset(bytes.data() + bb, 0x00, static_cast<size_t>(bb));
  std::vector<double> got(static_cast<size_t>(be * blocks)), want(got.size());
  dequantize(t, bytes.data(), got.data(), be * blocks);
  for (int b = 0; b < blocks; ++b) book(t, bytes.data() + b * bb, want.data() + b * be);
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool same = std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i];
    if (!same && bad++ < 5)
      ADD_FAILURE() << dtype_name(t) << " block " << i / static_cast<size_t>(be) << " element "
                    << i % static_cast<size_t>(be) << ": got " << got[i] << ", book " << want[i];
  }
  EXPECT_EQ(bad, 0);
  // The float form is the exact value rounded once.
  std::vector<float> f(got.size());
  dequantize(t, bytes.data(), f.data(), be * blocks);
  for (size_t i = 0; i < got.size(); ++i)
    if (!std::isnan(got[i])) {
      ASSERT_EQ(f[i], static_cast<float>(got[i])) << i;
    }
  // Element reads decode the element's block.
  for (int64_t i : {int64_t{0}, be - 1, 5 * be + 3, be * blocks - 1})
    if (!std::isnan(want[static_cast<size_t>(i)])) {
      EXPECT_EQ(load_as_double(bytes.data(), t, i), want[static_cast<size_t>(i)]) << i;
    }
}

double nmse_of(const std::vector<float>& x, const std::vector<double>& y) {
  double e = 0, r = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e += (y[i] - x[i]) * (y[i] - x[i]);
    r += static_cast<double>(x[i]) * x[i];
  }
  return e / r;
}

// The quantizer's error on random data, per format: bounds a few times the error of a uniform
// quantizer of the format's bits (a regression fence, not a quality claim).
TEST_P(Formats, QuantizingRandomValuesKeepsTheErrorOfItsBits) {
  const DType t = GetParam();
  const int64_t n = 4096;
  std::mt19937_64 rng(42);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = nd(rng);
  std::vector<uint8_t> q(static_cast<size_t>(dtype_bytes(t, n)));
  ASSERT_TRUE(quantize(t, x.data(), q.data(), n).ok());
  std::vector<double> y(static_cast<size_t>(n));
  dequantize(t, q.data(), y.data(), n);
  double bound = 0;
  switch (t) {
    case DType::q8_0:
      bound = 2e-4;
      break;
    case DType::q6_k:
    case DType::q5_0:
    case DType::q5_1:
    case DType::q5_k:
      bound = 4e-3;
      break;
    case DType::q2_k:
      bound = 0.2;
      break;
    case DType::q3_k:
      bound = 0.06;
      break;
    default:  // 4 bits
      bound = 1.5e-2;
  }
  EXPECT_LT(nmse_of(x, y), bound) << dtype_name(t);
  // Zeros and a constant block stay finite; an all-zero row dequantizes to zeros.
  std::vector<float> zeros(static_cast<size_t>(dtype_block_elems(t)), 0.0f);
  ASSERT_TRUE(quantize(t, zeros.data(), q.data(), dtype_block_elems(t)).ok());
  std::vector<double> z(zeros.size());
  dequantize(t, q.data(), z.data(), dtype_block_elems(t));
  for (double v : z) EXPECT_EQ(v, 0.0);
}

// ---- The quantizer against ggml's reference quantizers (quantize_row_*_ref, ggml d99724f2,
// through ggml_quantize_chunk without an importance matrix): the RMS error they leave on the
// same 8 x 4096 matrices, measured once with the generator below (docs/quantization.md says
// how). A normal matrix and a heavy-tailed one (a normal times a log-normal scale).
uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
double unit_uniform(uint64_t& s) {
  return (static_cast<double>(splitmix(s) >> 11) + 0.5) * 0x1.0p-53;
}
double std_normal(uint64_t& s) {
  const double u = unit_uniform(s), v = unit_uniform(s);
  return std::sqrt(-2 * std::log(u)) * std::cos(6.283185307179586 * v);
}
std::vector<float> test_matrix(bool heavy, int64_t n) {
  std::vector<float> x(static_cast<size_t>(n));
  uint64_t s = heavy ? 1235 : 1234;
  for (float& v : x) {
    const double a = std_normal(s);
    v = static_cast<float>(heavy ? a * std::exp(std_normal(s)) : a);
  }
  return x;
}

// ggml's RMS error per format: {normal, heavy-tailed}. q4_z is duet's own: held to ggml's q4_0,
// whose blocks it can represent exactly (zero point 8).
struct GgmlRms {
  double normal, heavy;
};
GgmlRms ggml_rms(DType t) {
  switch (t) {
    case DType::q8_0:
      return {5.352149e-03, 2.512719e-02};
    case DType::q4_0:
    case DType::q4_z:
      return {8.592253e-02, 3.428853e-01};
    case DType::q4_1:
      return {7.805011e-02, 2.885295e-01};
    case DType::q5_0:
      return {4.257583e-02, 1.868091e-01};
    case DType::q5_1:
      return {3.784572e-02, 1.390075e-01};
    case DType::q2_k:
      return {2.954061e-01, 1.008900e+00};
    case DType::q3_k:
      return {1.507602e-01, 4.720396e-01};
    case DType::q4_k:
      return {7.141725e-02, 2.598191e-01};
    case DType::q5_k:
      return {3.618006e-02, 1.344733e-01};
    case DType::q6_k:
      return {1.774574e-02, 7.594428e-02};
    default:
      return {0, 0};
  }
}

TEST_P(Formats, QuantizerErrorIsAtMostGgmlsReferenceQuantizers) {
  const DType t = GetParam();
  const int64_t n = 8 * 4096;
  for (bool heavy : {false, true}) {
    const std::vector<float> x = test_matrix(heavy, n);
    std::vector<uint8_t> q(static_cast<size_t>(dtype_bytes(t, n)));
    ASSERT_TRUE(quantize(t, x.data(), q.data(), n).ok());
    std::vector<double> y(static_cast<size_t>(n));
    dequantize(t, q.data(), y.data(), n);
    double e = 0;
    for (int64_t i = 0; i < n; ++i) e += (x[i] - y[i]) * (x[i] - y[i]);
    const double rms = std::sqrt(e / static_cast<double>(n));
    const GgmlRms g = ggml_rms(t);
    EXPECT_LE(rms, heavy ? g.heavy : g.normal) << (heavy ? "heavy-tailed" : "normal");
  }
}

TEST_P(Formats, QuantizingRefusesNonFiniteValuesAndPartialBlocks) {
  const DType t = GetParam();
  const int64_t be = dtype_block_elems(t);
  std::vector<float> x(static_cast<size_t>(2 * be), 0.5f);
  std::vector<uint8_t> q(static_cast<size_t>(dtype_bytes(t, 2 * be)));
  x[static_cast<size_t>(be + 3)] = NAN;
  Status s = quantize(t, x.data(), q.data(), 2 * be);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("index " + std::to_string(be + 3)), std::string::npos) << s.message();
  s = quantize(t, x.data(), q.data(), be - 1);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("multiple of " + std::to_string(be)), std::string::npos)
      << s.message();
}

TEST_P(Formats, QuantizedTensorsReadRowsThroughViews) {
  const DType t = GetParam();
  const int64_t K = 2 * dtype_block_elems(t);
  auto src = HostTensor::empty(DType::f32, std::vector<int64_t>{5, K});
  for (int64_t i = 0; i < src.numel(); ++i)
    src.data<float>()[i] = std::sin(0.37f * static_cast<float>(i));
  auto q = quantize(src, t, "w");
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(q->storage_bytes(), static_cast<uint64_t>(5 * dtype_bytes(t, K)));
  const std::vector<double> all = q->to_doubles();
  // Rows 1..3 as a view: its elements are those rows; a dense copy holds the same blocks.
  auto rows = slice(q->desc(), 0, 1, 4);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  auto view = q->view(*rows);
  ASSERT_TRUE(view.ok()) << view.status().message();
  const std::vector<double> part = view->to_doubles();
  ASSERT_EQ(part.size(), static_cast<size_t>(3 * K));
  for (size_t i = 0; i < part.size(); ++i) EXPECT_EQ(part[i], all[static_cast<size_t>(K) + i]);
  EXPECT_EQ(view->contiguous().to_doubles(), part);
  auto back = dequantize(*q, DType::f32);
  ASSERT_TRUE(back.ok());
  for (size_t i = 0; i < all.size(); ++i)
    EXPECT_EQ(back->data<float>()[i], static_cast<float>(all[i]));
}

TEST_P(Formats, DescriptorsKeepWholeBlocksInRows) {
  const DType t = GetParam();
  const int64_t be = dtype_block_elems(t);
  const TensorDesc w = TensorDesc::contiguous(t, {4, 2 * be});
  EXPECT_TRUE(validate(w).ok());
  EXPECT_FALSE(validate(TensorDesc::contiguous(t, {4, be + 1})).ok());
  auto tr = transpose(w, 0, 1);
  EXPECT_TRUE(!tr.ok() || !validate(*tr).ok()) << "a transposed block format cannot be addressed";
  auto part = slice(w, 1, 0, be / 2);
  EXPECT_TRUE(!part.ok() || !validate(*part).ok()) << "half a block is not addressable";
  Status s = validate(TensorDesc::contiguous(t, {4, be + 1}));
  EXPECT_NE(s.message().find("multiple of " + std::to_string(be)), std::string::npos)
      << s.message();
}

INSTANTIATE_TEST_SUITE_P(All, Formats, testing::ValuesIn(kQuantizedDTypes), name_of);

TEST(Formats, ElementTypesAreBlocksOfOne) {
  for (DType t : kElementDTypes) {
    EXPECT_FALSE(is_quantized(t));
    EXPECT_EQ(dtype_block_elems(t), 1);
    EXPECT_EQ(dtype_bytes(t, 7), 7 * static_cast<int64_t>(dtype_size(t)));
  }
  EXPECT_EQ(parse_dtype("q4_K"), DType::q4_k);  // llama.cpp's spelling
  EXPECT_EQ(parse_dtype("Q4_K"), std::nullopt);
  EXPECT_EQ(dtype_of_ggml_type(12), DType::q4_k);
  EXPECT_EQ(dtype_of_ggml_type(16), std::nullopt);  // iq2_xxs
}

TEST(Formats, QuantizingATensorNamesItInErrors) {
  auto src = HostTensor::empty(DType::f32, std::vector<int64_t>{2, 33});
  auto q = quantize(src, DType::q4_0, "blk.0.w");
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("blk.0.w"), std::string::npos) << q.status().message();
  EXPECT_NE(q.status().message().find("multiple of 32"), std::string::npos);
  auto i = HostTensor::empty(DType::i32, std::vector<int64_t>{2, 32});
  EXPECT_FALSE(quantize(i, DType::q4_0).ok());
  auto f = HostTensor::empty(DType::f32, std::vector<int64_t>{2, 32});
  EXPECT_FALSE(quantize(f, DType::f16).ok());
}

// ---- Ops that read block formats.

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TensorDesc q(DType t, std::vector<int64_t> s) {
  return TensorDesc::contiguous(t, s);
}

TEST(QuantizedOps, MatmulReadsAWeightStoredNByKAndKeepsTheActivationDtype) {
  OpAttrs tb;
  tb.transpose_b = true;
  for (DType a : {DType::f32, DType::f16, DType::bf16}) {
    auto op = make_op(OpKind::matmul, tb, {q(a, {2, 3, 512}), q(DType::q4_k, {33, 512})});
    ASSERT_TRUE(op.ok()) << op.status().message();
    EXPECT_EQ(op->output, q(a, {2, 3, 33}));
    EXPECT_EQ(op_bytes(*op),
              2.0 * 3 * 512 * dtype_size(a) + 33 * 2 * 144 + 2.0 * 3 * 33 * dtype_size(a))
        << "the weight counts its compressed bytes";
  }
  auto no_tb = make_op(OpKind::matmul, {}, {q(DType::f32, {3, 512}), q(DType::q8_0, {512, 64})},
                       {"x", "w"}, "proj");
  ASSERT_FALSE(no_tb.ok());
  EXPECT_HAS(no_tb.status().message(), "matmul 'proj': tensor 'w'");
  EXPECT_HAS(no_tb.status().message(), "transpose_b");
  auto a_quant = make_op(OpKind::matmul, tb, {q(DType::q4_0, {3, 64}), q(DType::q4_0, {5, 64})});
  ASSERT_FALSE(a_quant.ok());
  EXPECT_HAS(a_quant.status().message(), "a float activation");
  auto batched = make_op(OpKind::matmul, tb, {q(DType::f32, {3, 64}), q(DType::q4_0, {2, 5, 64})});
  ASSERT_FALSE(batched.ok());
  EXPECT_HAS(batched.status().message(), "rank 2");
  auto k_mismatch = make_op(OpKind::matmul, tb, {q(DType::f32, {3, 96}), q(DType::q4_0, {5, 64})});
  ASSERT_FALSE(k_mismatch.ok());
  EXPECT_HAS(k_mismatch.status().message(), "K = 96");
}

TEST(QuantizedOps, EmbeddingOfAQuantizedTableGivesF32Rows) {
  auto op = make_op(OpKind::embedding, {}, {q(DType::q6_k, {100, 256}), q(DType::i32, {2, 7})});
  ASSERT_TRUE(op.ok()) << op.status().message();
  EXPECT_EQ(op->output, q(DType::f32, {2, 7, 256}));
}

TEST(QuantizedOps, CastGoesFromABlockFormatToAFloatOnly) {
  OpAttrs to;
  to.to = DType::f16;
  auto op = make_op(OpKind::cast, to, {q(DType::q5_k, {4, 256})});
  ASSERT_TRUE(op.ok()) << op.status().message();
  EXPECT_EQ(op->output, q(DType::f16, {4, 256}));
  to.to = DType::i32;
  EXPECT_FALSE(make_op(OpKind::cast, to, {q(DType::q5_k, {4, 256})}).ok());
  to.to = DType::q4_0;
  auto into = make_op(OpKind::cast, to, {q(DType::f32, {4, 256})});
  ASSERT_FALSE(into.ok());
  EXPECT_HAS(into.status().message(), "duet::quantize");
}

TEST(QuantizedOps, OtherOpsRefuseBlockFormatsSayingWhatReadsThem) {
  for (OpKind k : {OpKind::add, OpKind::silu, OpKind::softmax, OpKind::copy}) {
    std::vector<TensorDesc> in = {q(DType::q8_0, {4, 64})};
    if (k == OpKind::add) in.push_back(q(DType::q8_0, {4, 64}));
    auto op = make_op(k, {}, in, {"w"});
    ASSERT_FALSE(op.ok()) << op_name(k);
    EXPECT_HAS(op.status().message(), "matmul (as 'b'), embedding");
  }
  OpAttrs cat;
  cat.axis = 0;
  EXPECT_FALSE(
      make_op(OpKind::concat, cat, {q(DType::q8_0, {4, 64}), q(DType::q8_0, {4, 64})}).ok());
}

TEST(QuantizedOps, ViewsKeepWholeBlocks) {
  OpAttrs rows;
  rows.axis = 0;
  rows.start = 1;
  rows.stop = 3;
  auto part = make_op(OpKind::slice, rows, {q(DType::q4_k, {8, 512})}, {"w"}, "rows");
  ASSERT_TRUE(part.ok()) << part.status().message();
  EXPECT_EQ(part->output.offset, 512);
  OpAttrs cols = rows;
  cols.axis = 1;
  cols.start = 0;
  cols.stop = 100;
  auto bad = make_op(OpKind::slice, cols, {q(DType::q4_k, {8, 512})}, {"w"}, "cols");
  ASSERT_FALSE(bad.ok());
  EXPECT_HAS(bad.status().message(), "slice 'cols': tensor 'w'");
  EXPECT_HAS(bad.status().message(), "whole q4_k blocks");
  OpAttrs t;
  t.dim0 = 0;
  t.dim1 = 1;
  EXPECT_FALSE(make_op(OpKind::transpose, t, {q(DType::q4_k, {8, 512})}).ok());
  OpAttrs r;
  r.shape = {16, 256};
  EXPECT_TRUE(make_op(OpKind::reshape, r, {q(DType::q4_k, {8, 512})}).ok());
  r.shape = {32, 128};
  EXPECT_FALSE(make_op(OpKind::reshape, r, {q(DType::q4_k, {8, 512})}).ok());
}

}  // namespace
}  // namespace duet
