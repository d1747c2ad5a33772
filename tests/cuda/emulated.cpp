#include "emulated.h"

#include <utility>
#include <vector>

#include "fake_driver.h"

namespace duet::cuda::testing {

namespace {

std::vector<std::string> split(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    const size_t comma = s.find(',');
    if (std::string_view item = s.substr(0, comma); !item.empty()) out.emplace_back(item);
    s = comma == std::string_view::npos ? std::string_view{} : s.substr(comma + 1);
  }
  return out;
}

// Each card on its own fake driver, named for the card.
Result<BackendOpenResult> open_card(std::string_view name, DeviceOptions options) {
  DUET_ASSIGN_OR_RETURN(DeviceProps props, card(name));
  auto driver = std::make_shared<FakeDriver>(std::vector<DeviceProps>{props});
  driver->blas = "unavailable: an emulated device has no cuBLASLt";
  options.id_prefix = "emu-" + std::string(name);
  return open_backend(driver, emulated_build(), options);
}

}  // namespace

Result<DeviceProps> card(std::string_view name) {
  const std::pair<std::string_view, DeviceProps (*)()> catalog[] = {
      {"v100", v100},       {"t4", t4},           {"rtx2080ti", rtx2080ti},
      {"gtx1660", gtx1660}, {"mx450", mx450},     {"gtx1060", gtx1060},
      {"a100", a100},       {"rtx3090", rtx3090}, {"jetson-orin-nano", jetson_orin_nano},
      {"rtx4090", rtx4090}, {"h100", h100},       {"h100-4sm", h100_4sm},
      {"rtx5090", rtx5090},
  };
  std::string names;
  for (const auto& [n, make] : catalog) {
    if (n == name) return make();
    names += (names.empty() ? "" : ", ") + std::string(n);
  }
  return Status(Code::invalid_argument,
                "no emulated card '" + std::string(name) + "' (the cards: " + names + ")");
}

BuildArchs emulated_build() {
  return parse_build_archs("61;75;80;86;87;88;89;90;90a;120", "120");
}

BackendFactory emulated_factory() {
  return {"cuda-emulated", [](const BackendOptions& o) -> Result<BackendOpenResult> {
            const std::vector<std::string> cards = split(o.get(kEmulateOption));
            if (cards.empty())
              return Status(Code::unsupported,
                            std::string("no card to emulate (") + kEmulateOption + ")");
            BackendOpenResult all;
            for (const std::string& c : cards) {
              DUET_ASSIGN_OR_RETURN(BackendOpenResult one, open_card(c, DeviceOptions::from(o)));
              for (auto& d : one.devices) all.devices.push_back(std::move(d));
              for (auto& n : one.notes) all.notes.push_back(std::move(n));
            }
            return all;
          }};
}

std::unique_ptr<CudaDevice> open_emulated(std::string_view card_name) {
  Result<BackendOpenResult> r = open_card(card_name, {});
  if (!r.ok() || r->devices.size() != 1) return nullptr;
  return std::unique_ptr<CudaDevice>(static_cast<CudaDevice*>(r->devices.front().release()));
}

}  // namespace duet::cuda::testing
