// The caching allocator's bookkeeping, over a fake memory source with a capacity.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "allocator.h"

namespace duet::cuda {
namespace {

struct FakeMemory {
  uint64_t capacity = 1ull << 30;
  uint64_t used = 0;
  int allocs = 0, frees = 0;
  std::map<uintptr_t, uint64_t> live;
  uintptr_t next = 0x10000;

  MemorySource source() {
    return {[this](uint64_t n) -> Result<void*> {
              if (used + n > capacity)
                return Status(Code::out_of_memory, "cudaMalloc: out of memory (fake)");
              used += n;
              ++allocs;
              const uintptr_t p = next;
              next += (n + 4095) / 4096 * 4096 + 4096;
              live[p] = n;
              return reinterpret_cast<void*>(p);
            },
            [this](void* p) {
              auto it = live.find(reinterpret_cast<uintptr_t>(p));
              ASSERT_NE(it, live.end()) << "freed a pointer that is not live";
              used -= it->second;
              live.erase(it);
              ++frees;
            }};
  }
};

constexpr uint64_t MiB = 1ull << 20;

TEST(CachingAllocator, SizeClassesWasteAtMostAQuarter) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100000; ++i) {
    const uint64_t n = rng() % (1ull << (rng() % 34));
    const uint64_t c = CachingAllocator::size_class(n);
    ASSERT_GE(c, n);
    ASSERT_EQ(c % 512, 0u) << n;
    ASSERT_LE(c, std::max<uint64_t>(512, n + n / 4 + 512)) << n;
    ASSERT_EQ(CachingAllocator::size_class(c), c) << "classes are fixed points";
    ASSERT_GT(CachingAllocator::next_class(c), c);
  }
  EXPECT_EQ(CachingAllocator::size_class(0), 512u);
  EXPECT_EQ(CachingAllocator::size_class(5 * MiB + 1), 6 * MiB);
}

TEST(CachingAllocator, FreedBlockIsReusedWithoutTheDriver) {
  FakeMemory mem;
  CachingAllocator a(mem.source());
  auto b1 = a.allocate(3 * MiB);
  ASSERT_TRUE(b1.ok());
  void* p = b1->ptr;
  a.release(*b1);
  auto b2 = a.allocate(3 * MiB - 100);
  ASSERT_TRUE(b2.ok());
  EXPECT_EQ(b2->ptr, p);
  EXPECT_EQ(mem.allocs, 1);
  AllocatorStats s = a.stats();
  EXPECT_EQ(s.requests, 2u);
  EXPECT_EQ(s.cache_hits, 1u);
  EXPECT_EQ(s.driver_allocs, 1u);
  EXPECT_EQ(s.in_use_bytes, 3 * MiB);
  EXPECT_EQ(s.cached_bytes, 0u);
  a.release(*b2);
}

TEST(CachingAllocator, TakesACachedBlockOneClassLargerButNoLarger) {
  FakeMemory mem;
  CachingAllocator a(mem.source());
  auto big = a.allocate(10 * MiB);  // class 10 MiB
  a.release(*big);
  auto near = a.allocate(9 * MiB);  // class 9 MiB: the 10 MiB block is one class up
  EXPECT_EQ(near->ptr, big->ptr);
  a.release(*near);
  auto small = a.allocate(4 * MiB);  // far smaller: a new block, the big one stays cached
  EXPECT_NE(small->ptr, big->ptr);
  EXPECT_EQ(mem.allocs, 2);
  EXPECT_EQ(a.stats().cached_bytes, 10 * MiB);
  a.release(*small);
}

TEST(CachingAllocator, OutOfMemoryEmptiesTheCacheAndRetries) {
  FakeMemory mem;
  mem.capacity = 100 * MiB;
  CachingAllocator a(mem.source());
  auto b = a.allocate(60 * MiB);
  ASSERT_TRUE(b.ok());
  a.release(*b);  // 60 MiB cached, unusable for 80 MiB
  auto big = a.allocate(80 * MiB);
  ASSERT_TRUE(big.ok()) << big.status().message();
  AllocatorStats s = a.stats();
  EXPECT_EQ(s.flushes, 1u);
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(mem.frees, 1);
  a.release(*big);
}

TEST(CachingAllocator, OutOfMemoryIsReturnedWhenNothingHelps) {
  FakeMemory mem;
  mem.capacity = 10 * MiB;
  CachingAllocator a(mem.source());
  auto b = a.allocate(20 * MiB);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Code::out_of_memory);
  EXPECT_EQ(a.stats().in_use_bytes, 0u);
}

TEST(CachingAllocator, CacheLimitSendsBlocksBackToTheDriver) {
  FakeMemory mem;
  CachingAllocator a(mem.source(), 8 * MiB);
  auto x = a.allocate(6 * MiB);
  auto y = a.allocate(6 * MiB);
  a.release(*x);
  a.release(*y);  // would exceed 8 MiB cached
  EXPECT_EQ(a.stats().cached_bytes, 6 * MiB);
  EXPECT_EQ(mem.frees, 1);
}

TEST(CachingAllocator, EmptyCacheAndDestructionReturnEverything) {
  FakeMemory mem;
  {
    CachingAllocator a(mem.source());
    for (uint64_t n : std::initializer_list<uint64_t>{1 * MiB, 2 * MiB, 700, 5000})
      a.release(*a.allocate(n));
    EXPECT_GT(mem.used, 0u);
    a.empty_cache();
    EXPECT_EQ(mem.used, 0u);
    a.release(*a.allocate(MiB));
  }
  EXPECT_EQ(mem.used, 0u);
  EXPECT_TRUE(mem.live.empty());
}

// A transformer-like step: per layer a few recurring activation sizes plus a KV-sized block,
// intermediates dying within the layer.
void transformer_step(CachingAllocator& a, uint64_t kv, std::mt19937& rng) {
  std::vector<CachingAllocator::Block> live;
  for (int layer = 0; layer < 8; ++layer) {
    for (uint64_t n : std::initializer_list<uint64_t>{4 * MiB, 4 * MiB, 11 * MiB, 96 * 1024, kv}) {
      auto b = a.allocate(n + rng() % 1024);
      ASSERT_TRUE(b.ok()) << b.status().message() << "; " << a.stats().str();
      live.push_back(*b);
    }
    for (size_t i = 0; i + 2 < live.size(); ++i) {
      a.release(live[i]);
      live[i] = {};
    }
  }
  for (auto& b : live) a.release(b);
}

TEST(CachingAllocator, RecurringShapesStopCallingTheDriverAndStayCompact) {
  FakeMemory mem;
  CachingAllocator a(mem.source());
  std::mt19937 rng(3);
  for (int step = 0; step < 3; ++step) transformer_step(a, 5 * MiB, rng);
  const int warm = mem.allocs;
  for (int step = 0; step < 100; ++step) transformer_step(a, 5 * MiB, rng);
  const AllocatorStats s = a.stats();
  EXPECT_EQ(mem.allocs, warm) << s.str();
  EXPECT_GT(s.cache_hits, s.requests * 9 / 10) << s.str();
  EXPECT_LE(s.peak_reserved_bytes, s.peak_in_use_bytes + 16 * MiB) << s.str();
}

// A KV length that grows every step leaves blocks of outgrown size classes in the cache. They
// must never cost an allocation that fits: when the driver runs out, the cache is emptied.
TEST(CachingAllocator, OutgrownCachedBlocksNeverCauseOutOfMemory) {
  FakeMemory mem;
  mem.capacity = 48 * MiB;  // about 1.5 x the most this pattern has in use at once
  CachingAllocator a(mem.source());
  std::mt19937 rng(3);
  for (int step = 0; step < 200; ++step) {
    transformer_step(a, (512 + static_cast<uint64_t>(step % 64) * 16) * 4096, rng);
    if (::testing::Test::HasFatalFailure()) return;
  }
  const AllocatorStats s = a.stats();
  EXPECT_GT(s.flushes, 0u) << s.str();
  EXPECT_LE(s.peak_reserved_bytes, mem.capacity) << s.str();
  EXPECT_GT(s.cache_hits, s.requests * 3 / 4) << s.str();
}

}  // namespace
}  // namespace duet::cuda
