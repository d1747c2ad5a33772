// Recording: every planned op becomes one or more dispatches in one command buffer; nothing is
// submitted until synchronize() (or until the parameter ring or the descriptor pool fills). A
// barrier is recorded only before a dispatch that reads or writes a range that an earlier
// dispatch since the last barrier wrote, or writes a range one of them read.
#include <chrono>
#include <cstring>

#include "duet/internal/log.h"
#include "vk_internal.h"

namespace duet::vulkan {

namespace {
constexpr uint64_t kRingBytes = 4ull << 20;
constexpr uint32_t kSetsPerPool = 1024;
constexpr uint32_t kErrorSlots = 256;
}  // namespace

Recorder::Recorder(std::shared_ptr<Core> core, Pipelines& pipelines)
    : core_(std::move(core)), pipelines_(pipelines) {}

Recorder::~Recorder() {
  VkDevice d = core_->device;
  for (Pipelines::Made& m : waiting_) m.wait();
  if (capturing_) {
    vkEndCommandBuffer(cmd_);
    free_capture(cap_);
    cmd_ = plain_cmd_;
    capturing_ = recording_ = false;
  }
  for (auto& [id, c] : captures_) free_capture(c);
  captures_.clear();
  if (recording_) {
    vkEndCommandBuffer(cmd_);
    recording_ = false;
  }
  if (host_alloc_) {
    host_alloc_->release(ring_);
    host_alloc_->release(errors_);
  }
  host_alloc_.reset();
  destroy_views();
  if (unused_view_) vkDestroyBufferView(d, unused_view_, nullptr);
  if (dpool_) vkDestroyDescriptorPool(d, dpool_, nullptr);
  if (queries_) vkDestroyQueryPool(d, queries_, nullptr);
  if (fence_) vkDestroyFence(d, fence_, nullptr);
  if (pool_) vkDestroyCommandPool(d, pool_, nullptr);
}

Status Recorder::init() {
  VkDevice d = core_->device;
  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = core_->info.queue_family;
  VkResult r = vkCreateCommandPool(d, &pi, nullptr, &pool_);
  if (r != VK_SUCCESS) return vk_error("vkCreateCommandPool", r, core_->id);
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  r = vkAllocateCommandBuffers(d, &ai, &cmd_);
  if (r != VK_SUCCESS) return vk_error("vkAllocateCommandBuffers", r, core_->id);
  VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  r = vkCreateFence(d, &fi, nullptr, &fence_);
  if (r != VK_SUCCESS) return vk_error("vkCreateFence", r, core_->id);
  DUET_TRY(make_pool(&dpool_));
  sets_left_ = kSetsPerPool;

  host_alloc_ = std::make_unique<Allocator>(d, core_->info, true, 8ull << 20, core_->id);
  DUET_ASSIGN_OR_RETURN(ring_, host_alloc_->allocate(kRingBytes));
  DUET_ASSIGN_OR_RETURN(errors_, host_alloc_->allocate(kErrorSlots * 8));
  std::memset(errors_.block->mapped + errors_.offset, 0, kErrorSlots * 8);
  ring_align_ = std::max<uint64_t>({256, core_->info.props.limits.minStorageBufferOffsetAlignment,
                                    core_->info.props.limits.minUniformBufferOffsetAlignment});
  // Every texel binding of the layout must hold a valid view: unused ones see the error slots.
  DUET_ASSIGN_OR_RETURN(unused_view_, view(TexelWindow{errors_.block->buffer, errors_.offset,
                                                       kErrorSlots * 8, VK_FORMAT_R32_UINT}));
  views_.clear();
  return {};
}

Status Recorder::make_pool(VkDescriptorPool* pool) {
  const VkDescriptorPoolSize ps[] = {
      {VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, kSetsPerPool},
      {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * (kBindings - 1 + 2)},
      {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, kSetsPerPool * kTexelBindings}};
  VkDescriptorPoolCreateInfo dp{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  dp.maxSets = kSetsPerPool;
  dp.poolSizeCount = 3;
  dp.pPoolSizes = ps;
  VkResult r = vkCreateDescriptorPool(core_->device, &dp, nullptr, pool);
  if (r != VK_SUCCESS) return vk_error("vkCreateDescriptorPool", r, core_->id);
  return {};
}

Result<VkBufferView> Recorder::view(const TexelWindow& w) {
  VkBufferViewCreateInfo ci{VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO};
  ci.buffer = w.buffer;
  ci.format = w.format;
  ci.offset = w.offset;
  ci.range = w.range;
  VkBufferView v = VK_NULL_HANDLE;
  VkResult r = vkCreateBufferView(core_->device, &ci, nullptr, &v);
  if (r != VK_SUCCESS) return vk_error("vkCreateBufferView", r, core_->id);
  (capturing_ ? cap_.views : views_).push_back(v);
  return v;
}

void Recorder::destroy_views() {
  for (VkBufferView v : views_) vkDestroyBufferView(core_->device, v, nullptr);
  views_.clear();
}

bool Recorder::overlaps(const std::vector<Range>& set, const Range& r) {
  for (const Range& x : set)
    if (x.buffer == r.buffer && x.lo < r.hi && r.lo < x.hi) return true;
  return false;
}

bool Recorder::touches(VkBuffer buffer, uint64_t offset, uint64_t bytes) const {
  return recording_ && overlaps(batch_, Range{buffer, offset, offset + bytes});
}

Status Recorder::begin() {
  if (recording_) return {};
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VkResult r = vkBeginCommandBuffer(cmd_, &bi);
  if (r != VK_SUCCESS) return vk_error("vkBeginCommandBuffer", r, core_->id);
  recording_ = true;
  if (timing_) {
    command([q = queries_, n = query_capacity_](VkCommandBuffer c) {
      vkCmdResetQueryPool(c, q, 0, n);
    });
    queries_used_ = 0;
    boundary_ = timestamp();  // the batch's start
    // An op cut by the last submission goes on here.
    if (op_open_) pieces_.push_back({spans_.size() - 1, boundary_, UINT32_MAX});
  }
  return {};
}

// One timestamp at the start of each batch and one after each op: an op's span runs from the
// timestamp before it (the batch's start or the previous op's end) to its own. Timestamps latch
// when every command before them has completed (bottom of the pipe), so an op's start is the end
// of the work before it; where dispatches overlap on a GPU the spans are intervals between
// completions, which add up to no more than the time the device was busy. (lavapipe flushes its
// pipeline at every such timestamp: one per op rather than two halves that cost.)
uint32_t Recorder::timestamp() {
  const uint32_t q = queries_used_++;
  command([pool = queries_, q](VkCommandBuffer c) {
    vkCmdWriteTimestamp(c, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool, q);
  });
  return q;
}

Status Recorder::begin_timing(uint32_t valid_bits, double period_ns, uint32_t queries) {
  if (recording_) DUET_TRY(flush());
  queries = std::max<uint32_t>(queries, 3);
  if (queries_ && query_capacity_ != queries) {
    vkDestroyQueryPool(core_->device, queries_, nullptr);
    queries_ = VK_NULL_HANDLE;
  }
  if (!queries_) {
    VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qi.queryCount = queries;
    VkResult r = vkCreateQueryPool(core_->device, &qi, nullptr, &queries_);
    if (r != VK_SUCCESS) return vk_error("vkCreateQueryPool", r, core_->id);
    query_capacity_ = queries;
  }
  mask_ = valid_bits >= 64 ? ~0ull : (1ull << valid_bits) - 1;
  period_ns_ = period_ns;
  origin_.reset();
  pieces_.clear();
  spans_.clear();
  op_open_ = false;
  timing_ = true;
  return {};
}

Status Recorder::op_start() {
  if (recording_ && queries_used_ + 1 > query_capacity_) DUET_TRY(flush());
  spans_.push_back({-1.0, 0.0, 0.0});  // start < 0: no piece read yet
  DUET_TRY(begin());
  pieces_.push_back({spans_.size() - 1, boundary_, UINT32_MAX});
  op_open_ = true;
  return {};
}

Status Recorder::op_end() {
  // Not recording: the op's last piece was closed by a submission and nothing followed it.
  if (op_open_ && recording_) pieces_.back().end = boundary_ = timestamp();
  op_open_ = false;
  return {};
}

Status Recorder::collect() {
  if (pieces_.empty()) return {};
  std::vector<uint64_t> ticks(queries_used_);
  VkResult r = vkGetQueryPoolResults(
      core_->device, queries_, 0, queries_used_, ticks.size() * sizeof(uint64_t), ticks.data(),
      sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
  if (r != VK_SUCCESS) return vk_error("vkGetQueryPoolResults", r, core_->id);
  const double scale = period_ns_ * 1e-9;
  for (const Piece& p : pieces_) {
    const uint64_t t0 = ticks[p.start] & mask_, t1 = ticks[p.end] & mask_;
    if (!origin_) origin_ = t0;
    // Differences modulo the valid bits: right across one wrap of the counter.
    KernelSpan& s = spans_[p.op];
    if (s.start < 0) s.start = static_cast<double>((t0 - *origin_) & mask_) * scale;
    s.end = static_cast<double>((t1 - *origin_) & mask_) * scale;
    s.seconds += static_cast<double>((t1 - t0) & mask_) * scale;
  }
  pieces_.clear();
  return {};
}

std::vector<KernelSpan> Recorder::end_timing() {
  timing_ = false;
  op_open_ = false;
  pieces_.clear();
  return std::move(spans_);
}

Status Recorder::reserve(uint64_t bytes, uint64_t* offset) {
  const uint64_t need = (bytes + ring_align_ - 1) / ring_align_ * ring_align_;
  if (need > kRingBytes)
    return Err(Code::internal).device(core_->id).note("parameter block larger than the ring");
  if (ring_used_ + need > kRingBytes) DUET_TRY(flush());
  *offset = ring_used_;
  ring_used_ += need;
  return {};
}

Result<uint32_t> Recorder::error_slot(std::string what, std::string value_word,
                                      std::string suffix) {
  if (capturing_) {
    if (cap_.slots.size() >= kErrorSlots)
      return Err(Code::unsupported)
          .device(core_->id)
          .note("a recording reports errors through at most " + std::to_string(kErrorSlots) +
                " slots");
    cap_.slots.push_back({std::move(what), std::move(value_word), std::move(suffix)});
    return static_cast<uint32_t>(cap_.slots.size() - 1);
  }
  if (error_what_.size() >= kErrorSlots) {
    DUET_TRY(flush());
    for (std::string& e : take_errors()) deferred_errors_.push_back(std::move(e));
  }
  error_what_.push_back({std::move(what), std::move(value_word), std::move(suffix)});
  return static_cast<uint32_t>(error_what_.size() - 1);
}

Window Recorder::error_window() const {
  if (capturing_) return {cap_.errors.block->buffer, cap_.errors.offset, kErrorSlots * 8, true};
  return {errors_.block->buffer, errors_.offset, kErrorSlots * 8, true};
}

std::vector<std::string> Recorder::take_errors() {
  std::vector<std::string> out;
  out.swap(deferred_errors_);
  auto* w = reinterpret_cast<uint32_t*>(errors_.block->mapped + errors_.offset);
  for (size_t i = 0; i < error_what_.size(); ++i)
    if (w[2 * i])
      out.push_back(error_what_[i].what + ": " + error_what_[i].value_word + " " +
                    std::to_string(static_cast<int32_t>(w[2 * i + 1])) + error_what_[i].suffix);
  std::memset(w, 0, error_what_.size() * 8);
  error_what_.clear();
  return out;
}

Status Recorder::record(const Dispatch& d) {
  std::optional<uint32_t> dense;
  if (d.dense_spec) {
    dense = 0u;
    for (uint32_t k = 0; k < std::size(d.params.td); ++k)
      if (d.params.td[k].dense) *dense |= 1u << k;
  }
  DUET_ASSIGN_OR_RETURN(Pipelines::Made made, pipelines_.request(d.shader, d.spec, dense));
  // A pipeline made before (or failed before) is used (or reported) now; one being made is
  // waited for at the submission.
  const bool ready = made.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  if (ready && !made.get().ok()) return made.get().status();
  if (!capturing_ && sets_left_ == 0) DUET_TRY(flush());
  if (capturing_ && cap_.sets_left == 0) {
    VkDescriptorPool pool = VK_NULL_HANDLE;
    DUET_TRY(make_pool(&pool));
    cap_.pools.push_back(pool);
    cap_.sets_left = kSetsPerPool;
  }
  // Parameters (and any table after them) into the ring, or a capture's blocks.
  const uint64_t pbytes = sizeof(Params);
  uint64_t poff = 0, eoff = 0;
  Allocation area = ring_;
  if (capturing_) {
    DUET_ASSIGN_OR_RETURN(area, capture_reserve(pbytes, d.extra.size(), &poff, &eoff));
  } else {
    DUET_TRY(reserve(pbytes, &poff));
    if (!d.extra.empty()) {
      DUET_TRY(reserve(d.extra.size(), &eoff));
      if (eoff < poff) {  // the ring was flushed between the two reservations
        DUET_TRY(reserve(pbytes, &poff));
      }
    }
  }
  std::byte* ring = area.block->mapped + area.offset;
  std::memcpy(ring + poff, &d.params, pbytes);
  if (!d.extra.empty()) std::memcpy(ring + eoff, d.extra.data(), d.extra.size());
  DUET_TRY(begin());

  std::array<Window, kBindings> bind = d.bind;
  bind[0] = {area.block->buffer, area.offset + poff, pbytes, false};
  if (d.extra_binding > 0)
    bind[static_cast<size_t>(d.extra_binding)] = {area.block->buffer, area.offset + eoff,
                                                  d.extra.size(), false};
  std::array<Window, 2> side = {d.scalar, d.errors};  // kScalarBinding, kErrorBinding
  // Unused bindings point at the parameter block: every binding of the layout stays valid.
  for (auto& w : bind)
    if (!w.buffer) w = {bind[0].buffer, bind[0].offset, bind[0].range, false};
  for (auto& w : side)
    if (!w.buffer) w = {bind[0].buffer, bind[0].offset, bind[0].range, false};

  // Hazards against what ran since the last barrier (texel bindings are reads).
  std::vector<Window> used;
  for (size_t i = 1; i < kBindings; ++i)
    if (d.bind[i].buffer) used.push_back(d.bind[i]);
  if (d.scalar.buffer) used.push_back(d.scalar);
  if (d.errors.buffer) used.push_back(d.errors);
  for (const TexelWindow& t : d.texel)
    if (t.buffer) used.push_back({t.buffer, t.offset, t.range, false});
  bool hazard = false;
  for (const Window& w : used) {
    Range r{w.buffer, w.offset, w.offset + w.range};
    if (overlaps(writes_since_barrier_, r) || (w.write && overlaps(reads_since_barrier_, r)))
      hazard = true;
  }
  if (hazard) {
    command([](VkCommandBuffer c) {
      VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
      mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT;
      mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
      vkCmdPipelineBarrier(c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                           VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    });
    reads_since_barrier_.clear();
    writes_since_barrier_.clear();
    ++barriers;
  }
  for (const Window& w : used) {
    Range r{w.buffer, w.offset, w.offset + w.range};
    (w.write ? writes_since_barrier_ : reads_since_barrier_).push_back(r);
    batch_.push_back(r);
  }
  std::array<VkBufferView, kTexelBindings> views{};
  for (uint32_t i = 0; i < kTexelBindings; ++i) {
    if (!d.texel[i].buffer) {
      views[i] = unused_view_;
      continue;
    }
    DUET_ASSIGN_OR_RETURN(views[i], view(d.texel[i]));
  }

  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  ai.descriptorPool = capturing_ ? cap_.pools.back() : dpool_;
  ai.descriptorSetCount = 1;
  VkDescriptorSetLayout sl = pipelines_.set_layout();
  ai.pSetLayouts = &sl;
  VkDescriptorSet set = VK_NULL_HANDLE;
  VkResult r = vkAllocateDescriptorSets(core_->device, &ai, &set);
  if (r != VK_SUCCESS) return vk_error("vkAllocateDescriptorSets", r, core_->id);
  --(capturing_ ? cap_.sets_left : sets_left_);
  std::array<VkDescriptorBufferInfo, kAllBindings> infos{};
  std::array<VkWriteDescriptorSet, kAllBindings> writes{};
  for (uint32_t i = 0; i < writes.size(); ++i) {
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = descriptor_type(i);
    if (i < kBindings || i >= kScalarBinding) {
      const Window& w = i < kBindings ? bind[i] : side[i - kScalarBinding];
      infos[i] = {w.buffer, w.offset, w.range};
      writes[i].pBufferInfo = &infos[i];
    } else {
      writes[i].pTexelBufferView = &views[i - kBindings];
    }
  }
  vkUpdateDescriptorSets(core_->device, static_cast<uint32_t>(writes.size()), writes.data(), 0,
                         nullptr);
  if (!ready) waiting_.push_back(made);
  // Played after settle() has seen every waited pipeline made: get() does not block then.
  command([made, layout = pipelines_.layout(), set, g = d.groups](VkCommandBuffer c) {
    vkCmdBindPipeline(c, VK_PIPELINE_BIND_POINT_COMPUTE, *made.get());
    vkCmdBindDescriptorSets(c, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, &set, 0, nullptr);
    vkCmdDispatch(c, g[0], g[1], g[2]);
  });
  ++dispatches;
  if (recent.size() == 16) recent.erase(recent.begin());
  recent.emplace_back(d.shader, d.spec);
  last_dense = dense;
  return {};
}

Status Recorder::update(VkBuffer buffer, uint64_t offset, const void* data, uint64_t bytes) {
  if (capturing_)
    return Err(Code::internal).device(core_->id).note("a buffer written while recording");
  DUET_TRY(begin());
  auto emit = [buffer, offset, bytes](VkCommandBuffer c, const void* bytes_from) {
    VkMemoryBarrier before{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    before.srcAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    before.dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    vkCmdPipelineBarrier(c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0,
                         1, &before, 0, nullptr, 0, nullptr);
    vkCmdUpdateBuffer(c, buffer, offset, bytes, bytes_from);
    VkMemoryBarrier after{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    after.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    after.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    vkCmdPipelineBarrier(c, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0,
                         1, &after, 0, nullptr, 0, nullptr);
  };
  if (waiting_.empty()) {
    emit(cmd_, data);
  } else {  // on the tape: the data is copied now (vkCmdUpdateBuffer copies when recorded)
    const auto* p = static_cast<const std::byte*>(data);
    command([emit, copy = std::vector<std::byte>(p, p + bytes)](VkCommandBuffer c) {
      emit(c, copy.data());
    });
  }
  barriers += 2;
  ++updates;
  reads_since_barrier_.clear();
  writes_since_barrier_.clear();
  batch_.push_back({buffer, offset, offset + bytes});
  return {};
}

Status Recorder::copy(VkBuffer src, uint64_t src_offset, VkBuffer dst, uint64_t dst_offset,
                      uint64_t bytes) {
  if (capturing_)
    return Err(Code::internal).device(core_->id).note("a buffer read while recording");
  DUET_TRY(begin());
  command([=](VkCommandBuffer c) {
    VkMemoryBarrier before{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    before.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    before.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT;
    vkCmdPipelineBarrier(c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0, nullptr, 0, nullptr);
    VkBufferCopy region{src_offset, dst_offset, bytes};
    vkCmdCopyBuffer(c, src, dst, 1, &region);
    VkMemoryBarrier after{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    after.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    after.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(c, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                         &after, 0, nullptr, 0, nullptr);
  });
  barriers += 2;
  ++copies;
  reads_since_barrier_.clear();
  writes_since_barrier_.clear();
  batch_.push_back({src, src_offset, src_offset + bytes});
  batch_.push_back({dst, dst_offset, dst_offset + bytes});
  return {};
}

Status Recorder::settle() {
  if (waiting_.empty()) return {};
  const auto t0 = std::chrono::steady_clock::now();
  Status failed;
  for (const Pipelines::Made& m : waiting_)
    if (const Result<VkPipeline>& p = m.get(); !p.ok() && failed.ok()) failed = p.status();
  pipelines_.add_wait(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  waiting_.clear();
  std::vector<std::function<void(VkCommandBuffer)>> tape;
  tape.swap(tape_);
  if (!failed.ok()) {
    drop_batch();
    return failed;
  }
  for (auto& f : tape) f(cmd_);
  return {};
}

void Recorder::drop_batch() {
  vkEndCommandBuffer(cmd_);
  vkResetCommandBuffer(cmd_, 0);
  vkResetDescriptorPool(core_->device, dpool_, 0);
  destroy_views();
  recording_ = false;
  sets_left_ = kSetsPerPool;
  ring_used_ = 0;
  reads_since_barrier_.clear();
  writes_since_barrier_.clear();
  batch_.clear();
  error_what_.clear();
}

Status Recorder::flush() {
  if (capturing_)
    return Err(Code::internal)
        .device(core_->id)
        .note("work submitted while recording (only execute() may come between begin and end)");
  if (!recording_) return {};
  if (timing_ && op_open_) pieces_.back().end = timestamp();
  DUET_TRY(settle());
  recording_ = false;
  VkResult r = vkEndCommandBuffer(cmd_);
  if (r != VK_SUCCESS) return vk_error("vkEndCommandBuffer", r, core_->id);
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd_;
  r = vkQueueSubmit(core_->queue, 1, &si, fence_);
  if (r != VK_SUCCESS) return vk_error("vkQueueSubmit", r, core_->id);
  ++submissions;
  r = vkWaitForFences(core_->device, 1, &fence_, VK_TRUE, UINT64_MAX);
  if (r != VK_SUCCESS) return vk_error("vkWaitForFences", r, core_->id);
  vkResetFences(core_->device, 1, &fence_);
  const Status collected = timing_ ? collect() : Status{};
  vkResetCommandBuffer(cmd_, 0);
  vkResetDescriptorPool(core_->device, dpool_, 0);
  destroy_views();
  sets_left_ = kSetsPerPool;
  ring_used_ = 0;
  reads_since_barrier_.clear();
  writes_since_barrier_.clear();
  batch_.clear();
  return collected;
}

Result<Allocation> Recorder::capture_reserve(uint64_t pbytes, uint64_t extra, uint64_t* poff,
                                             uint64_t* eoff) {
  auto up = [this](uint64_t n) { return (n + ring_align_ - 1) / ring_align_ * ring_align_; };
  const uint64_t need = up(pbytes) + up(extra);
  if (cap_.params.empty() || cap_.params_used + need > cap_.params.back().size) {
    DUET_ASSIGN_OR_RETURN(Allocation a, host_alloc_->allocate(std::max<uint64_t>(need, 1 << 20)));
    cap_.params.push_back(a);
    cap_.params_used = 0;
  }
  *poff = cap_.params_used;
  *eoff = cap_.params_used + up(pbytes);
  cap_.params_used += need;
  return cap_.params.back();
}

void Recorder::free_capture(Capture& c) {
  VkDevice d = core_->device;
  if (c.cmd) vkFreeCommandBuffers(d, pool_, 1, &c.cmd);
  for (VkDescriptorPool p : c.pools) vkDestroyDescriptorPool(d, p, nullptr);
  for (const Allocation& a : c.params) host_alloc_->release(a);
  for (VkBufferView v : c.views) vkDestroyBufferView(d, v, nullptr);
  if (c.errors.block) host_alloc_->release(c.errors);
  c = Capture{};
}

Status Recorder::begin_capture() {
  if (capturing_) return Err(Code::internal).device(core_->id).note("a recording is under way");
  if (timing_)
    return Err(Code::unsupported)
        .device(core_->id)
        .note("recording is not supported while kernel timing is on");
  DUET_TRY(flush());  // what came before runs first
  Capture c;
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkResult r = vkAllocateCommandBuffers(core_->device, &ai, &c.cmd);
  if (r != VK_SUCCESS) return vk_error("vkAllocateCommandBuffers", r, core_->id);
  auto errors = host_alloc_->allocate(kErrorSlots * 8);
  if (!errors.ok()) {
    free_capture(c);
    return errors.status();
  }
  c.errors = *errors;
  std::memset(c.errors.block->mapped + c.errors.offset, 0, kErrorSlots * 8);
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  r = vkBeginCommandBuffer(c.cmd, &bi);
  if (r != VK_SUCCESS) {
    free_capture(c);
    return vk_error("vkBeginCommandBuffer", r, core_->id);
  }
  cap_ = std::move(c);
  plain_cmd_ = cmd_;
  cmd_ = cap_.cmd;
  capturing_ = recording_ = true;
  reads_since_barrier_.clear();
  writes_since_barrier_.clear();
  batch_.clear();
  return {};
}

Result<int> Recorder::end_capture() {
  if (!capturing_) return Err(Code::unsupported).device(core_->id).note("no recording was begun");
  Status st = settle();  // the tape (dispatches whose pipelines were being made) played
  if (st.ok()) {
    VkResult r = vkEndCommandBuffer(cmd_);
    if (r != VK_SUCCESS) st = vk_error("vkEndCommandBuffer", r, core_->id);
  }
  cmd_ = plain_cmd_;
  capturing_ = recording_ = false;
  reads_since_barrier_.clear();
  writes_since_barrier_.clear();
  batch_.clear();
  if (!st.ok()) {
    free_capture(cap_);
    return st;
  }
  const int id = next_capture_++;
  captures_.emplace(id, std::move(cap_));
  cap_ = Capture{};
  return id;
}

Status Recorder::replay(int id) {
  auto it = captures_.find(id);
  if (it == captures_.end())
    return Err(Code::not_found)
        .device(core_->id)
        .note("no recording " + std::to_string(id) + " to replay");
  if (capturing_) return Err(Code::internal).device(core_->id).note("replayed while recording");
  DUET_TRY(flush());  // what came before runs first
  Capture& c = it->second;
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &c.cmd;
  VkResult r = vkQueueSubmit(core_->queue, 1, &si, fence_);
  if (r != VK_SUCCESS) return vk_error("vkQueueSubmit", r, core_->id);
  ++submissions;
  r = vkWaitForFences(core_->device, 1, &fence_, VK_TRUE, UINT64_MAX);
  if (r != VK_SUCCESS) return vk_error("vkWaitForFences", r, core_->id);
  vkResetFences(core_->device, 1, &fence_);
  auto* w = reinterpret_cast<uint32_t*>(c.errors.block->mapped + c.errors.offset);
  std::string first;
  for (size_t i = 0; i < c.slots.size(); ++i)
    if (w[2 * i] && first.empty())
      first = c.slots[i].what + ": " + c.slots[i].value_word + " " +
              std::to_string(static_cast<int32_t>(w[2 * i + 1])) + c.slots[i].suffix;
  std::memset(w, 0, c.slots.size() * 8);
  // Reported by the next synchronize(), as a plain batch's errors are.
  if (!first.empty()) deferred_errors_.push_back(std::move(first));
  return {};
}

void Recorder::release(int id) {
  auto it = captures_.find(id);
  if (it == captures_.end()) return;
  free_capture(it->second);
  captures_.erase(it);
}

}  // namespace duet::vulkan
