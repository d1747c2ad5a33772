// Pipelines: one per (shader, specialization constants), created on first use and kept. Their
// compiled form is also kept on disk in a VkPipelineCache file per device UUID and driver
// version, so a second start of a desktop app skips the driver's shader compiler. A file that is
// corrupt, truncated or from another driver is ignored with a warning.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <thread>

#include "duet/internal/env.h"
#include "duet/internal/log.h"
#include "vk_internal.h"

namespace duet::vulkan {

namespace shaders {
struct Entry {
  std::string_view name;
  std::span<const uint32_t> words;
};
extern const Entry kEntries[];
extern const int kNumEntries;
}  // namespace shaders

namespace {

// CPU seconds of the calling thread (a driver that compiles on the calling thread, as lavapipe
// does, spends them there): on a loaded machine a truer cost than the wall time.
double thread_cpu_seconds() {
  timespec t{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0) return 0;
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

constexpr char kMagic[8] = {'D', 'U', 'E', 'T', 'P', 'C', '0', '1'};

uint64_t fnv1a(const std::byte* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<uint8_t>(p[i])) * 1099511628211ull;
  return h;
}

// File layout: magic, u64 payload size, u64 FNV-1a of the payload, payload (the driver's blob).
std::vector<std::byte> read_cache_file(const std::string& path,
                                       const VkPhysicalDeviceProperties& p) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return {};
  std::string raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::byte> all(raw.size());
  if (!raw.empty()) std::memcpy(all.data(), raw.data(), raw.size());
  auto reject = [&](const char* why) {
    log().warn("Vulkan pipeline cache {} ignored: {}", path, why);
    return std::vector<std::byte>{};
  };
  if (all.size() < 24 || std::memcmp(all.data(), kMagic, 8) != 0) return reject("not a duet cache");
  uint64_t size = 0, hash = 0;
  std::memcpy(&size, all.data() + 8, 8);
  std::memcpy(&hash, all.data() + 16, 8);
  if (size != all.size() - 24) return reject("truncated");
  if (fnv1a(all.data() + 24, size) != hash) return reject("checksum mismatch (corrupt)");
  // The driver's own header: length, version, vendor, device, pipelineCacheUUID.
  if (size < 16 + VK_UUID_SIZE) return reject("payload too short");
  uint32_t vendor = 0, device = 0;
  std::memcpy(&vendor, all.data() + 24 + 8, 4);
  std::memcpy(&device, all.data() + 24 + 12, 4);
  if (vendor != p.vendorID || device != p.deviceID ||
      std::memcmp(all.data() + 24 + 16, p.pipelineCacheUUID, VK_UUID_SIZE) != 0)
    return reject("made by another device or driver");
  return std::vector<std::byte>(all.begin() + 24, all.end());
}

}  // namespace

std::string default_cache_dir(const BackendOptions& o) {
  std::string d = o.get("vulkan.cache_dir");
  if (!d.empty()) return d;
  if (const char* e = std::getenv("DUET_VULKAN_CACHE_DIR"); e && *e) return e;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/duet";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/duet";
  return {};
}

int default_pipeline_threads() {
  if (auto n = env_int("DUET_VULKAN_PIPELINE_THREADS", 1, 64, "the cores (at most 8)")) {
    return static_cast<int>(*n);
  }
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
}

Pipelines::Pipelines(std::shared_ptr<Core> core, std::string cache_dir, int threads)
    : core_(std::move(core)), dir_(std::move(cache_dir)), threads_(std::max(threads, 1)) {
  slots_ = std::make_unique<std::counting_semaphore<>>(threads_);
}

Pipelines::~Pipelines() {
  for (auto& [k, made] : pipelines_) made.wait();  // workers still making one
  if (!pipelines_.empty()) log().info("{}: {}", core_->id, summary());
  if (Status s = save(); !s.ok()) log().warn("{}", s.message());
  VkDevice d = core_->device;
  for (auto& [k, made] : pipelines_)
    if (const Result<VkPipeline>& p = made.get(); p.ok()) vkDestroyPipeline(d, *p, nullptr);
  for (auto& [k, m] : modules_) vkDestroyShaderModule(d, m, nullptr);
  if (layout_) vkDestroyPipelineLayout(d, layout_, nullptr);
  if (set_layout_) vkDestroyDescriptorSetLayout(d, set_layout_, nullptr);
  if (cache_) vkDestroyPipelineCache(d, cache_, nullptr);
}

Status Pipelines::init() {
  VkDevice d = core_->device;
  std::array<VkDescriptorSetLayoutBinding, kAllBindings> b{};
  for (uint32_t i = 0; i < b.size(); ++i) {
    b[i].binding = i;
    b[i].descriptorType = descriptor_type(i);
    b[i].descriptorCount = 1;
    b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo sl{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  sl.bindingCount = static_cast<uint32_t>(b.size());
  sl.pBindings = b.data();
  VkResult r = vkCreateDescriptorSetLayout(d, &sl, nullptr, &set_layout_);
  if (r != VK_SUCCESS) return vk_error("vkCreateDescriptorSetLayout", r, core_->id);
  VkPipelineLayoutCreateInfo pl{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pl.setLayoutCount = 1;
  pl.pSetLayouts = &set_layout_;
  r = vkCreatePipelineLayout(d, &pl, nullptr, &layout_);
  if (r != VK_SUCCESS) return vk_error("vkCreatePipelineLayout", r, core_->id);

  const auto& p = core_->info.props;
  std::vector<std::byte> initial;
  if (!dir_.empty()) {
    path_ = dir_ + "/vulkan-" + hex(p.pipelineCacheUUID, VK_UUID_SIZE) + "-" +
            std::to_string(p.vendorID) + "-" + std::to_string(p.deviceID) + "-" +
            std::to_string(p.driverVersion) + ".pcache";
    if (core_->info.caps.uuid)
      path_ = dir_ + "/vulkan-" + hex(core_->info.caps.uuid->data(), 16) + "-" +
              std::to_string(p.driverVersion) + "-" + hex(p.pipelineCacheUUID, VK_UUID_SIZE) +
              ".pcache";
    initial = read_cache_file(path_, p);
  }
  VkPipelineCacheCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  ci.initialDataSize = initial.size();
  ci.pInitialData = initial.empty() ? nullptr : initial.data();
  r = vkCreatePipelineCache(d, &ci, nullptr, &cache_);
  if (r != VK_SUCCESS && !initial.empty()) {
    log().warn("Vulkan pipeline cache {} ignored: the driver rejected it ({})", path_,
               vk_result_name(r));
    ci.initialDataSize = 0;
    ci.pInitialData = nullptr;
    initial.clear();
    r = vkCreatePipelineCache(d, &ci, nullptr, &cache_);
  }
  if (r != VK_SUCCESS) return vk_error("vkCreatePipelineCache", r, core_->id);
  loaded_bytes_ = initial.size();
  if (loaded_bytes_) log().debug("{}: pipeline cache loaded from {}", core_->id, path_);
  return {};
}

Status Pipelines::save() {
  {
    std::lock_guard<std::mutex> g(m_);
    if (path_.empty() || !cache_ || pipelines_.empty()) return {};
  }
  size_t n = 0;
  VkResult r = vkGetPipelineCacheData(core_->device, cache_, &n, nullptr);
  if (r != VK_SUCCESS || n == 0) return {};
  std::vector<std::byte> data(n);
  r = vkGetPipelineCacheData(core_->device, cache_, &n, data.data());
  if (r != VK_SUCCESS) return {};
  data.resize(n);
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  // Written to a unique temporary name and renamed: concurrent processes never see half a file.
  const std::string tmp = path_ + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    const uint64_t size = data.size(), hash = fnv1a(data.data(), data.size());
    f.write(kMagic, 8);
    f.write(reinterpret_cast<const char*>(&size), 8);
    f.write(reinterpret_cast<const char*>(&hash), 8);
    f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(size));
    if (!f) {
      std::filesystem::remove(tmp, ec);
      return Status(Code::io_error, "Vulkan pipeline cache: cannot write " + tmp);
    }
  }
  std::filesystem::rename(tmp, path_, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return Status(Code::io_error, "Vulkan pipeline cache: cannot write " + path_);
  }
  return {};
}

Result<Pipelines::Made> Pipelines::request(const std::string& shader,
                                           const std::vector<uint32_t>& spec,
                                           std::optional<uint32_t> dense) {
  Key key = std::make_tuple(shader, spec, dense);
  std::unique_lock<std::mutex> lock(m_);
  if (auto it = pipelines_.find(key); it != pipelines_.end()) return it->second;
  VkShaderModule module = VK_NULL_HANDLE;
  if (auto it = modules_.find(shader); it != modules_.end()) {
    module = it->second;
  } else {
    const shaders::Entry* e = nullptr;
    for (int i = 0; i < shaders::kNumEntries; ++i)
      if (shaders::kEntries[i].name == shader) e = &shaders::kEntries[i];
    if (!e) return Err(Code::internal).device(core_->id).note("no embedded shader named " + shader);
    VkShaderModuleCreateInfo mi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    mi.codeSize = e->words.size() * 4;
    mi.pCode = e->words.data();
    VkResult r = vkCreateShaderModule(core_->device, &mi, nullptr, &module);
    if (r != VK_SUCCESS) return vk_error("vkCreateShaderModule", r, core_->id);
    modules_[shader] = module;
  }
  Made made;
  if (threads_ > 1) {
    try {
      made = std::async(std::launch::async, [this, key, module] {
               slots_->acquire();
               Result<VkPipeline> p = make(key, module);
               slots_->release();
               return p;
             }).share();
      pipelines_.emplace(std::move(key), made);
      return made;
    } catch (const std::system_error& e) {  // no thread to be had: made here instead
      log().debug("{}: pipeline {} made on the recording thread: {}", core_->id, shader, e.what());
    }
  }
  std::promise<Result<VkPipeline>> now;
  made = now.get_future().share();
  pipelines_.emplace(key, made);
  lock.unlock();
  now.set_value(make(key, module));
  return made;
}

Result<VkPipeline> Pipelines::get(const std::string& shader, const std::vector<uint32_t>& spec,
                                  std::optional<uint32_t> dense) {
  DUET_ASSIGN_OR_RETURN(Made made, request(shader, spec, dense));
  return made.get();
}

Result<VkPipeline> Pipelines::make(const Key& key, VkShaderModule module) {
  const auto& [shader, spec, dense] = key;
  std::vector<uint32_t> values = spec;
  std::vector<VkSpecializationMapEntry> entries(spec.size());
  for (uint32_t i = 0; i < spec.size(); ++i) entries[i] = {i, i * 4, 4};
  if (dense) {
    entries.push_back({kDenseConstantId, static_cast<uint32_t>(values.size() * 4), 4});
    values.push_back(*dense);
  }
  VkSpecializationInfo si{static_cast<uint32_t>(entries.size()), entries.data(), values.size() * 4,
                          values.data()};
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = values.empty() ? nullptr : &si;
  ci.layout = layout_;
  VkPipeline p = VK_NULL_HANDLE;
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = thread_cpu_seconds();
  VkResult r = vkCreateComputePipelines(core_->device, cache_, 1, &ci, nullptr, &p);
  const double cpu = thread_cpu_seconds() - cpu0;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log().debug("{}: pipeline {} made in {:.3f} s ({:.3f} s of this thread's CPU)", core_->id, shader,
              s, cpu);
  {
    std::lock_guard<std::mutex> g(m_);
    ++stats_.created;
    stats_.create_s += s;
    stats_.create_cpu_s += cpu;
    if (s > stats_.slowest_s) {
      stats_.slowest_s = s;
      stats_.slowest = shader;
    }
  }
  if (r != VK_SUCCESS)
    return vk_error(("vkCreateComputePipelines(" + shader + ")").c_str(), r, core_->id);
  return p;
}

Pipelines::Stats Pipelines::stats() const {
  std::lock_guard<std::mutex> g(m_);
  return stats_;
}

void Pipelines::add_wait(double seconds) {
  std::lock_guard<std::mutex> g(m_);
  stats_.wait_s += seconds;
}

std::string Pipelines::summary() const {
  const Stats s = stats();
  return fmt::format(
      "{} pipeline{} made in {:.2f} s ({:.2f} s of CPU in the calling threads) on {} thread{} "
      "(recording waited {:.2f} s; slowest {} {:.2f} s), pipeline cache {}",
      s.created, s.created == 1 ? "" : "s", s.create_s, s.create_cpu_s, threads_,
      threads_ == 1 ? "" : "s", s.wait_s, s.slowest.empty() ? "-" : s.slowest, s.slowest_s,
      path_.empty()   ? "off"
      : loaded_bytes_ ? "loaded from disk"
                      : "cold");
}

}  // namespace duet::vulkan
