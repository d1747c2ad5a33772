// Engines and planner devices with the built-in backends: rules for profiles, this machine's
// devices for engines.
#include <map>
#include <mutex>

#include "duet/backends.h"
#include "duet/builtin_engine.h"
#include "duet/profiles.h"

namespace duet {

std::vector<PlanDevice> profile_devices(std::span<const DeviceCaps> caps,
                                        std::span<const std::string> labels) {
  std::map<BackendKind, int> next;
  std::vector<PlanDevice> out;
  for (size_t i = 0; i < caps.size(); ++i) {
    const DeviceCaps& c = caps[i];
    PlanDevice d;
    d.id = std::string(backend_name(c.backend)) + ":" + std::to_string(next[c.backend]++);
    d.caps = c;
    d.rules = &builtin_rules(c.backend);
    d.rules->annotate_profile(d.caps);
    d.label = i < labels.size() ? labels[i] : c.name;
    out.push_back(std::move(d));
  }
  return out;
}

Result<std::vector<PlanDevice>> profile_devices(std::span<const std::string> names) {
  std::vector<DeviceCaps> caps;
  std::vector<std::string> labels;
  for (const std::string& n : names) {
    DUET_ASSIGN_OR_RETURN(DeviceCaps c, load_profile(n));
    caps.push_back(std::move(c));
    labels.push_back(n);
  }
  return profile_devices(caps, labels);
}

Result<std::vector<PlanDevice>> profile_devices(std::initializer_list<std::string_view> names) {
  const std::vector<std::string> list(names.begin(), names.end());
  return profile_devices(std::span<const std::string>(list));
}

std::shared_ptr<Registry> shared_registry(const BackendOptions& options) {
  // Never destroyed: at exit, drivers loaded with dlopen may already be finalised, and tearing
  // devices down after them crashes or leaks inside the driver. The OS reclaims everything.
  static std::mutex m;
  static auto* r = new std::shared_ptr<Registry>();
  std::lock_guard<std::mutex> g(m);
  if (!*r) *r = std::make_shared<Registry>(open_registry(options));
  return *r;
}

Result<std::unique_ptr<Engine>> open_engine(Graph graph, std::optional<Policy> policy) {
  if (!policy) {
    DUET_ASSIGN_OR_RETURN(policy, policy_from_env());
  }
  std::shared_ptr<Registry> r = shared_registry();
  return Engine::create(std::move(graph), r->devices(), std::move(*policy), r);
}

}  // namespace duet
