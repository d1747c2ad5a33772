// The tile geometry of the wgmma attention kernel (attention_wgmma.h), shared with the host's
// selection and launch planning (host/shapes.h). Plain constants: no device code.
#pragma once

#include <cstdint>

namespace duet::kernels::dev {

template <int D>
struct WgShape {
  static constexpr int kWG = 2;         // consumer warpgroups, 64 rows each
  static constexpr int kBM = 64 * kWG;  // query rows per block
  static constexpr int kBN = 128;       // keys per tile
  static constexpr int kStages = D <= 64 ? 4 : 2;
  static constexpr int kThreads = 128 * (kWG + 1);
  static constexpr int kCB = D / 64;                 // 64-column (128-byte) blocks of a row
  static constexpr uint32_t kQBytes = 64 * D * 2;    // one consumer's Q tile
  static constexpr uint32_t kKVBytes = kBN * D * 2;  // one K (or V) tile
  static constexpr uint32_t kBarOffset = kWG * kQBytes + 2 * kStages * kKVBytes;
  // Everything, with the 1024 bytes that align the base.
  static constexpr uint32_t kSmem = 1024 + kBarOffset + 3 * kStages * 8;
};

// Deliberate faults, instantiated only by the tests (tests/kernels/wgmma_attention_test.cpp):
// each must make the emulated kernel fail, showing the checks can see that kind of mistake.
enum class WgFault : int {
  none,
  skip_full_wait,   // a consumer reads V without waiting for its TMA to land
  skip_empty_wait,  // the producer refills a stage without waiting for its release
  early_release,    // a consumer releases a stage before its P V wgmma has landed
  no_proxy_fence,   // Q's ordinary stores are not fenced for the async proxy
  wrong_swizzle,    // Q is stored unswizzled
  early_rescale,    // O is rescaled while the P V wgmma writing it is in flight
};

// Head dims it is instantiated for (others take the flash tier).
inline constexpr int kWgmmaHeadDims[] = {64, 128};

}  // namespace duet::kernels::dev
