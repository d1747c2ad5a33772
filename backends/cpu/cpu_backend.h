// The CPU backend: always present, every op, f32 compute (tier "simd") and the float64
// reference (tier "reference").
#pragma once

#include "duet/registry.h"

namespace duet::cpu {

// Options: "cpu.threads" (default: DUET_CPU_THREADS, else every core).
BackendFactory factory();
const BackendRules& rules();
// The host CPU's capability record (name, ISA, cores, memory, estimated peaks).
DeviceCaps probe_caps(int threads);

}  // namespace duet::cpu
