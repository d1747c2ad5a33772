#include "duet/registry.h"

#include <exception>

#include "duet/internal/log.h"

namespace duet {

std::string BackendOptions::get(const std::string& key, const std::string& fallback) const {
  auto it = values.find(key);
  return it == values.end() ? fallback : it->second;
}

int BackendOptions::get_int(const std::string& key, int fallback) const {
  auto it = values.find(key);
  if (it == values.end()) return fallback;
  try {
    return std::stoi(it->second);
  } catch (const std::exception&) {
    log().warn("option {}={} is not an integer; using {}", key, it->second, fallback);
    return fallback;
  }
}

bool BackendOptions::get_bool(const std::string& key, bool fallback) const {
  auto it = values.find(key);
  if (it == values.end()) return fallback;
  const std::string& v = it->second;
  if (v == "1" || v == "true" || v == "on" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "off" || v == "no") return false;
  log().warn("option {}={} is not a boolean; using {}", key, v, fallback);
  return fallback;
}

Registry Registry::open(const std::vector<BackendFactory>& factories,
                        const BackendOptions& options) {
  Registry r;
  for (const BackendFactory& f : factories) {
    BackendReport report;
    report.backend = f.name;
    Result<BackendOpenResult> opened = Status(Code::internal, "backend factory threw");
    try {
      opened = f.open(options);
    } catch (const std::exception& e) {
      opened = Status(Code::internal, std::string("backend threw while opening: ") + e.what());
    }
    if (!opened.ok()) {
      report.reason = opened.status().message();
      log().info("backend {} unavailable: {}", f.name, report.reason);
    } else {
      report.notes = std::move(opened->notes);
      if (opened->devices.empty()) {
        report.reason = "no device";
      } else {
        report.available = true;
        for (auto& d : opened->devices) {
          log().info("device {}: {}", d->id(), d->caps().name);
          r.views_.push_back(d.get());
          r.owned_.push_back(std::move(d));
        }
      }
    }
    r.reports_.push_back(std::move(report));
  }
  return r;
}

Device* Registry::find(std::string_view id) const {
  for (Device* d : views_)
    if (d->id() == id) return d;
  return nullptr;
}

}  // namespace duet
