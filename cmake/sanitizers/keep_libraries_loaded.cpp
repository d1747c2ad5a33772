// Linked into every executable of a sanitizer build, never into the library and never into a
// normal build: dlclose does nothing, so every shared library stays loaded until the process
// exits. The executable's definition wins over libc's (and over the sanitizer runtime's
// interceptor) for every caller, the Vulkan loader included.
//
// Why: the Vulkan loader unloads drivers and layers in vkDestroyInstance, before the leak check
// at exit. Memory such a library keeps in its own globals (Mesa's drivers allocate their CPU
// topology once, under pthread_once, on AMD CPUs) then has no root left and is reported as a
// leak, with a stack of unnamed frames that no suppression can match. Kept loaded, the
// library's globals are roots again and its frames keep their module name. Newer loaders
// (1.3.261 and later) can do the same themselves with VK_LOADER_DISABLE_DYNAMIC_LIBRARY_UNLOADING;
// Debian 12's cannot. Nothing of duet's own is exempted: its allocations are checked as before.
extern "C" __attribute__((visibility("default"))) int dlclose(void*) {
  return 0;
}
