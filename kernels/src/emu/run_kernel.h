// Runs one planned call of a kernel under the emulator.
#pragma once

#include "emu/emu.h"
#include "host/launch_plan.h"

namespace duet::kernels::emu_impl {

// With the call's own arguments, or with `p` (arguments completed at launch: tensor maps).
template <class P>
Status run_kernel(const detail::Call& c, void (*kernel)(P), const P& p) {
  struct Thunk {
    void (*kernel)(P);
    const P* params;
  };
  const Thunk t{kernel, &p};
  const emu::Grid grid{{c.grid.x, c.grid.y, c.grid.z}, c.threads, c.smem};
  return emu::run(
      c.name(), grid,
      [](const void* x) {
        const auto* th = static_cast<const Thunk*>(x);
        th->kernel(*th->params);
      },
      &t);
}
template <class P>
Status run_kernel(const detail::Call& c, void (*kernel)(P)) {
  return run_kernel(c, kernel, std::get<P>(c.params));
}

}  // namespace duet::kernels::emu_impl
