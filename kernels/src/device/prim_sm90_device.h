// The Hopper part of prim.h on the GPU: named barriers, mbarriers, the TMA copy engine, the
// async-proxy fence (sm_90), and wgmma and setmaxnreg (sm_90a). Included only by nvcc (through
// prim.h). Outside an sm_90 (sm_90a) image each function traps: the kernels using them are
// compiled only for sm_90a (kernels/CMakeLists.txt), and the PTX test checks that no other
// image contains these instructions.
#pragma once

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define DUET_SM90 1
#else
#define DUET_SM90 0
#endif
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define DUET_SM90A 1
#else
#define DUET_SM90A 0
#endif

DUET_DEV_BEGIN

// ---- named barriers (ids 1..15; 0 is __syncthreads)
DUET_DEV void named_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
DUET_DEV void named_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

// ---- mbarriers (8 bytes of shared memory each)
DUET_DEV void mbar_init(uint64_t* bar, int count) {
#if DUET_SM90
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
#else
  __trap();
#endif
}
// Makes the initialised barriers visible to the async proxy (the TMA unit) before first use.
DUET_DEV void mbar_fence_init() {
#if DUET_SM90
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
DUET_DEV void mbar_arrive(uint64_t* bar) {
#if DUET_SM90
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
#else
  __trap();
#endif
}
DUET_DEV void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#if DUET_SM90
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
#else
  __trap();
#endif
}
// Until the phase of this parity has completed.
DUET_DEV void mbar_wait(uint64_t* bar, int parity) {
#if DUET_SM90
  const uint32_t a = smem_addr(bar);
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(a), "r"(parity)
        : "memory");
  } while (!done);
#else
  __trap();
#endif
}

// Orders this thread's ordinary shared-memory stores before later async-proxy reads (wgmma,
// TMA stores) of them.
DUET_DEV void fence_proxy_async() {
#if DUET_SM90
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// ---- TMA: a box of a tensor (tile mode) into shared memory, completing on `bar`.
DUET_DEV void tma_load_4d(void* dst, const TensorMap& map, int c0, int c1, int c2, int c3,
                          uint64_t* bar) {
#if DUET_SM90
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], "
      "[%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(bar))
      : "memory");
#else
  __trap();
#endif
}
DUET_DEV void tma_prefetch_map(const TensorMap& map) {
#if DUET_SM90
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map)) : "memory");
#endif
}

// ---- register reallocation between warpgroups (sm_90a)
template <int R>
DUET_DEV void setmaxnreg_inc() {
#if DUET_SM90A
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
#endif
}
template <int R>
DUET_DEV void setmaxnreg_dec() {
#if DUET_SM90A
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
#endif
}

// ---- wgmma (sm_90a)
DUET_DEV void wgmma_fence() {
#if DUET_SM90A
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
DUET_DEV void wgmma_commit() {
#if DUET_SM90A
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
DUET_DEV void wgmma_wait() {
#if DUET_SM90A
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Keeps the compiler from moving accesses of these registers across the asynchronous wgmma
// (it sees only the issuing asm statement write them).
template <int N>
DUET_DEV void wgmma_pin(float (&d)[N]) {
  DUET_UNROLL
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int N>
DUET_DEV void wgmma_pin(uint32_t (&r)[N][4]) {
  DUET_UNROLL
  for (int i = 0; i < N; ++i) DUET_UNROLL
  for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
}

// d (m64nNk16, N/2 floats a thread) = A * B (+ d when scale_d): wgmma_ss reads A and B from
// shared memory (A K-major, B K-major: an [N][16] tile), wgmma_rs A from four registers a thread
// (the m16n8k16 A fragment of each warp's 16 rows) and B N-major (a [16][N] tile).
DUET_DEV_END
#if DUET_SM90A
#include "device/wgmma_asm.h"
#else
DUET_DEV_BEGIN
template <int ND, class T>
DUET_DEV void wgmma_ss(float (&)[ND], uint64_t, uint64_t, int, T) {
  __trap();
}
template <int ND, class T>
DUET_DEV void wgmma_rs(float (&)[ND], const uint32_t (&)[4], uint64_t, int, T) {
  __trap();
}
DUET_DEV_END
#endif
DUET_DEV_BEGIN

// stmatrix: the inverse of ldmatrix (lane l gives the address of row l % 8 of matrix l / 8).
DUET_DEV void stmatrix_x4(const uint32_t (&r)[4], void* p) {
#if DUET_SM90
  asm volatile(
      "stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_addr(p)),
      "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
      : "memory");
#else
  __trap();
#endif
}

DUET_DEV_END
