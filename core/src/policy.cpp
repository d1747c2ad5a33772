#include "duet/policy.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace duet {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  return out;
}

bool is_device_id(std::string_view s, BackendKind* b) {
  const size_t colon = s.find(':');
  if (colon == std::string_view::npos || colon + 1 >= s.size()) return false;
  auto kind = parse_backend(s.substr(0, colon));
  if (!kind) return false;
  for (char c : s.substr(colon + 1))
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  *b = *kind;
  return true;
}

// Text from the user in a message: clipped, so a 10 MB term is not repeated whole.
std::string single_quoted(std::string_view s) {
  return "'" + clip_text(s, 60) + "'";
}

std::string backends_list() {
  return "cpu, vulkan or cuda";
}

// A tier named in a policy, or the error: an old name says what it is called now.
Result<Tier> policy_tier(std::string_view name, const std::string& target) {
  if (auto t = parse_tier(name)) return *t;
  const std::string what =
      single_quoted(name) + (target == name ? "" : " in " + single_quoted(target));
  const std::string renamed = renamed_tier(name);
  if (!renamed.empty())
    return Status(Code::invalid_argument, what + ": no longer a tier name: " + renamed);
  return Status(Code::invalid_argument, what + ": not a kernel tier (" + tier_names() + ")");
}

Result<PolicyTarget> parse_target(std::string_view text) {
  PolicyTarget t;
  t.text = std::string(text);
  if (text.empty()) return Status(Code::invalid_argument, "an empty target");
  std::string_view place = text, tier;
  if (const size_t dot = text.find('.'); dot != std::string_view::npos) {
    place = text.substr(0, dot);
    tier = text.substr(dot + 1);
    if (tier.empty() || place.empty())
      return Status(
          Code::invalid_argument,
          single_quoted(t.text) + ": expected BACKEND.TIER or DEVICE.TIER (e.g. cuda.flash)");
  }
  BackendKind b{};
  if (is_device_id(place, &b)) {
    t.backend = b;
    t.device = std::string(place);
  } else if (auto kind = parse_backend(place)) {
    t.backend = *kind;
  } else if (tier.empty() && (parse_tier(place) || !renamed_tier(place).empty())) {
    DUET_ASSIGN_OR_RETURN(t.tier, policy_tier(place, t.text));  // a tier on every backend
    return t;
  } else if (place.find(':') != std::string_view::npos) {
    return Status(Code::invalid_argument, single_quoted(place) +
                                              ": expected a device id such as cuda:0 (backend " +
                                              backends_list() + ", then a number)");
  } else {
    return Status(Code::invalid_argument,
                  single_quoted(place) + ": not a backend (" + backends_list() +
                      "), a device (cuda:0) or a kernel tier (" + tier_names() + ")");
  }
  if (!tier.empty()) {
    DUET_ASSIGN_OR_RETURN(t.tier, policy_tier(tier, t.text));
  }
  return t;
}

Result<Precision> parse_prec(std::string_view v, bool* is_auto) {
  *is_auto = v == "auto";
  if (*is_auto) return Precision::f32;
  std::string s(v);
  if (s == "fp32") s = "f32";
  if (s == "fp16") s = "f16";
  if (s == "fp64") s = "f64";
  if (auto p = parse_precision(s)) return *p;
  return Status(Code::invalid_argument,
                single_quoted(v) + ": expected a precision (f32, f16, bf16, f64 or auto)");
}

Result<bool> parse_switch(std::string_view v) {
  if (v == "on" || v == "true" || v == "1" || v == "yes" || v == "allow") return true;
  if (v == "off" || v == "false" || v == "0" || v == "no" || v == "forbid") return false;
  return Status(Code::invalid_argument, single_quoted(v) + ": expected on or off");
}

std::string size_text(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"TiB", "GiB", "MiB", "KiB"};
  for (int i = 0; i < 4; ++i) {
    const uint64_t unit = uint64_t{1} << (10 * (4 - i));
    if (bytes >= unit && bytes % unit == 0) return std::to_string(bytes / unit) + kUnits[i];
  }
  return std::to_string(bytes);
}

std::string precision_list(const std::vector<Precision>& list) {
  if (list.empty()) return "none";
  std::string s;
  for (Precision p : list) s += (s.empty() ? "" : ",") + std::string(precision_name(p));
  return s;
}

}  // namespace

bool PolicyTarget::matches_device(BackendKind b, std::string_view device_id) const {
  if (backend && *backend != b) return false;
  return device.empty() || device == device_id;
}

namespace {
// Whether a policy naming tier `named` means tier `t` on backend b: Vulkan's shared-memory kernels
// were 'tiled' before that name was left to CUDA's sm_75 tier, and a policy written then
// (deny=vulkan.tiled, allow=tiled) keeps meaning them; explain shows the term as written.
bool names_tier(std::optional<Tier> named, BackendKind b, Tier t) {
  return named == t ||
         (named == Tier::tiled && t == Tier::shared_memory && b == BackendKind::vulkan);
}
}  // namespace

bool PolicyTarget::matches_tier(BackendKind b, std::string_view device_id, Tier t) const {
  return names_tier(tier, b, t) && matches_device(b, device_id);
}

bool Policy::empty() const {
  return *this == Policy{};
}

std::string Policy::str() const {
  std::vector<std::string> terms;
  auto targets = [](const std::vector<PolicyTarget>& ts) {
    std::string s;
    for (const PolicyTarget& t : ts) s += (s.empty() ? "" : ",") + t.text;
    return s;
  };
  if (!allow.empty()) terms.push_back("allow=" + targets(allow));
  if (!deny.empty()) terms.push_back("deny=" + targets(deny));
  if (precision) terms.push_back("precision=" + std::string(precision_name(*precision)));
  for (const auto& [k, p] : op_precision)
    terms.push_back("precision." + std::string(op_name(k)) + "=" + std::string(precision_name(p)));
  if (bf16_fallback != Precision::f16)
    terms.push_back("fallback=" + std::string(precision_name(bf16_fallback)));
  if (!lower.empty()) terms.push_back("lower=" + precision_list(lower));
  for (const auto& [k, list] : op_lower)
    terms.push_back("lower." + std::string(op_name(k)) + "=" + precision_list(list));
  if (budget) terms.push_back("budget=" + size_text(*budget));
  for (const auto& [d, b] : budgets) terms.push_back("budget." + d + "=" + size_text(b));
  if (!split) terms.push_back("split=off");
  std::string s;
  for (const std::string& t : terms) s += (s.empty() ? "" : ";") + t;
  return s;
}

std::optional<Precision> Policy::forced_precision(OpKind k, std::string* term) const {
  if (auto it = op_precision.find(k); it != op_precision.end()) {
    if (term)
      *term =
          "precision." + std::string(op_name(k)) + "=" + std::string(precision_name(it->second));
    return it->second;
  }
  if (precision && term) *term = "precision=" + std::string(precision_name(*precision));
  return precision;
}

std::string Policy::lower_allowed(OpKind k, Precision p) const {
  auto it = op_lower.find(k);
  const std::vector<Precision>& list = it != op_lower.end() ? it->second : lower;
  for (Precision q : list)
    if (q == p)
      return it != op_lower.end() ? "lower." + std::string(op_name(k)) + "=" + precision_list(list)
                                  : "lower=" + precision_list(list);
  return {};
}

std::string Policy::device_denied(BackendKind b, std::string_view device_id) const {
  for (const PolicyTarget& t : deny)
    if (t.is_placement() && t.matches_device(b, device_id)) return "deny=" + t.text;
  bool any_allow = false;
  std::string allowed;
  for (const PolicyTarget& t : allow) {
    if (!t.is_placement()) continue;
    any_allow = true;
    if (t.matches_device(b, device_id)) return {};
    allowed += (allowed.empty() ? "" : ",") + t.text;
  }
  return any_allow ? "allow=" + allowed : std::string();
}

std::string Policy::tier_denied(BackendKind b, std::string_view device_id, Tier tier) const {
  for (const PolicyTarget& t : deny)
    if (t.matches_tier(b, device_id, tier)) return "deny=" + t.text;
  // Tier allows restrict the devices they name to the tiers listed.
  bool restricted = false;
  std::string allowed;
  for (const PolicyTarget& t : allow) {
    if (t.is_placement() || !t.matches_device(b, device_id)) continue;
    restricted = true;
    if (names_tier(t.tier, b, tier)) return {};
    allowed += (allowed.empty() ? "" : ",") + t.text;
  }
  return restricted ? "allow=" + allowed : std::string();
}

std::optional<uint64_t> Policy::budget_for(BackendKind b, std::string_view device_id,
                                           std::string* term) const {
  if (auto it = budgets.find(std::string(device_id)); it != budgets.end()) {
    if (term) *term = "budget." + it->first + "=" + size_text(it->second);
    return it->second;
  }
  if (auto it = budgets.find(std::string(backend_name(b))); it != budgets.end()) {
    if (term) *term = "budget." + it->first + "=" + size_text(it->second);
    return it->second;
  }
  if (budget && term) *term = "budget=" + size_text(*budget);
  return budget;
}

Result<uint64_t> parse_size(std::string_view text) {
  std::string_view s = trim(text);
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  const std::string number(s.substr(0, i));
  std::string unit(trim(s.substr(i)));
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto bad = [&] {
    return Status(
        Code::invalid_argument,
        single_quoted(text) + ": expected a size such as 4GiB, 512MiB, 1.5GB or a number of bytes");
  };
  if (number.empty() || number.front() == '.' || number.find('.') != number.rfind('.'))
    return bad();
  double v = std::strtod(number.c_str(), nullptr);
  static const std::map<std::string, double> kUnits = {{"", 1},
                                                       {"b", 1},
                                                       {"k", 1024.0},
                                                       {"kib", 1024.0},
                                                       {"kb", 1e3},
                                                       {"m", 1048576.0},
                                                       {"mib", 1048576.0},
                                                       {"mb", 1e6},
                                                       {"g", 1073741824.0},
                                                       {"gib", 1073741824.0},
                                                       {"gb", 1e9},
                                                       {"t", 1099511627776.0},
                                                       {"tib", 1099511627776.0},
                                                       {"tb", 1e12}};
  auto it = kUnits.find(unit);
  if (it == kUnits.end()) return bad();
  v *= it->second;
  if (!std::isfinite(v) || v < 1 || v > 1.8e19) return bad();
  return static_cast<uint64_t>(std::llround(v));
}

std::string format_us(double us) {
  char b[32];
  if (us >= 1000.0)
    std::snprintf(b, sizeof b, "%.2f ms", us / 1000.0);
  else
    std::snprintf(b, sizeof b, "%.1f us", us);
  return b;
}

std::string format_bytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof buf,
                  v < 10    ? "%.2f %s"
                  : v < 100 ? "%.1f %s"
                            : "%.0f %s",
                  v, kUnits[u]);
  return buf;
}

Result<Policy> parse_policy(std::string_view text, Policy base, std::string_view origin) {
  Policy p = std::move(base);
  int index = 0;
  if (trim(text).empty()) return p;  // no policy
  for (std::string_view term : split(text, ';')) {
    ++index;
    auto fail = [&](const std::string& why) {
      return Status(Code::invalid_argument, std::string(origin) + ": term " +
                                                std::to_string(index) + " " + single_quoted(term) +
                                                ": " + why);
    };
    if (term.empty())
      return fail(
          "an empty term (';' at the start or end, or two in a row); terms are "
          "KEY=VALUE separated by ';'");
    const size_t eq = term.find('=');
    if (eq == std::string_view::npos)
      return fail(
          "expected KEY=VALUE (keys: allow, deny, device, precision, precision.OP, "
          "fallback, lower, lower.OP, budget, budget.DEVICE, split)");
    const std::string_view key = trim(term.substr(0, eq)), value = trim(term.substr(eq + 1));
    if (value.empty()) return fail("expected a value after '='");
    if (key == "allow" || key == "deny" || key == "device") {
      for (std::string_view item : split(value, ',')) {
        auto t = parse_target(item);
        if (!t.ok()) return fail(t.status().message());
        if (key == "device" && !t->is_placement())
          return fail(single_quoted(t->text) +
                      ": device= takes devices and backends; use allow= for tiers");
        (key == "deny" ? p.deny : p.allow).push_back(std::move(*t));
      }
    } else if (key == "precision" || key.rfind("precision.", 0) == 0) {
      bool is_auto = false;
      auto prec = parse_prec(value, &is_auto);
      if (!prec.ok()) return fail(prec.status().message());
      if (key == "precision") {
        p.precision = is_auto ? std::nullopt : std::optional<Precision>(*prec);
        continue;
      }
      const std::string_view op = key.substr(10);
      auto kind = parse_op(op);
      if (!kind || is_view(*kind))
        return fail(single_quoted(op) +
                    ": expected an op kind with a kernel (matmul, "
                    "attention, softmax, ...)");
      if (is_auto)
        p.op_precision.erase(*kind);
      else
        p.op_precision[*kind] = *prec;
    } else if (key == "fallback") {
      if (value == "f16" || value == "fp16")
        p.bf16_fallback = Precision::f16;
      else if (value == "f32" || value == "fp32" || value == "safe")
        p.bf16_fallback = Precision::f32;
      else
        return fail(single_quoted(value) + ": expected f16 or f32");
    } else if (key == "lower" || key.rfind("lower.", 0) == 0) {
      std::vector<Precision> list;
      if (value != "none") {
        for (std::string_view item : split(value, ',')) {
          bool is_auto = false;
          auto prec = parse_prec(item, &is_auto);
          if (!prec.ok() || is_auto)
            return fail(single_quoted(item) + ": expected precisions (f32, f16, bf16) or none");
          if (std::find(list.begin(), list.end(), *prec) == list.end()) list.push_back(*prec);
        }
      }
      if (key == "lower") {
        p.lower = std::move(list);
        continue;
      }
      const std::string_view op = key.substr(6);
      auto kind = parse_op(op);
      if (!kind || is_view(*kind))
        return fail(single_quoted(op) +
                    ": expected an op kind with a kernel (matmul, attention, softmax, ...)");
      p.op_lower[*kind] = std::move(list);
    } else if (key == "budget" || key.rfind("budget.", 0) == 0) {
      auto size = parse_size(value);
      if (!size.ok()) return fail(size.status().message());
      if (key == "budget") {
        p.budget = *size;
        continue;
      }
      const std::string_view target = key.substr(7);
      BackendKind b{};
      if (!is_device_id(target, &b) && !parse_backend(target))
        return fail(single_quoted(target) + ": expected a device (cuda:0) or a backend (" +
                    backends_list() + ")");
      p.budgets[std::string(target)] = *size;
    } else if (key == "split") {
      auto on = parse_switch(value);
      if (!on.ok()) return fail(on.status().message());
      p.split = *on;
    } else {
      return fail("unknown key " + single_quoted(key) +
                  " (keys: allow, deny, device, precision, precision.OP, fallback, lower, "
                  "lower.OP, budget, budget.DEVICE, split)");
    }
  }
  return p;
}

Result<Policy> policy_from_env() {
  const char* env = std::getenv("DUET_POLICY");
  if (!env || !*env) return Policy{};
  return parse_policy(env, {}, "DUET_POLICY");
}

}  // namespace duet
