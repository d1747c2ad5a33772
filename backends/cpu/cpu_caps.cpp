#include <unistd.h>

#include <string>
#include <thread>

#include "cpu_backend.h"
#include "duet/internal/host_cpu.h"
#include "kernels/isa.h"

namespace duet::cpu {

DeviceCaps probe_caps(int threads) {
  DeviceCaps c;
  c.backend = BackendKind::cpu;
  c.type = DeviceType::cpu;
  c.name = cpuinfo_field("model name");
  if (c.name.empty()) c.name = "host CPU";
  std::string vendor = cpuinfo_field("vendor_id");
  c.vendor = vendor == "GenuineIntel" ? "intel" : vendor == "AuthenticAMD" ? "amd" : "cpu";
  c.compute_units = threads;
  c.subgroup_size = 1;
  c.fp16_storage = c.bf16_storage = c.int8_storage = true;  // stored, computed in f32 (below)

  int lanes = 4;  // f32 lanes per FMA
  std::string isa;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  c.arch = "x86-64";
  if (__builtin_cpu_supports("avx2")) {
    isa += " avx2";
    lanes = 8;
  }
  if (__builtin_cpu_supports("fma")) isa += " fma";
  if (kernels::host_has_f16c()) isa += " f16c";
  if (__builtin_cpu_supports("avx512f")) {
    isa += " avx512f";
    lanes = 16;
  }
  if (__builtin_cpu_supports("avx512bf16")) isa += " avx512_bf16";
  // bf16 arithmetic for matmul where the kernels in force have vdpbf16ps (not when
  // DUET_CPU_ISA lowers them at the time the device opens).
  c.bf16_arith = kernels::active_isa() == kernels::Isa::avx512bf16;
#elif defined(__aarch64__)
  c.arch = "aarch64";
  isa = " neon";
#else
  c.arch = "unknown";
#endif
  if (!isa.empty()) c.extra["isa"] = isa.substr(1);
  c.extra["threads"] = std::to_string(threads);

  c.clock_mhz = host_cpu_mhz();
  c.peak_gflops_f32 = host_peak_gflops(threads, lanes);
  c.peak_gflops_f16 = c.peak_gflops_f32;
  // vdpbf16ps: two products per f32 lane.
  c.peak_gflops_bf16 = c.bf16_arith ? 2 * c.peak_gflops_f32 : c.peak_gflops_f32;
  c.memory_gbps = host_memory_gbps(threads);
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  c.memory_bytes =
      pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
  c.host_visible_device_memory = true;
  c.reads_host_memory = true;
  return c;
}

}  // namespace duet::cpu
