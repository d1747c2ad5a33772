#include "kernels/isa.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "duet/internal/log.h"

namespace duet::cpu::kernels {

namespace {
constexpr Isa kEveryIsa[] = {Isa::generic, Isa::avx2, Isa::avx512, Isa::avx512bf16, Isa::neon};
}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512bf16:
      return "avx512bf16";
    case Isa::avx512:
      return "avx512";
    case Isa::avx2:
      return "avx2";
    case Isa::neon:
      return "neon";
    case Isa::generic:
      break;
  }
  return "generic";
}

std::optional<Isa> parse_isa(std::string_view name) {
  for (Isa i : kEveryIsa)
    if (name == isa_name(i)) return i;
  return std::nullopt;
}

bool host_has_f16c() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
#else
  return false;
#endif
}

bool isa_supported(Isa isa) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const bool avx2 =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && host_has_f16c();
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f");
  switch (isa) {
    case Isa::avx512bf16:
      return avx512 && __builtin_cpu_supports("avx512bf16");
    case Isa::avx512:
      return avx512;
    case Isa::avx2:
      return avx2;
    case Isa::generic:
      return true;
    case Isa::neon:
      return false;
  }
  return false;
#elif defined(__aarch64__)
  // Advanced SIMD is part of ARMv8-A: every aarch64 CPU runs it.
  return isa == Isa::generic || isa == Isa::neon;
#else
  return isa == Isa::generic;
#endif
}

Isa detected_isa() {
  static const Isa best = [] {
    for (Isa i : {Isa::avx512bf16, Isa::avx512, Isa::avx2, Isa::neon})
      if (isa_supported(i)) return i;
    return Isa::generic;
  }();
  return best;
}

namespace {

// isa_supported for every ISA, asked once (cpuid is slow in a virtual machine, and
// DUET_CPU_ISA is read on every op).
bool supported_here(Isa isa) {
  static const uint32_t mask = [] {
    uint32_t m = 0;
    for (Isa i : kEveryIsa)
      if (isa_supported(i)) m |= 1u << static_cast<int>(i);
    return m;
  }();
  return (mask >> static_cast<int>(isa)) & 1u;
}

Isa resolve_isa() {
  const Isa best = detected_isa();
  const char* env = std::getenv("DUET_CPU_ISA");
  if (!env || !*env) return best;
  const std::optional<Isa> want = parse_isa(env);
  static std::atomic<bool> warned{false};
  if (!want) {
    if (!warned.exchange(true))
      log().warn(
          "DUET_CPU_ISA='{}' is not one of avx512bf16, avx512, avx2, neon, generic; using {}", env,
          isa_name(best));
    return best;
  }
  if (!supported_here(*want)) {
    if (!warned.exchange(true))
      log().warn("DUET_CPU_ISA={} is not supported by this CPU; using {}", env, isa_name(best));
    return best;
  }
  return *want;
}

}  // namespace

Isa active_isa() {
  const Isa isa = resolve_isa();
  // Say which kernels run (debug level), once and again whenever the choice changes.
  static std::atomic<int> last{-1};
  if (last.exchange(static_cast<int>(isa)) != static_cast<int>(isa))
    log().debug("cpu kernels: {} (best this CPU runs: {}{})", isa_name(isa),
                isa_name(detected_isa()), isa == detected_isa() ? "" : ", set by DUET_CPU_ISA");
  return isa;
}

const Kernels& kernels_for(Isa isa) {
#if defined(__x86_64__) || defined(__i386__)
  if (isa == Isa::avx512bf16) return avx512bf16_kernels();
  if (isa == Isa::avx512) return avx512_kernels();
  if (isa == Isa::avx2) return avx2_kernels();
#elif defined(__aarch64__)
  if (isa == Isa::neon) return neon_kernels();
#else
  (void)isa;
#endif
  return portable_kernels();
}

}  // namespace duet::cpu::kernels
