#include "allocator.h"

#include <bit>

namespace duet::cuda {

namespace {

constexpr uint64_t kGranule = 512;

std::string mib(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return b;
}

}  // namespace

std::string AllocatorStats::str() const {
  return "in use " + mib(in_use_bytes) + ", cached " + mib(cached_bytes) + ", peak in use " +
         mib(peak_in_use_bytes) + ", peak reserved " + mib(peak_reserved_bytes) + "; " +
         std::to_string(requests) + " requests, " + std::to_string(cache_hits) +
         " from the cache, " + std::to_string(driver_allocs) + " driver allocations, " +
         std::to_string(driver_frees) + " frees, " + std::to_string(flushes) + " flushes";
}

uint64_t CachingAllocator::size_class(uint64_t bytes) {
  if (bytes <= 8 * kGranule)
    return bytes <= kGranule ? kGranule : (bytes + kGranule - 1) / kGranule * kGranule;
  const int e = 63 - std::countl_zero(bytes);  // 2^e <= bytes < 2^(e+1)
  const uint64_t step = uint64_t{1} << (e - 2);
  return (bytes + step - 1) / step * step;
}

uint64_t CachingAllocator::next_class(uint64_t class_size) {
  return size_class(class_size + 1);
}

Result<CachingAllocator::Block> CachingAllocator::allocate(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.requests;
  const uint64_t cls = size_class(bytes);
  auto it = free_.lower_bound(cls);
  if (it != free_.end() && it->first <= next_class(cls)) {
    Block b{it->second, it->first};
    free_.erase(it);
    ++stats_.cache_hits;
    stats_.cached_bytes -= b.size;
    stats_.in_use_bytes += b.size;
    stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
    return b;
  }
  Result<void*> p = source_.alloc(cls);
  if (!p.ok() && p.status().code() == Code::out_of_memory && !free_.empty()) {
    while (!free_.empty()) free_locked(free_.begin());
    ++stats_.flushes;
    p = source_.alloc(cls);
  }
  if (!p.ok()) return p.status();
  ++stats_.driver_allocs;
  stats_.in_use_bytes += cls;
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  stats_.peak_reserved_bytes =
      std::max(stats_.peak_reserved_bytes, stats_.in_use_bytes + stats_.cached_bytes);
  return Block{*p, cls};
}

void CachingAllocator::release(Block b) {
  if (!b.ptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  stats_.in_use_bytes -= b.size;
  if (stats_.cached_bytes + b.size > cache_limit_) {
    source_.free(b.ptr);
    ++stats_.driver_frees;
    return;
  }
  free_.emplace(b.size, b.ptr);
  stats_.cached_bytes += b.size;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  while (!free_.empty()) free_locked(free_.begin());
}

void CachingAllocator::free_locked(std::multimap<uint64_t, void*>::iterator it) {
  source_.free(it->second);
  ++stats_.driver_frees;
  stats_.cached_bytes -= it->first;
  free_.erase(it);
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace duet::cuda
