#include "emu/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define DUET_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DUET_EMU_ASAN 1
#endif
#endif
#if DUET_EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace duet::kernels::emu {

FiberStack::FiberStack(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_ = (bytes + page - 1) / page * page;
  map_bytes_ = size_ + page;
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
  if (map_) munmap(map_, map_bytes_);
}

bool running_under_asan() {
#if DUET_EMU_ASAN
  return true;
#else
  return false;
#endif
}

void switch_context(ucontext_t* from, const ucontext_t* to, const SwitchNote& note) {
#if DUET_EMU_ASAN
  __sanitizer_start_switch_fiber(note.from_fake, note.to_bottom, note.to_size);
#else
  (void)note;
#endif
  swapcontext(from, to);
}

void finish_switch(void* fake, const void** old_bottom, size_t* old_size) {
#if DUET_EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, old_bottom, old_size);
#else
  (void)fake, (void)old_bottom, (void)old_size;
#endif
}

}  // namespace duet::kernels::emu
