// What the host and the device halves of the DLPack exchange share (dlpack.cpp,
// device_memory.cpp): DLPack's device types and dtypes in duet's words.
#pragma once

#include <optional>
#include <string>

#include <dlpack/dlpack.h>

#include "common.h"

namespace duetpy {

// "CUDA", "CUDA pinned host", ... for messages.
const char* device_type_name(int type);
// Host memory a CPU can read in place: plain and pinned host memory.
bool host_readable(int type);
// duet's dtype of a DLPack dtype (int64 has none: the caller narrows it).
std::optional<duet::DType> dtype_of(const DLDataType& t);
DLDataType dl_dtype(duet::DType t);
std::string dl_type_text(const DLDataType& t);
// Calls the producer's deleter once, with the GIL (a NumPy producer's deleter releases a Python
// reference).
void release(DLManagedTensor* m);

}  // namespace duetpy
