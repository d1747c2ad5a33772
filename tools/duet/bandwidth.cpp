#include "duet/bandwidth.h"

#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <new>
#include <thread>
#include <vector>

namespace duet::cli {

namespace {

// Sixteen-byte lanes through the compiler's vector extension (SSE2 on x86-64, NEON on aarch64):
// the baseline flags already read far faster than memory delivers.
typedef uint64_t Lane __attribute__((vector_size(16)));

// XORs every 16-byte lane of [p, p + n) into eight independent accumulators (two cache lines
// per step), so the loop is bound by the loads alone.
uint64_t read_all(const Lane* p, size_t n) {
  Lane a[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) a[k] ^= p[i + static_cast<size_t>(k)];
  for (; i < n; ++i) a[0] ^= p[i];
  Lane s = a[0];
  for (int k = 1; k < 8; ++k) s ^= a[k];
  return s[0] ^ s[1];
}

volatile uint64_t g_sink = 0;

// The last-level cache this CPU's cores share, in bytes (0 when unknown). Linux's cache topology
// first: glibc's figure can be the whole package's (every AMD CCD's L3 summed) where one core
// sees only its own slice.
uint64_t last_level_cache() {
  std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index3/size");
  uint64_t kib = 0;
  char unit = 0;
  if (f >> kib >> unit && unit == 'K') return kib << 10;
  long l3 = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
  l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
  return static_cast<uint64_t>(std::max(l3, 0L));
}

// Eight times the last-level cache, between 256 MiB and 1 GiB.
uint64_t buffer_bytes() {
  return std::clamp<uint64_t>(8 * last_level_cache(), 256ull << 20, 1ull << 30);
}

}  // namespace

ReadBandwidth measure_read_bandwidth(int threads) {
  ReadBandwidth r;
  r.threads = std::max(1, threads);
  r.bytes = buffer_bytes();
  r.passes = 15;
  const size_t lanes = static_cast<size_t>(r.bytes / sizeof(Lane));
  std::unique_ptr<Lane[]> buf(new (std::nothrow) Lane[lanes]);
  if (!buf) return ReadBandwidth{};
  std::memset(static_cast<void*>(buf.get()), 1, r.bytes);  // every page present before timing

  // Each thread reads its own contiguous part; a barrier starts and ends every pass, and the
  // first thread times from one to the other.
  std::vector<double> seconds;
  std::vector<uint64_t> sink(static_cast<size_t>(r.threads));
  std::barrier sync(r.threads);
  auto work = [&](int t) {
    const size_t begin = lanes * static_cast<size_t>(t) / static_cast<size_t>(r.threads);
    const size_t end = lanes * static_cast<size_t>(t + 1) / static_cast<size_t>(r.threads);
    for (int pass = 0; pass <= r.passes; ++pass) {  // pass 0 is not timed
      sync.arrive_and_wait();
      const auto t0 = std::chrono::steady_clock::now();
      sink[static_cast<size_t>(t)] ^= read_all(buf.get() + begin, end - begin);
      sync.arrive_and_wait();
      if (t == 0 && pass > 0)
        seconds.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < r.threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (std::thread& th : pool) th.join();
  // The accumulated bits go somewhere the compiler must keep, so no read can be dropped.
  for (uint64_t s : sink) g_sink = g_sink ^ s;

  std::sort(seconds.begin(), seconds.end());
  const double gb = static_cast<double>(r.bytes) * 1e-9;
  r.gbps = gb / seconds.front();
  r.median_gbps = gb / seconds[seconds.size() / 2];
  return r;
}

}  // namespace duet::cli
