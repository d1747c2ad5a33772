// The quantizers: each block's scales found by an error-minimising search (quant/fit.h), then
// rounded to their stored precision with the integers chosen again against the stored scales,
// trying the neighbouring stored values and keeping what gives the least squared error.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <thread>
#include <vector>

#include "duet/block_layout.h"
#include "duet/half.h"
#include "duet/quantize.h"
#include "fit.h"

namespace duet {

namespace {

using quant::fit_affine;
using quant::fit_symmetric;
using quant::round_to;
using quant::squared_error;

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

// f16 values next to h (h itself first): the stored scale may round either way of the fit.
int f16_neighbours(uint16_t h, uint16_t* out) {
  int n = 0;
  out[n++] = h;
  if ((h & 0x7fff) < 0x7c00) {
    if ((h & 0x7fff) != 0) out[n++] = static_cast<uint16_t>(h - 1);
    if ((h & 0x7fff) < 0x7bff) out[n++] = static_cast<uint16_t>(h + 1);
  }
  return n;
}

// Element e (< 32) of nibble storage: low nibbles hold 0..15, high nibbles 16..31.
void put_nibbles(uint8_t* qs, const int* q) {
  for (int i = 0; i < 16; ++i) qs[i] = static_cast<uint8_t>((q[i] & 0xF) | (q[i + 16] & 0xF) << 4);
}
void put_fifth_bits(uint8_t* b, const int* q) {
  uint32_t qh = 0;
  for (int e = 0; e < 32; ++e) qh |= static_cast<uint32_t>((q[e] >> 4) & 1) << e;
  std::memcpy(b, &qh, 4);
}

// A symmetric block of n: x ~ d q, q in [qmin, qmax], d stored as f16. Writes q (unshifted).
uint16_t symmetric_f16(const float* x, int n, int qmin, int qmax, int* q) {
  const double d = fit_symmetric(x, n, qmin, qmax, q);
  uint16_t cand[3], best = 0;
  const int nc = f16_neighbours(to_f16(d), cand);
  double best_err = -1;
  int tq[256];
  for (int c = 0; c < nc; ++c) {
    const double dc = f16_value(cand[c]);
    round_to(x, n, dc, 0, qmin, qmax, tq);
    const double err = squared_error(x, n, dc, tq, 0);
    if (best_err < 0 || err < best_err) {
      best_err = err;
      best = cand[c];
      std::copy(tq, tq + n, q);
    }
  }
  return best;
}

// Symmetric 32-blocks with `levels` levels offset by levels / 2: q4_0, q5_0.
void quantize_sym32(const float* x, uint8_t* b, int levels, int d_off, int qs_off, int qh_off) {
  int q[32];
  put_f16(b, d_off, symmetric_f16(x, 32, -levels / 2, levels / 2 - 1, q));
  for (int& v : q) v += levels / 2;
  put_nibbles(b + qs_off, q);
  if (qh_off >= 0) put_fifth_bits(b + qh_off, q);
}

// Scale-and-min 32-blocks: q4_1, q5_1 (w = d q + m, both f16).
void quantize_min32(const float* x, uint8_t* b, int levels, int d_off, int m_off, int qs_off,
                    int qh_off) {
  int q[32], tq[32];
  double a, o;
  fit_affine(x, 32, levels - 1, false, q, &a, &o);
  uint16_t dc[3], mc[3], bd = to_f16(a), bm = to_f16(o);
  const int nd = f16_neighbours(bd, dc), nm = f16_neighbours(bm, mc);
  double best_err = -1;
  for (int i = 0; i < nd; ++i)
    for (int j = 0; j < nm; ++j) {
      const double d = f16_value(dc[i]), m = f16_value(mc[j]);
      for (int e = 0; e < 32; ++e) tq[e] = d == 0 ? 0 : clamp_round((x[e] - m) / d, 0, levels - 1);
      const double err = squared_error(x, 32, d, tq, m);
      if (best_err < 0 || err < best_err) {
        best_err = err;
        bd = dc[i];
        bm = mc[j];
        std::copy(tq, tq + 32, q);
      }
    }
  put_f16(b, d_off, bd);
  put_f16(b, m_off, bm);
  put_nibbles(b + qs_off, q);
  if (qh_off >= 0) put_fifth_bits(b + qh_off, q);
}

void quantize_q8_0(const float* x, uint8_t* b) {
  int q[32];
  put_f16(b, DUET_Q8_0_D, symmetric_f16(x, 32, -128, 127, q));
  for (int e = 0; e < 32; ++e)
    b[DUET_Q8_0_QS + e] = static_cast<uint8_t>(static_cast<int8_t>(q[e]));
}

// q4_z: w = d (q - z) with an integer zero point z in 0..15.
void quantize_q4_z(const float* x, uint8_t* b) {
  int q[32], tq[32];
  double a, o;
  fit_affine(x, 32, 15, false, q, &a, &o);
  uint16_t dc[3], bd = to_f16(a);
  const int nd = f16_neighbours(bd, dc);
  int bz = 8;
  double best_err = -1;
  for (int i = 0; i < nd; ++i) {
    const double d = f16_value(dc[i]);
    const int z0 = d == 0 ? 8 : clamp_round(-o / d, 0, 15);
    for (int z = std::max(0, z0 - 1); z <= std::min(15, z0 + 1); ++z) {
      round_to(x, 32, d, z, 0, 15, tq);
      const double err = squared_error(x, 32, d, tq, -d * z);
      if (best_err < 0 || err < best_err) {
        best_err = err;
        bd = dc[i];
        bz = z;
        std::copy(tq, tq + 32, q);
      }
    }
  }
  if (f16_value(bd) == 0) std::fill(q, q + 32, bz);
  put_f16(b, DUET_Q4_Z_D, bd);
  b[DUET_Q4_Z_Z] = static_cast<uint8_t>(bz);
  b[DUET_Q4_Z_PAD] = 0;
  put_nibbles(b + DUET_Q4_Z_QS, q);
}

// ---- the k-quants: sub-block scales (and mins) fitted first, then stored as integers of
// `bits` bits under f16 super-block scales; each sub-block's integer scale (and min) is then
// chosen among its neighbours by the error of its requantized values, and the super-block
// scales refitted by least squares once, keeping whichever state has the smaller error.

// x ~ es q - eo for q in [0, qmax]: the nearest q and the squared error.
double requantize_affine(const float* x, int n, double es, double eo, int qmax, int* q) {
  double err = 0;
  for (int i = 0; i < n; ++i) {
    q[i] = es == 0 ? 0 : clamp_round((x[i] + eo) / es, 0, qmax);
    const double r = x[i] - (es * q[i] - eo);
    err += r * r;
  }
  return err;
}

struct KMin {  // a super-block with mins: w = d sc[s] q - dmin m[s]
  uint16_t dh = 0, dminh = 0;
  int sc[16] = {}, m[16] = {};
  int q[256] = {};
  double err = 0;
};

// Integer scales and mins for the super scales dh, dminh, each chosen among its neighbours.
KMin choose_k_ints(const float* x, int sub, int qmax, int smax, uint16_t dh, uint16_t dminh,
                   const double* scale, const double* mins) {
  KMin k;
  k.dh = dh;
  k.dminh = dminh;
  const double d = f16_value(dh), dmin = f16_value(dminh);
  int tq[32];
  for (int s = 0; s < 256 / sub; ++s) {
    const float* xs = x + s * sub;
    const int sc0 = d == 0 ? 0 : clamp_round(scale[s] / d, 0, smax);
    const int m0 = dmin == 0 ? 0 : clamp_round(mins[s] / dmin, 0, smax);
    double best = -1;
    for (int a = std::max(0, sc0 - 1); a <= std::min(smax, sc0 + 1); ++a)
      for (int c = std::max(0, m0 - 1); c <= std::min(smax, m0 + 1); ++c) {
        const double err = requantize_affine(xs, sub, d * a, dmin * c, qmax, tq);
        if (best < 0 || err < best) {
          best = err;
          k.sc[s] = a;
          k.m[s] = c;
          std::copy(tq, tq + sub, k.q + s * sub);
        }
      }
    k.err += best;
  }
  return k;
}

KMin fit_k_min(const float* x, int sub, int qmax, int bits) {
  const int n = 256 / sub, smax = (1 << bits) - 1;
  double scale[16], mins[16], max_scale = 0, max_min = 0;
  int q[32];
  for (int s = 0; s < n; ++s) {
    double off;
    fit_affine(x + s * sub, sub, qmax, true, q, &scale[s], &off);
    mins[s] = -off;
    max_scale = std::max(max_scale, scale[s]);
    max_min = std::max(max_min, mins[s]);
  }
  KMin best = choose_k_ints(x, sub, qmax, smax, to_f16(max_scale / smax), to_f16(max_min / smax),
                            scale, mins);
  // Least squares for d and dmin given the integers: x ~ d (sc q) - dmin m.
  for (int it = 0; it < 2; ++it) {
    double saa = 0, sab = 0, sbb = 0, sxa = 0, sxb = 0;
    for (int e = 0; e < 256; ++e) {
      const double a = best.sc[e / sub] * best.q[e], bb = -best.m[e / sub];
      saa += a * a;
      sab += a * bb;
      sbb += bb * bb;
      sxa += x[e] * a;
      sxb += x[e] * bb;
    }
    const double det = saa * sbb - sab * sab;
    if (!(det > 0)) break;
    const double d = (sxa * sbb - sxb * sab) / det, dmin = (saa * sxb - sab * sxa) / det;
    if (!(d >= 0) || !(dmin >= 0)) break;
    // The sub-block fits in units of the new super scales.
    const KMin k = choose_k_ints(x, sub, qmax, smax, to_f16(d), to_f16(dmin), scale, mins);
    if (k.err >= best.err) break;
    best = k;
  }
  return best;
}

void quantize_q2_k(const float* x, uint8_t* b) {
  const KMin k = fit_k_min(x, 16, 3, 4);
  for (int s = 0; s < 16; ++s)
    b[DUET_Q2_K_SCALES + s] = static_cast<uint8_t>(k.sc[s] | k.m[s] << 4);
  uint8_t* qs = b + DUET_Q2_K_QS;
  std::memset(qs, 0, 64);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, r = e % 128, j = r / 32, l = r % 32;
    qs[32 * h + l] |= static_cast<uint8_t>(k.q[e] << (2 * j));
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
  const KMin k = fit_k_min(x, 32, five ? 31 : 15, 6);
  put_f16(b, five ? DUET_Q5_K_D : DUET_Q4_K_D, k.dh);
  put_f16(b, five ? DUET_Q5_K_DMIN : DUET_Q4_K_DMIN, k.dminh);
  put_scales_k4(b + (five ? DUET_Q5_K_SCALES : DUET_Q4_K_SCALES), k.sc, k.m);
  uint8_t* qs = b + (five ? DUET_Q5_K_QS : DUET_Q4_K_QS);
  std::memset(qs, 0, 128);
  for (int e = 0; e < 256; ++e) {
    const int i = 32 * (e / 64) + e % 32;
    qs[i] |= static_cast<uint8_t>((k.q[e] & 0xF) << ((e % 64) < 32 ? 0 : 4));
  }
  if (five) {
    uint8_t* qh = b + DUET_Q5_K_QH;
    std::memset(qh, 0, 32);
    for (int e = 0; e < 256; ++e)
      qh[e % 32] |= static_cast<uint8_t>(((k.q[e] >> 4) & 1) << (2 * (e / 64) + (e % 64) / 32));
  }
}

// ---- the symmetric k-quants (q3_k, q6_k): w = d sc[s] q per 16, q in [qmin, qmax], sc signed
// integers in [smin, smax].
struct KSym {
  uint16_t dh = 0;
  int sc[16] = {};
  int q[256] = {};
  double err = 0;
};

KSym choose_k_sym(const float* x, int qmin, int qmax, int smin, int smax, uint16_t dh,
                  const double* scale) {
  KSym k;
  k.dh = dh;
  const double d = f16_value(dh);
  int tq[16];
  for (int s = 0; s < 16; ++s) {
    const float* xs = x + 16 * s;
    const int s0 = d == 0 ? 0 : clamp_round(scale[s] / d, smin, smax);
    double best = -1;
    for (int a = std::max(smin, s0 - 1); a <= std::min(smax, s0 + 1); ++a) {
      const double es = d * a;
      if (es == 0)
        std::fill(tq, tq + 16, 0);
      else
        round_to(xs, 16, es, 0, qmin, qmax, tq);
      const double err = squared_error(xs, 16, es, tq, 0);
      if (best < 0 || err < best) {
        best = err;
        k.sc[s] = a;
        std::copy(tq, tq + 16, k.q + 16 * s);
      }
    }
    k.err += best;
  }
  return k;
}

KSym fit_k_sym(const float* x, int qmin, int qmax, int smin, int smax) {
  double scale[16], m = 0;
  int q[16];
  for (int s = 0; s < 16; ++s) {
    scale[s] = fit_symmetric(x + 16 * s, 16, qmin, qmax, q);
    if (std::abs(scale[s]) > std::abs(m)) m = scale[s];
  }
  // The scale of largest magnitude at either end of the integer scales.
  KSym best = choose_k_sym(x, qmin, qmax, smin, smax, to_f16(m / smin), scale);
  const KSym other = choose_k_sym(x, qmin, qmax, smin, smax, to_f16(m / smax), scale);
  if (other.err < best.err) best = other;
  for (int it = 0; it < 2; ++it) {  // least squares for d given the integers: x ~ d (sc q)
    double saa = 0, sxa = 0;
    for (int e = 0; e < 256; ++e) {
      const double a = best.sc[e / 16] * best.q[e];
      saa += a * a;
      sxa += x[e] * a;
    }
    if (!(saa > 0)) break;
    const KSym k = choose_k_sym(x, qmin, qmax, smin, smax, to_f16(sxa / saa), scale);
    if (k.err >= best.err) break;
    best = k;
  }
  return best;
}

void quantize_q3_k(const float* x, uint8_t* b) {
  const KSym k = fit_k_sym(x, -4, 3, -32, 31);
  uint8_t* hm = b + DUET_Q3_K_HMASK;
  uint8_t* qs = b + DUET_Q3_K_QS;
  uint8_t* scb = b + DUET_Q3_K_SCALES;
  std::memset(b, 0, DUET_Q3_K_BYTES);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, r = e % 128, j = r / 32, l = r % 32, u = k.q[e] + 4;
    qs[32 * h + l] |= static_cast<uint8_t>((u & 3) << (2 * j));
    hm[l] |= static_cast<uint8_t>((u >> 2) << (4 * h + j));
  }
  for (int s = 0; s < 16; ++s) {
    const int v = k.sc[s] + 32;
    scb[s < 8 ? s : s - 8] |= static_cast<uint8_t>((v & 0xF) << (s < 8 ? 0 : 4));
    scb[8 + s % 4] |= static_cast<uint8_t>(((v >> 4) & 3) << (2 * (s / 4)));
  }
  put_f16(b, DUET_Q3_K_D, k.dh);
}

void quantize_q6_k(const float* x, uint8_t* b) {
  const KSym k = fit_k_sym(x, -32, 31, -128, 127);
  uint8_t* ql = b + DUET_Q6_K_QL;
  uint8_t* qh = b + DUET_Q6_K_QH;
  std::memset(b, 0, DUET_Q6_K_BYTES);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, r = e % 128, j = r / 32, l = r % 32, u = k.q[e] + 32;
    ql[64 * h + l + 32 * (j % 2)] |= static_cast<uint8_t>((u & 0xF) << (j < 2 ? 0 : 4));
    qh[32 * h + l] |= static_cast<uint8_t>(((u >> 4) & 3) << (2 * j));
  }
  for (int s = 0; s < 16; ++s)
    b[DUET_Q6_K_SCALES + s] = static_cast<uint8_t>(static_cast<int8_t>(k.sc[s]));
  put_f16(b, DUET_Q6_K_D, k.dh);
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
  // The search costs about a microsecond per value: large tensors take every core.
  const int64_t blocks = n / be;
  const int64_t threads = std::clamp<int64_t>(blocks * be / (1 << 20), 1,
                                              std::max(1u, std::thread::hardware_concurrency()));
  auto run = [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      quantize_block(format, src + b * be, static_cast<uint8_t*>(dst) + b * bb);
  };
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) {
    const int64_t b0 = blocks * t / threads, b1 = blocks * (t + 1) / threads;
    try {
      pool.emplace_back(run, b0, b1);
    } catch (const std::exception&) {  // no thread to be had: this one does the range
      run(b0, b1);
    }
  }
  run(0, blocks / threads);
  for (std::thread& t : pool) t.join();
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
