#include "duet/dist/agreement.h"

#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "duet/graph_file.h"

namespace duet::dist {

std::string graph_fingerprint(const Graph& graph) {
  // FNV-1a over the graph file's text: stable across hosts and builds that write the same file.
  uint64_t h = 1469598103934665603ull;
  for (char c : graph_to_json(graph)) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

Status agree_on_start(Transport& transport, std::string_view duet_version,
                      std::string_view fingerprint) {
  // One record per rank: "<version>\n<fingerprint>\n<host>".
  std::string mine = fmt::format("{}\n{}\n{}", duet_version, fingerprint, transport.host());
  auto all = transport.all_gather(mine, "start: agreeing on the duet build and the graph");
  if (!all.ok()) return all.status();
  auto split = [](const std::string& r) {
    std::vector<std::string> parts;
    size_t start = 0;
    for (size_t i = 0; i <= r.size(); ++i)
      if (i == r.size() || r[i] == '\n') {
        parts.push_back(r.substr(start, i - start));
        start = i + 1;
      }
    parts.resize(3);
    return parts;
  };
  const auto first = split((*all)[0]);
  for (size_t r = 1; r < all->size(); ++r) {
    const auto other = split((*all)[r]);
    if (other[0] != first[0])
      return Status(Code::invalid_argument,
                    fmt::format("start: rank {} ({}) runs duet {}, rank 0 ({}) runs duet {}: every "
                                "rank must run the same duet build",
                                r, other[2], other[0], first[2], first[0]));
    if (other[1] != first[1])
      return Status(Code::invalid_argument,
                    fmt::format("start: rank {} ({}) loaded a graph of fingerprint {}, rank 0 ({}) "
                                "one of {}: every rank must load the same model (same file, same "
                                "input shapes)",
                                r, other[2], other[1], first[2], first[1]));
  }
  return Status::ok_status();
}

}  // namespace duet::dist
