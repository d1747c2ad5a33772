#include "duet/internal/host_cpu.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>

namespace duet {

std::string cpuinfo_field(const std::string& key) {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        const size_t start = line.find_first_not_of(" \t", colon + 1);
        return start == std::string::npos ? std::string() : line.substr(start);
      }
    }
  }
  return {};
}

double host_cpu_mhz() {
  const std::string mhz = cpuinfo_field("cpu MHz");
  const double v = mhz.empty() ? 0.0 : std::strtod(mhz.c_str(), nullptr);
  return v > 0 ? v : 2000.0;
}

double host_peak_gflops(int threads, int lanes) {
  return std::max(threads, 1) * host_cpu_mhz() * 1e-3 * lanes * 2 * 2;
}

double host_memory_gbps(int threads) {
  return 25.0 * std::clamp(threads, 1, 8);
}

}  // namespace duet
