// The kernel instances the planner can choose, and nothing else: calls go(kernel) with the
// instance a launch names. Included by the translation units that compile a tier (for the GPU
// and for the emulator), so each instance is compiled only where its tier is built.
#pragma once

#include "device/attention_tc.h"
#include "device/matmul_tc.h"
#include "duet/status.h"

DUET_DEV_BEGIN

template <class T, class Arch, class Go>
Status attention_instance(int head_dim, Go&& go) {
  // Key tile: 64; at hd 256 32 (flash) or 16 (tiled, Q in shared memory); see host/shapes.h.
  constexpr int kBc256 = Arch::kAsync ? 32 : 16;
  switch (head_dim) {
    case 64:
      return go(&attention_tc<T, 64, 64, Arch>);
    case 80:
      return go(&attention_tc<T, 80, 64, Arch>);
    case 96:
      return go(&attention_tc<T, 96, 64, Arch>);
    case 128:
      return go(&attention_tc<T, 128, 64, Arch>);
    case 256:
      return go(&attention_tc<T, 256, kBc256, Arch>);
  }
  return Status(Code::unsupported, "no attention kernel for head dim " + std::to_string(head_dim));
}

template <class T, class Arch, class Go>
Status matmul_instance(bool b_nmajor, Go&& go) {
  return b_nmajor ? go(&matmul_tc<T, true, Arch>) : go(&matmul_tc<T, false, Arch>);
}

DUET_DEV_END
