#include <gtest/gtest.h>
#if defined(__linux__)
#include <sched.h>
#endif

#include <atomic>
#include <new>
#include <vector>

#include "thread_pool.h"

namespace duet::cpu {
namespace {

#if defined(__linux__)
TEST(ThreadPool, DefaultSizeIsTheCoresTheProcessMayRunOn) {
  // A process bound to one core (mpirun binds each rank to one by default; taskset) gets one
  // thread, not one per core of the machine time-sliced on it.
  cpu_set_t all, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  EXPECT_EQ(ThreadPool::default_threads(), CPU_COUNT(&all));
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &all)) {
      CPU_SET(c, &one);
      break;
    }
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  const int bound = ThreadPool::default_threads();
  const int bound_pool = ThreadPool(0).size();
  ASSERT_EQ(sched_setaffinity(0, sizeof all, &all), 0);
  EXPECT_EQ(bound, 1);
  EXPECT_EQ(bound_pool, 1);
}
#endif

TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(10007);
  pool.parallel_for(static_cast<int64_t>(hits.size()), 7, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(ThreadPool, NestedRegionsRunInline) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(8, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      pool.parallel_for(100, 10, [&](int64_t bb, int64_t ee) { sum += ee - bb; });
  });
  EXPECT_EQ(sum.load(), 800);
}

TEST(ThreadPool, RunOnAllGivesEachThreadItsIndex) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> seen(4);
  pool.run_on_all([&](int t) { seen[static_cast<size_t>(t)]++; });
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
}

// A chunk that runs out of memory on a pool thread: the exception reaches the calling thread once
// the region is done (where the CPU device reports it as an error), not std::terminate, and the
// pool runs the next region.
TEST(ThreadPool, AnExceptionOfAPoolThreadIsThrownOnTheCallerAndThePoolRunsOn) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> seen(4);
  EXPECT_THROW(pool.run_on_all([&](int t) {
    seen[static_cast<size_t>(t)]++;
    if (t == 2) throw std::bad_alloc();
  }),
               std::bad_alloc);
  for (auto& s : seen) EXPECT_EQ(s.load(), 1) << "every thread ran its part";
  EXPECT_THROW(pool.run_on_all([](int t) {
    if (t == 0) throw std::bad_alloc();  // the caller's own
  }),
               std::bad_alloc);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(1000, 10, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 1000);
}

}  // namespace
}  // namespace duet::cpu
