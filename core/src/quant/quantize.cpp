// The quantizers: each block's scales fitted to its values (min/max, the largest magnitude for
// the symmetric formats), scales rounded to their stored precision first and the integers
// rounded to nearest against the stored scales. Simple and deterministic; not ggml's search for
// the error-minimising scales, so a block's error can be somewhat larger than llama.cpp's.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "duet/block_layout.h"
#include "duet/half.h"
#include "duet/quantize.h"

namespace duet {

namespace {

uint16_t to_f16(double v) {
  return f32_to_f16(static_cast<float>(v));
}
double f16_value(uint16_t h) {
  return static_cast<double>(f16_to_f32(h));
}
void put_f16(uint8_t* b, int off, uint16_t h) {
  std::memcpy(b + off, &h, 2);
}

int clamp_round(double v, int lo, int hi) {
  if (!(v == v)) return lo;
  return static_cast<int>(
      std::clamp(std::nearbyint(v), static_cast<double>(lo), static_cast<double>(hi)));
}

// The value of largest magnitude (with its sign).
double signed_max(const float* x, int n) {
  double m = 0;
  for (int i = 0; i < n; ++i)
    if (std::abs(x[i]) > std::abs(m)) m = x[i];
  return m;
}

void min_max(const float* x, int n, double* lo, double* hi) {
  *lo = x[0];
  *hi = x[0];
  for (int i = 1; i < n; ++i) {
    *lo = std::min<double>(*lo, x[i]);
    *hi = std::max<double>(*hi, x[i]);
  }
}

// Element e (< 32) of nibble storage: low nibbles hold 0..15, high nibbles 16..31.
void put_nibbles(uint8_t* qs, const int* q) {
  for (int i = 0; i < 16; ++i) qs[i] = static_cast<uint8_t>((q[i] & 0xF) | (q[i + 16] & 0xF) << 4);
}

// Symmetric 32-blocks with `levels` levels (16 or 32) offset by levels / 2: q4_0, q5_0.
void quantize_sym32(const float* x, uint8_t* b, int levels, int d_off, int qs_off, int qh_off) {
  const double max = signed_max(x, 32);
  const uint16_t dh = to_f16(max / -(levels / 2));
  const double d = f16_value(dh);
  put_f16(b, d_off, dh);
  int q[32];
  for (int e = 0; e < 32; ++e)
    q[e] = d == 0 ? levels / 2 : clamp_round(x[e] / d + levels / 2, 0, levels - 1);
  put_nibbles(b + qs_off, q);
  if (qh_off >= 0) {
    uint32_t qh = 0;
    for (int e = 0; e < 32; ++e) qh |= static_cast<uint32_t>((q[e] >> 4) & 1) << e;
    std::memcpy(b + qh_off, &qh, 4);
  }
}

// Scale-and-min 32-blocks: q4_1, q5_1.
void quantize_min32(const float* x, uint8_t* b, int levels, int d_off, int m_off, int qs_off,
                    int qh_off) {
  double lo, hi;
  min_max(x, 32, &lo, &hi);
  const uint16_t dh = to_f16((hi - lo) / (levels - 1)), mh = to_f16(lo);
  const double d = f16_value(dh), m = f16_value(mh);
  put_f16(b, d_off, dh);
  put_f16(b, m_off, mh);
  int q[32];
  for (int e = 0; e < 32; ++e) q[e] = d == 0 ? 0 : clamp_round((x[e] - m) / d, 0, levels - 1);
  put_nibbles(b + qs_off, q);
  if (qh_off >= 0) {
    uint32_t qh = 0;
    for (int e = 0; e < 32; ++e) qh |= static_cast<uint32_t>((q[e] >> 4) & 1) << e;
    std::memcpy(b + qh_off, &qh, 4);
  }
}

void quantize_q8_0(const float* x, uint8_t* b) {
  double amax = 0;
  for (int e = 0; e < 32; ++e) amax = std::max<double>(amax, std::abs(x[e]));
  const uint16_t dh = to_f16(amax / 127);
  const double d = f16_value(dh);
  put_f16(b, DUET_Q8_0_D, dh);
  for (int e = 0; e < 32; ++e)
    b[DUET_Q8_0_QS + e] =
        static_cast<uint8_t>(static_cast<int8_t>(d == 0 ? 0 : clamp_round(x[e] / d, -128, 127)));
}

// GPTQ's asymmetric rule: the range always holds 0, so the zero point is an integer in 0..15.
void quantize_q4_z(const float* x, uint8_t* b) {
  double lo, hi;
  min_max(x, 32, &lo, &hi);
  lo = std::min(lo, 0.0);
  hi = std::max(hi, 0.0);
  const uint16_t dh = to_f16((hi - lo) / 15);
  const double d = f16_value(dh);
  const int z = d == 0 ? 8 : clamp_round(-lo / d, 0, 15);
  put_f16(b, DUET_Q4_Z_D, dh);
  b[DUET_Q4_Z_Z] = static_cast<uint8_t>(z);
  b[DUET_Q4_Z_PAD] = 0;
  int q[32];
  for (int e = 0; e < 32; ++e) q[e] = d == 0 ? z : clamp_round(x[e] / d + z, 0, 15);
  put_nibbles(b + DUET_Q4_Z_QS, q);
}

// Sub-block scales and mins of the k-quants with mins (q2_k, q4_k, q5_k): per sub-block a range
// holding 0, then the super-block scales that quantize them to `bits` bits.
struct KScales {
  int n = 0;  // sub-blocks
  int sc[16] = {}, m[16] = {};
  double escale[16] = {}, eoffset[16] = {};  // as stored: w = escale * q - eoffset
  uint16_t dh = 0, dminh = 0;
};

KScales fit_k_scales(const float* x, int sub, int levels, int scale_bits) {
  KScales k;
  k.n = 256 / sub;
  double scale[16], mins[16], max_scale = 0, max_min = 0;
  for (int s = 0; s < k.n; ++s) {
    double lo, hi;
    min_max(x + s * sub, sub, &lo, &hi);
    lo = std::min(lo, 0.0);
    scale[s] = (hi - lo) / (levels - 1);
    mins[s] = -lo;
    max_scale = std::max(max_scale, scale[s]);
    max_min = std::max(max_min, mins[s]);
  }
  const int smax = (1 << scale_bits) - 1;
  k.dh = to_f16(max_scale / smax);
  k.dminh = to_f16(max_min / smax);
  const double d = f16_value(k.dh), dmin = f16_value(k.dminh);
  for (int s = 0; s < k.n; ++s) {
    k.sc[s] = d == 0 ? 0 : clamp_round(scale[s] / d, 0, smax);
    k.m[s] = dmin == 0 ? 0 : clamp_round(mins[s] / dmin, 0, smax);
    k.escale[s] = d * k.sc[s];
    k.eoffset[s] = dmin * k.m[s];
  }
  return k;
}

void quantize_k_ints(const float* x, const KScales& k, int sub, int levels, int* q) {
  for (int e = 0; e < 256; ++e) {
    const int s = e / sub;
    q[e] = k.escale[s] == 0 ? 0 : clamp_round((x[e] + k.eoffset[s]) / k.escale[s], 0, levels - 1);
  }
}

void quantize_q2_k(const float* x, uint8_t* b) {
  const KScales k = fit_k_scales(x, 16, 4, 4);
  int q[256];
  quantize_k_ints(x, k, 16, 4, q);
  for (int s = 0; s < 16; ++s)
    b[DUET_Q2_K_SCALES + s] = static_cast<uint8_t>(k.sc[s] | k.m[s] << 4);
  uint8_t* qs = b + DUET_Q2_K_QS;
  std::memset(qs, 0, 64);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, r = e % 128, j = r / 32, l = r % 32;
    qs[32 * h + l] |= static_cast<uint8_t>(q[e] << (2 * j));
  }
  put_f16(b, DUET_Q2_K_D, k.dh);
  put_f16(b, DUET_Q2_K_DMIN, k.dminh);
}

void put_scales_k4(uint8_t* out, const int* sc, const int* m) {
  for (int s = 0; s < 4; ++s) {
    out[s] = static_cast<uint8_t>((sc[s] & 63) | (sc[s + 4] >> 4) << 6);
    out[s + 4] = static_cast<uint8_t>((m[s] & 63) | (m[s + 4] >> 4) << 6);
    out[s + 8] = static_cast<uint8_t>((sc[s + 4] & 0xF) | (m[s + 4] & 0xF) << 4);
  }
}

void quantize_q45_k(const float* x, uint8_t* b, bool five) {
  const int levels = five ? 32 : 16;
  const KScales k = fit_k_scales(x, 32, levels, 6);
  int q[256];
  quantize_k_ints(x, k, 32, levels, q);
  put_f16(b, five ? DUET_Q5_K_D : DUET_Q4_K_D, k.dh);
  put_f16(b, five ? DUET_Q5_K_DMIN : DUET_Q4_K_DMIN, k.dminh);
  put_scales_k4(b + (five ? DUET_Q5_K_SCALES : DUET_Q4_K_SCALES), k.sc, k.m);
  uint8_t* qs = b + (five ? DUET_Q5_K_QS : DUET_Q4_K_QS);
  std::memset(qs, 0, 128);
  for (int e = 0; e < 256; ++e) {
    const int i = 32 * (e / 64) + e % 32;
    qs[i] |= static_cast<uint8_t>((q[e] & 0xF) << ((e % 64) < 32 ? 0 : 4));
  }
  if (five) {
    uint8_t* qh = b + DUET_Q5_K_QH;
    std::memset(qh, 0, 32);
    for (int e = 0; e < 256; ++e)
      qh[e % 32] |= static_cast<uint8_t>(((q[e] >> 4) & 1) << (2 * (e / 64) + (e % 64) / 32));
  }
}

// The symmetric k-quants (q3_k, q6_k): per sub-block of 16 a signed scale mapping the value of
// largest magnitude to the lowest level, then a super-scale for the integer scales.
void quantize_q3_k(const float* x, uint8_t* b) {
  double scale[16], max_scale = 0;
  for (int s = 0; s < 16; ++s) {
    scale[s] = signed_max(x + 16 * s, 16) / -4;
    if (std::abs(scale[s]) > std::abs(max_scale)) max_scale = scale[s];
  }
  const uint16_t dh = to_f16(max_scale / -32);
  const double d = f16_value(dh);
  int sc[16], q[256];
  for (int s = 0; s < 16; ++s) sc[s] = d == 0 ? 0 : clamp_round(scale[s] / d, -32, 31);
  for (int e = 0; e < 256; ++e) {
    const double es = d * sc[e / 16];
    q[e] = (es == 0 ? 0 : clamp_round(x[e] / es, -4, 3)) + 4;
  }
  uint8_t* hm = b + DUET_Q3_K_HMASK;
  uint8_t* qs = b + DUET_Q3_K_QS;
  uint8_t* scb = b + DUET_Q3_K_SCALES;
  std::memset(b, 0, DUET_Q3_K_BYTES);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, r = e % 128, j = r / 32, l = r % 32;
    qs[32 * h + l] |= static_cast<uint8_t>((q[e] & 3) << (2 * j));
    hm[l] |= static_cast<uint8_t>((q[e] >> 2) << (4 * h + j));
  }
  for (int s = 0; s < 16; ++s) {
    const int v = sc[s] + 32;
    scb[s < 8 ? s : s - 8] |= static_cast<uint8_t>((v & 0xF) << (s < 8 ? 0 : 4));
    scb[8 + s % 4] |= static_cast<uint8_t>(((v >> 4) & 3) << (2 * (s / 4)));
  }
  put_f16(b, DUET_Q3_K_D, dh);
}

void quantize_q6_k(const float* x, uint8_t* b) {
  double scale[16], max_abs = 0;
  for (int s = 0; s < 16; ++s) {
    scale[s] = signed_max(x + 16 * s, 16) / -32;
    max_abs = std::max(max_abs, std::abs(scale[s]));
  }
  const uint16_t dh = to_f16(max_abs / 127);
  const double d = f16_value(dh);
  int sc[16], q[256];
  for (int s = 0; s < 16; ++s) sc[s] = d == 0 ? 0 : clamp_round(scale[s] / d, -127, 127);
  for (int e = 0; e < 256; ++e) {
    const double es = d * sc[e / 16];
    q[e] = (es == 0 ? 0 : clamp_round(x[e] / es, -32, 31)) + 32;
  }
  uint8_t* ql = b + DUET_Q6_K_QL;
  uint8_t* qh = b + DUET_Q6_K_QH;
  std::memset(b, 0, DUET_Q6_K_BYTES);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, r = e % 128, j = r / 32, l = r % 32;
    ql[64 * h + l + 32 * (j % 2)] |= static_cast<uint8_t>((q[e] & 0xF) << (j < 2 ? 0 : 4));
    qh[32 * h + l] |= static_cast<uint8_t>(((q[e] >> 4) & 3) << (2 * j));
  }
  for (int s = 0; s < 16; ++s)
    b[DUET_Q6_K_SCALES + s] = static_cast<uint8_t>(static_cast<int8_t>(sc[s]));
  put_f16(b, DUET_Q6_K_D, dh);
}

void quantize_block(DType format, const float* x, uint8_t* b) {
  switch (format) {
    case DType::q8_0:
      return quantize_q8_0(x, b);
    case DType::q4_0:
      return quantize_sym32(x, b, 16, DUET_Q4_0_D, DUET_Q4_0_QS, -1);
    case DType::q4_1:
      return quantize_min32(x, b, 16, DUET_Q4_1_D, DUET_Q4_1_M, DUET_Q4_1_QS, -1);
    case DType::q5_0:
      return quantize_sym32(x, b, 32, DUET_Q5_0_D, DUET_Q5_0_QS, DUET_Q5_0_QH);
    case DType::q5_1:
      return quantize_min32(x, b, 32, DUET_Q5_1_D, DUET_Q5_1_M, DUET_Q5_1_QS, DUET_Q5_1_QH);
    case DType::q2_k:
      return quantize_q2_k(x, b);
    case DType::q3_k:
      return quantize_q3_k(x, b);
    case DType::q4_k:
      return quantize_q45_k(x, b, false);
    case DType::q5_k:
      return quantize_q45_k(x, b, true);
    case DType::q6_k:
      return quantize_q6_k(x, b);
    case DType::q4_z:
      return quantize_q4_z(x, b);
    default:
      return;
  }
}

}  // namespace

Status quantize(DType format, const float* src, void* dst, int64_t n) {
  if (!is_quantized(format))
    return Err(Code::invalid_argument)
        .op("quantize")
        .expected("a block format (q8_0, q4_0, q4_k, ...)")
        .got(std::string(dtype_name(format)));
  const int64_t be = dtype_block_elems(format), bb = dtype_block_bytes(format);
  if (n % be != 0)
    return Err(Code::invalid_argument)
        .op("quantize")
        .expected("a multiple of " + std::to_string(be) + " values for " +
                  std::string(dtype_name(format)))
        .got(std::to_string(n));
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(src[i]))
      return Err(Code::invalid_argument)
          .op("quantize")
          .expected("finite values")
          .got(std::to_string(src[i]) + " at index " + std::to_string(i));
  for (int64_t b = 0; b < n / be; ++b)
    quantize_block(format, src + b * be, static_cast<uint8_t*>(dst) + b * bb);
  return {};
}

Result<HostTensor> quantize(const HostTensor& src, DType format, std::string_view name) {
  auto err = [&] { return Err(Code::invalid_argument).op("quantize").tensor(name); };
  if (!src.defined()) return err().expected("tensor data").got("none");
  if (!is_quantized(format))
    return err()
        .expected("a block format (q8_0, q4_0, q4_k, ...)")
        .got(std::string(dtype_name(format)));
  if (!is_float(src.dtype())) return err().expected("a float tensor").got(src.desc().str());
  const int64_t be = dtype_block_elems(format);
  if (src.desc().rank == 0 || src.desc().dim(-1) % be != 0)
    return err()
        .expected("a last dim that is a multiple of " + std::to_string(be) + " (the " +
                  std::string(dtype_name(format)) + " block)")
        .got(src.desc().str());
  std::vector<double> v = src.to_doubles();
  std::vector<float> f(v.begin(), v.end());
  HostTensor out = HostTensor::empty(format, src.desc().dims());
  Status s = quantize(format, f.data(), out.storage(), src.numel());
  if (!s.ok()) return s.with_context("tensor '" + std::string(name) + "'");
  return out;
}

Result<HostTensor> dequantize(const HostTensor& src, DType to) {
  if (!src.defined() || !is_quantized(src.dtype()))
    return Err(Code::invalid_argument)
        .op("dequantize")
        .expected("a quantized tensor")
        .got(src.defined() ? src.desc().str() : "none");
  if (!is_float(to))
    return Err(Code::invalid_argument)
        .op("dequantize")
        .expected("a float target dtype")
        .got(std::string(dtype_name(to)));
  HostTensor out = HostTensor::empty(to, src.desc().dims());
  out.from_doubles(src.to_doubles());
  return out;
}

}  // namespace duet
