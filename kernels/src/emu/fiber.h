// Cooperative fibers for the emulator: one stack and saved context per emulated CUDA thread.
// On x86-64 a switch saves the callee-saved registers and the floating-point control words on
// the stack it leaves and takes the other's stack pointer (fiber.cpp); elsewhere ucontext keeps
// this portable (glibc's swapcontext also sets the signal mask, a system call each switch, which
// took most of an emulated kernel's time). AddressSanitizer is told about every stack switch, as
// it requires for code that switches stacks.
#pragma once

#include <ucontext.h>

#include <cstddef>

namespace duet::kernels::emu {

class FiberStack {
 public:
  explicit FiberStack(size_t bytes);
  ~FiberStack();
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;
  void* base() const { return base_; }  // lowest usable address (a guard page sits below it)
  size_t size() const { return size_; }
  bool valid() const { return base_ != nullptr; }

 private:
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  void* base_ = nullptr;
  size_t size_ = 0;
};

#if defined(__x86_64__) && defined(__GNUC__)
#define DUET_EMU_STACK_SWITCH 1
#else
#define DUET_EMU_STACK_SWITCH 0
#endif

// A suspended fiber, or the scheduler while a fiber runs.
struct FiberContext {
#if DUET_EMU_STACK_SWITCH
  void* sp = nullptr;
#else
  ucontext_t uc{};
#endif
};

// Prepares `c` so that the next switch to it runs `entry` (which must never return) on `stack`.
void make_context(FiberContext& c, const FiberStack& stack, void (*entry)());

// A context switch with the sanitizer annotations. `from_fake` receives the fake-stack handle
// of the context being left (nullptr when that context will never be resumed); after the switch
// returns, `finish` must be called on the resumed side.
struct SwitchNote {
  void** from_fake = nullptr;
  const void* to_bottom = nullptr;
  size_t to_size = 0;
};
void switch_context(FiberContext* from, const FiberContext* to, const SwitchNote& note);
// Called first thing after a switch lands (also at a fiber's first entry). Returns, through
// old_bottom/old_size, the stack that was left (needed to switch back to it).
void finish_switch(void* fake, const void** old_bottom, size_t* old_size);

bool running_under_asan();

}  // namespace duet::kernels::emu
