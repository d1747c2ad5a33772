// The backend registry: opens every backend the build knows, keeps the devices that opened, and
// remembers, for each backend that did not, why ("no Vulkan loader", "no NVIDIA driver").
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "duet/device.h"
#include "duet/export.h"

namespace duet {

// Options passed to every backend when it opens. Unknown keys are ignored by backends that do
// not use them; each backend documents its own (e.g. "cpu.threads", "vulkan.validation").
struct DUET_API BackendOptions {
  std::map<std::string, std::string> values;
  std::string get(const std::string& key, const std::string& fallback = {}) const;
  int get_int(const std::string& key, int fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
};

struct DUET_API BackendReport {
  std::string backend;             // "cpu", "vulkan", "cuda"
  bool available = false;          // opened with at least one device
  std::string reason;              // why not, when unavailable
  std::vector<std::string> notes;  // e.g. "device 1 skipped: ..."
};

struct DUET_API BackendOpenResult {
  std::vector<std::unique_ptr<Device>> devices;
  std::vector<std::string> notes;
};

struct DUET_API BackendFactory {
  std::string name;
  // Opens the backend; an error Status says why it is unavailable.
  std::function<Result<BackendOpenResult>(const BackendOptions&)> open;
};

class DUET_API Registry {
 public:
  Registry() = default;
  Registry(Registry&&) noexcept = default;
  Registry& operator=(Registry&&) noexcept = default;

  static Registry open(const std::vector<BackendFactory>& factories,
                       const BackendOptions& options = {});

  const std::vector<Device*>& devices() const { return views_; }
  Device* find(std::string_view id) const;  // "cpu:0"; nullptr when absent
  const std::vector<BackendReport>& backends() const { return reports_; }

 private:
  std::vector<std::unique_ptr<Device>> owned_;
  std::vector<Device*> views_;
  std::vector<BackendReport> reports_;
};

}  // namespace duet
