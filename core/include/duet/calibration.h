// Calibration: what a present device really does. A short run of the main kernel families
// (matmul, attention, an element-wise op, and an empty-sized op for the launch cost) measures
// each device's throughput, so that the planner's cost model ranks devices by measured speed
// rather than by datasheet peaks. Results are cached per device, driver and duet version (like
// the Vulkan pipeline cache) and measured again when any of them changes. Profiles are never
// calibrated: their estimates come from their peaks. docs/planner.md, "Calibration".
//
//   DUET_CALIBRATION        unset: use the cache, measure what it lacks (the default)
//                           off: no measurement, estimates from peaks only
//                           refresh: measure again once in this process and rewrite the cache
//                           FILE.json: a fixed calibration (written by `duet calibrate --save`),
//                           never measured nor rewritten: reproducible plans, tests
//   cache folder            $DUET_CACHE_DIR, else $XDG_CACHE_HOME/duet, else ~/.cache/duet
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "duet/device.h"
#include "duet/export.h"
#include "duet/status.h"
#include "duet/tier.h"

namespace duet {

// The kernel families the cost model and the calibration know. Every op belongs to one:
// contractions by their flops, the rest (element-wise, rows, data movement) by their bytes.
enum class CostFamily : uint8_t { matmul, attention, memory };
DUET_API std::string_view cost_family_name(CostFamily f);
DUET_API CostFamily cost_family(OpKind k);

// One measured rate: a kernel tier at a precision on the family's calibration shape.
struct DUET_API MeasuredRate {
  CostFamily family = CostFamily::memory;
  Tier tier = Tier::reference;
  Precision precision = Precision::f32;
  double gflops = 0;  // matmul, attention: useful flops per second (op_flops), launch excluded
  double gbps = 0;    // memory: bytes read and written per second (op_bytes), launch excluded
  std::string shape;  // what was measured, for explain: "f16[256,512] x f16[512,512]"
  // The measured kernel's efficiency class (KernelChoice::efficiency), to scale the rate to
  // another kernel of the family; 0 where unknown (a calibration of an older duet).
  double efficiency = 0;
  bool operator==(const MeasuredRate&) const = default;
};

struct DUET_API Calibration {
  std::string device_key;  // device, driver and duet version it belongs to (calibration_key)
  double launch_us = 0;    // a tiny kernel, from its start until the device finished it
  std::vector<MeasuredRate> rates;
  std::string measured_at;  // UTC time of the measurement
  double cost_s = 0;        // how long measuring took (pipeline compilation included)
  std::string source;       // "measured now", "cache <file>", "fixed <file>" (set when loaded)
  // Why the measurement looks disturbed ("" when it does not). Kept in the cache (JSON
  // "not_used") so that later processes do not measure again; a calibration with a doubt is never
  // used for estimates.
  std::string doubt;

  bool empty() const { return rates.empty() && launch_us <= 0; }
  // The rate of exactly this family, tier and precision (nullptr when not measured).
  const MeasuredRate* find(CostFamily f, Tier tier, Precision p) const;
  bool operator==(const Calibration& o) const {
    return device_key == o.device_key && launch_us == o.launch_us && rates == o.rates &&
           measured_at == o.measured_at && cost_s == o.cost_s;
  }
};

// The key a calibration is cached under: backend, device name and ids, driver name and version,
// compute units (threads for CPU devices), and duet's version. A driver update changes it.
DUET_API std::string calibration_key(const DeviceCaps& caps);

// Measures devices now, together: they take turns round after round and each keeps its best
// runs, so load from other work slows them alike and their ranking holds on a busy machine
// (about 0.5 s, plus on lavapipe the first compilation of each kernel's pipeline). Uses the
// devices through Executors, so it is safe beside engines that share them. A kernel far slower
// than the device's peaks allow sets `doubt`.
DUET_API Result<std::vector<Calibration>> calibrate(std::span<Device* const> devices);
DUET_API Result<Calibration> calibrate(Device& device);

// JSON of calibrations (one per device key), as cached and as `duet calibrate --save` writes.
DUET_API std::string calibrations_to_json(std::span<const Calibration> c);
DUET_API Result<std::vector<Calibration>> calibrations_from_json(std::string_view text,
                                                                 std::string_view origin);

// How this process calibrates (from DUET_CALIBRATION): the mode and where the cache lives.
struct DUET_API CalibrationSettings {
  enum Mode : uint8_t { cached, off, refresh, fixed };
  Mode mode = cached;
  std::string file;  // fixed: the file; cached/refresh: the cache file
  static CalibrationSettings from_env();
};
// The cache file for a process without DUET_CALIBRATION ("" when no cache folder is known).
DUET_API std::string calibration_cache_file();

// The calibrations of `devices` under `settings`: from the fixed file, from the cache, or
// measured now (those the cache lacks, together) and added to the cache. Remembered for the rest
// of the process (per device key), so an engine re-planning never measures twice. An empty
// calibration (with `source` saying why) when calibration is off or failed, or the measurement
// looked disturbed (cached as such, so that the next process does not measure again; refresh
// does): the planner then uses peaks.
DUET_API std::vector<Calibration> calibrations_for(
    std::span<Device* const> devices,
    const CalibrationSettings& settings = CalibrationSettings::from_env());
DUET_API Calibration calibration_for(
    Device& device, const CalibrationSettings& settings = CalibrationSettings::from_env());

}  // namespace duet
