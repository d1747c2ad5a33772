// The Vulkan device (buffers, copies, execution) and the backend's factory.
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "duet/internal/env.h"
#include "duet/internal/log.h"
#include "vk_internal.h"
#include "vulkan_backend.h"

namespace duet::vulkan {

namespace {
// Reads of mapped memory the host does not cache from this size on go through a copy on the
// queue (a submission and a wait, tens of microseconds); smaller ones are a memcpy. On an H200
// (2026-11-28) a memcpy from the resizable-BAR mapping read 59 MB/s: 4 KiB 70 us, a decode
// step's 501 KiB of logits 8.4 ms, 8 MiB 142 ms.
constexpr uint64_t kCopiedReadBytes = 2 << 10;
// The host-cached buffer such reads land in; larger reads go in pieces of it.
constexpr uint64_t kReadbackBytes = 8ull << 20;
}  // namespace

DeviceOptions DeviceOptions::from(const BackendOptions& o) {
  DeviceOptions d;
  d.group_matvecs =
      o.get_bool("vulkan.group_matvecs", env_switch("DUET_VULKAN_GROUP_MATVECS", true));
  d.share_q8 = o.get_bool("vulkan.share_q8", env_switch("DUET_VULKAN_SHARE_Q8", true));
  d.fuse_add_norm =
      o.get_bool("vulkan.fuse_add_norm", env_switch("DUET_VULKAN_FUSE_ADD_NORM", true));
  d.fuse_rope_write =
      o.get_bool("vulkan.fuse_rope_write", env_switch("DUET_VULKAN_FUSE_ROPE_WRITE", true));
  return d;
}

VulkanDevice::VulkanDevice(std::shared_ptr<Core> core, std::string cache_dir, bool force_staging,
                           uint64_t block_bytes, int copied_reads, DeviceOptions options)
    : core_(std::move(core)),
      caps_(core_->info.caps),
      cache_dir_(std::move(cache_dir)),
      options_(options) {
  staging_ = force_staging || !caps_.host_visible_device_memory;
  block_bytes_ = block_bytes;
  copied_reads_from_ = copied_reads == 0 ? 0 : copied_reads < 0 ? kCopiedReadBytes : 1;
}

VulkanDevice::~VulkanDevice() {
  if (recorder_) (void)flush_held();
  if (recorder_) (void)recorder_->flush();
  if (readback_alloc_) readback_alloc_->release(readback_);
  scratch_.clear();
  capture_scratch_.clear();
  recording_scratch_.clear();
  rope_tables_.clear();
  recorder_.reset();
  pipelines_.reset();
}

const BackendRules& VulkanDevice::rules() const {
  return vulkan::rules();
}

Status VulkanDevice::init() {
  const auto& lim = core_->info.props.limits;
  window_align_ = std::max<uint64_t>(lim.minStorageBufferOffsetAlignment, 16);
  max_window_ = lim.maxStorageBufferRange;
  max_texels_ = core_->info.max_texels;
  texel_align_ = std::max<uint64_t>(core_->info.texel_align, 16);
  // Blocks of 256 MiB (less where the driver caps single allocations), or as the options say.
  uint64_t block = block_bytes_ ? std::max<uint64_t>(block_bytes_, 256) : 256ull << 20;
  if (caps_.max_allocation) block = std::min(block, caps_.max_allocation);
  core_->allocator =
      std::make_unique<Allocator>(core_->device, core_->info, !staging_, block, core_->id);
  pipelines_ = std::make_unique<Pipelines>(core_, cache_dir_, default_pipeline_threads());
  DUET_TRY(pipelines_->init());
  recorder_ = std::make_unique<Recorder>(core_, *pipelines_);
  DUET_TRY(recorder_->init());
  // Copied reads where the mapped memory is not host-cached (or where forced), and a host-cached
  // type exists to copy into.
  const bool cached = (core_->allocator->flags() & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) != 0;
  if (staging_ || (cached && copied_reads_from_ == kCopiedReadBytes)) copied_reads_from_ = 0;
  if (copied_reads_from_) {
    readback_alloc_ = std::make_unique<Allocator>(core_->device, core_->info, true,
                                                  kReadbackBytes * 2, core_->id, true);
    if (!readback_alloc_->has_type()) copied_reads_from_ = 0;
  }
  caps_.extra["memory_path"] =
      staging_ ? "device-local memory with staging copies"
               : std::string("host-visible device-local memory (no staging") +
                     (copied_reads_from_ ? "; reads copied into host-cached memory" : "") + ")";
  caps_.extra["pipeline_cache"] =
      pipelines_->cache_path().empty() ? "off" : pipelines_->cache_path();
  caps_.extra["validation"] = core_->instance->validation() ? "on" : "off";
  timestamp_bits_ = core_->info.timestamp_bits;
  return {};
}

Result<std::shared_ptr<Buffer>> VulkanDevice::allocate(uint64_t bytes) {
  // Past the driver's limits vkAllocateMemory is invalid usage, not a clean failure: refuse here.
  const DeviceCaps& real = core_->info.caps;
  const uint64_t limit = real.max_allocation ? real.max_allocation : real.memory_bytes;
  if (limit && bytes > limit)
    return Err(Code::out_of_memory)
        .device(id())
        .expected("an allocation of at most " + std::to_string(limit) +
                  " bytes (the driver's maxMemoryAllocationSize)")
        .got(std::to_string(bytes) + " bytes");
  auto a = core_->allocator->allocate(std::max<uint64_t>(bytes, 4));
  if (!a.ok()) return a.status();
  return std::shared_ptr<Buffer>(std::make_shared<VkBuf>(core_, *a, bytes));
}

Result<std::shared_ptr<VkBuf>> VulkanDevice::scratch(uint64_t bytes) {
  DUET_ASSIGN_OR_RETURN(Allocation a, core_->allocator->allocate(std::max<uint64_t>(bytes, 4)));
  auto b = std::make_shared<VkBuf>(core_, a, bytes);
  (recorder_->capturing() ? capture_scratch_ : scratch_).push_back(b);
  return b;
}

Result<VkBuf*> VulkanDevice::rope_table(float theta, int rope_dims) {
  uint32_t bits;
  std::memcpy(&bits, &theta, sizeof bits);
  auto& slot = rope_tables_[{bits, rope_dims}];
  if (!slot) {
    // cos and sin of (v << 8k) * theta^(-2i/rope_dims), in double, for each byte k of a position.
    const int half = rope_dims / 2;
    std::vector<float> t(static_cast<size_t>(3 * 256 * half * 2));
    for (int k = 0; k < 3; ++k)
      for (int v = 0; v < 256; ++v)
        for (int i = 0; i < half; ++i) {
          const double freq = std::pow(static_cast<double>(theta), -2.0 * i / rope_dims);
          const double angle = static_cast<double>(int64_t{v} << (8 * k)) * freq;
          const size_t e = 2 * ((static_cast<size_t>(k) * 256 + static_cast<size_t>(v)) *
                                    static_cast<size_t>(half) +
                                static_cast<size_t>(i));
          t[e] = static_cast<float>(std::cos(angle));
          t[e + 1] = static_cast<float>(std::sin(angle));
        }
    DUET_ASSIGN_OR_RETURN(auto b, allocate(t.size() * sizeof(float)));
    DUET_TRY(write(*b, 0, t.data(), t.size() * sizeof(float)));
    slot = std::move(b);
  }
  return static_cast<VkBuf*>(slot.get());
}

Status VulkanDevice::copy_staged(VkBuf& buf, uint64_t offset, void* host, uint64_t bytes,
                                 bool to_device) {
  // A host-visible staging buffer, a one-off command buffer, and a wait. Chunks of 64 MiB.
  VkDevice d = core_->device;
  const uint64_t chunk = std::min<uint64_t>(bytes, 64ull << 20);
  Allocator host_alloc(d, core_->info, true, std::max<uint64_t>(chunk, 1 << 20) * 2, core_->id);
  auto staging = host_alloc.allocate(chunk);
  if (!staging.ok())
    return staging.status().with_context("a staging buffer for copying " + std::to_string(bytes) +
                                         " bytes");
  const Allocation st = *staging;
  VkCommandPool pool = VK_NULL_HANDLE;
  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = core_->info.queue_family;
  VkResult r = vkCreateCommandPool(d, &pi, nullptr, &pool);
  if (r != VK_SUCCESS) return vk_error("vkCreateCommandPool", r, core_->id);
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  vkAllocateCommandBuffers(d, &ai, &cmd);
  Status status;
  for (uint64_t done = 0; done < bytes && status.ok(); done += chunk) {
    const uint64_t n = std::min(chunk, bytes - done);
    auto* h = static_cast<std::byte*>(host) + done;
    if (to_device) std::memcpy(st.block->mapped + st.offset, h, n);
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    vkBeginCommandBuffer(cmd, &bi);
    VkBufferCopy region{};
    region.size = n;
    if (to_device) {
      region.srcOffset = st.offset;
      region.dstOffset = buf.base() + offset + done;
      vkCmdCopyBuffer(cmd, st.block->buffer, buf.vk(), 1, &region);
    } else {
      region.srcOffset = buf.base() + offset + done;
      region.dstOffset = st.offset;
      vkCmdCopyBuffer(cmd, buf.vk(), st.block->buffer, 1, &region);
    }
    vkEndCommandBuffer(cmd);
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd;
    r = vkQueueSubmit(core_->queue, 1, &si, VK_NULL_HANDLE);
    if (r == VK_SUCCESS) r = vkQueueWaitIdle(core_->queue);
    if (r != VK_SUCCESS) {
      status = vk_error("staging copy", r, core_->id);
      break;
    }
    if (!to_device) std::memcpy(h, st.block->mapped + st.offset, n);
    vkResetCommandBuffer(cmd, 0);
  }
  vkDestroyCommandPool(d, pool, nullptr);
  host_alloc.release(st);
  return status;
}

bool VulkanDevice::owns(const Buffer& b) const {
  const auto* v = dynamic_cast<const VkBuf*>(&b);
  return v && v->owner() == core_.get();
}

// Arguments checked by Device::write and read: a buffer of this device, a range inside it.
Status VulkanDevice::write_checked(Buffer& dst, uint64_t offset, const void* src, uint64_t bytes) {
  auto* b = static_cast<VkBuf*>(&dst);
  DUET_TRY(flush_held());
  q8.reset();  // the write may change activations a quantize_q8 read
  // Work recorded before this write that touches the range runs first: a small write goes into
  // the command stream after it (an input uploaded in the middle of a run, into memory the run
  // used before), anything else waits for it.
  const uint64_t at = b->base() + offset;
  if (recorder_->touches(b->vk(), at, bytes)) {
    if (bytes <= Recorder::kMaxUpdateBytes && bytes % 4 == 0 && at % 4 == 0)
      return recorder_->update(b->vk(), at, src, bytes);
    DUET_TRY(synchronize());
  }
  if (staging_) return copy_staged(*b, offset, const_cast<void*>(src), bytes, true);
  std::memcpy(b->mapped() + offset, src, bytes);
  return {};
}

Status VulkanDevice::read_copied(VkBuf& buf, uint64_t offset, void* host, uint64_t bytes) {
  if (!readback_.block) {
    DUET_ASSIGN_OR_RETURN(readback_, readback_alloc_->allocate(kReadbackBytes));
  }
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = std::min(bytes - done, kReadbackBytes);
    DUET_TRY(recorder_->copy(buf.vk(), buf.base() + offset + done, readback_.block->buffer,
                             readback_.offset, n));
    DUET_TRY(synchronize());
    std::memcpy(static_cast<std::byte*>(host) + done, readback_.block->mapped + readback_.offset,
                n);
    done += n;
  }
  return {};
}

Status VulkanDevice::read_checked(Buffer& src, uint64_t offset, void* dst, uint64_t bytes) {
  auto* b = static_cast<VkBuf*>(&src);
  DUET_TRY(flush_held());
  // The copy goes after the recorded work: one submission for both.
  if (copied_reads_from_ && bytes >= copied_reads_from_) return read_copied(*b, offset, dst, bytes);
  if (recorder_->touches(b->vk(), b->base() + offset, bytes)) DUET_TRY(synchronize());
  if (staging_) return copy_staged(*b, offset, dst, bytes, false);
  std::memcpy(dst, b->mapped() + offset, bytes);
  return {};
}

Status VulkanDevice::check_validation() {
  std::vector<std::string> m = core_->instance->take_messages();
  if (m.empty()) return {};
  std::string text = m.front();
  if (m.size() > 1) text += " (and " + std::to_string(m.size() - 1) + " more)";
  return Err(Code::internal).device(id()).note("Vulkan validation: " + text);
}

std::array<uint64_t, 4> VulkanDevice::record_marks() const {
  const Recorder& r = *recorder_;
  return {r.dispatches, r.submissions, r.updates, r.copies};
}

namespace {
// An op kept for later: its refs point at aliases of the caller's buffers.
HeldOp hold(const PlannedOp& op, std::span<const TensorRef> inputs, const TensorRef& output) {
  HeldOp h{op, {inputs.begin(), inputs.end()}, output, {}};
  // One alias per buffer: refs to one buffer stay refs to one buffer (write_slice in place).
  std::vector<std::pair<Buffer*, Buffer*>> seen;
  auto keep = [&](TensorRef& r) {
    for (auto [from, to] : seen)
      if (from == r.buffer) {
        r.buffer = to;
        return;
      }
    h.keep.push_back(VkBuf::alias(*static_cast<VkBuf*>(r.buffer)));
    seen.emplace_back(r.buffer, h.keep.back().get());
    r.buffer = h.keep.back().get();
  };
  for (TensorRef& r : h.inputs) keep(r);
  keep(h.output);
  return h;
}
}  // namespace

Status VulkanDevice::flush_held() {
  if (!cast_ && rope_.empty() && !add_ && held_.empty()) return {};
  if (cast_) {
    HeldOp cast = std::move(*cast_);
    cast_.reset();
    DUET_TRY(record_op(*this, cast.op, cast.inputs, cast.output));
  }
  if (!rope_.empty()) {
    std::vector<HeldOp> r = std::move(rope_);
    rope_.clear();
    DUET_TRY(record_rope_write(*this, r));
  }
  if (add_) {
    HeldOp add = std::move(*add_);
    add_.reset();
    DUET_TRY(record_op(*this, add.op, add.inputs, add.output));
  }
  if (held_.empty()) return check_validation();
  std::vector<HeldOp> g = std::move(held_);
  held_.clear();
  Status s = record_group(*this, g);
  if (!s.ok()) return s;
  return check_validation();
}

Status VulkanDevice::execute_checked(const PlannedOp& op, std::span<const TensorRef> inputs,
                                     const TensorRef& output) {
  DUET_TRY(check_validation());
  const bool timed = recorder_->timing();
  // A held cast runs inside the cache write of its output, else alone first.
  if (cast_) {
    HeldOp cast = std::move(*cast_);
    cast_.reset();
    if (joins_cast_write(*this, cast, op, inputs, output)) {
      DUET_TRY(record_cast_write(*this, cast, op, inputs, output));
      return check_validation();
    }
    DUET_TRY(record_op(*this, cast.op, cast.inputs, cast.output));
  }
  // A held rope takes a cache write of its output, then the V write after it (or runs now).
  if (!rope_.empty()) {
    if (joins_rope_write(*this, rope_, op, inputs, output)) {
      rope_.push_back(hold(op, inputs, output));
      if (rope_.size() == 3) DUET_TRY(flush_held());
      return {};
    }
    DUET_TRY(flush_held());
  }
  // A held add runs inside this op when it is the rmsnorm of the add's sum, else alone first.
  if (add_) {
    HeldOp add = std::move(*add_);
    add_.reset();
    if (folds_add(*this, add, op, inputs, output)) {
      DUET_TRY(record_add_norm(*this, add, op, inputs, output));
      return check_validation();
    }
    DUET_TRY(record_op(*this, add.op, add.inputs, add.output));
  }
  // A rope is held until the next op says whether it writes the rope's output into a cache.
  if (options_.fuse_rope_write && !timed && may_hold_rope(op, inputs, output)) {
    DUET_TRY(flush_held());
    rope_.push_back(hold(op, inputs, output));
    return {};
  }
  // A cast is held until the next op says whether it writes the cast's output into a cache.
  if (options_.fuse_rope_write && !timed && may_hold_cast(op, inputs, output)) {
    DUET_TRY(flush_held());
    cast_ = hold(op, inputs, output);
    return {};
  }
  // An add is held until the next op says whether it is an rmsnorm of its sum.
  if (options_.fuse_add_norm && !timed && may_fold_add(op, inputs, output)) {
    DUET_TRY(flush_held());
    add_ = hold(op, inputs, output);
    return {};
  }
  // A mat-vec is held until the next op says whether it joins it (one dispatch for both).
  if (options_.group_matvecs && !timed && may_group(op, inputs)) {
    if (!held_.empty() && !joins_group(held_, op, inputs, output)) DUET_TRY(flush_held());
    held_.push_back(hold(op, inputs, output));
    if (held_.size() == kMaxGroup) DUET_TRY(flush_held());
    return {};
  }
  DUET_TRY(flush_held());
  if (timed) DUET_TRY(recorder_->op_start());
  Status s = record_op(*this, op, inputs, output);
  if (timed) {
    const Status e = recorder_->op_end();
    if (s.ok()) s = e;
  }
  if (!s.ok()) return s;
  return check_validation();
}

Status VulkanDevice::begin_kernel_timing() {
  if (recorder_->capturing())
    return Err(Code::unsupported).device(id()).note("kernel timing while recording");
  DUET_TRY(flush_held());
  const float period = core_->info.timestamp_period;
  if (timestamp_bits_ == 0 || !(period > 0))
    return Err(Code::unsupported)
        .device(id())
        .note("kernel timing on the device is not supported: queue family " +
              std::to_string(core_->info.queue_family) + " has timestampValidBits " +
              std::to_string(timestamp_bits_) + " and timestampPeriod " + std::to_string(period) +
              " ns (no device timestamps)");
  if (recorder_->pending()) DUET_TRY(synchronize());
  DUET_TRY(recorder_->begin_timing(timestamp_bits_, period, timing_queries_));
  timing_submissions_ = recorder_->submissions;
  return check_validation();
}

Status VulkanDevice::begin_recording() {
  // DUET_VULKAN_RECORDINGS=0: every run step by step (what recordings buy, measured).
  static const bool enabled = env_switch("DUET_VULKAN_RECORDINGS", true);
  if (!enabled)
    return Err(Code::unsupported)
        .device(id())
        .note("recording and replaying work is not supported: DUET_VULKAN_RECORDINGS=0");
  DUET_TRY(flush_held());
  q8.reset();
  Status s = recorder_->begin_capture();
  if (s.code() == Code::unsupported)
    return Err(Code::unsupported)
        .device(id())
        .note("recording and replaying work is not supported now: " + s.message());
  DUET_TRY(s);
  return check_validation();
}

Result<int> VulkanDevice::end_recording() {
  const Status held = flush_held();
  q8.reset();
  Result<int> id = recorder_->end_capture();
  if (!held.ok()) {
    if (id.ok()) release_recording(*id);
    capture_scratch_.clear();
    return held;
  }
  std::vector<std::shared_ptr<VkBuf>> keep;
  keep.swap(capture_scratch_);
  if (!id.ok()) return id.status();
  recording_scratch_[*id] = std::move(keep);
  DUET_TRY(check_validation());
  return id;
}

Status VulkanDevice::replay(int recording) {
  DUET_TRY(flush_held());
  q8.reset();
  DUET_TRY(recorder_->replay(recording));
  scratch_.clear();  // what was recorded before has run
  return check_validation();
}

void VulkanDevice::release_recording(int recording) {
  recorder_->release(recording);
  recording_scratch_.erase(recording);
}

Result<std::vector<KernelSpan>> VulkanDevice::end_kernel_timing() {
  if (!recorder_->timing()) return Device::end_kernel_timing();
  Status s = synchronize();
  std::vector<KernelSpan> spans = recorder_->end_timing();
  if (!s.ok()) return s;
  log().debug("{}: {} ops timed in {} submissions", id(), spans.size(),
              recorder_->submissions - timing_submissions_);
  return spans;
}

Status VulkanDevice::synchronize() {
  Status s = flush_held();
  if (s.ok()) s = recorder_->flush();
  q8.reset();
  scratch_.clear();
  if (groups != logged_[0] || shared_q8 != logged_[2] || fused_adds != logged_[3] ||
      rope_writes != logged_[4] || cast_writes != logged_[5])
    log().debug(
        "{}: {} mat-vecs in {} grouped dispatches, {} quantize_q8 dispatches shared, {} adds "
        "inside rmsnorms, {} ropes and {} casts wrote their cache rows",
        id(), grouped - logged_[1], groups - logged_[0], shared_q8 - logged_[2],
        fused_adds - logged_[3], rope_writes - logged_[4], cast_writes - logged_[5]);
  logged_ = {groups, grouped, shared_q8, fused_adds, rope_writes, cast_writes};
  const Recorder& r = *recorder_;
  if (r.dispatches != counted_[0])
    log().debug("{}: {} dispatches and {} barriers recorded since the last synchronize", id(),
                r.dispatches - counted_[0], r.barriers - counted_[1]);
  counted_ = {r.dispatches, r.barriers};
  DUET_TRY(check_validation());
  DUET_TRY(s);
  std::vector<std::string> errors = recorder_->take_errors();
  if (!errors.empty()) return Err(Code::invalid_argument).device(id()).note(errors.front());
  return {};
}

namespace {

Result<std::unique_ptr<VulkanDevice>> open_device(std::shared_ptr<Instance> instance,
                                                  PhysicalInfo info, int index,
                                                  const BackendOptions& o) {
  auto core = std::make_shared<Core>();
  core->instance = std::move(instance);
  core->info = std::move(info);
  core->id = "vulkan:" + std::to_string(index);
  const PhysicalInfo& pi = core->info;

  float prio = 1.0f;
  VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qi.queueFamilyIndex = pi.queue_family;
  qi.queueCount = 1;
  qi.pQueuePriorities = &prio;

  const bool v12 = pi.props.apiVersion >= VK_API_VERSION_1_2;
  std::vector<const char*> ext;
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDevice16BitStorageFeatures s16{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDevice8BitStorageFeatures s8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderFloat16Int8Features f16i8{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  void** next = &f2.pNext;
  auto chain = [&next](auto* s) {
    *next = s;
    next = &s->pNext;
  };
  s16.storageBuffer16BitAccess = pi.storage16;
  chain(&s16);
  if (pi.storage8) {
    if (!v12) ext.push_back(VK_KHR_8BIT_STORAGE_EXTENSION_NAME);
    s8.storageBuffer8BitAccess = VK_TRUE;
    chain(&s8);
  }
  if (pi.float16 || pi.int8) {
    if (!v12) ext.push_back(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
    f16i8.shaderFloat16 = pi.float16;
    f16i8.shaderInt8 = pi.int8;
    chain(&f16i8);
  }
  // Packed integer dot products (the int_dot kernels), enabled only where the device has them.
  VkPhysicalDeviceShaderIntegerDotProductFeatures idp{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
  if (pi.int_dot) {
    if (pi.props.apiVersion < VK_API_VERSION_1_3)
      ext.push_back(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
    idp.shaderIntegerDotProduct = VK_TRUE;
    chain(&idp);
  }
  // Cooperative matrices (the coopmat kernels), where the device has them.
  CoopMatFeatures cmf{kCoopMatFeaturesType, nullptr, VK_TRUE, VK_FALSE};
  if (pi.coopmat) {
    ext.push_back(kCoopMatExtension);
    chain(&cmf);
  }
  f2.features.shaderInt16 = pi.int16;
  if (!v12 && pi.has_extension("VK_KHR_portability_subset"))
    ext.push_back("VK_KHR_portability_subset");

  VkDeviceCreateInfo ci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  ci.pNext = &f2;
  ci.queueCreateInfoCount = 1;
  ci.pQueueCreateInfos = &qi;
  ci.enabledExtensionCount = static_cast<uint32_t>(ext.size());
  ci.ppEnabledExtensionNames = ext.data();
  VkResult r = vkCreateDevice(pi.handle, &ci, nullptr, &core->device);
  if (r != VK_SUCCESS) return vk_error("vkCreateDevice", r, core->id);
  vkGetDeviceQueue(core->device, pi.queue_family, 0, &core->queue);

  // "vulkan.block_bytes": the size of the memory blocks tensors are sub-allocated from (tests
  // make it small so that every few tensors need a new vkAllocateMemory).
  // "vulkan.copied_reads": 1 reads every mapped buffer through a copy into host-cached memory
  // (the tests, on lavapipe), 0 never; unset, DUET_VULKAN_COPIED_READS (a switch) decides, and
  // unset too, where the mapped memory is not host-cached (resizable BAR).
  int copied = o.get_int("vulkan.copied_reads", -1);
  if (copied < 0 && std::getenv("DUET_VULKAN_COPIED_READS") &&
      *std::getenv("DUET_VULKAN_COPIED_READS"))
    copied = env_switch("DUET_VULKAN_COPIED_READS", false) ? 1 : 0;
  auto dev = std::make_unique<VulkanDevice>(
      core, default_cache_dir(o), o.get_bool("vulkan.force_staging", false),
      static_cast<uint64_t>(std::max(0, o.get_int("vulkan.block_bytes", 0))), copied,
      DeviceOptions::from(o));
  DUET_TRY(dev->init());
  return dev;
}

bool env_flag(const char* name) {
  return env_switch(name, false);
}

}  // namespace

BackendFactory factory() {
  return {"vulkan", [](const BackendOptions& o) -> Result<BackendOpenResult> {
            std::string loader = o.get("vulkan.loader");
            if (loader.empty())
              if (const char* e = std::getenv("DUET_VULKAN_LOADER"); e && *e) loader = e;
            if (loader.empty()) loader = "libvulkan.so.1";
            DUET_TRY(load_loader(loader));
            const bool validation =
                o.get_bool("vulkan.validation", env_flag("DUET_VULKAN_VALIDATION"));
            BackendOpenResult out;
            DUET_ASSIGN_OR_RETURN(std::shared_ptr<Instance> inst,
                                  Instance::create(validation, &out.notes));
            uint32_t n = 0;
            VkResult r = vkEnumeratePhysicalDevices(inst->handle(), &n, nullptr);
            if (r != VK_SUCCESS) return vk_error("vkEnumeratePhysicalDevices", r);
            if (n == 0)
              return Status(Code::unsupported, "the Vulkan loader found no physical device");
            std::vector<VkPhysicalDevice> pds(n);
            vkEnumeratePhysicalDevices(inst->handle(), &n, pds.data());
            // "vulkan.devices": comma-separated indices to open (default: all).
            const std::string only = o.get("vulkan.devices");
            int index = 0;
            for (uint32_t i = 0; i < n; ++i) {
              if (!only.empty() &&
                  ("," + only + ",").find("," + std::to_string(i) + ",") == std::string::npos)
                continue;
              auto info = probe(inst->handle(), pds[i], inst->validation_layer_version());
              if (!info.ok()) {
                out.notes.push_back("physical device " + std::to_string(i) +
                                    " skipped: " + info.status().message());
                continue;
              }
              auto dev = open_device(inst, std::move(*info), index, o);
              if (!dev.ok()) {
                out.notes.push_back("physical device " + std::to_string(i) +
                                    " skipped: " + dev.status().message());
                continue;
              }
              ++index;
              out.devices.push_back(std::move(*dev));
            }
            if (auto m = inst->take_messages(); !m.empty())
              return Status(Code::internal, "Vulkan validation while opening: " + m.front());
            return out;
          }};
}

}  // namespace duet::vulkan
