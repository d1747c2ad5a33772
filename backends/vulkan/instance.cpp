#include <algorithm>
#include <cstring>

#include "duet/internal/log.h"
#include "vk_internal.h"

namespace duet::vulkan {

namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                          VkDebugUtilsMessageTypeFlagsEXT,
                                          const VkDebugUtilsMessengerCallbackDataEXT* data,
                                          void* user) {
  if (severity < VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) return VK_FALSE;
  std::string m = data && data->pMessage ? data->pMessage : "(no message)";
  log().warn("Vulkan validation: {}", m);
  static_cast<Instance*>(user)->add_message(std::move(m));
  return VK_FALSE;
}

// The layer's specVersion, 0 when it is not installed.
uint32_t layer_version(const char* name) {
  uint32_t n = 0;
  if (vkEnumerateInstanceLayerProperties(&n, nullptr) != VK_SUCCESS) return 0;
  std::vector<VkLayerProperties> layers(n);
  if (vkEnumerateInstanceLayerProperties(&n, layers.data()) != VK_SUCCESS) return 0;
  for (const auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return std::max<uint32_t>(l.specVersion, 1);
  return 0;
}

bool has_instance_extension(const char* layer, const char* name) {
  uint32_t n = 0;
  if (vkEnumerateInstanceExtensionProperties(layer, &n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkExtensionProperties> ext(n);
  if (vkEnumerateInstanceExtensionProperties(layer, &n, ext.data()) != VK_SUCCESS) return false;
  for (const auto& e : ext)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

}  // namespace

Result<std::shared_ptr<Instance>> Instance::create(bool validation,
                                                   std::vector<std::string>* notes) {
  std::shared_ptr<Instance> inst(new Instance());
  uint32_t api = VK_API_VERSION_1_1;
  if (vkEnumerateInstanceVersion) {
    uint32_t v = 0;
    if (vkEnumerateInstanceVersion(&v) == VK_SUCCESS && v >= VK_API_VERSION_1_3)
      api = VK_API_VERSION_1_3;
    else if (v >= VK_API_VERSION_1_2)
      api = VK_API_VERSION_1_2;
  }
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "duet";
  app.pEngineName = "duet";
  app.apiVersion = api;

  std::vector<const char*> layers, extensions;
  bool debug_utils = false;
  if (validation) {
    inst->layer_version_ = layer_version(kValidationLayer);
    if (inst->layer_version_ == 0) {
      notes->push_back("validation requested but VK_LAYER_KHRONOS_validation is not installed");
      log().warn("Vulkan: validation requested but {} is not installed", kValidationLayer);
    } else {
      layers.push_back(kValidationLayer);
      debug_utils = has_instance_extension(kValidationLayer, VK_EXT_DEBUG_UTILS_EXTENSION_NAME) ||
                    has_instance_extension(nullptr, VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
      if (debug_utils) extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    }
  }
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  ci.enabledLayerCount = static_cast<uint32_t>(layers.size());
  ci.ppEnabledLayerNames = layers.data();
  ci.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  ci.ppEnabledExtensionNames = extensions.data();
  // Messages during instance creation go to the same callback.
  VkDebugUtilsMessengerCreateInfoEXT mci{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  mci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                        VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  mci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  mci.pfnUserCallback = on_message;
  mci.pUserData = inst.get();
  if (debug_utils) ci.pNext = &mci;
  VkResult r = vkCreateInstance(&ci, nullptr, &inst->instance_);
  if (r != VK_SUCCESS)
    return Status(Code::unsupported,
                  "vkCreateInstance failed: " + vk_result_name(r) + " (no usable Vulkan driver)");
  load_instance_functions(inst->instance_, debug_utils);
  if (debug_utils) {
    r = vkCreateDebugUtilsMessengerEXT(inst->instance_, &mci, nullptr, &inst->messenger_);
    if (r != VK_SUCCESS) return vk_error("vkCreateDebugUtilsMessengerEXT", r);
  }
  return inst;
}

Instance::~Instance() {
  if (messenger_) vkDestroyDebugUtilsMessengerEXT(instance_, messenger_, nullptr);
  if (instance_) vkDestroyInstance(instance_, nullptr);
}

std::vector<std::string> Instance::take_messages() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> m;
  m.swap(messages_);
  return m;
}

void Instance::add_message(std::string m) {
  std::lock_guard<std::mutex> lock(mu_);
  messages_.push_back(std::move(m));
}

}  // namespace duet::vulkan
