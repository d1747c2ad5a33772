// Device memory: large blocks, each with one VkBuffer, sub-allocated first-fit with coalescing on
// release. One allocation per tensor would exhaust maxMemoryAllocationCount on real drivers and
// costs a kernel call each; blocks do not.
#include "duet/internal/fault.h"
#include "duet/internal/log.h"
#include "vk_internal.h"

namespace duet::vulkan {

uint32_t find_memory_type(const VkPhysicalDeviceMemoryProperties& m, uint32_t type_bits,
                          VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer) {
  uint32_t fallback = UINT32_MAX;
  for (uint32_t i = 0; i < m.memoryTypeCount; ++i) {
    if (!(type_bits & (1u << i))) continue;
    const VkMemoryPropertyFlags f = m.memoryTypes[i].propertyFlags;
    if ((f & want) != want) continue;
    if ((f & prefer) == prefer) return i;
    if (fallback == UINT32_MAX) fallback = i;
  }
  return fallback;
}

Allocator::Allocator(VkDevice device, const PhysicalInfo& info, bool mapped, uint64_t block_size,
                     std::string device_id, bool host_cached)
    : device_(device),
      mapped_(mapped || host_cached),
      block_size_(block_size),
      id_(std::move(device_id)) {
  // The buffer usage is the same for every block, so one probe gives the type bits.
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = 4096;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT |
             VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
             VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  VkBuffer probe_buf = VK_NULL_HANDLE;
  uint32_t bits = ~0u;
  if (vkCreateBuffer(device_, &bi, nullptr, &probe_buf) == VK_SUCCESS) {
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device_, probe_buf, &req);
    bits = req.memoryTypeBits;
    vkDestroyBuffer(device_, probe_buf, nullptr);
  }
  const auto& m = info.memory;
  if (host_cached) {
    const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                       VK_MEMORY_PROPERTY_HOST_COHERENT_BIT |
                                       VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
    for (uint32_t i = 0; i < m.memoryTypeCount; ++i) {
      const VkMemoryPropertyFlags f = m.memoryTypes[i].propertyFlags;
      if (!(bits & (1u << i)) || (f & want) != want) continue;
      if (type_index_ == UINT32_MAX || !(f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)) type_index_ = i;
      if (!(f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)) break;
    }
  } else if (mapped_) {
    type_index_ = find_memory_type(
        m, bits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
        VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  } else {
    type_index_ = find_memory_type(m, bits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  }
  if (type_index_ != UINT32_MAX) flags_ = m.memoryTypes[type_index_].propertyFlags;
  alignment_ = std::max<uint64_t>({256, info.props.limits.minStorageBufferOffsetAlignment,
                                   info.props.limits.nonCoherentAtomSize});
}

Allocator::~Allocator() {
  for (auto& b : blocks_) {
    if (b->mapped) vkUnmapMemory(device_, b->memory);
    vkDestroyBuffer(device_, b->buffer, nullptr);
    vkFreeMemory(device_, b->memory, nullptr);
  }
}

Result<Block*> Allocator::new_block(uint64_t size, bool dedicated) {
  auto fail = [&](const char* call, VkResult r) -> Status {
    return Err(r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY
                   ? Code::out_of_memory
                   : Code::internal)
        .device(id_)
        .note(std::string(call) + " for " + std::to_string(size) +
              " bytes failed: " + vk_result_name(r));
  };
  if (type_index_ == UINT32_MAX)
    return Err(Code::unsupported).device(id_).note("no suitable memory type");
  auto b = std::make_unique<Block>();
  b->size = size;
  b->dedicated = dedicated;
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = size;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT |
             VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
             VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  // Fault injection (tests only) stands for the driver running out of memory at either call.
  VkResult r = fault::allocation_fails() ? VK_ERROR_OUT_OF_DEVICE_MEMORY
                                         : vkCreateBuffer(device_, &bi, nullptr, &b->buffer);
  if (r != VK_SUCCESS) return fail("vkCreateBuffer", r);
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device_, b->buffer, &req);
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = type_index_;
  r = fault::allocation_fails() ? VK_ERROR_OUT_OF_DEVICE_MEMORY
                                : vkAllocateMemory(device_, &ai, nullptr, &b->memory);
  if (r != VK_SUCCESS) {
    vkDestroyBuffer(device_, b->buffer, nullptr);
    return fail("vkAllocateMemory", r);
  }
  r = vkBindBufferMemory(device_, b->buffer, b->memory, 0);
  if (r == VK_SUCCESS && mapped_) {
    void* p = nullptr;
    r = vkMapMemory(device_, b->memory, 0, VK_WHOLE_SIZE, 0, &p);
    b->mapped = static_cast<std::byte*>(p);
  }
  if (r != VK_SUCCESS) {
    vkDestroyBuffer(device_, b->buffer, nullptr);
    vkFreeMemory(device_, b->memory, nullptr);
    return fail("binding or mapping memory", r);
  }
  b->free[0] = size;
  log().debug("{}: new {} memory block of {} MiB", id_, mapped_ ? "mapped" : "device", size >> 20);
  blocks_.push_back(std::move(b));
  return blocks_.back().get();
}

Result<Allocation> Allocator::allocate(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t size =
      std::max<uint64_t>(alignment_, (bytes + alignment_ - 1) / alignment_ * alignment_);
  if (size > block_size_ / 2) {
    // Large tensors get their own block, freed with them.
    DUET_ASSIGN_OR_RETURN(Block * b, new_block(size, true));
    b->free.clear();
    b->used = size;
    return Allocation{b, 0, size};
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (auto& b : blocks_) {
      if (b->dedicated) continue;
      for (auto it = b->free.begin(); it != b->free.end(); ++it) {
        if (it->second < size) continue;
        const uint64_t off = it->first, rest = it->second - size;
        b->free.erase(it);
        if (rest) b->free[off + size] = rest;
        b->used += size;
        return Allocation{b.get(), off, size};
      }
    }
    if (attempt == 0) DUET_TRY(new_block(block_size_, false).status());
  }
  return Err(Code::internal).device(id_).note("allocator found no room in a fresh block");
}

void Allocator::release(const Allocation& a) {
  if (!a.block) return;
  std::lock_guard<std::mutex> lock(mu_);
  Block* b = a.block;
  b->used -= a.size;
  if (b->dedicated || b->used == 0) {
    // Keep one empty shared block for reuse; give dedicated ones back at once.
    size_t empty_shared = 0;
    for (auto& x : blocks_) empty_shared += !x->dedicated && x->used == 0;
    if (b->dedicated || empty_shared > 1) {
      for (auto it = blocks_.begin(); it != blocks_.end(); ++it) {
        if (it->get() != b) continue;
        if (b->mapped) vkUnmapMemory(device_, b->memory);
        vkDestroyBuffer(device_, b->buffer, nullptr);
        vkFreeMemory(device_, b->memory, nullptr);
        blocks_.erase(it);
        return;
      }
    }
  }
  // Insert and coalesce with neighbours.
  auto [it, inserted] = b->free.emplace(a.offset, a.size);
  (void)inserted;
  auto next = std::next(it);
  if (next != b->free.end() && it->first + it->second == next->first) {
    it->second += next->second;
    b->free.erase(next);
  }
  if (it != b->free.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      b->free.erase(it);
    }
  }
}

Core::~Core() {
  allocator.reset();
  if (device) vkDestroyDevice(device, nullptr);
}

}  // namespace duet::vulkan
