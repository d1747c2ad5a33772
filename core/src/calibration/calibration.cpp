// Calibrations as data: families, keys, JSON, and where they are kept (the cache file, a fixed
// file, or nowhere), remembered per device for the life of the process. The measuring is in
// measure.cpp.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "duet/calibration.h"
#include "duet/internal/files.h"
#include "duet/internal/json.h"
#include "duet/internal/log.h"

namespace duet {

using nlohmann::ordered_json;

std::string_view cost_family_name(CostFamily f) {
  switch (f) {
    case CostFamily::matmul:
      return "matmul";
    case CostFamily::attention:
      return "attention";
    case CostFamily::memory:
      return "memory";
  }
  return "?";
}

CostFamily cost_family(OpKind k) {
  if (k == OpKind::matmul) return CostFamily::matmul;
  if (k == OpKind::attention) return CostFamily::attention;
  return CostFamily::memory;
}

const MeasuredRate* Calibration::find(CostFamily f, Tier tier, Precision p) const {
  for (const MeasuredRate& r : rates)
    if (r.family == f && r.tier == tier && r.precision == p) return &r;
  // A Vulkan device measured before its shared-memory kernels were renamed has their rate
  // under 'tiled' (a name no Vulkan kernel has now), and no other device asks for them.
  if (tier == Tier::shared_memory) return find(f, Tier::tiled, p);
  return nullptr;
}

std::string calibration_key(const DeviceCaps& c) {
  std::string k = std::string(backend_name(c.backend)) + "|" + c.name + "|" +
                  std::to_string(c.vendor_id) + ":" + std::to_string(c.device_id) + "|" +
                  c.driver_name + " " + c.driver_version + "|" + std::to_string(c.compute_units) +
                  " units|duet " DUET_CORE_VERSION;
  if (auto isa = c.extra.find("isa"); isa != c.extra.end()) k += "|" + isa->second;
  return k;
}

namespace {

std::optional<CostFamily> parse_family(std::string_view s) {
  for (CostFamily f : {CostFamily::matmul, CostFamily::attention, CostFamily::memory})
    if (cost_family_name(f) == s) return f;
  return std::nullopt;
}

ordered_json to_json(const Calibration& c) {
  ordered_json rates = ordered_json::array();
  for (const MeasuredRate& r : c.rates) {
    ordered_json j = {{"family", cost_family_name(r.family)},
                      {"tier", tier_name(r.tier)},
                      {"precision", precision_name(r.precision)}};
    if (r.gflops > 0) j["gflops"] = r.gflops;
    if (r.gbps > 0) j["gbps"] = r.gbps;
    if (r.efficiency > 0) j["efficiency"] = r.efficiency;
    j["shape"] = r.shape;
    rates.push_back(std::move(j));
  }
  ordered_json j = {{"device", c.device_key},
                    {"measured_at", c.measured_at},
                    {"cost_s", c.cost_s},
                    {"launch_us", c.launch_us},
                    {"rates", rates}};
  if (!c.doubt.empty()) j["not_used"] = c.doubt;
  return j;
}

Result<Calibration> from_json(const ordered_json& j, const std::string& where) {
  auto bad = [&](const std::string& why) { return Status(Code::parse_error, where + ": " + why); };
  if (!j.is_object() || !j.contains("device") || !j["device"].is_string())
    return bad("each calibration needs a \"device\" key (a string)");
  Calibration c;
  c.device_key = j["device"].get<std::string>();
  c.measured_at = j.value("measured_at", "");
  c.cost_s = j.value("cost_s", 0.0);
  c.launch_us = j.value("launch_us", 0.0);
  if (j.contains("not_used") && j["not_used"].is_string())
    c.doubt = j["not_used"].get<std::string>();
  if (!j.contains("rates") || !j["rates"].is_array()) return bad("\"rates\" must be an array");
  for (const auto& r : j["rates"]) {
    if (!r.is_object()) return bad("a rate must be an object");
    MeasuredRate m;
    auto f = parse_family(r.value("family", ""));
    auto p = parse_precision(r.value("precision", ""));
    if (!f)
      return bad("rate family '" + r.value("family", "") +
                 "': expected matmul, attention "
                 "or memory");
    if (!p) return bad("rate precision '" + r.value("precision", "") + "'");
    m.family = *f;
    m.precision = *p;
    const std::string tier = r.value("tier", "");
    auto t = parse_tier(tier);
    if (!t) return bad("rate tier '" + tier + "': expected one of " + tier_names());
    m.tier = *t;
    m.gflops = r.value("gflops", 0.0);
    m.gbps = r.value("gbps", 0.0);
    m.efficiency = r.value("efficiency", 0.0);
    m.shape = r.value("shape", "");
    if (m.gflops < 0 || m.gbps < 0 || (m.gflops == 0 && m.gbps == 0))
      return bad("rate " + tier + ": needs a positive gflops or gbps");
    c.rates.push_back(std::move(m));
  }
  return c;
}

}  // namespace

std::string calibrations_to_json(std::span<const Calibration> cs) {
  ordered_json list = ordered_json::array();
  for (const Calibration& c : cs) list.push_back(to_json(c));
  ordered_json j = {{"format", "duet-calibration"}, {"version", 1}, {"devices", list}};
  return j.dump(1) + "\n";
}

Result<std::vector<Calibration>> calibrations_from_json(std::string_view text,
                                                        std::string_view origin) {
  const std::string where(origin);
  auto parsed = parse_ordered_json(text);
  if (!parsed.ok()) return parsed.status().with_context(where);
  const ordered_json& j = *parsed;
  if (!j.is_object() || j.value("format", "") != "duet-calibration")
    return Status(Code::parse_error, where + ": not a duet calibration file (format)");
  if (j.value("version", 0) != 1)
    return Status(Code::invalid_argument, where + ": calibration format version " +
                                              std::to_string(j.value("version", 0)) +
                                              " (this duet reads version 1)");
  if (!j.contains("devices") || !j["devices"].is_array())
    return Status(Code::parse_error, where + ": \"devices\" must be an array");
  std::vector<Calibration> out;
  for (const auto& d : j["devices"]) {
    DUET_ASSIGN_OR_RETURN(Calibration c, from_json(d, where));
    out.push_back(std::move(c));
  }
  return out;
}

std::string calibration_cache_file() {
  std::string dir;
  if (const char* e = std::getenv("DUET_CACHE_DIR"); e && *e)
    dir = e;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    dir = std::string(x) + "/duet";
  else if (const char* h = std::getenv("HOME"); h && *h)
    dir = std::string(h) + "/.cache/duet";
  return dir.empty() ? std::string() : dir + "/calibration.json";
}

CalibrationSettings CalibrationSettings::from_env() {
  CalibrationSettings s;
  const char* e = std::getenv("DUET_CALIBRATION");
  const std::string v = e ? e : "";
  if (v == "off") {
    s.mode = off;
  } else if (v.empty() || v == "auto" || v == "refresh") {
    s.mode = v == "refresh" ? refresh : cached;
    s.file = calibration_cache_file();
  } else {
    s.mode = fixed;
    s.file = v;
  }
  return s;
}

namespace {

Result<std::vector<Calibration>> read_file(const std::string& path) {
  // A regular file of at most 16 MiB: a fifo named by DUET_CALIBRATION is refused, not waited on.
  auto text = read_whole_file(path, kCalibrationMaxBytes, "calibration file");
  if (!text.ok()) return text.status();
  return calibrations_from_json(*text, "calibration file '" + path + "'");
}

// Adds or replaces `c` in the cache file: written beside it and renamed, so that a reader never
// sees half a file and two processes at worst lose one entry (measured again later).
Status write_cache(const std::string& path, const Calibration& c) {
  std::vector<Calibration> all;
  if (auto old = read_file(path); old.ok()) all = std::move(*old);
  std::erase_if(all, [&](const Calibration& x) { return x.device_key == c.device_key; });
  all.push_back(c);
  for (Calibration& x : all) x.source.clear();
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (Status s = write_file_atomically(path, calibrations_to_json(all)); !s.ok())
    return s.with_context("calibration cache");
  return {};
}

std::optional<Calibration> find_key(const std::vector<Calibration>& all, const std::string& key) {
  for (const Calibration& c : all)
    if (c.device_key == key) return c;
  return std::nullopt;
}

// A stored measurement that was doubted is not used: the planner takes the peaks, and the entry
// says why (a device whose kernels always run far from its peaks, lavapipe, is not measured
// again by every process; DUET_CALIBRATION=refresh measures again).
Calibration usable(const Calibration& stored, const std::string& from) {
  if (stored.doubt.empty()) {
    Calibration c = stored;
    c.source = from;
    return c;
  }
  Calibration c;
  c.device_key = stored.device_key;
  c.measured_at = stored.measured_at;
  c.doubt = stored.doubt;
  c.source = from + ": measured " + stored.measured_at + " but not used: " + stored.doubt +
             "; estimates from peaks (DUET_CALIBRATION=refresh measures again)";
  return c;
}

}  // namespace

std::vector<Calibration> calibrations_for(std::span<Device* const> devices,
                                          const CalibrationSettings& settings) {
  static std::mutex m;
  static std::map<std::string, Calibration> remembered;  // per mode, file and device key
  std::lock_guard<std::mutex> g(m);
  std::vector<Calibration> out(devices.size());
  std::vector<std::string> memo(devices.size());
  std::vector<Device*> missing;
  std::vector<size_t> missing_at;
  std::optional<std::vector<Calibration>> file;
  for (size_t i = 0; i < devices.size(); ++i) {
    const std::string key = calibration_key(devices[i]->caps());
    memo[i] = std::to_string(settings.mode) + "|" + settings.file + "|" + key;
    if (auto it = remembered.find(memo[i]); it != remembered.end()) {
      out[i] = it->second;
      continue;
    }
    if (settings.mode == CalibrationSettings::off) {
      out[i].source = "off (DUET_CALIBRATION=off): estimates from peaks";
    } else if (settings.mode == CalibrationSettings::fixed) {
      auto all = read_file(settings.file);
      if (!all.ok()) {
        log().warn("{}; estimates from peaks", all.status().message());
        out[i].source = all.status().message();
      } else if (auto c = find_key(*all, key)) {
        out[i] = usable(*c, "fixed " + settings.file);
      } else {
        out[i].source = "fixed " + settings.file + " has no entry for this device";
      }
    } else {
      if (settings.mode == CalibrationSettings::cached && !settings.file.empty() && !file)
        if (auto all = read_file(settings.file); all.ok()) file = std::move(*all);
      std::optional<Calibration> cached;
      if (file) cached = find_key(*file, key);
      if (cached) {
        out[i] = usable(*cached, "cache " + settings.file);
      } else {
        missing.push_back(devices[i]);
        missing_at.push_back(i);
        continue;
      }
    }
    remembered[memo[i]] = out[i];
  }
  if (missing.empty()) return out;

  auto measured = calibrate(missing);
  for (size_t k = 0; k < missing.size(); ++k) {
    const size_t i = missing_at[k];
    Calibration& c = out[i];
    if (!measured.ok()) {
      log().warn("{}: calibration failed, estimates from peaks: {}", missing[k]->id(),
                 measured.status().message());
      c.source = "calibration failed: " + measured.status().message();
    } else if (!(*measured)[k].doubt.empty()) {
      // Cached with its doubt, so that the next process does not measure (and compile) again.
      const Calibration& doubted = (*measured)[k];
      log().info("{}: calibration not used: {}", missing[k]->id(), doubted.doubt);
      if (!settings.file.empty())
        if (Status s = write_cache(settings.file, doubted); !s.ok()) log().warn("{}", s.message());
      c = usable(doubted, "measured now");
      c.source += settings.file.empty() ? std::string(" (no cache folder)")
                                        : "; cached as not used in " + settings.file;
    } else {
      c = std::move((*measured)[k]);
      log().info("{}: calibrated in {:.2f} s", missing[k]->id(), c.cost_s);
      if (!settings.file.empty())
        if (Status s = write_cache(settings.file, c); !s.ok()) log().warn("{}", s.message());
      c.source = "measured now" + (settings.file.empty() ? std::string(" (no cache folder)")
                                                         : ", cached in " + settings.file);
    }
    remembered[memo[i]] = c;
  }
  return out;
}

Calibration calibration_for(Device& device, const CalibrationSettings& settings) {
  Device* d = &device;
  return calibrations_for(std::span<Device* const>(&d, 1), settings)[0];
}

}  // namespace duet
