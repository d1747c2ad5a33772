// DLPack 1.0's versioned managed tensor, for builds whose dlpack/dlpack.h predates it (Debian 12
// ships 0.6). Written from the DLPack 1.0 ABI: a version pair, the manager's context, its deleter,
// a word of flags, then the DLTensor of earlier versions, unchanged. A header of 1.0 or later
// defines the same struct itself (DLPACK_MAJOR_VERSION), and duet uses that one.
#pragma once

#include <cstddef>
#include <cstdint>

#include <dlpack/dlpack.h>

namespace duetpy {

#if defined(DLPACK_MAJOR_VERSION) && DLPACK_MAJOR_VERSION >= 1
using DLManagedTensorVersioned = ::DLManagedTensorVersioned;
using DLPackVersion = ::DLPackVersion;
#else
struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};
struct DLManagedTensorVersioned {
  // Always first, in every major version: a consumer reads it before anything else.
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};
#endif

// The version duet makes and reads (a consumer may read any minor version of this major one).
constexpr uint32_t kDLPackMajor = 1;
constexpr uint32_t kDLPackMinor = 0;
// The flags' bits (DLPack 1.0): the consumer must not write the memory; the producer copied it
// for this export.
constexpr uint64_t kDLPackReadOnly = uint64_t{1} << 0;
constexpr uint64_t kDLPackIsCopied = uint64_t{1} << 1;

// The capsule names of the Python protocol: an unconsumed capsule, and one a consumer took.
constexpr const char* kCapsuleVersioned = "dltensor_versioned";
constexpr const char* kCapsuleVersionedUsed = "used_dltensor_versioned";
constexpr const char* kCapsuleLegacy = "dltensor";
constexpr const char* kCapsuleLegacyUsed = "used_dltensor";

// The ABI, as every producer and consumer of 1.0 lays it out on a 64-bit machine.
static_assert(sizeof(void*) != 8 || (offsetof(DLManagedTensorVersioned, manager_ctx) == 8 &&
                                     offsetof(DLManagedTensorVersioned, deleter) == 16 &&
                                     offsetof(DLManagedTensorVersioned, flags) == 24 &&
                                     offsetof(DLManagedTensorVersioned, dl_tensor) == 32),
              "DLManagedTensorVersioned does not have DLPack 1.0's layout");

}  // namespace duetpy
