// Probing a physical device: every property and feature the engine uses, into DeviceCaps (what
// the planner sees) and PhysicalInfo (what the backend needs to create the device).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "duet/internal/host_cpu.h"
#include "vk_internal.h"
#include "vulkan_backend.h"

namespace duet::vulkan {

namespace {

// VK_KHR_cooperative_matrix postdates the Vulkan headers of Debian 12 (1.3.239); the few
// definitions needed to query it are spelled out here from the registry.
constexpr const char* kCoopMatExt = kCoopMatExtension;
// The first Vulkan version (and so validation layer) that knows VK_KHR_cooperative_matrix.
constexpr uint32_t kCoopMatLayerVersion = VK_MAKE_API_VERSION(0, 1, 3, 255);
constexpr VkStructureType kCoopMatPropsType = static_cast<VkStructureType>(1000506001);
struct CoopMatProps {
  VkStructureType sType;
  void* pNext;
  uint32_t MSize, NSize, KSize;
  int32_t AType, BType, CType, ResultType;
  VkBool32 saturatingAccumulation;
  int32_t scope;
};
using PFN_CoopMatProps = VkResult(VKAPI_PTR*)(VkPhysicalDevice, uint32_t*, CoopMatProps*);

std::optional<DType> component_dtype(int32_t t) {
  switch (t) {
    case 0:  // VK_COMPONENT_TYPE_FLOAT16_KHR
      return DType::f16;
    case 1:  // FLOAT32
      return DType::f32;
    case 3:  // SINT8
      return DType::i8;
    case 5:  // SINT32
      return DType::i32;
    case 1000141000:  // VK_COMPONENT_TYPE_BFLOAT16_KHR
      return DType::bf16;
    default:
      return std::nullopt;
  }
}

std::string vendor_name(uint32_t id) {
  switch (id) {
    case 0x10DE:
      return "nvidia";
    case 0x1002:
      return "amd";
    case 0x8086:
      return "intel";
    case 0x106B:
      return "apple";
    case 0x13B5:
      return "arm";
    case 0x5143:
      return "qualcomm";
    case 0x10005:
      return "mesa";
    default:
      return "unknown";
  }
}

DeviceType device_type(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return DeviceType::discrete_gpu;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return DeviceType::integrated_gpu;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return DeviceType::virtual_gpu;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return DeviceType::cpu;
    default:
      return DeviceType::other;
  }
}

std::string version_str(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) +
         "." + std::to_string(VK_API_VERSION_PATCH(v));
}

std::string mib(uint64_t b) {
  return std::to_string(b >> 20) + " MiB";
}

}  // namespace

std::string hex(const uint8_t* p, size_t n) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof b, "%02x", p[i]);
    s += b;
  }
  return s;
}

bool PhysicalInfo::has_extension(const char* name) const {
  for (const auto& e : extensions)
    if (e == name) return true;
  return false;
}

namespace {

// The extension-defined properties probe_properties queries, kept for the record.
struct Properties {
  VkPhysicalDeviceSubgroupProperties subgroup{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceIDProperties id{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
  VkPhysicalDeviceMaintenance3Properties maintenance3{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  bool has_driver = false;
  VkPhysicalDeviceSubgroupSizeControlProperties size_control{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES};
  // Compute units, where the driver tells them: NVIDIA's SM count, AMD's active compute units.
  VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
  VkPhysicalDeviceShaderCoreProperties2AMD amd{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_2_AMD};
};

// Appends structures to a pNext chain.
class Chain {
 public:
  explicit Chain(void** head) : next_(head) {}
  template <class S>
  void add(S* s) {
    *next_ = s;
    next_ = &s->pNext;
  }

 private:
  void** next_;
};

bool v12(const PhysicalInfo& info) {
  return info.props.apiVersion >= VK_API_VERSION_1_2;
}
bool v13(const PhysicalInfo& info) {
  return info.props.apiVersion >= VK_API_VERSION_1_3;
}

// Extensions, the compute queue family and its timestamps.
Status probe_queues(VkPhysicalDevice pd, PhysicalInfo& info) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> ext(n);
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, ext.data());
  for (const auto& e : ext) info.extensions.emplace_back(e.extensionName);

  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
  std::vector<VkQueueFamilyProperties> fams(n);
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, fams.data());
  for (uint32_t i = 0; i < n && info.queue_family == UINT32_MAX; ++i)
    if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) info.queue_family = i;
  if (info.queue_family == UINT32_MAX)
    return Status(Code::unsupported, std::string(info.props.deviceName) + ": no compute queue");
  info.timestamp_bits = fams[info.queue_family].timestampValidBits;
  info.timestamp_period = info.props.limits.timestampPeriod;
  return {};
}

// The features the kernels use, and whether cooperative matrices are enabled (KHR, NV).
struct CoopMatFeatureBits {
  bool khr = false, nv = false;
};

CoopMatFeatureBits probe_features(VkPhysicalDevice pd, PhysicalInfo& info) {
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDevice16BitStorageFeatures s16{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDevice8BitStorageFeatures s8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderFloat16Int8Features f16i8{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  VkPhysicalDeviceSubgroupSizeControlFeatures ssc{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES};
  VkPhysicalDeviceShaderIntegerDotProductFeatures idp{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
  CoopMatFeatures cmf{kCoopMatFeaturesType, nullptr, VK_FALSE, VK_FALSE};
  VkPhysicalDeviceCooperativeMatrixFeaturesNV cmf_nv{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  const bool has_coopmat = info.has_extension(kCoopMatExt);
  const bool has_coopmat_nv = info.has_extension(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
  Chain chain(&f2.pNext);
  chain.add(&s16);
  if (v12(info) || info.has_extension(VK_KHR_8BIT_STORAGE_EXTENSION_NAME)) chain.add(&s8);
  if (v12(info) || info.has_extension(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME)) chain.add(&f16i8);
  if (v13(info) || info.has_extension(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME)) chain.add(&ssc);
  if (v13(info) || info.has_extension(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME))
    chain.add(&idp);
  if (has_coopmat) chain.add(&cmf);
  if (has_coopmat_nv) chain.add(&cmf_nv);
  vkGetPhysicalDeviceFeatures2(pd, &f2);
  info.storage16 = s16.storageBuffer16BitAccess;
  info.storage8 = s8.storageBuffer8BitAccess;
  info.float16 = f16i8.shaderFloat16;
  info.int8 = f16i8.shaderInt8;
  info.int16 = f2.features.shaderInt16;
  info.subgroup_size_control = ssc.subgroupSizeControl && ssc.computeFullSubgroups;
  info.int_dot = idp.shaderIntegerDotProduct;
  return {has_coopmat && cmf.cooperativeMatrix, has_coopmat_nv && cmf_nv.cooperativeMatrix};
}

// Subgroups, the device's UUID, allocation limits, the driver, and whether packed integer dot
// products are accelerated.
void probe_properties(VkPhysicalDevice pd, PhysicalInfo& info, Properties& p) {
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  VkPhysicalDeviceShaderIntegerDotProductProperties idpp{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES};
  Chain chain(&p2.pNext);
  chain.add(&p.subgroup);
  chain.add(&p.id);
  chain.add(&p.maintenance3);
  p.has_driver = v12(info) || info.has_extension(VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME);
  if (p.has_driver) chain.add(&p.driver);
  if (v13(info) || info.has_extension(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME))
    chain.add(&p.size_control);
  if (v13(info) || info.has_extension(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME))
    chain.add(&idpp);
  if (info.has_extension(VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) chain.add(&p.sm);
  if (info.has_extension(VK_AMD_SHADER_CORE_PROPERTIES_2_EXTENSION_NAME)) chain.add(&p.amd);
  vkGetPhysicalDeviceProperties2(pd, &p2);
  // The int_dot kernels use OpSDot on packed 4x8-bit signed operands.
  info.int_dot_accelerated = info.int_dot && idpp.integerDotProduct4x8BitPackedSignedAccelerated;
}

// Identity, arithmetic and storage, subgroups, workgroup and buffer limits.
void record_device(const PhysicalInfo& info, const Properties& p, DeviceCaps& c) {
  const VkPhysicalDeviceLimits& lim = info.props.limits;
  c.backend = BackendKind::vulkan;
  c.name = info.props.deviceName;
  c.vendor_id = info.props.vendorID;
  c.device_id = info.props.deviceID;
  c.vendor = vendor_name(c.vendor_id);
  c.type = device_type(info.props.deviceType);
  c.api_version = version_str(info.props.apiVersion);
  if (p.has_driver) {
    c.driver_name = p.driver.driverName;
    c.driver_version = p.driver.driverInfo;
  }
  if (c.driver_version.empty()) c.driver_version = std::to_string(info.props.driverVersion);
  if (p.id.deviceUUID[0] || p.id.deviceUUID[15]) {
    std::array<uint8_t, 16> u{};
    std::memcpy(u.data(), p.id.deviceUUID, 16);
    c.uuid = u;
  }
  c.arch = c.driver_name.empty() ? c.vendor : c.driver_name;

  c.fp16_storage = info.storage16;
  c.bf16_storage = info.storage16;  // bf16 is stored as 16-bit words and widened in the shader
  c.int8_storage = info.storage8;
  c.fp16_arith = info.float16;
  c.int8_arith = info.int8;
  c.int_dot = info.int_dot;
  c.int_dot_accelerated = info.int_dot_accelerated;
  c.bf16_arith = info.has_extension("VK_KHR_shader_bfloat16");

  c.subgroup_size = static_cast<int>(p.subgroup.subgroupSize);
  c.subgroup_min = c.subgroup_max = c.subgroup_size;
  if (p.size_control.minSubgroupSize) {
    c.subgroup_min = static_cast<int>(p.size_control.minSubgroupSize);
    c.subgroup_max = static_cast<int>(p.size_control.maxSubgroupSize);
  }
  c.subgroup_size_control = info.subgroup_size_control;
  c.subgroup_arithmetic = (p.subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                          (p.subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  if (p.sm.shaderSMCount) c.compute_units = static_cast<int>(p.sm.shaderSMCount);
  if (p.amd.activeComputeUnitCount)
    c.compute_units = static_cast<int>(p.amd.activeComputeUnitCount);
  c.shared_mem_per_block = lim.maxComputeSharedMemorySize;
  c.shared_mem_per_block_optin = lim.maxComputeSharedMemorySize;
  c.max_threads_per_block = lim.maxComputeWorkGroupInvocations;
  for (int i = 0; i < 3; ++i) {
    c.max_block_dims[static_cast<size_t>(i)] = lim.maxComputeWorkGroupSize[i];
    c.max_grid_dims[static_cast<size_t>(i)] = lim.maxComputeWorkGroupCount[i];
  }
  c.max_buffer_range = lim.maxStorageBufferRange;
  c.max_allocation = p.maintenance3.maxMemoryAllocationSize;
}

// Device memory: the largest device-local heap, and whether the host can map all of it.
// Returns the heaps as text.
std::string record_memory(const PhysicalInfo& info, DeviceCaps& c) {
  std::string heaps;
  uint64_t largest_local = 0;
  for (uint32_t h = 0; h < info.memory.memoryHeapCount; ++h) {
    const VkMemoryHeap& heap = info.memory.memoryHeaps[h];
    const bool local = heap.flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT;
    if (local) largest_local = std::max<uint64_t>(largest_local, heap.size);
    heaps += (heaps.empty() ? "" : ", ") + mib(heap.size) + (local ? " device-local" : " host");
  }
  c.memory_bytes = largest_local;
  for (uint32_t t = 0; t < info.memory.memoryTypeCount; ++t) {
    const VkMemoryType& mt = info.memory.memoryTypes[t];
    const VkMemoryPropertyFlags both =
        VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
    // A small host-visible window of VRAM (no resizable BAR) does not count.
    if ((mt.propertyFlags & both) == both &&
        info.memory.memoryHeaps[mt.heapIndex].size >= largest_local)
      c.host_visible_device_memory = true;
  }
  return heaps;
}

// "16x16x16 f16+f32": a matrix unit as duet devices shows it.
std::string unit_text(const MatrixUnit& u) {
  return std::to_string(u.m) + "x" + std::to_string(u.n) + "x" + std::to_string(u.k) + " " +
         std::string(dtype_name(u.a)) + "+" + std::string(dtype_name(u.acc));
}

// Cooperative matrix shapes, where the driver exposes VK_KHR_cooperative_matrix. Returns them as
// text for duet devices.
std::string record_coopmat(VkInstance instance, VkPhysicalDevice pd, bool enabled, DeviceCaps& c) {
  std::string coop = "absent (no VK_KHR_cooperative_matrix)";
  if (!enabled) return coop;
  auto fn = reinterpret_cast<PFN_CoopMatProps>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
  uint32_t cn = 0;
  if (fn && fn(pd, &cn, nullptr) == VK_SUCCESS) {
    std::vector<CoopMatProps> props(
        cn, CoopMatProps{kCoopMatPropsType, nullptr, 0, 0, 0, 0, 0, 0, 0, VK_FALSE, 0});
    if (fn(pd, &cn, props.data()) == VK_SUCCESS) {
      coop.clear();
      for (const auto& p : props) {
        auto a = component_dtype(p.AType), acc = component_dtype(p.CType);
        if (!a || !acc) continue;
        c.matrix_units.push_back({std::string(kCoopMatApi), static_cast<int>(p.MSize),
                                  static_cast<int>(p.NSize), static_cast<int>(p.KSize), *a, *acc});
        coop += (coop.empty() ? "" : ", ") + unit_text(c.matrix_units.back());
        if (*a == DType::bf16) c.bf16_arith = true;
      }
    }
  }
  c.tensor_cores = !c.matrix_units.empty();
  return coop.empty() ? "no usable shapes" : coop;
}

// NVIDIA's older VK_NV_cooperative_matrix: its shapes recorded (api kCoopMatNvApi), used by no
// kernel (see docs/vulkan.md). Returns them as text for duet devices.
std::string record_coopmat_nv(VkInstance instance, VkPhysicalDevice pd, bool enabled,
                              DeviceCaps& c) {
  std::string coop_nv = "absent";
  if (!enabled) return coop_nv;
  auto fn = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV"));
  uint32_t cn = 0;
  if (fn && fn(pd, &cn, nullptr) == VK_SUCCESS) {
    std::vector<VkCooperativeMatrixPropertiesNV> props(
        cn, VkCooperativeMatrixPropertiesNV{VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV});
    if (fn(pd, &cn, props.data()) == VK_SUCCESS) {
      coop_nv.clear();
      for (const auto& p : props) {
        auto a = component_dtype(static_cast<int32_t>(p.AType));
        auto acc = component_dtype(static_cast<int32_t>(p.CType));
        if (!a || !acc) continue;
        c.matrix_units.push_back({std::string(kCoopMatNvApi), static_cast<int>(p.MSize),
                                  static_cast<int>(p.NSize), static_cast<int>(p.KSize), *a, *acc});
        coop_nv += (coop_nv.empty() ? "" : ", ") + unit_text(c.matrix_units.back());
      }
      if (coop_nv.empty()) coop_nv = "no usable shapes";
    }
  }
  return coop_nv;
}

// Uniform texel buffers: the "register_blocked" kernels read their operands through them, because
// on a CPU device (lavapipe) a texel fetch is a vector gather while a storage-buffer read is a
// loop over the invocations. The formats are among those Vulkan requires; checked all the same.
void probe_texel_buffers(VkPhysicalDevice pd, PhysicalInfo& info, DeviceCaps& c) {
  const VkPhysicalDeviceLimits& lim = info.props.limits;
  bool texel_formats = true;
  for (VkFormat f : {VK_FORMAT_R32G32B32A32_UINT, VK_FORMAT_R32_UINT, VK_FORMAT_R16_UINT}) {
    VkFormatProperties fp{};
    vkGetPhysicalDeviceFormatProperties(pd, f, &fp);
    texel_formats =
        texel_formats && (fp.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT);
  }
  if (texel_formats) {
    info.max_texels = lim.maxTexelBufferElements;
    info.texel_align = std::max<uint64_t>(lim.minTexelBufferOffsetAlignment, 4);
  }
  c.max_texel_elements = info.max_texels;
}

// A CPU device runs workgroups on worker threads, one per core of the host (lavapipe's
// default; LP_NUM_THREADS changes it). Its throughput is the host's: those cores at the vector
// width the driver compiles for ("llvmpipe (LLVM 15.0.6, 256 bits)"), and the host's memory. The
// kernels' efficiency classes scale these down for each kernel family on a CPU device.
void record_cpu_device(DeviceCaps& c) {
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  if (const char* e = std::getenv("LP_NUM_THREADS"); e && std::atoi(e) > 0) threads = std::atoi(e);
  c.compute_units = std::max(threads, 1);
  int bits = 128;
  if (const size_t b = c.name.find(" bits"); b != std::string::npos) {
    size_t a = b;
    while (a > 0 && std::isdigit(static_cast<unsigned char>(c.name[a - 1]))) --a;
    if (a < b) bits = std::max(128, std::atoi(c.name.substr(a, b - a).c_str()));
  }
  c.clock_mhz = host_cpu_mhz();
  c.peak_gflops_f32 = host_peak_gflops(c.compute_units, bits / 32);
  c.peak_gflops_f16 = c.peak_gflops_f32;  // f16 is widened to f32 for the arithmetic
  c.memory_gbps = host_memory_gbps(c.compute_units);
}

}  // namespace

Result<PhysicalInfo> probe(VkInstance instance, VkPhysicalDevice pd, uint32_t layer_version) {
  PhysicalInfo info;
  info.handle = pd;
  vkGetPhysicalDeviceProperties(pd, &info.props);
  vkGetPhysicalDeviceMemoryProperties(pd, &info.memory);
  const uint32_t api = info.props.apiVersion;
  if (api < VK_API_VERSION_1_1)
    return Status(Code::unsupported,
                  std::string(info.props.deviceName) + ": Vulkan " + version_str(api) + " < 1.1");
  DUET_TRY(probe_queues(pd, info));
  const CoopMatFeatureBits coop = probe_features(pd, info);
  Properties props;
  probe_properties(pd, info, props);

  DeviceCaps& c = info.caps;
  record_device(info, props, c);
  const std::string heaps = record_memory(info, c);
  std::string coop_khr = record_coopmat(instance, pd, coop.khr, c);
  // The device enables VK_KHR_cooperative_matrix (the coopmat kernels) where it has usable shapes,
  // except under a validation layer older than the extension (Debian 12's is 1.3.239): that
  // layer reports the extension's feature structure as an error, and opening the device fails.
  info.coopmat = coop.khr && !c.matrix_units.empty();
  if (info.coopmat && layer_version != 0 && layer_version < kCoopMatLayerVersion) {
    info.coopmat = false;
    std::erase_if(c.matrix_units, [](const MatrixUnit& u) { return u.api != kCoopMatNvApi; });
    coop_khr += "; off: the validation layer (" + version_str(layer_version) +
                ") predates VK_KHR_cooperative_matrix (" + version_str(kCoopMatLayerVersion) + ")";
  }
  const std::string coop_nv = record_coopmat_nv(instance, pd, coop.nv, c);
  probe_texel_buffers(pd, info, c);
  if (c.type == DeviceType::cpu) record_cpu_device(c);

  // The probe's facts as text, for duet devices (display only: the rules read the fields above).
  const VkPhysicalDeviceLimits& lim = info.props.limits;
  c.extra["cooperative_matrix_nv"] = coop_nv;
  c.extra["max_texel_buffer_elements"] = std::to_string(info.max_texels);
  c.extra["memory_heaps"] = heaps;
  c.extra["max_storage_buffer_range"] = mib(lim.maxStorageBufferRange);
  c.extra["max_workgroup_count"] = std::to_string(lim.maxComputeWorkGroupCount[0]) + "x" +
                                   std::to_string(lim.maxComputeWorkGroupCount[1]) + "x" +
                                   std::to_string(lim.maxComputeWorkGroupCount[2]);
  c.extra["max_workgroup_size"] = std::to_string(lim.maxComputeWorkGroupSize[0]) + "x" +
                                  std::to_string(lim.maxComputeWorkGroupSize[1]) + "x" +
                                  std::to_string(lim.maxComputeWorkGroupSize[2]);
  c.extra["subgroup_size_range"] = std::to_string(c.subgroup_min) + ".." +
                                   std::to_string(c.subgroup_max) +
                                   (c.subgroup_size_control ? " (size control)" : "");
  c.extra["cooperative_matrix"] = coop_khr;
  c.extra["shader_float16"] = info.float16 ? "yes" : "no";
  c.extra["shader_int8"] = info.int8 ? "yes" : "no";
  c.extra["storage_16bit"] = info.storage16 ? "yes" : "no";
  c.extra["storage_8bit"] = info.storage8 ? "yes" : "no";
  c.extra["integer_dot_product"] = info.int_dot ? "yes" : "no";
  c.extra["integer_dot_accelerated"] = info.int_dot_accelerated ? "yes" : "no";
  c.extra["device_uuid"] = hex(props.id.deviceUUID, 16);
  c.extra["pipeline_cache_uuid"] = hex(info.props.pipelineCacheUUID, VK_UUID_SIZE);
  c.extra["max_storage_buffers_per_stage"] =
      std::to_string(lim.maxPerStageDescriptorStorageBuffers);
  c.extra["min_storage_buffer_offset_alignment"] =
      std::to_string(lim.minStorageBufferOffsetAlignment);
  return info;
}

}  // namespace duet::vulkan
