// Fuzz target: the safetensors reader. Every tensor of a file that parses is read; the tensors
// duet has are written again, and the written file must read back to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include "duet/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = duet::parse_safetensors(std::span(reinterpret_cast<const std::byte*>(data), size));
  if (!f.ok()) return 0;
  std::vector<std::pair<std::string, duet::HostTensor>> read;
  for (const duet::SafetensorsEntry& e : f->tensors) {
    auto t = f->tensor(e.name);
    if (t.ok()) read.emplace_back(e.name, std::move(*t));
  }
  auto bytes = duet::encode_safetensors(read, f->metadata);
  if (!bytes.ok()) return 0;  // e.g. a name the writer refuses
  auto back = duet::parse_safetensors(*bytes);
  if (!back.ok()) {
    std::fprintf(stderr, "a written file does not read back: %s\n",
                 back.status().message().c_str());
    std::abort();
  }
  for (const auto& [name, t] : read) {
    auto u = back->tensor(name);
    if (!u.ok() || u->desc().str() != t.desc().str() ||
        std::memcmp(u->data<std::byte>(), t.data<std::byte>(),
                    static_cast<size_t>(t.desc().nbytes())) != 0) {
      std::fprintf(stderr, "tensor '%s' differs after a write and a read\n", name.c_str());
      std::abort();
    }
  }
  return 0;
}
