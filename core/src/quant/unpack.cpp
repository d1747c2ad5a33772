// Decoding of every block format into its integer form (UnpackedBlock), written from the
// layouts in duet/block_layout.h, and dequantization built on it.
#include <cstring>

#include "duet/block_layout.h"
#include "duet/half.h"
#include "duet/quantize.h"

namespace duet {

namespace {

const uint8_t* bytes(const void* p) {
  return static_cast<const uint8_t*>(p);
}

double f16_at(const uint8_t* b, int off) {
  uint16_t h;
  std::memcpy(&h, b + off, 2);
  return static_cast<double>(f16_to_f32(h));
}

uint32_t u32_at(const uint8_t* b, int off) {
  uint32_t v;
  std::memcpy(&v, b + off, 4);
  return v;
}

// The nibble of element e (< 32) in the 16 bytes at qs: low nibbles hold 0..15, high 16..31.
uint8_t nibble32(const uint8_t* qs, int e) {
  return e < 16 ? qs[e] & 0xF : qs[e - 16] >> 4;
}

// Formats without a min pass an offset of -0.0, the additive identity (x + -0.0 is x for every
// x, -0.0 included), so that their elements are the book's product bit for bit.
void set_sub(UnpackedBlock* o, int s, double scale, int zero, double offset) {
  o->scale[s] = scale;
  o->zero[s] = zero;
  o->offset[s] = offset;
}

void unpack_q8_0(const uint8_t* b, UnpackedBlock* o) {
  const double d = f16_at(b, DUET_Q8_0_D);
  for (int e = 0; e < 32; ++e)
    o->q[e] = static_cast<uint8_t>(static_cast<int8_t>(b[DUET_Q8_0_QS + e]) + 128);
  set_sub(o, 0, d, 128, -0.0);
}

// q4_0, q4_1, q4_z: nibbles with a scale and either an integer zero point or a min.
void unpack_nibbles(const uint8_t* qs, UnpackedBlock* o) {
  for (int e = 0; e < 32; ++e) o->q[e] = nibble32(qs, e);
}

void unpack_q5(const uint8_t* qs, uint32_t qh, UnpackedBlock* o) {
  for (int e = 0; e < 32; ++e)
    o->q[e] = static_cast<uint8_t>(nibble32(qs, e) | ((qh >> e) & 1u) << 4);
}

// Byte i of a block's packed scales (sc), for the decoders of duet/block_layout.h.
#define DUET_SCALE_BYTE(i) sc[i]

void unpack_q2_k(const uint8_t* b, UnpackedBlock* o) {
  const double d = f16_at(b, DUET_Q2_K_D), dmin = f16_at(b, DUET_Q2_K_DMIN);
  const uint8_t* qs = b + DUET_Q2_K_QS;
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, r = e % 128, j = r / 32, l = r % 32;
    o->q[e] = (qs[32 * h + l] >> (2 * j)) & 3;
  }
  for (int s = 0; s < 16; ++s) {
    const uint8_t sc = b[DUET_Q2_K_SCALES + s];
    set_sub(o, s, d * (sc & 0xF), 0, -(dmin * (sc >> 4)));
  }
}

void unpack_q3_k(const uint8_t* b, UnpackedBlock* o) {
  const double d = f16_at(b, DUET_Q3_K_D);
  const uint8_t* qs = b + DUET_Q3_K_QS;
  const uint8_t* hm = b + DUET_Q3_K_HMASK;
  const uint8_t* sc = b + DUET_Q3_K_SCALES;
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, r = e % 128, j = r / 32, l = r % 32;
    const int q2 = (qs[32 * h + l] >> (2 * j)) & 3;
    const int hbit = (hm[l] >> (4 * h + j)) & 1;
    o->q[e] = static_cast<uint8_t>(q2 + 4 * hbit);  // q - 4 * !hbit, shifted up by 4
  }
  for (int s = 0; s < 16; ++s)
    set_sub(o, s, d * (DUET_Q3_K_SCALE(DUET_SCALE_BYTE, s) - 32), 4, -0.0);
}

void unpack_q45_k(const uint8_t* b, bool five, UnpackedBlock* o) {
  const int d_off = five ? DUET_Q5_K_D : DUET_Q4_K_D;
  const int dmin_off = five ? DUET_Q5_K_DMIN : DUET_Q4_K_DMIN;
  const uint8_t* sc = b + (five ? DUET_Q5_K_SCALES : DUET_Q4_K_SCALES);
  const uint8_t* qs = b + (five ? DUET_Q5_K_QS : DUET_Q4_K_QS);
  const uint8_t* qh = b + DUET_Q5_K_QH;
  const double d = f16_at(b, d_off), dmin = f16_at(b, dmin_off);
  for (int e = 0; e < 256; ++e) {
    const uint8_t byte = qs[32 * (e / 64) + e % 32];
    int q = (e % 64) < 32 ? byte & 0xF : byte >> 4;
    if (five) q |= ((qh[e % 32] >> (2 * (e / 64) + (e % 64) / 32)) & 1) << 4;
    o->q[e] = static_cast<uint8_t>(q);
  }
  for (int s = 0; s < 8; ++s)
    set_sub(o, s, d * DUET_Q4_K_SCALE(DUET_SCALE_BYTE, s), 0,
            -(dmin * DUET_Q4_K_MIN(DUET_SCALE_BYTE, s)));
}

void unpack_q6_k(const uint8_t* b, UnpackedBlock* o) {
  const double d = f16_at(b, DUET_Q6_K_D);
  const uint8_t* ql = b + DUET_Q6_K_QL;
  const uint8_t* qh = b + DUET_Q6_K_QH;
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, r = e % 128, j = r / 32, l = r % 32;
    const uint8_t lo = ql[64 * h + l + 32 * (j % 2)];
    const int q = (j < 2 ? lo & 0xF : lo >> 4) | ((qh[32 * h + l] >> (2 * j)) & 3) << 4;
    o->q[e] = static_cast<uint8_t>(q);
  }
  for (int s = 0; s < 16; ++s) {
    set_sub(o, s, d * static_cast<int8_t>(b[DUET_Q6_K_SCALES + s]), 32, -0.0);
  }
}

}  // namespace

void unpack_block(DType format, const void* block, UnpackedBlock* o) {
  const uint8_t* b = bytes(block);
  switch (format) {
    case DType::q8_0:
      return unpack_q8_0(b, o);
    case DType::q4_0: {
      unpack_nibbles(b + DUET_Q4_0_QS, o);
      set_sub(o, 0, f16_at(b, DUET_Q4_0_D), 8, -0.0);
      return;
    }
    case DType::q4_1:
      unpack_nibbles(b + DUET_Q4_1_QS, o);
      set_sub(o, 0, f16_at(b, DUET_Q4_1_D), 0, f16_at(b, DUET_Q4_1_M));
      return;
    case DType::q5_0: {
      unpack_q5(b + DUET_Q5_0_QS, u32_at(b, DUET_Q5_0_QH), o);
      set_sub(o, 0, f16_at(b, DUET_Q5_0_D), 16, -0.0);
      return;
    }
    case DType::q5_1:
      unpack_q5(b + DUET_Q5_1_QS, u32_at(b, DUET_Q5_1_QH), o);
      set_sub(o, 0, f16_at(b, DUET_Q5_1_D), 0, f16_at(b, DUET_Q5_1_M));
      return;
    case DType::q2_k:
      return unpack_q2_k(b, o);
    case DType::q3_k:
      return unpack_q3_k(b, o);
    case DType::q4_k:
      return unpack_q45_k(b, false, o);
    case DType::q5_k:
      return unpack_q45_k(b, true, o);
    case DType::q6_k:
      return unpack_q6_k(b, o);
    case DType::q4_z: {
      unpack_nibbles(b + DUET_Q4_Z_QS, o);
      set_sub(o, 0, f16_at(b, DUET_Q4_Z_D), b[DUET_Q4_Z_Z] & 0xF, -0.0);
      return;
    }
    default:
      std::memset(o, 0, sizeof *o);  // not a block format: callers check is_quantized first
      return;
  }
}

namespace {

template <class T>
void dequantize_as(DType format, const void* src, T* dst, int64_t n) {
  const DTypeInfo& info = dtype_info(format);
  const int64_t be = info.block_elems;
  const int sub = info.sub_elems;
  UnpackedBlock u;
  for (int64_t b = 0; b < n / be; ++b) {
    unpack_block(format, bytes(src) + b * info.block_bytes, &u);
    for (int64_t e = 0; e < be; ++e) {
      const int s = static_cast<int>(e / sub);
      // The book's formula, exact in double: the product has at most 11 + 8 + 8 significant
      // bits; a min is added only where the zero point is 0 (d * sc * q - dmin * m).
      dst[b * be + e] = static_cast<T>(u.scale[s] * (u.q[e] - u.zero[s]) + u.offset[s]);
    }
  }
}

}  // namespace

void dequantize(DType format, const void* src, double* dst, int64_t n) {
  dequantize_as(format, src, dst, n);
}

void dequantize(DType format, const void* src, float* dst, int64_t n) {
  dequantize_as(format, src, dst, n);
}

}  // namespace duet
