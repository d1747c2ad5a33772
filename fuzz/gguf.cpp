// Fuzz target: the GGUF reader: the header, every metadata value and every tensor of a buffer.
#include <cstddef>
#include <cstdint>
#include <span>

#include "duet/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = duet::parse_gguf(std::span(reinterpret_cast<const std::byte*>(data), size));
  if (!f.ok()) return 0;
  for (const duet::GgufTensorInfo& t : f->tensors) {
    (void)f->tensor_bytes(t);
    auto h = f->tensor(t.name);
    if (h.ok()) (void)h->to_doubles();
  }
  return 0;
}
