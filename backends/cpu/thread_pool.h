// A fixed pool of worker threads for the CPU backend. parallel_for splits [0, n) into chunks and
// runs them on the pool and the calling thread; it returns when every chunk is done. An exception
// thrown by a chunk on a pool thread (std::bad_alloc) is thrown again on the calling thread once
// the region is done, so the caller reports it; never std::terminate.
//
// Between regions the workers, and the caller waiting for them, spin for a short while
// (DUET_CPU_SPIN_US microseconds, default 50; 0: never) before they sleep: a decode step runs
// hundreds of short regions back to back, and waking a sleeping thread costs more than many of
// them take.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace duet::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // total threads including the caller; <= 0 means all cores
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls f(begin, end) over chunks of at least `grain` items covering [0, n).
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f);
  // Calls f(t) once on each of `size()` threads (t in [0, size())), e.g. for per-thread tiles.
  void run_on_all(const std::function<void(int)>& f);

  static int default_threads();

 private:
  void worker(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::mutex submit_mu_;  // one parallel region at a time
  std::condition_variable wake_, done_;
  const std::function<void(int)>* job_ = nullptr;
  // Written under mu_; read without it while spinning.
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stopping_{false};
  int64_t spin_ns_ = 0;
  std::exception_ptr error_;  // the first exception of a pool thread in the current region
  bool stop_ = false;
};

}  // namespace duet::cpu
