#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <iostream>

#include <nlohmann/json.hpp>

#include "devices_report.h"
#include "duet/backends.h"
#include "duet/commands.h"
#include "duet/common.h"
#include "duet/profiles.h"
#include "duet/version.h"

namespace duet::cli {

// Named for the command, so that the sources compile together in a unity build.
namespace devices_command {
namespace {

std::string gib(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return b;
}

std::string features(const DeviceCaps& c) {
  std::string s;
  auto add = [&s](bool on, const char* name) {
    if (on) s += (s.empty() ? "" : ", ") + std::string(name);
  };
  add(c.fp16_arith, "fp16 arithmetic");
  add(c.bf16_arith, "bf16 arithmetic");
  add(c.int8_arith, "int8 arithmetic");
  add(c.int_dot, "integer dot product");
  add(c.fp16_storage, "fp16 storage");
  add(c.bf16_storage, "bf16 storage");
  add(c.int8_storage, "int8 storage");
  add(c.tensor_cores, "matrix units");
  add(c.async_copy, "async copy");
  return s.empty() ? "none" : s;
}

std::string host_name() {
  char b[256] = {};
  if (::gethostname(b, sizeof b - 1) != 0 || !*b) return "a machine without a name";
  return "host '" + std::string(b) + "'";
}

std::string today_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%d", &tm);
  return b;
}

std::string routes(const std::vector<Device*>& g) {
  std::string s;
  for (Device* d : g) s += (s.empty() ? "" : " and ") + d->id();
  return s;
}

void print_text(const Registry& reg) {
  std::printf("Backends\n");
  for (const BackendReport& r : reg.backends()) {
    int n = 0;
    for (Device* d : reg.devices()) n += backend_name(d->caps().backend) == r.backend;
    if (r.available)
      std::printf("  %-7s available, %d device%s\n", r.backend.c_str(), n, n == 1 ? "" : "s");
    else
      std::printf("  %-7s unavailable: %s\n", r.backend.c_str(), r.reason.c_str());
    for (const std::string& note : r.notes) std::printf("          note: %s\n", note.c_str());
  }
  for (Device* d : reg.devices()) {
    const DeviceCaps& c = d->caps();
    std::printf("\n%s  %s\n", d->id().c_str(), c.name.c_str());
    std::printf("  type %s, vendor %s, arch %s", std::string(device_type_name(c.type)).c_str(),
                c.vendor.c_str(), c.arch.c_str());
    if (c.cc_major) std::printf(", compute capability %d.%d", c.cc_major, c.cc_minor);
    std::printf("\n  %d compute units, memory %s", c.compute_units, gib(c.memory_bytes).c_str());
    if (c.peak_gflops_f32 > 0) std::printf(", peak f32 %.0f GFLOP/s", c.peak_gflops_f32);
    std::printf("\n  features: %s\n", features(c).c_str());
    if (c.subgroup_size > 1 || c.shared_mem_per_block)
      std::printf("  subgroup %d, shared memory %llu KiB per block, max %u threads per block\n",
                  c.subgroup_size, static_cast<unsigned long long>(c.shared_mem_per_block / 1024),
                  c.max_threads_per_block);
    if (!c.driver_name.empty())
      std::printf("  driver %s %s\n", c.driver_name.c_str(), c.driver_version.c_str());
    for (const auto& [k, v] : c.extra) std::printf("  %s: %s\n", k.c_str(), v.c_str());
  }
  for (const auto& g : shared_gpus(reg))
    std::printf("\none GPU, %zu routes: %s (%s, matched by UUID)\n", g.size(), routes(g).c_str(),
                g.front()->caps().name.c_str());
}

}  // namespace
}  // namespace devices_command

Command add_devices(CLI::App& app) {
  using namespace devices_command;
  auto* sub = app.add_subcommand(
      "devices",
      "List every backend and device with its capabilities, and why any backend is unavailable");
  auto json_out = std::make_shared<bool>(false);
  auto profile_of = std::make_shared<std::string>();
  sub->add_flag("--json", *json_out, "Print JSON instead of text");
  sub->add_option("--profile", *profile_of,
                  "Print device ID's capability record as a profile, which `duet plan "
                  "--profile FILE` and DUET_PROFILES folders read as is");
  auto run = std::make_shared<std::function<int()>>([sub, json_out, profile_of] {
    Registry reg = open_registry();
    if (!profile_of->empty()) {
      auto d = select_devices(reg, {*profile_of});
      if (!d.ok()) return fail(*sub, "--profile: " + d.status().message(), 2);
      DeviceCaps caps = d->front()->caps();
      caps.source = "probed by `duet devices` (duet " + std::string(DUET_VERSION_STRING) + ") on " +
                    host_name() + ", " + today_utc();
      std::cout << profile_json(caps);
      return 0;
    }
    if (*json_out) {
      std::cout << devices_json(reg).dump(2) << "\n";
    } else {
      print_text(reg);
    }
    return 0;
  });
  return {sub, run};
}

}  // namespace duet::cli
