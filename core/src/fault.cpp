// Compiled with DUET_FAULT_INJECTION only in builds configured with it (core/CMakeLists.txt):
// nothing else of the library changes with the option.
#include "duet/internal/fault.h"

#include <atomic>

namespace duet::fault {

#ifdef DUET_FAULT_INJECTION

namespace {
std::atomic<int64_t> counted{0};
std::atomic<int64_t> armed{-1};
std::atomic<bool> failed{false};
}  // namespace

bool allocation_fails() {
  int64_t n = counted.fetch_add(1);
  if (!armed.compare_exchange_strong(n, -1)) return false;  // not the armed one (or disarmed)
  failed = true;
  return true;
}
bool available() {
  return true;
}
void reset() {
  armed = -1;
  failed = false;
  counted = 0;
}
void arm(int64_t n) {
  failed = false;
  armed = n;
}
void disarm() {
  armed = -1;
}
int64_t allocations() {
  return counted.load();
}
bool fired() {
  return failed.load();
}

#else

bool allocation_fails() {
  return false;
}
bool available() {
  return false;
}
void reset() {}
void arm(int64_t) {}
void disarm() {}
int64_t allocations() {
  return 0;
}
bool fired() {
  return false;
}

#endif

}  // namespace duet::fault
