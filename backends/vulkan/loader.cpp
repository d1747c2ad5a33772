// The loader is opened at run time: a program built with Vulkan support starts on machines that
// have no libvulkan, and the factory reports why instead.
#define VOLK_IMPLEMENTATION
#include <dlfcn.h>

#include "vk_internal.h"

namespace duet::vulkan {

namespace {
std::mutex g_mu;
void* g_lib = nullptr;
std::string g_name;
bool g_instance_loaded = false;  // volk's instance-level pointers are set (for g_lib)
bool g_debug_utils_loaded = false;
}  // namespace

Status load_loader(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_lib && g_name == name) return {};
  void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    return Status(Code::unsupported, "no Vulkan loader: cannot open " + name + " (" +
                                         (e ? std::string(e) : std::string("unknown")) + ")");
  }
  auto gipa = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
  if (!gipa) {
    dlclose(lib);
    return Status(Code::unsupported, "no Vulkan loader: " + name + " has no vkGetInstanceProcAddr");
  }
  volkInitializeCustom(gipa);
  // The previous library stays open: function pointers taken from it may still be in use.
  g_lib = lib;
  g_name = name;
  g_instance_loaded = g_debug_utils_loaded = false;
  return {};
}

void load_instance_functions(VkInstance instance, bool debug_utils) {
  // volk keeps one global pointer per function. The loader's vkGetInstanceProcAddr answers every
  // instance with the same trampolines (they dispatch on the handle), so the pointers are set
  // once: loading them again for each instance rewrote globals that other threads, with engines
  // of their own, were calling through (a data race ThreadSanitizer reports). The debug-utils
  // pointers are null for an instance without that extension, so they are filled in, from null,
  // by the first instance that has it.
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_instance_loaded) {
    volkLoadInstance(instance);
    g_instance_loaded = true;
    g_debug_utils_loaded = debug_utils;
  } else if (debug_utils && !g_debug_utils_loaded) {
    vkCreateDebugUtilsMessengerEXT = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT"));
    vkDestroyDebugUtilsMessengerEXT = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT"));
    g_debug_utils_loaded = true;
  }
}

std::string vk_result_name(VkResult r) {
  switch (r) {
#define DUET_VK_CASE(x) \
  case x:               \
    return #x;
    DUET_VK_CASE(VK_SUCCESS)
    DUET_VK_CASE(VK_NOT_READY)
    DUET_VK_CASE(VK_TIMEOUT)
    DUET_VK_CASE(VK_INCOMPLETE)
    DUET_VK_CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
    DUET_VK_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    DUET_VK_CASE(VK_ERROR_INITIALIZATION_FAILED)
    DUET_VK_CASE(VK_ERROR_DEVICE_LOST)
    DUET_VK_CASE(VK_ERROR_MEMORY_MAP_FAILED)
    DUET_VK_CASE(VK_ERROR_LAYER_NOT_PRESENT)
    DUET_VK_CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    DUET_VK_CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    DUET_VK_CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    DUET_VK_CASE(VK_ERROR_TOO_MANY_OBJECTS)
    DUET_VK_CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
    DUET_VK_CASE(VK_ERROR_FRAGMENTED_POOL)
    DUET_VK_CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
    DUET_VK_CASE(VK_ERROR_INVALID_SHADER_NV)
#undef DUET_VK_CASE
    default:
      return "VkResult " + std::to_string(static_cast<int>(r));
  }
}

Status vk_error(const char* call, VkResult r, const std::string& device) {
  Code code = Code::internal;
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
    code = Code::out_of_memory;
  else if (r == VK_ERROR_DEVICE_LOST)
    code = Code::device_lost;
  Err e(code);
  if (!device.empty()) e.device(device);
  e.note(std::string(call) + " failed: " + vk_result_name(r));
  return e;
}

}  // namespace duet::vulkan
