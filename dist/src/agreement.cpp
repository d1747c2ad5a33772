#include "duet/dist/agreement.h"

#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "duet/graph_file.h"

namespace duet::dist {

namespace {
// Every refusal begins so (refused_at_start); the transport's own errors begin with "rank N".
constexpr std::string_view kRefusal = "start refused: ";
}  // namespace

std::string graph_fingerprint(const Graph& graph) {
  // FNV-1a over the graph file's text: stable across hosts and builds that write the same file.
  uint64_t h = 1469598103934665603ull;
  for (char c : graph_to_json(graph)) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

Status agree_on_start(Transport& transport, const BuildIdentity& build,
                      std::string_view fingerprint) {
  // One record per rank: "<build>\n<fingerprint>\n<host>". An older duet sent its version alone
  // in the first line: it parses as no build identity, and is refused as another build.
  std::string mine = fmt::format("{}\n{}\n{}", build.serialize(), fingerprint, transport.host());
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
  auto describe = [](const std::optional<BuildIdentity>& b, const std::string& raw) {
    return b ? b->text() : "duet " + raw + " (a build that does not send its identity)";
  };
  const auto first = split((*all)[0]);
  const auto first_build = BuildIdentity::parse(first[0]);
  for (size_t r = 1; r < all->size(); ++r) {
    const auto other = split((*all)[r]);
    const auto other_build = BuildIdentity::parse(other[0]);
    std::string differs;
    if (!first_build || !other_build)
      differs = other[0] == first[0] ? "" : "the build";
    else
      differs = first_build->difference(*other_build);
    if (!differs.empty())
      return Status(Code::invalid_argument,
                    fmt::format("{}rank {} ({}) runs {}; rank 0 ({}) runs {}: {} differ{}, and "
                                "every rank must run the same duet build",
                                kRefusal, r, other[2], describe(other_build, other[0]), first[2],
                                describe(first_build, first[0]), differs,
                                differs.find(" and ") == std::string::npos ? "s" : ""));
    if (other[1] != first[1])
      return Status(Code::invalid_argument,
                    fmt::format("{}rank {} ({}) loaded a graph of fingerprint {}, rank 0 ({}) "
                                "one of {}: every rank must load the same model (same file, same "
                                "input shapes)",
                                kRefusal, r, other[2], other[1], first[2], first[1]));
  }
  return Status::ok_status();
}

bool refused_at_start(const Status& s) {
  return s.code() == Code::invalid_argument && s.message().rfind(kRefusal, 0) == 0;
}

}  // namespace duet::dist
