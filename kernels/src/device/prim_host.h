// The host side of prim.h: every primitive forwards to the emulator (kernels/src/emu/), which
// runs each CUDA thread of a block as a fiber. Warp-collective primitives (mma, ldmatrix,
// shuffles, votes) wait for all 32 lanes; barriers wait for the whole block; cp.async data lands
// only at the issuing thread's wait.
#pragma once

#include <algorithm>
#include <cmath>

#include "duet/half.h"
#include "emu/emu.h"

DUET_DEV_BEGIN

using std::fmaxf;
using std::fminf;

DUET_DEV int tid() {
  return emu::self_tid();
}
DUET_DEV int nthreads() {
  return emu::self_ntid();
}
DUET_DEV int bid_x() {
  return static_cast<int>(emu::self_bid().x);
}
DUET_DEV int bid_y() {
  return static_cast<int>(emu::self_bid().y);
}
DUET_DEV int bid_z() {
  return static_cast<int>(emu::self_bid().z);
}
DUET_DEV int nbid_x() {
  return static_cast<int>(emu::self_grid().x);
}
DUET_DEV int nbid_y() {
  return static_cast<int>(emu::self_grid().y);
}

DUET_DEV unsigned char* smem() {
  return emu::self_smem();
}
DUET_DEV uint32_t smem_addr(const void* p) {
  return emu::smem_addr(p);
}
DUET_DEV void sync() {
  emu::barrier();
}
DUET_DEV void sync_warp() {
  emu::warp_barrier();
}

// The emulator runs one kernel at a time: the previous one has always finished.
DUET_DEV void grid_dependency_sync() {}

DUET_DEV uint32_t shfl_xor_u32(uint32_t v, int mask) {
  return emu::shfl(v, emu::Shfl::bfly, mask);
}
DUET_DEV uint32_t shfl_idx_u32(uint32_t v, int src) {
  return emu::shfl(v, emu::Shfl::idx, src);
}
DUET_DEV uint32_t shfl_down_u32(uint32_t v, int delta) {
  return emu::shfl(v, emu::Shfl::down, delta);
}
DUET_DEV float shfl_xor(float v, int mask) {
  return bits_float(shfl_xor_u32(float_bits(v), mask));
}
DUET_DEV float shfl_idx(float v, int src) {
  return bits_float(shfl_idx_u32(float_bits(v), src));
}
DUET_DEV uint32_t ballot(bool p) {
  return emu::vote(emu::Vote::ballot, p);
}
DUET_DEV bool vote_any(bool p) {
  return emu::vote(emu::Vote::any, p) != 0;
}
DUET_DEV bool vote_all(bool p) {
  return emu::vote(emu::Vote::all, p) != 0;
}

DUET_DEV void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, F16) {
  const uint32_t b[2] = {b0, b1};
  emu::mma(emu::Mma::m16n8k16_f16, d, a, b);
}
DUET_DEV void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, Bf16) {
  const uint32_t b[2] = {b0, b1};
  emu::mma(emu::Mma::m16n8k16_bf16, d, a, b);
}
DUET_DEV void mma_1688(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t b0) {
  const uint32_t a[2] = {a0, a1};
  emu::mma(emu::Mma::m16n8k8_f16, d, a, &b0);
}

DUET_DEV void mma_s8_16832(int (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  const uint32_t b[2] = {b0, b1};
  emu::mma_s8(emu::MmaS8::m16n8k32, d, a, b);
}
DUET_DEV void mma_s8_16816(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t b) {
  const uint32_t a[2] = {a0, a1};
  emu::mma_s8(emu::MmaS8::m16n8k16, d, a, &b);
}
DUET_DEV void mma_s8_8816(int (&d)[2], uint32_t a, uint32_t b) {
  emu::mma_s8(emu::MmaS8::m8n8k16, d, &a, &b);
}

DUET_DEV int dp4a(uint32_t a, uint32_t b, int c) {
  return emu::dp4a(a, b, c);
}

DUET_DEV void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  emu::ldmatrix(4, false, r, p);
}
DUET_DEV void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  emu::ldmatrix(4, true, r, p);
}
DUET_DEV void ldmatrix_x2(uint32_t (&r)[2], const void* p) {
  emu::ldmatrix(2, false, r, p);
}
DUET_DEV void ldmatrix_x2_trans(uint32_t (&r)[2], const void* p) {
  emu::ldmatrix(2, true, r, p);
}
DUET_DEV void ldmatrix_x1(uint32_t& r, const void* p) {
  emu::ldmatrix(1, false, &r, p);
}

DUET_DEV void cp_async16(void* dst, const void* src, int src_bytes) {
  emu::cp_async(dst, src, 16, src_bytes);
}
DUET_DEV void cp_async_commit() {
  emu::cp_async_commit();
}
template <int N>
DUET_DEV void cp_async_wait() {
  emu::cp_async_wait(N);
}

DUET_DEV uint32_t funnel_r(uint32_t lo, uint32_t hi, int s) {
  const uint64_t v = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<uint32_t>(v >> (s & 31));
}

DUET_DEV Vec16 load16(const void* p) {
  Vec16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
// Stores into shared memory are noted: the async proxy (wgmma) reads them only after a
// fence.proxy.async by the writer.
DUET_DEV void store16(void* p, const Vec16& v) {
  std::memcpy(p, &v, sizeof v);
  emu::note_store(p, sizeof v);
}
DUET_DEV void store_u32(void* p, uint32_t v) {
  std::memcpy(p, &v, sizeof v);
  emu::note_store(p, sizeof v);
}
DUET_DEV uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
DUET_DEV uint16_t load_u16(const void* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

DUET_DEV uint32_t pack2(float lo, float hi, F16) {
  return static_cast<uint32_t>(f32_to_f16(lo)) | (static_cast<uint32_t>(f32_to_f16(hi)) << 16);
}
DUET_DEV uint32_t pack2(float lo, float hi, Bf16) {
  return static_cast<uint32_t>(f32_to_bf16(lo)) | (static_cast<uint32_t>(f32_to_bf16(hi)) << 16);
}

DUET_DEV float half_to_float(uint16_t h) {
  return f16_to_f32(h);
}
DUET_DEV void unpack2(uint32_t w, float& lo, float& hi, F16) {
  lo = f16_to_f32(static_cast<uint16_t>(w));
  hi = f16_to_f32(static_cast<uint16_t>(w >> 16));
}

DUET_DEV uint16_t round16(float v, F16) {
  return f32_to_f16(v);
}
DUET_DEV uint16_t round16(float v, Bf16) {
  return f32_to_bf16(v);
}

DUET_DEV float exp2_fast(float x) {
  return std::exp2(x);
}
DUET_DEV float log2_fast(float x) {
  return std::log2(x);
}

DUET_DEV void atomic_min_u64(unsigned long long* p, unsigned long long v) {
  emu::atomic_min_u64(p, v);
}

DUET_DEV_END
