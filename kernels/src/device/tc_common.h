// Pieces shared by the tensor-core kernels of sm_80+ (the flash attention and pipelined matmul
// tiers) and of sm_75 (the tiled tier). The architecture is a policy: how tiles reach shared
// memory and which mma shape multiplies them.
#pragma once

#include "device/prim.h"

DUET_DEV_BEGIN

// sm_80+ (flash, pipelined): cp.async copies (data lands at the wait, overlapping compute), bf16 or
// f16 mma.sync m16n8k16.
struct Sm80Arch {
  static constexpr bool kAsync = true;
};
// sm_75 (tiled): loads staged through registers (ld.global -> st.shared), f16 only,
// mma.sync m16n8k8 (two per 16-deep step).
struct Sm75Arch {
  static constexpr bool kAsync = false;
};

// D(16x8, fp32) += A(16x16) * B(16x8): A as the four m16n8k16 A registers, B as its two.
// On sm_75 the same registers feed two m16n8k8: {a0,a1} x b0 covers k 0-7, {a2,a3} x b1 k 8-15.
template <class Arch, class T>
DUET_DEV void mma16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (Arch::kAsync) {
    mma_16816(d, a, b0, b1, T{});
  } else {
    mma_1688(d, a[0], a[1], b0);
    mma_1688(d, a[2], a[3], b1);
  }
}

// 8 elements (16 bytes) into shared memory; `n` of them valid, the rest zero-filled. `src` must
// be 16-byte aligned (any valid address when n == 0).
template <class Arch>
DUET_DEV void copy_chunk(uint16_t* dst, const uint16_t* src, int n) {
  if constexpr (Arch::kAsync) {
    cp_async16(dst, src, n * 2);
  } else if (n == 8) {
    store16(dst, load16(src));
  } else {
    for (int e = 0; e < 8; ++e) dst[e] = e < n ? src[e] : uint16_t(0);
  }
}

template <class Arch>
DUET_DEV void commit() {
  if constexpr (Arch::kAsync) cp_async_commit();
}
template <class Arch, int N>
DUET_DEV void wait_groups() {
  if constexpr (Arch::kAsync) cp_async_wait<N>();
}

// Lane address patterns for ldmatrix.x4 (lane l addresses row l%8 of matrix l/8):
// A fragment of a 16x16 tile stored row-major (rows = m, cols = k): matrices (r0-7,c0-7),
// (r8-15,c0-7), (r0-7,c8-15), (r8-15,c8-15) -> a0..a3.
DUET_DEV int a_row(int l) {
  return l & 15;
}
DUET_DEV int a_col(int l) {
  return (l >> 4) * 8;
}
// B fragments of two 8-wide n tiles from a tile stored n-major (rows = n, cols = k):
// matrices (n0-7,k0-7), (n0-7,k8-15), (n8-15,k0-7), (n8-15,k8-15) -> {b0,b1} of tile 0, then 1.
DUET_DEV int bn_row(int l) {
  return ((l >> 4) << 3) + (l & 7);
}
DUET_DEV int bn_col(int l) {
  return ((l >> 3) & 1) * 8;
}
// B fragments of two 8-wide n tiles from a tile stored k-major (rows = k, cols = n), loaded
// with .trans: matrices (k0-7,n0-7), (k8-15,n0-7), (k0-7,n8-15), (k8-15,n8-15) -> same order.
DUET_DEV int bk_row(int l) {
  return l & 15;
}
DUET_DEV int bk_col(int l) {
  return (l >> 4) * 8;
}

inline constexpr float kLog2e = 1.4426950408889634f;

DUET_DEV_END
