// Run-time choice of the CPU kernels' instruction set. The best ISA the CPU supports is used
// unless DUET_CPU_ISA (avx512bf16, avx512, avx2, neon or generic) asks for another; a request
// for one the CPU does not run falls back to the best supported ISA with a warning.
#pragma once

#include <optional>
#include <string_view>

#include "kernels/kernels.h"

namespace duet::cpu::kernels {

std::string_view isa_name(Isa isa);
std::optional<Isa> parse_isa(std::string_view name);

// The best ISA this CPU and OS support (cpuid via __builtin_cpu_supports, checked once).
Isa detected_isa();
// Whether the CPU can run `isa`'s kernels.
bool isa_supported(Isa isa);
// F16C (half <-> float conversion) on this CPU: cpuid leaf 1, since clang 14 does not accept
// "f16c" in __builtin_cpu_supports.
bool host_has_f16c();
// The ISA in force now: detected_isa() lowered by DUET_CPU_ISA. Read on every call (one getenv),
// so tests and tools can switch paths between ops.
Isa active_isa();

const Kernels& kernels_for(Isa isa);  // isa must be supported
inline const Kernels& active_kernels() {
  return kernels_for(active_isa());
}

}  // namespace duet::cpu::kernels
