// Fuzz target: the duet-graph JSON reader. Property: a graph that reads writes a text that reads
// back to a graph writing the same text (text -> graph -> text is a fixed point after one step).
// Constants' files are never opened (load_constants = false), so an input cannot make the
// harness read the machine's files. The parsed document gets a budget of 64 MiB (a campaign's
// -malloc_limit_mb=128 shows an allocation past it).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "duet/graph_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  duet::GraphLoadOptions o;
  o.load_constants = false;
  o.memory_budget = 64 << 20;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto g = duet::graph_from_json(text, "/nonexistent", o);
  if (!g.ok()) return 0;
  const std::string once = duet::graph_to_json(*g);
  auto again = duet::graph_from_json(once, "/nonexistent", o);
  if (!again.ok()) {
    std::fprintf(stderr, "a written graph does not read back: %s\n%s\n",
                 again.status().message().c_str(), once.c_str());
    std::abort();
  }
  const std::string twice = duet::graph_to_json(*again);
  if (twice != once) {
    std::fprintf(stderr, "text -> graph -> text differs:\n%s\n---\n%s\n", once.c_str(),
                 twice.c_str());
    std::abort();
  }
  return 0;
}
