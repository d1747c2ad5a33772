#include "duet/dtype.h"
#include "kernels/isa.h"
#include "kernels/quant.h"

namespace duet::cpu::kernels {

static_assert(static_cast<int>(QSlot::q8_0) == static_cast<int>(DType::q8_0) &&
                  static_cast<int>(QSlot::q4_0) == static_cast<int>(DType::q4_0) &&
                  static_cast<int>(QSlot::q4_k) == static_cast<int>(DType::q4_k) &&
                  static_cast<int>(QSlot::q6_k) == static_cast<int>(DType::q6_k) &&
                  static_cast<int>(QSlot::q4_z) == static_cast<int>(DType::q4_z),
              "QSlot numbers the formats as DType");
static_assert(kNumDTypes <= kFormatSlots);

#if defined(__x86_64__) || defined(__i386__)
namespace {
bool vnni() {
  __builtin_cpu_init();
  return isa_supported(Isa::avx512) && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vnni");
}
}  // namespace
#endif

const QuantKernels& quant_kernels_for(Isa isa) {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has_vnni = vnni();
  // Every AVX-512 level (avx512bf16 too) runs the VNNI kernels where the CPU has VNNI.
  if ((isa == Isa::avx512 || isa == Isa::avx512bf16) && has_vnni) return avx512_quant_kernels();
  if (isa != Isa::generic && isa_supported(Isa::avx2)) return avx2_quant_kernels();
#elif defined(__aarch64__)
  if (isa == Isa::neon) return neon_quant_kernels();
#else
  (void)isa;
#endif
  return portable_quant_kernels();
}

}  // namespace duet::cpu::kernels
