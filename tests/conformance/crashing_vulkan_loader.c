/* A Vulkan loader that crashes at its first call, standing in for a misbehaving driver: the
   listing of the conformance tests must survive it (listing_test.cmake). */
#include <signal.h>

typedef void (*duet_void_fn)(void);

__attribute__((visibility("default"))) duet_void_fn vkGetInstanceProcAddr(void* instance,
                                                                          const char* name) {
  (void)instance;
  (void)name;
  raise(SIGSEGV);
  return 0;
}
