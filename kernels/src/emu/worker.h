// The emulator's block runner, shared by the files that emulate instructions (emu.cpp: warps,
// barriers, mma, ldmatrix, cp.async; emu_sm90.cpp: warpgroups, mbarriers, TMA, wgmma). A Worker
// runs one block at a time: every CUDA thread of the block is a fiber, scheduled cooperatively
// warp by warp (emu.h has the model). Internal to kernels/src/emu/.
#pragma once

#include <ucontext.h>

#include <cstdint>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "emu/emu.h"
#include "emu/fiber.h"

namespace duet::kernels::emu {

inline constexpr int kLanes = 32;
inline constexpr int kGroupThreads = 128;         // a warpgroup: four consecutive warps
inline constexpr uint64_t kMaxSmem = 227 * 1024;  // the largest opt-in block shared memory (sm_90)
inline constexpr unsigned char kPoison = 0xFF;    // NaN in f32, f16 and bf16
// Shared-memory addresses (smem_addr, descriptors, TMA destinations) are offsets into a window
// that starts 16 bytes past a 1024-byte boundary, so a kernel that needs 128- or 1024-byte
// alignment (swizzled TMA and wgmma tiles) must align its buffers itself, as on a GPU, where
// the dynamic shared memory starts after a reserved area.
inline constexpr uint32_t kSmemWindowBase = 16;

enum class State : uint8_t { ready, yielded, waiting, done, failed };

struct Copy {  // one cp.async
  unsigned char* dst;
  const unsigned char* src;
  int bytes, src_bytes;
};

// One wgmma.mma_async of a warpgroup, issued and not yet waited for: its result for every
// thread of the group, the registers it lands in, and what it read (checked unchanged at the
// wait: the hardware reads its operands at some time before the wait completes).
struct PendingMma {
  int n = 0;                              // accumulator floats per thread (N / 2)
  float* d[kGroupThreads] = {};           // each thread's accumulator registers
  std::vector<float> value;               // [thread][n]
  const uint32_t* a[kGroupThreads] = {};  // A from registers (null: A from shared memory)
  uint32_t a_seen[kGroupThreads][4] = {};
  std::vector<uint32_t> smem_addr;  // shared bytes read (16-bit elements: their addresses)
  std::vector<uint16_t> smem_seen;  // and their values at issue
};

struct Thread {
  int tid = 0;
  State state = State::ready;
  const char* waiting_at = "";
  const void* wait_obj = nullptr;  // the mbarrier or named barrier waited for
  int wait_arg = 0;                // mbarrier: the phase parity waited for
  FiberContext ctx;
  std::unique_ptr<FiberStack> stack;
  void* asan_fake = nullptr;
  std::vector<Copy> open;                // cp.async issued, not yet committed
  std::deque<std::vector<Copy>> groups;  // committed, oldest first
  bool wgmma_fenced = false;             // wgmma.fence since the last wgmma.wait_group
};

// One warp-collective rendezvous: each lane deposits its operands, the last to arrive computes
// every lane's result, then all lanes read their own.
struct Warp {
  int arrived = 0;
  const char* what = nullptr;  // the collective the first lane arrived at
  int variant = 0;             // its shape/mode, which every lane must share
  uint32_t in[kLanes][12] = {};
  float fin[kLanes][4] = {};
  const void* addr[kLanes] = {};
  int arg[kLanes] = {};
  uint32_t out[kLanes][4] = {};
  float fout[kLanes][4] = {};
};

// The same for the four warps of a warpgroup (wgmma, its commit and wait, setmaxnreg).
struct Group {
  int arrived = 0;
  const char* what = nullptr;
  uint64_t variant = 0;
  float* d[kGroupThreads] = {};
  const uint32_t* a[kGroupThreads] = {};
  uint64_t desc[kGroupThreads][2] = {};
  std::vector<PendingMma> open;                // issued since the last commit
  std::deque<std::vector<PendingMma>> groups;  // committed, oldest first
};

// An mbarrier's state, kept beside the 8 bytes of shared memory it lives in.
struct TmaCopy {
  uint32_t dst = 0;  // shared window address
  TmaDesc desc;
  int64_t coord[5] = {};
  int issuer = 0;
};
struct MBarrier {
  uint32_t addr = 0;
  int expected = 0, pending = 0;
  int64_t tx = 0;
  uint32_t phase = 0;
  std::vector<TmaCopy> inflight;  // bulk copies that complete on this barrier, not yet landed
};

std::string dim3_str(Dim3 d);
std::string ranges(const std::vector<int>& ids);  // "0-15, 17"

class Worker {
 public:
  Worker(std::string_view kernel, const Grid& grid, Entry entry, const void* params);

  bool ok_to_run(std::string* error) const;
  // Runs one block to completion; false with *error set when it failed.
  bool run_block(int64_t linear, std::string* error);

  // ---- what the running fiber sees
  Thread& self() { return *current_; }
  Dim3 bid() const { return bid_; }
  const Grid& grid() const { return grid_; }
  unsigned char* smem() { return smem_.data(); }
  std::vector<Thread>& threads() { return threads_; }

  // Fails the block from inside a fiber, which is then abandoned: `compose` appends the message,
  // so that its temporaries are destroyed before the fiber's stack is left for good (nothing
  // on an abandoned stack may own memory).
  template <class Compose>
  [[noreturn]] void fail(Compose&& compose) {
    if (error_.empty()) {
      error_ = "thread " + std::to_string(current_->tid) + ": ";
      compose(error_);
    }
    current_->state = State::failed;
    leave(/*dying=*/true);
    std::abort();  // unreachable: a failed fiber is never resumed
  }
  [[noreturn]] void fail_with(const std::string& why) {
    fail([&](std::string& e) { e += why; });
  }

  void barrier();
  // bar.sync / bar.arrive on named barrier `id` (1..15) expecting `count` threads.
  void named_barrier(int id, int count, bool wait);

  // The warp rendezvous. `deposit` writes this lane's operands, `compute` (run by the last lane
  // to arrive) fills every lane's results.
  template <class Deposit, class Compute>
  Warp& collective(const char* what, int variant, Deposit&& deposit, Compute&& compute) {
    Thread& t = self();
    const int w = t.tid / kLanes, l = t.tid % kLanes;
    Warp& wp = warps_[static_cast<size_t>(w)];
    if (wp.arrived == 0) {
      wp.what = what;
      wp.variant = variant;
    } else if (wp.what != what || wp.variant != variant) {
      fail([&](std::string& e) {
        e += "warp " + std::to_string(w) + " diverged: lane " + std::to_string(l) + " reached " +
             what + " while other lanes wait at " + wp.what;
      });
    }
    deposit(wp, l);
    if (++wp.arrived == kLanes) {
      wp.arrived = 0;
      compute(wp);
      wake(w * kLanes, kLanes, what);
    } else {
      wait_here(t, what);
    }
    return wp;
  }

  // The warpgroup rendezvous (128 threads: warps 4g..4g+3), as collective().
  template <class Deposit, class Compute>
  Group& group_collective(const char* what, uint64_t variant, Deposit&& deposit,
                          Compute&& compute) {
    Thread& t = self();
    if (grid_.threads % kGroupThreads != 0)
      fail([&](std::string& e) {
        e += std::string(what) + " needs whole warpgroups (blocks of a multiple of 128 threads), " +
             "the block has " + std::to_string(grid_.threads);
      });
    const int g = t.tid / kGroupThreads, i = t.tid % kGroupThreads;
    Group& gp = groups_[static_cast<size_t>(g)];
    if (gp.arrived == 0) {
      gp.what = what;
      gp.variant = variant;
    } else if (gp.what != what || gp.variant != variant) {
      fail([&](std::string& e) {
        e += "warpgroup " + std::to_string(g) + " diverged: thread " + std::to_string(t.tid) +
             " reached " + what + " while other threads of the group wait at " + gp.what;
      });
    }
    deposit(gp, i);
    if (++gp.arrived == kGroupThreads) {
      gp.arrived = 0;
      compute(gp);
      wake(g * kGroupThreads, kGroupThreads, what);
    } else {
      wait_here(t, what);
    }
    return gp;
  }

  // ---- shared memory: window addresses, checks, and the proxy fence bookkeeping
  uint32_t window(const void* p) const {
    return static_cast<uint32_t>(static_cast<const unsigned char*>(p) - smem_.data()) +
           kSmemWindowBase;
  }
  // The host bytes of [addr, addr + bytes) of the window; fails the block when outside.
  unsigned char* at(uint32_t addr, uint32_t bytes, const char* what);
  void check_smem(const void* p, int bytes, int align, const char* what);
  bool in_smem(const void* p) const {
    const auto* c = static_cast<const unsigned char*>(p);
    return c >= smem_.data() && c < smem_.data() + grid_.smem_bytes;
  }
  // Ordinary (generic-proxy) stores into shared memory: the bytes are marked as written by the
  // calling thread until it executes fence.proxy.async; wgmma and TMA stores refuse to read
  // marked bytes (their reads go through the async proxy).
  void note_generic_store(const void* p, int bytes);
  void fence_proxy_async();
  void clear_generic(uint32_t addr, uint32_t bytes);  // written by the async proxy
  // Fails when a byte of [addr, addr + bytes) holds an unfenced generic store.
  void check_async_read(uint32_t addr, uint32_t bytes, const char* what);

  // ---- mbarriers
  MBarrier* find_mbarrier(uint32_t addr);
  MBarrier& mbarrier(const void* p, const char* what);  // fails when not initialised
  std::vector<MBarrier>& mbarriers() { return mbarriers_; }
  // Lands the bulk copies in flight on `b` (their data reaches shared memory, their bytes count
  // against the transaction count) and completes the phase when nothing is pending. Called by
  // the scheduler when no thread can run: copies complete as late as possible.
  void land_copies(MBarrier& b);
  bool land_waited_copies();  // on every barrier something waits on; false when none
  void complete_if_done(MBarrier& b);
  void wait_mbarrier(MBarrier& b, int parity);

  // Gives the other warps a turn before this thread continues (after an mbarrier arrive: the
  // adversarial order for a producer that reuses a buffer too early).
  void yield_to_other_warps();

  std::vector<Group>& groups() { return groups_; }

  static constexpr const char* kBarrier = "bar.sync";
  static constexpr const char* kNamedBarrier = "bar.sync (named)";
  static constexpr const char* kMbarWait = "mbarrier.try_wait";

 private:
  static void fiber_main();
  void wait_here(Thread& t, const char* what);
  void wake(int first, int count, const char* what);
  void leave(bool dying);
  void resume(Thread& t);
  bool schedule();
  std::string deadlock_report() const;

  std::string_view kernel_;
  Grid grid_;
  Entry entry_;
  const void* params_;
  std::vector<Thread> threads_;
  std::vector<Warp> warps_;
  std::vector<Group> groups_;
  std::vector<unsigned char> smem_;
  std::vector<int16_t> writer_;  // per 16 shared bytes: thread + 1 of an unfenced store, or 0
  std::vector<MBarrier> mbarriers_;
  int named_arrived_[16] = {};
  int named_count_[16] = {};
  Dim3 bid_;
  int bar_arrived_ = 0;
  int done_ = 0;
  std::string error_;
  Thread* current_ = nullptr;
  FiberContext sched_ctx_;
  const void* sched_bottom_ = nullptr;
  size_t sched_size_ = 0;
};

// The worker running the calling fiber (valid only inside run()).
Worker& worker();

}  // namespace duet::kernels::emu
