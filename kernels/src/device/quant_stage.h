// Raw bytes of block-quantized rows staged into shared memory in 16-byte chunks, the widest
// copy there is (cp.async on sm_80+, ld.global.v4 / st.shared.v4 before): the quantized kernels
// then decode from shared memory (quant_words.h) whatever the alignment of a row's blocks.
//
// A range [lo, end) starts on any even address; it is copied from lo rounded down to 16 bytes
// (still inside the allocation: device allocations and the emulator's buffers are 256-byte
// aligned), so its first byte lands at dst + (lo & 15). Bytes at and past `end` are zero-filled,
// never read. The destination needs round_up(15 + (end - lo), 16) bytes, plus the 4 bytes the
// word loader reads past the last word.
#pragma once

#include "device/tc_common.h"

DUET_DEV_BEGIN

DUET_DEV const uint8_t* floor16(const uint8_t* p) {
  return reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t(15));
}
DUET_DEV int offset16(const uint8_t* p) {
  return static_cast<int>(reinterpret_cast<uintptr_t>(p) & 15);
}

// 16 bytes at src (16-byte aligned), of which the first n are valid, into dst.
template <class Arch>
DUET_DEV void copy16(void* dst, const uint8_t* src, int n) {
  if constexpr (Arch::kAsync) {
    cp_async16(dst, src, n);
  } else if (n == 16) {
    store16(dst, load16(src));
  } else {
    auto* d = static_cast<uint8_t*>(dst);
    for (int e = 0; e < 16; ++e) d[e] = e < n ? src[e] : uint8_t(0);
  }
}

// This thread's share (chunks t, t + step, ...) of staging [lo, end) at dst; returns the offset
// of lo in dst.
template <class Arch>
DUET_DEV int stage_bytes(uint8_t* dst, const uint8_t* lo, const uint8_t* end, int t, int step) {
  const uint8_t* base = floor16(lo);
  const int64_t total = end - base;
  const int chunks = static_cast<int>((total + 15) / 16);
  DUET_NO_UNROLL
  for (int c = t; c < chunks; c += step) {
    const int64_t left = total - int64_t(c) * 16;
    copy16<Arch>(dst + 16 * c, base + 16 * c, left >= 16 ? 16 : static_cast<int>(left));
  }
  return offset16(lo);
}

// Waits until at most n (0-3) of this thread's committed copy groups are in flight.
template <class Arch>
DUET_DEV void wait_pending(int n) {
  if constexpr (Arch::kAsync) {
    if (n <= 0)
      cp_async_wait<0>();
    else if (n == 1)
      cp_async_wait<1>();
    else if (n == 2)
      cp_async_wait<2>();
    else
      cp_async_wait<3>();
  }
}

DUET_DEV_END
