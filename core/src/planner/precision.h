// Precision as a floor: an op asks for a precision (the policy's, else its tensors'), and a
// kernel choice meets that request when it stores the op's tensors exactly and computes at that
// precision or better (duet::covers). Below the floor a choice is acceptable only as a substitute
// the policy accepts: fp16 for bf16 on a device without bf16 (fallback=f16, the default), or a
// precision the user allowed (lower=, lower.OP=). Among the acceptable choices, time decides.
// Internal to the planner (docs/planner.md).
#pragma once

#include <optional>
#include <string>

#include "duet/device.h"
#include "duet/graph.h"
#include "duet/policy.h"

namespace duet::planning {

// Where a choice stands against the op's precision floor.
struct Standing {
  enum Kind : uint8_t { meets, substitute, refused };
  Kind kind = refused;
  Precision kept = Precision::f32;  // what the kernel keeps: its precision, or narrower storage
  bool by_policy = false;           // the policy decided (a forced precision, lower=)
  std::string term;                 // the policy term that decided, when one did
  std::string why;                  // substitute: why it is accepted; refused: why not
};

// The precision rules for one op under a policy.
class PrecisionFloor {
 public:
  PrecisionFloor(const Policy& policy, const OpDesc& op);

  Precision asked() const { return asked_; }
  const std::optional<Precision>& forced() const { return forced_; }
  const std::string& forced_term() const { return forced_term_; }
  bool data_movement() const { return data_movement_; }

  // `asked_on_device`: whether the device has a usable choice at the asked precision for the op
  // (fallback=f16 applies only where it has none).
  Standing judge(const KernelChoice& c, const OpDesc& op, bool asked_on_device) const;

 private:
  const Policy& policy_;
  OpKind kind_;
  Precision asked_;
  std::optional<Precision> forced_;
  std::string forced_term_;
  bool data_movement_ = false;
};

// The precision an op's tensors ask for: that of its first floating-point input.
Precision asked_precision(const OpDesc& op);

}  // namespace duet::planning
