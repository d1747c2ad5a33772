// The host CPU as the cost model sees it, for every device that computes on it: the CPU backend,
// and Vulkan drivers that run on the CPU (lavapipe). Internal to duet's libraries.
#pragma once

#include <string>

namespace duet {

// A field of /proc/cpuinfo's first processor ("model name"), "" when absent.
std::string cpuinfo_field(const std::string& key);
// The clock /proc/cpuinfo reports (MHz), 2000 when it does not.
double host_cpu_mhz();
// Peak f32 GFLOP/s of `threads` cores doing `lanes`-wide FMAs on two pipes: an upper bound the
// cost model scales down by what each kernel tier reaches.
double host_peak_gflops(int threads, int lanes);
// Streaming bandwidth of `threads` cores, roughly (a 2-core VM streams about 45 GB/s): about
// 25 GB/s per core up to 8 cores. For the cost model only; calibration measures the real one.
double host_memory_gbps(int threads);

}  // namespace duet
