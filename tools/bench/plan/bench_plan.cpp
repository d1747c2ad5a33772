// duet_bench_plan: the planner's time on chains of element-wise nodes of growing length, on one
// device and split over two under a memory budget (a benchmark, never a test).
//
//   build/tools/duet_bench_plan [--rounds 3]
//
// Planning should grow linearly with the node count (docs/planner.md); each row gives the median
// of the rounds and microseconds per node, so a quadratic step shows as a per-node time that grows
// with the length.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "duet/builtin_engine.h"
#include "duet/graph.h"
#include "duet/planner.h"
#include "duet/policy.h"

namespace duet {
namespace {

Graph chain(int nodes) {
  GraphBuilder b("chain");
  ValueId x = b.input("x", DType::f32, {1024});
  for (int i = 0; i < nodes; ++i) x = b.relu(x, "r" + std::to_string(i));
  b.output(x);
  return std::move(*b.build());
}

int run(int rounds) {
  const std::vector<std::string> one = {"a100"}, two = {"a100", "a100"};
  auto budget = parse_policy("budget=1MiB", {}, "bench");
  if (!budget.ok()) return std::fprintf(stderr, "%s\n", budget.status().message().c_str()), 1;
  std::printf("%-9s %-26s %12s %12s\n", "nodes", "devices", "plan ms", "us/node");
  for (int n : {1000, 10000, 100000, 200000}) {
    const Graph g = chain(n);
    for (int split = 0; split < 2; ++split) {
      auto devices = profile_devices(split ? two : one);
      if (!devices.ok()) return std::fprintf(stderr, "%s\n", devices.status().message().c_str()), 1;
      std::vector<double> ms;
      for (int r = 0; r < rounds; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        auto p = make_plan(g, *devices, split ? *budget : Policy{});
        const auto t1 = std::chrono::steady_clock::now();
        if (!p.ok()) return std::fprintf(stderr, "%s\n", p.status().message().c_str()), 1;
        ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
      std::sort(ms.begin(), ms.end());
      const double med = ms[ms.size() / 2];
      std::printf("%-9d %-26s %12.1f %12.2f\n", n, split ? "2 x a100, budget=1MiB" : "1 x a100",
                  med, 1000.0 * med / n);
    }
  }
  return 0;
}

}  // namespace
}  // namespace duet

int main(int argc, char** argv) {
  CLI::App app{"duet_bench_plan: planning time against graph length"};
  int rounds = 3;
  app.add_option("--rounds", rounds, "timed plans per row (the median is shown)")
      ->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  return duet::run(rounds);
}
