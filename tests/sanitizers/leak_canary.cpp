// Leaks one allocation on purpose, after opening and closing every device as the tests do (Vulkan
// on lavapipe with its validation layer), and returns normally. LeakSanitizer must report that
// allocation and nothing else: the test around it fails if leak checking is off or suppressed
// too broadly, and if a driver's memory is taken for a leak again.
#include <cstdio>

#include "duet/backends.h"

namespace {

char* volatile g_last = nullptr;

__attribute__((noinline)) void leak_on_purpose() {
  g_last = new char[4096];
  g_last[0] = 1;
  g_last = nullptr;
}

}  // namespace

int main() {
  {
    duet::Registry reg = duet::open_registry();
    for (duet::Device* d : reg.devices()) std::printf("opened %s\n", d->id().c_str());
  }
  leak_on_purpose();
  return 0;
}
