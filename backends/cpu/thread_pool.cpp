#include "thread_pool.h"

#if defined(__linux__)
#include <sched.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <utility>

namespace duet::cpu {

namespace {
// Set on pool threads while they run a job, so nested parallel regions run inline instead of
// waiting for a pool that is busy running their caller.
thread_local bool t_in_pool = false;

// How long a thread spins before it sleeps (DUET_CPU_SPIN_US, microseconds).
int64_t spin_ns_from_env() {
  constexpr int64_t kDefaultUs = 50, kMaxUs = 100000;
  const char* v = std::getenv("DUET_CPU_SPIN_US");
  if (!v || !*v) return kDefaultUs * 1000;
  char* end = nullptr;
  const long long us = std::strtoll(v, &end, 10);
  if (*end != '\0' || us < 0) return kDefaultUs * 1000;
  return std::min<int64_t>(us, kMaxUs) * 1000;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until done() or `ns` nanoseconds have passed, yielding between short bursts; whether
// done() held.
template <class Done>
bool spin_until(int64_t ns, Done done) {
  if (ns <= 0) return done();
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= until) return done();
    // Give the core away when others wait for it (the machine oversubscribed): returns at once
    // when nothing else is runnable.
    std::this_thread::yield();
  }
}

struct InPool {
  bool prev = t_in_pool;
  InPool() { t_in_pool = true; }
  ~InPool() { t_in_pool = prev; }
};
}  // namespace

int ThreadPool::default_threads() {
#if defined(__linux__)
  // The cores this process may run on, not the machine's: a process bound to some of them
  // (mpirun binds each rank to a core by default, taskset, a container's cpuset) would otherwise
  // time-slice a worker per machine core on its few, and every parallel region would wait for
  // the workers that are not running.
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ThreadPool::ThreadPool(int threads) : spin_ns_(spin_ns_from_env()) {
  if (threads <= 0) threads = default_threads();
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    stopping_.store(true, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job;
    spin_until(spin_ns_, [&] {
      return generation_.load(std::memory_order_acquire) != seen ||
             stopping_.load(std::memory_order_acquire);
    });
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_.load() != seen; });
      if (stop_) return;
      seen = generation_.load();
      job = job_;
    }
    {
      InPool in;
      try {
        (*job)(index);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = std::current_exception();
      }
    }
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // Under the lock, so that a caller between its check and its sleep is not missed.
      std::lock_guard<std::mutex> lock(mu_);
      done_.notify_one();
    }
  }
}

void ThreadPool::run_on_all(const std::function<void(int)>& f) {
  if (workers_.empty() || t_in_pool) {
    for (int t = 0; t < size(); ++t) f(t);  // inline, same partition as the pool
    return;
  }
  std::lock_guard<std::mutex> submit(submit_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &f;
    pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  std::exception_ptr mine;
  {
    InPool in;
    try {
      f(0);
    } catch (...) {
      mine = std::current_exception();  // thrown again once the workers are done with f
    }
  }
  spin_until(spin_ns_, [&] { return pending_.load(std::memory_order_acquire) == 0; });
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
  job_ = nullptr;
  std::exception_ptr theirs = std::exchange(error_, nullptr);
  lock.unlock();
  if (mine) std::rethrow_exception(mine);
  if (theirs) std::rethrow_exception(theirs);
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& f) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks = (n + grain - 1) / grain;
  if (max_chunks == 1 || workers_.empty() || t_in_pool) {
    f(0, n);
    return;
  }
  // A few chunks per thread balance uneven work (e.g. causal attention rows).
  const int64_t chunks = std::min<int64_t>(max_chunks, static_cast<int64_t>(size()) * 4);
  const int64_t step = (n + chunks - 1) / chunks;
  std::atomic<int64_t> next{0};
  run_on_all([&](int) {
    for (;;) {
      int64_t c = next.fetch_add(1);
      int64_t b = c * step;
      if (b >= n) return;
      f(b, std::min(n, b + step));
    }
  });
}

}  // namespace duet::cpu
