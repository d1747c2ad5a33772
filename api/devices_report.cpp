#include "devices_report.h"

#include <algorithm>

#include "duet/internal/caps_json.h"

namespace duet {

std::vector<std::vector<Device*>> shared_gpus(const Registry& reg) {
  std::vector<std::vector<Device*>> groups;
  for (Device* d : reg.devices()) {
    if (!d->caps().uuid || d->caps().type == DeviceType::cpu) continue;
    auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& grp) {
      return grp.front()->caps().uuid == d->caps().uuid;
    });
    if (g == groups.end())
      groups.push_back({d});
    else
      g->push_back(d);
  }
  std::erase_if(groups, [](const auto& g) { return g.size() < 2; });
  return groups;
}

nlohmann::json devices_json(const Registry& reg) {
  nlohmann::json j;
  j["backends"] = nlohmann::json::array();
  for (const BackendReport& r : reg.backends())
    j["backends"].push_back({{"backend", r.backend},
                             {"available", r.available},
                             {"reason", r.reason},
                             {"notes", r.notes}});
  j["devices"] = nlohmann::json::array();
  for (Device* d : reg.devices()) {
    nlohmann::json dj = caps_to_json(d->caps());
    dj["id"] = d->id();
    j["devices"].push_back(dj);
  }
  j["gpus"] = nlohmann::json::array();
  for (const auto& g : shared_gpus(reg)) {
    nlohmann::json ids = nlohmann::json::array();
    for (Device* d : g) ids.push_back(d->id());
    j["gpus"].push_back({{"uuid", caps_to_json(g.front()->caps())["uuid"]}, {"routes", ids}});
  }
  return j;
}

}  // namespace duet
