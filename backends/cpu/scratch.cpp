#include "scratch.h"

namespace duet::cpu {

std::nullptr_t Scratch::fail(uint64_t bytes, const char* what) {
  std::lock_guard<std::mutex> g(mu_);
  if (!failed_.load(std::memory_order_relaxed)) {
    bytes_ = bytes;
    what_ = what;
    failed_.store(true, std::memory_order_release);
  }
  return nullptr;
}

Status Scratch::status(const OpDesc& op, const std::string& device) const {
  if (!failed()) return {};
  std::lock_guard<std::mutex> g(mu_);
  return Err(Code::out_of_memory)
      .op(op_name(op.kind), op.name)
      .device(device)
      .note("out of host memory: allocating " + std::to_string(bytes_) + " bytes of scratch for " +
            what_ + " failed");
}

}  // namespace duet::cpu
