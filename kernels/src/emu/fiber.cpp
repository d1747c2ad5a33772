#include "emu/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <mutex>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define DUET_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DUET_EMU_ASAN 1
#endif
#endif
#if DUET_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace duet::kernels::emu {

namespace {

// Stacks outlive their fibers: a launch makes one a thread of its block, and mapping, guarding
// and unmapping them (and the page faults of fresh pages) took most of an emulated launch's
// time. Released stacks wait here for the next launch; the pool is never destroyed, so that a
// stack released during exit finds it.
struct StackPool {
  std::mutex mutex;
  std::vector<std::pair<void*, size_t>> free;  // mapping, its length
};
StackPool& stack_pool() {
  static StackPool* pool = new StackPool;
  return *pool;
}
// At most this many stacks wait (1,024 threads a block, and a few blocks at once).
constexpr size_t kPooledStacks = 4096;

}  // namespace

FiberStack::FiberStack(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_ = (bytes + page - 1) / page * page;
  map_bytes_ = size_ + page;
  {
    StackPool& pool = stack_pool();
    std::lock_guard<std::mutex> lock(pool.mutex);
    for (size_t i = pool.free.size(); i-- > 0;)
      if (pool.free[i].second == map_bytes_) {
        map_ = pool.free[i].first;
        pool.free[i] = pool.free.back();
        pool.free.pop_back();
        break;
      }
  }
  if (map_) {
    base_ = static_cast<char*>(map_) + page;
#if DUET_EMU_ASAN
    // The last fiber on this stack left it without unwinding: clear what it poisoned.
    __asan_unpoison_memory_region(base_, size_);
#endif
    return;
  }
  void* p = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    size_ = map_bytes_ = 0;
    return;
  }
  map_ = p;
  mprotect(map_, page, PROT_NONE);  // overflowing the stack faults instead of corrupting memory
  base_ = static_cast<char*>(map_) + page;
}

FiberStack::~FiberStack() {
  if (!map_) return;
  {
    StackPool& pool = stack_pool();
    std::lock_guard<std::mutex> lock(pool.mutex);
    if (pool.free.size() < kPooledStacks) {
      pool.free.emplace_back(map_, map_bytes_);
      return;
    }
  }
  munmap(map_, map_bytes_);
}

bool running_under_asan() {
#if DUET_EMU_ASAN
  return true;
#else
  return false;
#endif
}

#if DUET_EMU_STACK_SWITCH
}  // namespace duet::kernels::emu

// duet_emu_switch(&from_sp, to_sp): pushes the callee-saved registers and the MXCSR and x87
// control words, stores the stack pointer in *from_sp, and pops the same from to_sp's stack.
extern "C" void duet_emu_switch(void** from_sp, void* to_sp);
asm(R"(
  .pushsection .text
  .globl duet_emu_switch
  .hidden duet_emu_switch
  .type duet_emu_switch, @function
duet_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size duet_emu_switch, .-duet_emu_switch
  .popsection
)");

namespace duet::kernels::emu {

void make_context(FiberContext& c, const FiberStack& stack, void (*entry)()) {
  // What duet_emu_switch pops, from the top of a 16-byte aligned stack down: a return address
  // for `entry` (never used), `entry` itself (the switch returns into it, leaving the stack as a
  // call would), six zero registers, and this thread's control words.
  const auto top = (reinterpret_cast<uintptr_t>(stack.base()) + stack.size()) & ~uintptr_t{15};
  auto* sp = reinterpret_cast<uint64_t*>(top);
  *--sp = 0;
  *--sp = reinterpret_cast<uint64_t>(entry);
  for (int i = 0; i < 6; ++i) *--sp = 0;
  uint32_t mxcsr = 0;
  uint16_t fpucw = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpucw));
  *--sp = static_cast<uint64_t>(fpucw) << 32 | mxcsr;
  c.sp = sp;
}
#else
void make_context(FiberContext& c, const FiberStack& stack, void (*entry)()) {
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack.base();
  c.uc.uc_stack.ss_size = stack.size();
  c.uc.uc_link = nullptr;
  makecontext(&c.uc, entry, 0);
}
#endif

void switch_context(FiberContext* from, const FiberContext* to, const SwitchNote& note) {
#if DUET_EMU_ASAN
  __sanitizer_start_switch_fiber(note.from_fake, note.to_bottom, note.to_size);
#else
  (void)note;
#endif
#if DUET_EMU_STACK_SWITCH
  duet_emu_switch(&from->sp, to->sp);
#else
  swapcontext(&from->uc, &to->uc);
#endif
}

void finish_switch(void* fake, const void** old_bottom, size_t* old_size) {
#if DUET_EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, old_bottom, old_size);
#else
  (void)fake, (void)old_bottom, (void)old_size;
#endif
}

}  // namespace duet::kernels::emu
