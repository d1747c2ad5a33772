// The Hopper (sm_90a) kernel instances the planner can choose: calls go(kernel) with the instance
// a launch names. Included by the translation units that compile the wgmma tier (for sm_90a and
// for the emulator).
#pragma once

#include <string>

#include "device/attention_wgmma.h"
#include "duet/status.h"

DUET_DEV_BEGIN

template <class T, class Go>
Status attention_wgmma_instance(int head_dim, Go&& go) {
  switch (head_dim) {
    case 64:
      return go(&attention_wgmma<T, 64>);
    case 128:
      return go(&attention_wgmma<T, 128>);
  }
  return Status(Code::unsupported,
                "no wgmma attention kernel for head dim " + std::to_string(head_dim));
}

DUET_DEV_END
