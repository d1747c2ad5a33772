#include "duet/plan_view.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "duet/internal/index.h"
#include "duet/internal/text.h"

namespace duet::cli {

namespace {}  // namespace

std::string device_id(const Plan& plan, int device) {
  return device < 0 || static_cast<size_t>(device) >= plan.devices.size()
             ? "host"
             : plan.devices[static_cast<size_t>(device)].id;
}

std::string devices_line(const Plan& plan) {
  std::string s = "devices:";
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    const PlanDevice& pd = plan.devices[d];
    s += (d ? ", " : " ") + pd.id + " (" + (pd.label.empty() ? pd.caps.name : pd.label) + ")";
  }
  return s;
}

std::string transfer_name(const Plan& plan, const PlanStep& s) {
  if (s.src_device == kHost && plan.values[u(s.output)].borrowed) return "borrow";
  if (s.src_device == kHost) return "upload";
  if (s.device == kHost) return "download";
  return "copy";
}

std::string plan_summary(const Plan& plan, const ChosenPolicy& policy) {
  std::ostringstream o;
  int kernels = 0;
  for (const PlanStep& s : plan.steps) kernels += s.kind == StepKind::kernel && !s.once;
  o << "plan for graph '" << plan.graph << "': " << counted(kernels, "kernel") << " on "
    << plan.devices_used().size() << " of " << counted(int64_t(plan.devices.size()), "device")
    << ", estimated " << format_us(plan.est_us) << " per run\n"
    << devices_line(plan) << "\n"
    << policy.line() << "\n";

  struct Line {
    std::string name, op, device, precision, tier, estimate;
  };
  std::vector<Line> rows = {{"step", "op", "device", "precision", "tier", "estimate"}};
  for (const PlanStep& s : plan.steps) {
    if (s.kind == StepKind::view) continue;
    if (s.kind == StepKind::transfer) {
      rows.push_back({plan.values[u(s.inputs[0])].name,
                      transfer_name(plan, s) + " " + format_bytes(s.bytes),
                      device_id(plan, s.src_device) + " -> " + device_id(plan, s.device), "", "",
                      s.once ? "at load" : ""});
      continue;
    }
    rows.push_back({s.name + (s.node < 0 ? " [inserted]" : ""), std::string(op_name(s.op.op.kind)),
                    device_id(plan, s.device), std::string(precision_name(s.op.choice.precision)),
                    std::string(tier_name(s.op.choice.tier)),
                    s.once ? "at load" : format_us(s.est_us)});
  }
  size_t w[5] = {};
  for (const Line& r : rows) {
    w[0] = std::max(w[0], r.name.size());
    w[1] = std::max(w[1], r.op.size());
    w[2] = std::max(w[2], r.device.size());
    w[3] = std::max(w[3], r.precision.size());
    w[4] = std::max(w[4], r.tier.size());
  }
  auto pad = [](const std::string& s, size_t n) { return s + std::string(n - s.size() + 2, ' '); };
  for (const Line& r : rows) {
    std::string line = "  " + pad(r.name, w[0]) + pad(r.op, w[1]) + pad(r.device, w[2]) +
                       pad(r.precision, w[3]) + pad(r.tier, w[4]) + r.estimate;
    while (line.back() == ' ') line.pop_back();
    o << line << "\n";
  }

  const auto copies = plan.copies();
  o << "copies between devices: "
    << (copies.empty() ? std::string("none")
                       : std::to_string(copies.size()) + ", " + format_bytes(plan.copy_bytes()))
    << "\n";
  for (int d : plan.devices_used()) {
    const DeviceMemoryPlan& m = plan.memory[u(d)];
    o << "memory on " << plan.device_name(d) << ": peak " << format_bytes(m.peak_bytes)
      << ", budget "
      << (m.budget_bytes ? format_bytes(m.budget_bytes) + " (" + m.budget_source + ")"
                         : std::string("unknown"))
      << "\n";
  }
  for (const std::string& n : plan.notes) o << "note: " << n << "\n";
  return o.str();
}

std::string with_policy_source(const std::string& explained, const ChosenPolicy& policy) {
  const size_t at = explained.find("\npolicy: ");
  if (at == std::string::npos) return policy.line() + "\n" + explained;
  const size_t end = explained.find('\n', at + 1);
  return explained.substr(0, at + 1) + policy.line() + explained.substr(end);
}

}  // namespace duet::cli
