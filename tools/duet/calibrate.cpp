// duet calibrate: the measured rates the planner ranks this machine's devices by, where they are
// cached, and measuring them again (--refresh) or saving them as a fixed calibration (--save).
#include <chrono>
#include <cstdio>
#include <iostream>

#include "duet/backends.h"
#include "duet/calibration.h"
#include "duet/commands.h"
#include "duet/common.h"

namespace duet::cli {

// Named for the command, so that the sources compile together in a unity build.
namespace calibrate_command {
namespace {

struct Options {
  std::vector<std::string> devices;
  bool refresh = false;
  std::string save;
};

std::string rates_text(const Calibration& c) {
  std::string s;
  char b[160];
  std::snprintf(b, sizeof b, "  launch %.1f us\n", c.launch_us);
  s += b;
  for (const MeasuredRate& r : c.rates) {
    std::snprintf(
        b, sizeof b, "  %-9s %-8s %-4s %8.1f %-7s  (%s)\n",
        std::string(cost_family_name(r.family)).c_str(), std::string(tier_name(r.tier)).c_str(),
        std::string(precision_name(r.precision)).c_str(), r.gflops > 0 ? r.gflops : r.gbps,
        r.gflops > 0 ? "GFLOP/s" : "GB/s", r.shape.c_str());
    s += b;
  }
  return s;
}

int run_calibrate(const CLI::App& cmd, const Options& o) {
  CalibrationSettings settings = CalibrationSettings::from_env();
  if (o.refresh) {
    if (settings.mode == CalibrationSettings::fixed || settings.mode == CalibrationSettings::off)
      settings.file = calibration_cache_file();
    settings.mode = CalibrationSettings::refresh;
  }
  Registry reg = open_registry();
  auto devices = select_devices(reg, split_list(o.devices));
  if (!devices.ok()) return fail(cmd, devices.status().message(), 2);
  std::printf("calibration: %s\n", settings.mode == CalibrationSettings::off
                                       ? "off (DUET_CALIBRATION=off)"
                                   : settings.mode == CalibrationSettings::fixed
                                       ? ("fixed file " + settings.file).c_str()
                                   : settings.file.empty() ? "not cached (no cache folder)"
                                                           : ("cache " + settings.file).c_str());
  // Together, so that devices measured now take turns (docs/planner.md, "Calibration").
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Calibration> got = calibrations_for(*devices, settings);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<Calibration> all;
  for (size_t i = 0; i < devices->size(); ++i) {
    const Device* d = (*devices)[i];
    Calibration& c = got[i];
    std::printf("\n%s  %s\n  key: %s\n  source: %s", d->id().c_str(), d->caps().name.c_str(),
                calibration_key(d->caps()).c_str(), c.source.c_str());
    if (!c.empty())
      std::printf(", measured %s in %.2f s\n%s", c.measured_at.c_str(), c.cost_s,
                  rates_text(c).c_str());
    else
      std::printf("\n");
    if (!c.empty()) all.push_back(std::move(c));
  }
  std::printf("\n(this call: %.2f s)\n", s);
  if (!o.save.empty()) {
    if (Status st = write_file_atomically(o.save, calibrations_to_json(all)); !st.ok())
      return fail(cmd, st.message(), 1);
    std::printf("\nsaved to %s (plan with it: DUET_CALIBRATION=%s)\n", o.save.c_str(),
                o.save.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace calibrate_command

Command add_calibrate(CLI::App& app) {
  using namespace calibrate_command;
  auto* sub = app.add_subcommand(
      "calibrate",
      "Show the measured rates the planner ranks this machine's devices by (measuring what the "
      "cache lacks), measure them again (--refresh) or save them as a fixed calibration");
  auto o = std::make_shared<Options>();
  sub->add_option("--device", o->devices, "Only these devices (e.g. vulkan:0; comma-separated)");
  sub->add_flag("--refresh", o->refresh,
                "Measure again and rewrite the cache (after a driver or duet update the cache "
                "is not used: the key changes)");
  sub->add_option("--save", o->save,
                  "Also write the calibrations to this file, for DUET_CALIBRATION=FILE");
  auto run = std::make_shared<std::function<int()>>([sub, o] { return run_calibrate(*sub, *o); });
  return {sub, run};
}

}  // namespace duet::cli
