// Fuzz target: the ONNX importer, from a serialised ModelProto to a graph (external data files
// are never opened: the base folder does not exist). Values evaluated at import get a budget of
// 64 MiB, so that a fold which allocates past its budget shows under -malloc_limit_mb=128.
#include <cstddef>
#include <cstdint>
#include <span>

#include "duet/graph_file.h"
#include "duet/onnx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  duet::OnnxOptions o;
  o.load_constants = true;
  o.memory_budget = 64 << 20;
  auto g = duet::import_onnx(std::span(reinterpret_cast<const std::byte*>(data), size),
                             "/nonexistent", "fuzz", o);
  if (g.ok()) (void)duet::graph_to_json(*g);
  return 0;
}
