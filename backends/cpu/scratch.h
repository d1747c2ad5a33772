// Scratch memory of the CPU kernels: buffers sized by an op's inputs (packed GEMM panels, A
// slivers, attention tiles and packed K and V, quantized activations, dense copies of strided
// inputs). Kernels grow them through a Scratch, never by raw std::vector growth: a request the
// machine cannot meet (std::bad_alloc, a size past what a vector holds) is recorded and comes
// back null, the kernel abandons its share of the work, and the CPU device returns status():
// out_of_memory naming the op, the device, the buffer and its bytes. In a build with
// DUET_FAULT_INJECTION every request is an allocation point of the fault sweep
// (duet/internal/fault.h), also one that a warm per-thread buffer already serves, so that the
// sweep reaches each of them whatever ran before. One Scratch per op execution, shared by the
// threads of its parallel regions.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "duet/internal/fault.h"
#include "duet/op.h"
#include "duet/status.h"

namespace duet::cpu {

class Scratch {
 public:
  // `v` with at least max(n, 1) elements (contents unspecified), or null when they cannot be had;
  // `what` names the buffer in the error ("packed B panels").
  template <class T>
  T* grow(std::vector<T>& v, int64_t n, const char* what) {
    const uint64_t count = n > 1 ? static_cast<uint64_t>(n) : 1;
    if (fault::allocation_fails() || count > v.max_size()) return fail(count * sizeof(T), what);
    if (v.size() < count) {
      try {
        v.resize(static_cast<size_t>(count));
      } catch (const std::bad_alloc&) {
        return fail(count * sizeof(T), what);
      } catch (const std::length_error&) {
        return fail(count * sizeof(T), what);
      }
    }
    return v.data();
  }

  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // The first failed request as an error naming `op` and `device`; OK when none failed.
  Status status(const OpDesc& op, const std::string& device) const;

 private:
  std::nullptr_t fail(uint64_t bytes, const char* what);

  std::atomic<bool> failed_{false};
  mutable std::mutex mu_;
  uint64_t bytes_ = 0;
  const char* what_ = "";
};

}  // namespace duet::cpu
