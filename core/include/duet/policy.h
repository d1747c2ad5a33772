// User overrides for the planner. One Policy object, set from the API, from the DUET_POLICY
// environment variable, or from the command line, all in one syntax (docs/planner.md):
//
//   deny=cuda.flash;precision=f32;device=vulkan:0
//
//   allow=T,...        use only these devices/backends; tiers listed restrict the tiers of the
//                      backend/device they name (allow=cuda.tiled: CUDA runs tiled kernels only)
//   deny=T,...         never use these devices, backends or tiers
//   device=D,...       the same as allow= for devices and backends
//     T is: a backend (cuda, vulkan, cpu), a device (cuda:1), a tier on a backend (cuda.flash),
//     a tier on a device (cuda:1.flash) or a tier on every backend (flash)
//   precision=P        compute every op in P (f32, f16, bf16, f64; auto = what the graph asks)
//   precision.OP=P     compute ops of kind OP in P (wins over precision=)
//   fallback=f16|f32   when bf16 is asked for and a device has no bf16: fp16 with fp32
//                      accumulation (default) or f32 (safe)
//   lower=P,...        precisions the planner may use below what an op asks for, where they are
//                      estimated faster (explain says so); never without this term
//   lower.OP=P,...     the same for ops of kind OP (wins over lower=; lower.OP=none: not for OP)
//   budget=SIZE        memory budget of every device (4GiB, 512MiB, 1.5GB, 1000000)
//   budget.D=SIZE      of one device or backend (budget.cuda:0=6GiB)
//   split=on|off       allow or forbid spreading one graph over several devices
//
// An override always wins: the planner never falls back around it, explain() shows it, and an
// override nothing can satisfy is an error naming the op that cannot be placed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "duet/device.h"
#include "duet/export.h"
#include "duet/status.h"

namespace duet {

struct DUET_API PolicyTarget {
  std::optional<BackendKind> backend;  // empty: every backend (a bare tier)
  std::string device;                  // "cuda:1"; empty: every device of `backend`
  std::optional<Tier> tier;            // empty: the whole device or backend
  std::string text;                    // the target as written, for messages

  bool is_placement() const { return !tier; }
  bool matches_device(BackendKind b, std::string_view device_id) const;
  bool matches_tier(BackendKind b, std::string_view device_id, Tier tier) const;
  bool operator==(const PolicyTarget&) const = default;
};

struct DUET_API Policy {
  std::vector<PolicyTarget> allow;
  std::vector<PolicyTarget> deny;
  std::optional<Precision> precision;
  std::map<OpKind, Precision> op_precision;
  Precision bf16_fallback = Precision::f16;
  std::vector<Precision> lower;                       // below-floor precisions allowed
  std::map<OpKind, std::vector<Precision>> op_lower;  // per op kind (wins over `lower`)
  std::optional<uint64_t> budget;
  std::map<std::string, uint64_t> budgets;  // device id or backend name -> bytes
  bool split = true;

  bool empty() const;
  // The canonical text of the policy ("" when empty); parse_policy(str()) gives it back.
  std::string str() const;

  // The precision forced for an op kind, and the term that forces it ("precision=f32").
  std::optional<Precision> forced_precision(OpKind k, std::string* term = nullptr) const;
  // The term that allows computing ops of kind k in p although they ask for more ("" when no
  // term does).
  std::string lower_allowed(OpKind k, Precision p) const;
  // The term that keeps a device out ("" when it may be used).
  std::string device_denied(BackendKind b, std::string_view device_id) const;
  // The term that forbids a tier on a device ("" when allowed).
  std::string tier_denied(BackendKind b, std::string_view device_id, Tier tier) const;
  // The policy's memory budget for a device, and the term that sets it.
  std::optional<uint64_t> budget_for(BackendKind b, std::string_view device_id,
                                     std::string* term = nullptr) const;

  bool operator==(const Policy&) const = default;
};

// Parses the syntax above on top of `base` (allow/deny accumulate, other keys replace), so
// layers read naturally: parse_policy(cli_text, *policy_from_env()). `origin` names the source
// in errors ("DUET_POLICY", "--policy").
DUET_API Result<Policy> parse_policy(std::string_view text, Policy base = {},
                                     std::string_view origin = "policy");
// The policy in DUET_POLICY (an empty policy when unset).
DUET_API Result<Policy> policy_from_env();

// "4GiB", "512 MiB", "1.5GB", "1000000" -> bytes.
DUET_API Result<uint64_t> parse_size(std::string_view text);
// 1610612736 -> "1.5 GiB"
DUET_API std::string format_bytes(uint64_t bytes);
// 2500.0 -> "2.50 ms", 12.0 -> "12.0 us" (estimates and timings in explain and the CLI)
DUET_API std::string format_us(double us);

}  // namespace duet
