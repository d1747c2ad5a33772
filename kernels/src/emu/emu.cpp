// The emulator's runtime: workers (OS threads) that each run one block at a time, a block being
// one fiber per CUDA thread under a cooperative scheduler. See emu.h for the model.
#include "emu/emu.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "duet/half.h"
#include "emu/worker.h"

namespace duet::kernels::emu {

// ---- the block runner (worker.h)

std::string dim3_str(Dim3 d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

std::string ranges(const std::vector<int>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    s += (s.empty() ? "" : ", ") + std::to_string(ids[i]);
    if (j > i) s += "-" + std::to_string(ids[j]);
    i = j + 1;
  }
  return s;
}

namespace {
thread_local Worker* tl_worker = nullptr;
}  // namespace

Worker& worker() {
  // Reaching here outside run() is a bug in the caller, not a user error.
  if (!tl_worker) std::abort();
  return *tl_worker;
}

Worker::Worker(std::string_view kernel, const Grid& grid, Entry entry, const void* params)
    : kernel_(kernel),
      grid_(grid),
      entry_(entry),
      params_(params),
      threads_(static_cast<size_t>(grid.threads)),
      warps_(static_cast<size_t>(grid.threads / kLanes)),
      groups_(static_cast<size_t>((grid.threads + kGroupThreads - 1) / kGroupThreads)),
      smem_(std::max<uint64_t>(grid.smem_bytes, 1)),
      writer_((std::max<uint64_t>(grid.smem_bytes, 1) + kSmemWindowBase + 15) / 16) {
  const size_t stack_bytes = running_under_asan() ? 1024 * 1024 : 256 * 1024;
  for (int t = 0; t < grid.threads; ++t) {
    threads_[static_cast<size_t>(t)].tid = t;
    threads_[static_cast<size_t>(t)].stack = std::make_unique<FiberStack>(stack_bytes);
  }
}

bool Worker::ok_to_run(std::string* error) const {
  for (const Thread& t : threads_)
    if (!t.stack->valid()) {
      *error = "could not map fiber stacks for " + std::to_string(grid_.threads) + " threads";
      return false;
    }
  return true;
}

bool Worker::run_block(int64_t linear, std::string* error) {
  bid_.x = static_cast<unsigned>(linear % grid_.blocks.x);
  bid_.y = static_cast<unsigned>(linear / grid_.blocks.x % grid_.blocks.y);
  bid_.z = static_cast<unsigned>(linear / grid_.blocks.x / grid_.blocks.y);
  error_.clear();
  std::memset(smem_.data(), kPoison, smem_.size());
  std::fill(writer_.begin(), writer_.end(), int16_t{0});
  mbarriers_.clear();
  bar_arrived_ = 0;
  done_ = 0;
  for (int& n : named_arrived_) n = 0;
  for (Warp& w : warps_) w.arrived = 0;
  for (Group& g : groups_) {
    g.arrived = 0;
    g.open.clear();
    g.groups.clear();
  }
  for (Thread& t : threads_) {
    t.state = State::ready;
    t.waiting_at = "";
    t.wait_obj = nullptr;
    t.open.clear();
    t.groups.clear();
    t.wgmma_fenced = false;
    t.asan_fake = nullptr;
    make_context(t.ctx, *t.stack, &Worker::fiber_main);
  }
  Worker* saved = tl_worker;
  tl_worker = this;
  const bool ok = schedule();
  tl_worker = saved;
  if (!ok) *error = "block " + dim3_str(bid_) + ": " + error_;
  return ok;
}

void Worker::barrier() {
  Thread& t = self();
  if (++bar_arrived_ == grid_.threads) {
    bar_arrived_ = 0;
    for (Thread& o : threads_)
      if (o.state == State::waiting && o.waiting_at == kBarrier) o.state = State::ready;
    return;
  }
  wait_here(t, kBarrier);
}

void Worker::named_barrier(int id, int count, bool wait) {
  Thread& t = self();
  if (id < 1 || id > 15 || count <= 0 || count % kLanes != 0 || count > grid_.threads)
    fail([&](std::string& e) {
      e += "named barrier " + std::to_string(id) + " for " + std::to_string(count) +
           " threads (ids 1-15, a multiple of 32 threads, at most the block's " +
           std::to_string(grid_.threads) + ")";
    });
  const size_t i = static_cast<size_t>(id);
  if (named_arrived_[i] == 0) {
    named_count_[i] = count;
  } else if (named_count_[i] != count) {
    fail([&](std::string& e) {
      e += "named barrier " + std::to_string(id) + " reached with " + std::to_string(count) +
           " threads while others expect " + std::to_string(named_count_[i]);
    });
  }
  const void* obj = reinterpret_cast<const void*>(static_cast<uintptr_t>(id));
  if (++named_arrived_[i] == count) {
    named_arrived_[i] = 0;
    for (Thread& o : threads_)
      if (o.state == State::waiting && o.waiting_at == kNamedBarrier && o.wait_obj == obj)
        o.state = State::ready;
    return;
  }
  if (wait) {
    t.wait_obj = obj;
    wait_here(t, kNamedBarrier);
  }
}

unsigned char* Worker::at(uint32_t addr, uint32_t bytes, const char* what) {
  if (addr < kSmemWindowBase || addr - kSmemWindowBase + uint64_t{bytes} > grid_.smem_bytes)
    fail([&](std::string& e) {
      e += std::string(what) + ": shared address " + std::to_string(addr) + " (+" +
           std::to_string(bytes) + " bytes) is outside the block's " +
           std::to_string(grid_.smem_bytes) + " bytes of shared memory";
    });
  return smem_.data() + (addr - kSmemWindowBase);
}

void Worker::check_smem(const void* p, int bytes, int align, const char* what) {
  const auto* c = static_cast<const unsigned char*>(p);
  if (c < smem_.data() || c + bytes > smem_.data() + grid_.smem_bytes)
    fail([&](std::string& e) {
      e += std::string(what) + ": address is outside the block's " +
           std::to_string(grid_.smem_bytes) + " bytes of shared memory";
    });
  if (window(p) % static_cast<uint32_t>(align) != 0)
    fail([&](std::string& e) {
      e += std::string(what) + ": shared address " + std::to_string(window(p)) + " is not " +
           std::to_string(align) + "-byte aligned";
    });
}

void Worker::note_generic_store(const void* p, int bytes) {
  if (!in_smem(p)) return;
  const uint32_t a = window(p);
  for (MBarrier& b : mbarriers_)
    if (a < b.addr + 8 && b.addr < a + static_cast<uint32_t>(bytes))
      fail([&](std::string& e) {
        e += "a store into shared address " + std::to_string(a) + " overwrites the mbarrier at " +
             std::to_string(b.addr);
      });
  for (uint32_t c = a / 16; c <= (a + static_cast<uint32_t>(bytes) - 1) / 16; ++c)
    writer_[c] = static_cast<int16_t>(self().tid + 1);
}

void Worker::fence_proxy_async() {
  const auto me = static_cast<int16_t>(self().tid + 1);
  for (int16_t& w : writer_)
    if (w == me) w = 0;
}

void Worker::clear_generic(uint32_t addr, uint32_t bytes) {
  for (uint32_t c = addr / 16; c <= (addr + bytes - 1) / 16 && c < writer_.size(); ++c)
    writer_[c] = 0;
}

void Worker::check_async_read(uint32_t addr, uint32_t bytes, const char* what) {
  for (uint32_t c = addr / 16; c <= (addr + bytes - 1) / 16 && c < writer_.size(); ++c)
    if (writer_[c] != 0)
      fail([&](std::string& e) {
        e += std::string(what) + " reads shared address " + std::to_string(c * 16) +
             ", written by thread " + std::to_string(writer_[c] - 1) +
             " with ordinary stores and no fence.proxy.async since (the async proxy may not see "
             "them)";
      });
}

void Worker::yield_to_other_warps() {
  Thread& t = self();
  t.state = State::yielded;
  t.waiting_at = "yield";
  leave(/*dying=*/false);
}

void Worker::fiber_main() {
  Worker* w = tl_worker;
  finish_switch(nullptr, &w->sched_bottom_, &w->sched_size_);
  w->entry_(w->params_);
  w->current_->state = State::done;
  ++w->done_;
  w->leave(/*dying=*/true);
}

void Worker::wait_here(Thread& t, const char* what) {
  t.state = State::waiting;
  t.waiting_at = what;
  leave(/*dying=*/false);
}

void Worker::wake(int first, int count, const char* what) {
  for (int i = first; i < first + count; ++i) {
    Thread& o = threads_[static_cast<size_t>(i)];
    if (o.state == State::waiting && o.waiting_at == what) o.state = State::ready;
  }
}

// Fiber -> scheduler.
void Worker::leave(bool dying) {
  Thread& t = *current_;
  SwitchNote note{dying ? nullptr : &t.asan_fake, sched_bottom_, sched_size_};
  switch_context(&t.ctx, &sched_ctx_, note);
  finish_switch(t.asan_fake, &sched_bottom_, &sched_size_);
}

// Scheduler -> fiber.
void Worker::resume(Thread& t) {
  current_ = &t;
  void* fake = nullptr;
  SwitchNote note{&fake, t.stack->base(), t.stack->size()};
  switch_context(&sched_ctx_, &t.ctx, note);
  finish_switch(fake, nullptr, nullptr);
  current_ = nullptr;
}

// Warp by warp: a warp runs until all its lanes wait at a barrier (or exit) before the next
// warp starts. Early warps thus race as far ahead of late ones as a barrier allows, which is
// the adversarial order for a missing barrier (a warp overwriting a tile others still read,
// or reading one not yet written): the poisoned data then reaches the output. A thread that
// yielded (after an mbarrier arrive) runs again only when no other thread can (the producer it
// released runs first); bulk copies land only when nothing else can run either.
bool Worker::schedule() {
  for (;;) {
    bool progressed = false;
    for (size_t w = 0; w < warps_.size(); ++w) {
      for (bool again = true; again;) {
        again = false;
        for (size_t l = 0; l < kLanes; ++l) {
          Thread& t = threads_[w * kLanes + l];
          if (t.state != State::ready) continue;
          resume(t);
          progressed = again = true;
          if (!error_.empty()) return false;
        }
      }
    }
    if (done_ == grid_.threads) return true;
    if (!progressed) {
      bool yielded = false;
      for (Thread& t : threads_)
        if (t.state == State::yielded) {
          t.state = State::ready;
          yielded = true;
        }
      if (yielded) continue;
    }
    if (!progressed && land_waited_copies()) continue;
    if (!progressed) {
      error_ = deadlock_report();
      return false;
    }
  }
}

std::string Worker::deadlock_report() const {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (const Thread& t : threads_) {
    std::string what = t.state == State::done ? "exited" : std::string("wait at ") + t.waiting_at;
    if (t.state == State::waiting && t.waiting_at == kMbarWait)
      what += " (mbarrier at shared " +
              std::to_string(static_cast<uint32_t>(reinterpret_cast<uintptr_t>(t.wait_obj))) +
              ", parity " + std::to_string(t.wait_arg) + ")";
    if (t.state == State::waiting && t.waiting_at == kNamedBarrier)
      what += " " + std::to_string(reinterpret_cast<uintptr_t>(t.wait_obj));
    auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.first == what; });
    if (it == groups.end())
      groups.push_back({what, {t.tid}});
    else
      it->second.push_back(t.tid);
  }
  std::string s =
      "deadlock (divergent barrier or warp collective, or an mbarrier phase that never "
      "completes):";
  for (auto& [what, ids] : groups) s += " threads " + ranges(ids) + " " + what + ";";
  s.pop_back();
  return s;
}

namespace {

// ---- fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16 / m16n8k8", f16/bf16):
// groupID g = lane >> 2, threadID_in_group t = lane % 4; element i sits in register i / 2,
// low half first.
struct RC {
  int row, col;
};
RC a16816(int lane, int i) {
  const int g = lane >> 2, t = lane & 3;
  return {g + ((i >> 1) & 1) * 8, t * 2 + (i & 1) + (i >= 4 ? 8 : 0)};
}
RC b16816(int lane, int i) {
  const int g = lane >> 2, t = lane & 3;
  return {t * 2 + (i & 1) + (i >= 2 ? 8 : 0), g};
}
RC a1688(int lane, int i) {
  const int g = lane >> 2, t = lane & 3;
  return {g + (i >= 2 ? 8 : 0), t * 2 + (i & 1)};
}
RC b1688(int lane, int i) {
  const int g = lane >> 2, t = lane & 3;
  return {t * 2 + i, g};
}
RC cfrag(int lane, int i) {
  const int g = lane >> 2, t = lane & 3;
  return {g + (i >= 2 ? 8 : 0), t * 2 + (i & 1)};
}

// Integer (.s8) fragments, PTX ISA "Matrix Fragments for mma.m16n8k32" and "mma.m8n8k16": four
// bytes a register, element i in byte i % 4 of register i / 4.
RC a16832(int lane, int i) {
  const int g = lane >> 2, t = lane & 3;
  return {g + ((i >> 2) & 1) * 8, t * 4 + (i & 3) + (i >= 8 ? 16 : 0)};
}
RC b16832(int lane, int i) {
  const int g = lane >> 2, t = lane & 3;
  return {t * 4 + (i & 3) + (i >= 4 ? 16 : 0), g};
}
RC a8816(int lane, int i) {
  return {lane >> 2, (lane & 3) * 4 + i};
}
RC b8816(int lane, int i) {
  return {(lane & 3) * 4 + i, lane >> 2};
}
RC c8816(int lane, int i) {
  return {lane >> 2, (lane & 3) * 2 + i};
}

int32_t s8_of(uint32_t reg, int i) {
  return static_cast<int8_t>(static_cast<uint8_t>(reg >> (8 * i)));
}

float half_of(uint32_t reg, int h, bool bf16) {
  const auto bits = static_cast<uint16_t>(h ? reg >> 16 : reg & 0xffffu);
  return bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
}

const char* mma_name(Mma k) {
  switch (k) {
    case Mma::m16n8k16_f16:
      return "mma.m16n8k16.f16";
    case Mma::m16n8k16_bf16:
      return "mma.m16n8k16.bf16";
    case Mma::m16n8k8_f16:
      return "mma.m16n8k8.f16";
  }
  return "mma";
}

}  // namespace

int worker_count() {
  if (const char* e = std::getenv("DUET_EMU_THREADS")) {
    const int n = std::atoi(e);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

Status run(std::string_view kernel, const Grid& grid, Entry entry, const void* params) {
  auto fail = [&](const std::string& why) {
    return Status(Code::internal, "emulator: kernel '" + std::string(kernel) + "': " + why);
  };
  if (grid.threads < kLanes || grid.threads > 1024 || grid.threads % kLanes != 0)
    return fail("block of " + std::to_string(grid.threads) +
                " threads (the emulator runs whole warps: a multiple of 32 up to 1024)");
  if (grid.smem_bytes > kMaxSmem)
    return fail(std::to_string(grid.smem_bytes) + " bytes of shared memory per block (at most " +
                std::to_string(kMaxSmem) + " on any GPU)");
  if (grid.blocks.x == 0 || grid.blocks.y == 0 || grid.blocks.z == 0) return {};
  if (tl_worker) return fail("launched from inside a running kernel");
  const int64_t nblocks = static_cast<int64_t>(grid.blocks.x) * grid.blocks.y * grid.blocks.z;
  const int nworkers = static_cast<int>(std::min<int64_t>(worker_count(), nblocks));

  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::string first_error;
  auto work = [&] {
    Worker w(kernel, grid, entry, params);
    std::string err;
    if (!w.ok_to_run(&err)) {
      failed = true;
    } else {
      for (;;) {
        const int64_t b = next.fetch_add(1);
        if (b >= nblocks || failed) break;
        if (!w.run_block(b, &err)) {
          failed = true;
          break;
        }
      }
    }
    if (!err.empty()) {
      std::lock_guard<std::mutex> lock(mu);
      if (first_error.empty()) first_error = err;
    }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < nworkers; ++i) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (failed) return fail(first_error);
  return {};
}

int self_tid() {
  return worker().self().tid;
}
int self_ntid() {
  return worker().grid().threads;
}
Dim3 self_bid() {
  return worker().bid();
}
Dim3 self_grid() {
  return worker().grid().blocks;
}
unsigned char* self_smem() {
  return worker().smem();
}

void barrier() {
  worker().barrier();
}

uint32_t smem_addr(const void* p) {
  return worker().window(p);
}

void note_store(const void* p, int bytes) {
  worker().note_generic_store(p, bytes);
}

uint32_t shfl(uint32_t value, Shfl mode, int arg) {
  uint32_t r = 0;
  Worker& w = worker();
  const int lane = w.self().tid % kLanes;
  Warp& wp = w.collective(
      "shfl.sync", static_cast<int>(mode),
      [&](Warp& x, int l) {
        x.in[l][0] = value;
        x.arg[l] = arg;
      },
      [&](Warp& x) {
        for (int l = 0; l < kLanes; ++l) {
          int src = l;
          switch (mode) {
            case Shfl::idx:
              src = x.arg[l] & (kLanes - 1);
              break;
            case Shfl::bfly:
              src = l ^ (x.arg[l] & (kLanes - 1));
              break;
            case Shfl::down:
              src = l + x.arg[l] < kLanes ? l + x.arg[l] : l;
              break;
            case Shfl::up:
              src = l - x.arg[l] >= 0 ? l - x.arg[l] : l;
              break;
          }
          x.out[l][0] = x.in[src][0];
        }
      });
  r = wp.out[lane][0];
  return r;
}

uint32_t vote(Vote mode, bool p) {
  Worker& w = worker();
  const int lane = w.self().tid % kLanes;
  Warp& wp = w.collective(
      "vote.sync", static_cast<int>(mode), [&](Warp& x, int l) { x.in[l][0] = p ? 1u : 0u; },
      [&](Warp& x) {
        uint32_t bits = 0;
        for (int l = 0; l < kLanes; ++l) bits |= x.in[l][0] << l;
        uint32_t r = bits;
        if (mode == Vote::any) r = bits != 0;
        if (mode == Vote::all) r = bits == 0xffffffffu;
        for (int l = 0; l < kLanes; ++l) x.out[l][0] = r;
      });
  return wp.out[lane][0];
}

void mma(Mma kind, float* d, const uint32_t* a, const uint32_t* b) {
  Worker& w = worker();
  const int lane = w.self().tid % kLanes;
  const bool k16 = kind != Mma::m16n8k8_f16;
  const bool bf16 = kind == Mma::m16n8k16_bf16;
  const int K = k16 ? 16 : 8;
  const int na = k16 ? 4 : 2, nb = k16 ? 2 : 1;
  Warp& wp = w.collective(
      mma_name(kind), 0,
      [&](Warp& x, int l) {
        for (int i = 0; i < na; ++i) x.in[l][i] = a[i];
        for (int i = 0; i < nb; ++i) x.in[l][4 + i] = b[i];
        for (int i = 0; i < 4; ++i) x.fin[l][i] = d[i];
      },
      [&](Warp& x) {
        float A[16][16] = {}, B[16][8] = {}, C[16][8] = {};
        for (int l = 0; l < kLanes; ++l) {
          for (int i = 0; i < 2 * na; ++i) {
            const RC rc = k16 ? a16816(l, i) : a1688(l, i);
            A[rc.row][rc.col] = half_of(x.in[l][i / 2], i % 2, bf16);
          }
          for (int i = 0; i < 2 * nb; ++i) {
            const RC rc = k16 ? b16816(l, i) : b1688(l, i);
            B[rc.row][rc.col] = half_of(x.in[l][4 + i / 2], i % 2, bf16);
          }
          for (int i = 0; i < 4; ++i) {
            const RC rc = cfrag(l, i);
            C[rc.row][rc.col] = x.fin[l][i];
          }
        }
        // Products of 16-bit values are exact in double; the sum is rounded once to fp32.
        float D[16][8];
        for (int i = 0; i < 16; ++i)
          for (int j = 0; j < 8; ++j) {
            double s = C[i][j];
            for (int k = 0; k < K; ++k) s += static_cast<double>(A[i][k]) * B[k][j];
            D[i][j] = static_cast<float>(s);
          }
        for (int l = 0; l < kLanes; ++l)
          for (int i = 0; i < 4; ++i) {
            const RC rc = cfrag(l, i);
            x.fout[l][i] = D[rc.row][rc.col];
          }
      });
  for (int i = 0; i < 4; ++i) d[i] = wp.fout[lane][i];
}

void warp_barrier() {
  Worker& w = worker();
  w.collective(
      "bar.warp.sync", 0, [](Warp&, int) {}, [](Warp&) {});
}

void mma_s8(MmaS8 kind, int* d, const uint32_t* a, const uint32_t* b) {
  Worker& w = worker();
  const int lane = w.self().tid % kLanes;
  // m16n8k16 is the first half (k 0-15) of m16n8k32's fragments: A registers 0 and 1, B's 0.
  const bool big = kind != MmaS8::m8n8k16, k16 = kind == MmaS8::m16n8k16;
  const int M = big ? 16 : 8, K = kind == MmaS8::m16n8k32 ? 32 : 16;
  const int na = kind == MmaS8::m16n8k32 ? 4 : k16 ? 2 : 1, nb = kind == MmaS8::m16n8k32 ? 2 : 1;
  const int nd = big ? 4 : 2;
  Warp& wp = w.collective(
      kind == MmaS8::m16n8k32   ? "mma.m16n8k32.s8"
      : kind == MmaS8::m16n8k16 ? "mma.m16n8k16.s8"
                                : "mma.m8n8k16.s8",
      0,
      [&](Warp& x, int l) {
        for (int i = 0; i < na; ++i) x.in[l][i] = a[i];
        for (int i = 0; i < nb; ++i) x.in[l][4 + i] = b[i];
        for (int i = 0; i < nd; ++i) x.in[l][8 + i] = static_cast<uint32_t>(d[i]);
      },
      [&](Warp& x) {
        int32_t A[16][32] = {}, B[32][8] = {};
        uint32_t C[16][8] = {};
        for (int l = 0; l < kLanes; ++l) {
          for (int i = 0; i < 4 * na; ++i) {
            const RC rc = big ? a16832(l, i) : a8816(l, i);
            A[rc.row][rc.col] = s8_of(x.in[l][i / 4], i % 4);
          }
          for (int i = 0; i < 4 * nb; ++i) {
            const RC rc = big ? b16832(l, i) : b8816(l, i);
            B[rc.row][rc.col] = s8_of(x.in[l][4 + i / 4], i % 4);
          }
          for (int i = 0; i < nd; ++i) {
            const RC rc = big ? cfrag(l, i) : c8816(l, i);
            C[rc.row][rc.col] = x.in[l][8 + i];
          }
        }
        // Products of int8 fit int32; the sum wraps modulo 2^32 (unsigned arithmetic).
        for (int i = 0; i < M; ++i)
          for (int j = 0; j < 8; ++j)
            for (int k = 0; k < K; ++k) C[i][j] += static_cast<uint32_t>(A[i][k] * B[k][j]);
        for (int l = 0; l < kLanes; ++l)
          for (int i = 0; i < nd; ++i) {
            const RC rc = big ? cfrag(l, i) : c8816(l, i);
            x.out[l][i] = C[rc.row][rc.col];
          }
      });
  for (int i = 0; i < nd; ++i) d[i] = static_cast<int>(wp.out[lane][i]);
}

int dp4a(uint32_t a, uint32_t b, int c) {
  uint32_t r = static_cast<uint32_t>(c);
  for (int i = 0; i < 4; ++i) r += static_cast<uint32_t>(s8_of(a, i) * s8_of(b, i));
  return static_cast<int>(r);
}

void ldmatrix(int num, bool trans, uint32_t* r, const void* p) {
  Worker& w = worker();
  const int lane = w.self().tid % kLanes;
  // Every lane must hold a valid, 16-byte aligned row address (sm_75 requires it even for the
  // lanes .x1/.x2 ignore), so the check applies to all 32.
  w.check_smem(p, 16, 16, "ldmatrix");
  Warp& wp = w.collective(
      trans ? "ldmatrix.trans" : "ldmatrix", num, [&](Warp& x, int l) { x.addr[l] = p; },
      [&](Warp& x) {
        auto elem = [&](int m, int row, int col) {
          uint16_t v;
          std::memcpy(&v, static_cast<const unsigned char*>(x.addr[m * 8 + row]) + col * 2, 2);
          return static_cast<uint32_t>(v);
        };
        for (int l = 0; l < kLanes; ++l)
          for (int m = 0; m < num; ++m) {
            // Lane l holds row l/4, columns 2*(l%4) and +1 of matrix m (transposed: the column
            // l/4, rows 2*(l%4) and +1).
            const int row = l / 4, col = (l % 4) * 2;
            const uint32_t lo = trans ? elem(m, col, row) : elem(m, row, col);
            const uint32_t hi = trans ? elem(m, col + 1, row) : elem(m, row, col + 1);
            x.out[l][m] = lo | (hi << 16);
          }
      });
  for (int m = 0; m < num; ++m) r[m] = wp.out[lane][m];
}

void cp_async(void* dst, const void* src, int bytes, int src_bytes) {
  Worker& w = worker();
  if (bytes != 16)
    w.fail(
        [&](std::string& e) { e += "cp.async.cg copies 16 bytes, got " + std::to_string(bytes); });
  if (src_bytes < 0 || src_bytes > bytes)
    w.fail([&](std::string& e) {
      e += "cp.async src-size " + std::to_string(src_bytes) + " outside [0, 16]";
    });
  w.check_smem(dst, bytes, 16, "cp.async destination");
  if (src_bytes > 0 && reinterpret_cast<uintptr_t>(src) % 16 != 0)
    w.fail([](std::string& e) { e += "cp.async source address is not 16-byte aligned"; });
  auto* d = static_cast<unsigned char*>(dst);
  std::memset(d, kPoison, static_cast<size_t>(bytes));  // nothing valid lands before the wait
  w.note_generic_store(d, bytes);                       // cp.async writes through the generic proxy
  w.self().open.push_back({d, static_cast<const unsigned char*>(src), bytes, src_bytes});
}

void cp_async_commit() {
  Thread& t = worker().self();
  t.groups.push_back(std::move(t.open));
  t.open.clear();
}

void cp_async_wait(int newest_pending_allowed) {
  Thread& t = worker().self();
  while (static_cast<int>(t.groups.size()) > newest_pending_allowed) {
    for (const Copy& c : t.groups.front()) {
      if (c.src_bytes > 0) std::memcpy(c.dst, c.src, static_cast<size_t>(c.src_bytes));
      std::memset(c.dst + c.src_bytes, 0, static_cast<size_t>(c.bytes - c.src_bytes));
    }
    t.groups.pop_front();
  }
}

void atomic_min_u64(unsigned long long* p, unsigned long long v) {
  std::atomic_ref<unsigned long long> a(*p);
  unsigned long long cur = a.load();
  while (v < cur && !a.compare_exchange_weak(cur, v)) {
  }
}

}  // namespace duet::kernels::emu
