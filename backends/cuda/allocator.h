// A caching allocator for device memory: freed blocks go to a free list by size class and are
// handed out again instead of calling cudaMalloc/cudaFree per tensor (both are slow, and
// cudaFree synchronizes the device). Sizes round up to classes of at most 25% waste (4 classes
// per power of two, 512-byte granularity), so a freed block fits later requests of similar size;
// a request may also take a cached block one class larger. When the driver runs out of memory,
// every cached block is returned to it and the allocation is retried once: cached memory never
// causes an out-of-memory error by itself.
//
// All work of a device runs in order on one stream, so a block freed while kernels still read it
// is only reused by work queued after them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "duet/status.h"

namespace duet::cuda {

struct AllocatorStats {
  uint64_t requests = 0;       // allocate() calls
  uint64_t cache_hits = 0;     // served from the free list
  uint64_t driver_allocs = 0;  // device_alloc calls that succeeded
  uint64_t driver_frees = 0;
  uint64_t flushes = 0;       // cache emptied to retry an allocation
  uint64_t in_use_bytes = 0;  // blocks handed out (class sizes)
  uint64_t cached_bytes = 0;  // blocks in the free list
  uint64_t peak_in_use_bytes = 0;
  uint64_t peak_reserved_bytes = 0;  // in use + cached: what the driver gave us
  std::string str() const;
};

// Where blocks come from: the device's memory through the driver, or a fake in tests.
struct MemorySource {
  std::function<Result<void*>(uint64_t)> alloc;
  std::function<void(void*)> free;
};

class CachingAllocator {
 public:
  struct Block {
    void* ptr = nullptr;
    uint64_t size = 0;  // the block's real size (its class), >= the request
  };

  // `cache_limit` bounds the bytes kept in the free list (larger releases go to the driver).
  explicit CachingAllocator(MemorySource source, uint64_t cache_limit = UINT64_MAX)
      : source_(std::move(source)), cache_limit_(cache_limit) {}
  ~CachingAllocator() { empty_cache(); }
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes`. The driver's error (out_of_memory, device_lost) is returned as
  // is when even an empty cache does not help.
  Result<Block> allocate(uint64_t bytes);
  void release(Block b);
  // Returns every cached block to the driver.
  void empty_cache();
  AllocatorStats stats() const;

  static uint64_t size_class(uint64_t bytes);
  static uint64_t next_class(uint64_t class_size);

 private:
  void free_locked(std::multimap<uint64_t, void*>::iterator it);

  MemorySource source_;
  uint64_t cache_limit_;
  mutable std::mutex mu_;
  std::multimap<uint64_t, void*> free_;  // class size -> block
  AllocatorStats stats_;
};

}  // namespace duet::cuda
