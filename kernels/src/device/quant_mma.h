// The int8_mma tier: block-quantized weights times activations quantized to int8 per 32, on the
// integer tensor cores (m16n8k32 s8 on sm_80+, m8n8k16 s8 on sm_75), for prefill shapes.
//
// A block computes a 64 x 64 tile of C with 2 x 2 warps of 32 x 32. K goes through shared memory
// in chunks of kc groups of 32 (1 or 2 buffers, sized by the selection from the device's limit):
// the activations' int8 blocks are copied, the weights are decoded from their blocks to int8 in
// registers (q_block32_int) and stored beside their scales. Each group of 32 is one integer mma
// per 16x8 tile (two on sm_75, and two with half the operand zero on sm_80 for formats with a
// scale per 16), and its int32 sums are scaled into f32 accumulators:
//   acc += d_a * (sc[0] * I[0..16) + sc[1] * I[16..32)) + mn[0] * d_a * S[0..16) + mn[1] * ...
// Integer products are exact, so the result is the dequantized weights times the quantized
// activations up to the f32 roundings of the scaling.
#pragma once

#include "device/quant_int.h"
#include "device/tc_common.h"

DUET_DEV_BEGIN

template <class Arch>
DUET_KERNEL_BOUNDED(128)
qmma_kernel(const QMatmulParams p) {
  constexpr int BM = kQMmaBM, BN = kQMmaBN, WM = 32, WN = 32;
  constexpr int MT = WM / 16, NT = WN / 8;
  const int kc = p.kc, pitch = kc * 32 + 16;
  const int t0 = tid(), w = warp(), ln = lane();
  const int g = ln >> 2, t4 = ln & 3;
  const int wr = w / 2, wc = w % 2;
  const int m0 = bid_y() * BM, n0 = bid_x() * BN;
  const int groups = p.K / 32, nchunks = (groups + kc - 1) / kc;
  const Q8Block* qa = p.qa + int64_t(bid_z()) * p.M * groups;
  const int qk = q_block_elems(p.fmt), qb = q_block_bytes(p.fmt);

  // One buffer: A int8 [BM][pitch], W int8 [BN][pitch], A's (d, ds0, ds1) [BM][kc],
  // W's (sc0, sc1, mn0, mn1) [BN][kc].
  const int a_bytes = BM * pitch, w_bytes = BN * pitch;
  const int stage_bytes = a_bytes + w_bytes + BM * kc * 12 + BN * kc * 16;
  auto a_q = [&](int s) { return smem() + s * stage_bytes; };
  auto w_q = [&](int s) { return a_q(s) + a_bytes; };
  auto a_f = [&](int s) { return reinterpret_cast<float*>(w_q(s) + w_bytes); };
  auto w_f = [&](int s) { return a_f(s) + BM * kc * 3; };

  auto load = [&](int chunk, int s) {
    const int g0 = chunk * kc;
    DUET_NO_UNROLL
    for (int i = t0; i < BM * kc; i += kQMmaThreads) {
      const int r = i / kc, k = i % kc, m = m0 + r, gi = g0 + k;
      Vec16 lo = {}, hi = {};
      float d = 0.f, ds0 = 0.f, ds1 = 0.f;
      if (m < p.M && gi < groups) {
        const Q8Block& b = qa[int64_t(m) * groups + gi];
        lo = load16(b.q);
        hi = load16(b.q + 16);
        d = b.d;
        ds0 = b.ds[0];
        ds1 = b.ds[1];
      }
      unsigned char* dst = a_q(s) + r * pitch + k * 32;
      store16(dst, lo);
      store16(dst + 16, hi);
      float* f = a_f(s) + (r * kc + k) * 3;
      f[0] = d;
      f[1] = ds0;
      f[2] = ds1;
    }
    DUET_NO_UNROLL
    for (int i = t0; i < BN * kc; i += kQMmaThreads) {
      const int r = i / kc, k = i % kc, n = n0 + r, gi = g0 + k;
      uint32_t v[8] = {};
      float sc[2] = {0.f, 0.f}, mn[2] = {0.f, 0.f};
      if (n < p.N && gi < groups) {
        const int k0 = gi * 32;
        q_block32_int(p.fmt, p.w + int64_t(n) * p.w_row_bytes + int64_t(k0 / qk) * qb,
                      (k0 % qk) / 32, v, sc, mn);
      }
      unsigned char* dst = w_q(s) + r * pitch + k * 32;
      store16(dst, Vec16{{v[0], v[1], v[2], v[3]}});
      store16(dst + 16, Vec16{{v[4], v[5], v[6], v[7]}});
      float* f = w_f(s) + (r * kc + k) * 4;
      f[0] = sc[0];
      f[1] = sc[1];
      f[2] = mn[0];
      f[3] = mn[1];
    }
  };

  float acc[MT][NT][4];
  DUET_UNROLL
  for (int i = 0; i < MT; ++i) DUET_UNROLL
  for (int j = 0; j < NT; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;

  auto compute = [&](int s) {
    const unsigned char* aq = a_q(s);
    const unsigned char* wq = w_q(s);
    const float* af = a_f(s);
    const float* wf = w_f(s);
    DUET_NO_UNROLL
    for (int k = 0; k < kc; ++k) {
      DUET_UNROLL
      for (int i = 0; i < MT; ++i) {
        const int r0 = wr * WM + i * 16 + g;  // this lane's rows r0 and r0 + 8
        const unsigned char* a0 = aq + r0 * pitch + k * 32 + t4 * 4;
        const unsigned char* a8 = a0 + 8 * pitch;
        const uint32_t a[4] = {load_u32(a0), load_u32(a8), load_u32(a0 + 16), load_u32(a8 + 16)};
        const float* fa0 = af + (r0 * kc + k) * 3;
        const float* fa8 = af + ((r0 + 8) * kc + k) * 3;
        DUET_UNROLL
        for (int j = 0; j < NT; ++j) {
          const unsigned char* b = wq + (wc * WN + j * 8 + g) * pitch + k * 32 + t4 * 4;
          const uint32_t b0 = load_u32(b), b1 = load_u32(b + 16);
          int lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, 0, 0};  // sums over k [0, 16) and [16, 32)
          if constexpr (Arch::kAsync) {
            if (p.per16) {
              mma_s8_16832(lo, a, b0, 0u);
              mma_s8_16832(hi, a, 0u, b1);
            } else {
              mma_s8_16832(lo, a, b0, b1);
            }
          } else {
            int top[2] = {0, 0}, bot[2] = {0, 0};
            mma_s8_8816(top, a[0], b0);
            mma_s8_8816(bot, a[1], b0);
            lo[0] = top[0], lo[1] = top[1], lo[2] = bot[0], lo[3] = bot[1];
            top[0] = top[1] = bot[0] = bot[1] = 0;
            mma_s8_8816(top, a[2], b1);
            mma_s8_8816(bot, a[3], b1);
            hi[0] = top[0], hi[1] = top[1], hi[2] = bot[0], hi[3] = bot[1];
          }
          // Element e: row r0 + 8 * (e / 2), column 2 * t4 + e % 2 of the 16 x 8 tile.
          DUET_UNROLL
          for (int e = 0; e < 4; ++e) {
            const float* fa = e < 2 ? fa0 : fa8;
            const float* fw = wf + ((wc * WN + j * 8 + 2 * t4 + (e & 1)) * kc + k) * 4;
            acc[i][j][e] +=
                fa[0] * (fw[0] * static_cast<float>(lo[e]) + fw[1] * static_cast<float>(hi[e])) +
                fw[2] * fa[1] + fw[3] * fa[2];
          }
        }
      }
    }
  };

  load(0, 0);
  sync();
  for (int c = 0; c < nchunks; ++c) {
    const int s = p.stages > 1 ? c & 1 : 0;
    // Double buffering: the next chunk goes into the other buffer, which every warp finished
    // reading before the barrier that ended the previous step.
    if (p.stages > 1 && c + 1 < nchunks) load(c + 1, s ^ 1);
    compute(s);
    sync();
    if (p.stages == 1 && c + 1 < nchunks) {
      load(c + 1, 0);
      sync();
    }
  }

  const int64_t cb = int64_t(bid_z()) * p.M * p.N;
  DUET_UNROLL
  for (int i = 0; i < MT; ++i) DUET_UNROLL
  for (int j = 0; j < NT; ++j) DUET_UNROLL
  for (int e = 0; e < 4; ++e) {
    const int m = m0 + wr * WM + i * 16 + g + 8 * (e / 2);
    const int n = n0 + wc * WN + j * 8 + 2 * t4 + (e & 1);
    if (m < p.M && n < p.N) store_f32(p.c, p.c_dtype, cb + int64_t(m) * p.N + n, acc[i][j][e]);
  }
}

DUET_DEV_END
