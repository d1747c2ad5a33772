// The Hopper part of prim.h in the emulator (kernels/src/emu/emu_sm90.cpp): named barriers,
// mbarriers, TMA, the async-proxy fence, wgmma, setmaxnreg and stmatrix.
#pragma once

DUET_DEV_BEGIN

DUET_DEV void named_sync(int id, int count) {
  emu::named_barrier(id, count, true);
}
DUET_DEV void named_arrive(int id, int count) {
  emu::named_barrier(id, count, false);
}

DUET_DEV void mbar_init(uint64_t* bar, int count) {
  emu::mbar_init(bar, count);
}
DUET_DEV void mbar_fence_init() {}
DUET_DEV void mbar_arrive(uint64_t* bar) {
  emu::mbar_arrive(bar, 0);
}
DUET_DEV void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  emu::mbar_arrive(bar, bytes);
}
DUET_DEV void mbar_wait(uint64_t* bar, int parity) {
  emu::mbar_wait(bar, parity);
}
DUET_DEV void fence_proxy_async() {
  emu::fence_proxy_async();
}

DUET_DEV void tma_load_4d(void* dst, const TensorMap& map, int c0, int c1, int c2, int c3,
                          uint64_t* bar) {
  const int c[4] = {c0, c1, c2, c3};
  emu::tma_load(dst, map, c, bar);
}
DUET_DEV void tma_prefetch_map(const TensorMap&) {}

template <int R>
DUET_DEV void setmaxnreg_inc() {
  emu::setmaxnreg(true, R);
}
template <int R>
DUET_DEV void setmaxnreg_dec() {
  emu::setmaxnreg(false, R);
}

DUET_DEV void wgmma_fence() {
  emu::wgmma_fence();
}
DUET_DEV void wgmma_commit() {
  emu::wgmma_commit();
}
template <int N>
DUET_DEV void wgmma_wait() {
  emu::wgmma_wait(N);
}
template <int N>
DUET_DEV void wgmma_pin(float (&)[N]) {}
template <int N>
DUET_DEV void wgmma_pin(uint32_t (&)[N][4]) {}

template <int ND>
DUET_DEV void wgmma_ss(float (&d)[ND], uint64_t da, uint64_t db, int scale_d, F16) {
  emu::wgmma(emu::WgmmaType::f16, 2 * ND, d, nullptr, da, db, scale_d != 0, 0);
}
template <int ND>
DUET_DEV void wgmma_ss(float (&d)[ND], uint64_t da, uint64_t db, int scale_d, Bf16) {
  emu::wgmma(emu::WgmmaType::bf16, 2 * ND, d, nullptr, da, db, scale_d != 0, 0);
}
template <int ND>
DUET_DEV void wgmma_rs(float (&d)[ND], const uint32_t (&a)[4], uint64_t db, int scale_d, F16) {
  emu::wgmma(emu::WgmmaType::f16, 2 * ND, d, a, 0, db, scale_d != 0, 1);
}
template <int ND>
DUET_DEV void wgmma_rs(float (&d)[ND], const uint32_t (&a)[4], uint64_t db, int scale_d, Bf16) {
  emu::wgmma(emu::WgmmaType::bf16, 2 * ND, d, a, 0, db, scale_d != 0, 1);
}

DUET_DEV void stmatrix_x4(const uint32_t (&r)[4], void* p) {
  emu::stmatrix(4, false, r, p);
}

DUET_DEV_END
