#include "duet/tier.h"

#include <ostream>

namespace duet {

namespace {

struct TierName {
  Tier tier;
  std::string_view name;
};

constexpr TierName kTiers[] = {
    {Tier::reference, "reference"},
    {Tier::simd, "simd"},
    {Tier::generic, "generic"},
    {Tier::tiled, "tiled"},
    {Tier::flash, "flash"},
    {Tier::pipelined, "pipelined"},
    {Tier::register_blocked, "register_blocked"},
    {Tier::cublas, "cublas"},
    {Tier::coopmat, "coopmat"},
    {Tier::int_dot, "int_dot"},
    {Tier::int8_mma, "int8_mma"},
    {Tier::matvec, "matvec"},
    {Tier::wgmma, "wgmma"},
    {Tier::shared_memory, "shared_memory"},
};

constexpr Tier kAll[] = {Tier::reference, Tier::simd,         Tier::generic,          Tier::tiled,
                         Tier::flash,     Tier::pipelined,    Tier::register_blocked, Tier::cublas,
                         Tier::coopmat,   Tier::int_dot,      Tier::int8_mma,         Tier::matvec,
                         Tier::wgmma,     Tier::shared_memory};

}  // namespace

std::string_view tier_name(Tier t) {
  for (const TierName& n : kTiers)
    if (n.tier == t) return n.name;
  return "?";
}

std::ostream& operator<<(std::ostream& os, Tier t) {
  return os << tier_name(t);
}

std::optional<Tier> parse_tier(std::string_view name) {
  for (const TierName& n : kTiers)
    if (n.name == name) return n.tier;
  return std::nullopt;
}

std::span<const Tier> all_tiers() {
  return kAll;
}

std::string tier_names() {
  std::string s;
  for (const TierName& n : kTiers) s += (s.empty() ? "" : ", ") + std::string(n.name);
  return s;
}

std::string renamed_tier(std::string_view old_name) {
  if (old_name == "subgroup")
    return "the Vulkan kernels that keep their outputs in registers and use no subgroup "
           "operations are now 'register_blocked'";
  return {};
}

}  // namespace duet
