// The plan read back: its accessors (duet/plan.h), and the plan in words (explain, what `duet plan
// --explain` prints) and as JSON (plan_json).
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "duet/internal/index.h"
#include "duet/internal/text.h"
#include "duet/plan.h"

namespace duet {

namespace {
std::string rate(double v, const char* unit) {
  char b[48];
  std::snprintf(b, sizeof b, v >= 100 ? "%.0f %s" : v >= 10 ? "%.1f %s" : "%.2f %s", v, unit);
  return b;
}

// What the cost model knows of a device: its measured rates, or the peaks it starts from.
std::string cost_inputs(const PlanDevice& d) {
  const Calibration& m = d.measured;
  if (!m.empty()) {
    std::string s = "measured (" + m.source + (m.measured_at.empty() ? "" : ", " + m.measured_at) +
                    "): launch " + format_us(m.launch_us);
    for (const MeasuredRate& r : m.rates)
      s += "; " + std::string(cost_family_name(r.family)) + " " + std::string(tier_name(r.tier)) +
           " " + std::string(precision_name(r.precision)) + " " +
           (r.gflops > 0 ? rate(r.gflops, "GFLOP/s") : rate(r.gbps, "GB/s"));
    return s;
  }
  const DeviceCaps& c = d.caps;
  std::string s = "peaks (f32 " + rate(c.peak_gflops_f32, "GFLOP/s");
  if (c.peak_gflops_f16 > 0 && c.peak_gflops_f16 != c.peak_gflops_f32)
    s += ", f16 " + rate(c.peak_gflops_f16, "GFLOP/s");
  if (c.peak_gflops_bf16 > 0 && c.peak_gflops_bf16 != c.peak_gflops_f16)
    s += ", bf16 " + rate(c.peak_gflops_bf16, "GFLOP/s");
  s += ", memory " + rate(c.memory_gbps, "GB/s") + ") x tier efficiency";
  if (!m.source.empty()) s += "; calibration: " + m.source;
  return s;
}

std::string caps_line(const DeviceCaps& c) {
  std::string s = c.name.empty() ? std::string(backend_name(c.backend)) : c.name;
  if (!c.arch.empty()) s += ", " + c.arch;
  if (c.memory_bytes) s += ", " + format_bytes(c.memory_bytes);
  return s;
}
}  // namespace

std::string_view step_kind_name(StepKind k) {
  switch (k) {
    case StepKind::kernel:
      return "kernel";
    case StepKind::view:
      return "view";
    case StepKind::transfer:
      return "transfer";
  }
  return "?";
}

const PlanStep* Plan::step(std::string_view node) const {
  for (const PlanStep& s : steps)
    if (s.kind == StepKind::kernel && s.node >= 0 && s.name == node) return &s;
  return nullptr;
}

std::vector<const PlanStep*> Plan::copies() const {
  std::vector<const PlanStep*> out;
  for (const PlanStep& s : steps)
    if (s.kind == StepKind::transfer && s.device != kHost && s.src_device != kHost)
      out.push_back(&s);
  return out;
}

uint64_t Plan::copy_bytes() const {
  uint64_t b = 0;
  for (const PlanStep* s : copies()) b += s->bytes;
  return b;
}

std::vector<int> Plan::devices_used() const {
  std::vector<bool> used(devices.size(), false);
  for (const PlanStep& s : steps)
    if (s.kind == StepKind::kernel && s.device >= 0) used[u(s.device)] = true;
  std::vector<int> out;
  for (size_t i = 0; i < used.size(); ++i)
    if (used[i]) out.push_back(static_cast<int>(i));
  return out;
}

std::string Plan::device_name(int device) const {
  if (device < 0 || u(device) >= devices.size()) return "host";
  const PlanDevice& d = devices[u(device)];
  return d.label.empty() || d.label == d.id ? d.id : d.id + " (" + d.label + ")";
}

std::string explain(const Plan& plan) {
  std::ostringstream o;
  int kernels = 0;
  for (const PlanStep& s : plan.steps) kernels += s.kind == StepKind::kernel && !s.once ? 1 : 0;
  o << "plan for graph '" << plan.graph << "': " << counted(kernels, "kernel") << " on "
    << plan.devices_used().size() << " of " << counted(int64_t(plan.devices.size()), "device")
    << ", estimated " << format_us(plan.est_us) << " per run\n";
  o << "policy: " << (plan.policy.empty() ? "(none)" : plan.policy.str()) << "\n";
  o << "devices:\n";
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    const PlanDevice& pd = plan.devices[d];
    o << "  " << plan.device_name(static_cast<int>(d)) << ": " << caps_line(pd.caps);
    if (!pd.caps.source.empty() && pd.caps.source != "probed") o << " [" << pd.caps.source << "]";
    o << "\n";
    for (const auto& [k, v] : pd.caps.extra)
      if (k.find("image") != std::string::npos || k.find("kernel") != std::string::npos)
        o << "      " << k << ": " << v << "\n";
    o << "      cost model: " << cost_inputs(pd) << "\n";
  }

  o << "steps:\n";
  for (const PlanStep& s : plan.steps) {
    const std::string when = s.once ? " [once, at load]" : "";
    if (s.kind == StepKind::transfer) {
      const PlanValue& in = plan.values[u(s.inputs[0])];
      if (plan.values[u(s.output)].borrowed) {
        o << "  borrow " << in.name << ": " << plan.device_name(s.device)
          << " reads it where the host holds it, " << format_bytes(s.bytes) << ", no copy" << when
          << "\n";
        continue;
      }
      o << "  copy " << in.name << ": " << plan.device_name(s.src_device) << " -> "
        << plan.device_name(s.device) << ", " << format_bytes(s.bytes) << when << "\n";
      continue;
    }
    if (s.kind == StepKind::view) {
      const PlanValue& in = plan.values[u(s.inputs[0])];
      o << "  " << op_name(s.op.op.kind) << " '" << s.name << "' on " << plan.device_name(s.device)
        << ": a view of '" << in.name << "' (" << plan.values[u(s.output)].desc.str()
        << "), no kernel" << when << "\n";
      continue;
    }
    const KernelChoice& c = s.op.choice;
    o << "  " << describe(s.op.op) << (s.node < 0 ? " [inserted]" : "") << when << "\n";
    if (const PlanValue& root = plan.values[u(plan.values[u(s.output)].root)]; root.state)
      o << "    state      writes '" << root.name << "' in place ("
        << format_bytes(root.storage_bytes()) << ", kept across runs)\n";
    o << "    device     " << plan.device_name(s.device);
    if (!s.device_reason.empty()) o << ": " << s.device_reason;
    o << "\n";
    o << "    precision  " << precision_name(c.precision)
      << (c.precision == Precision::f32 || c.precision == Precision::f64 ? ""
                                                                         : " (f32 accumulation)");
    if (!s.precision_reason.empty()) o << ": " << s.precision_reason;
    o << "\n";
    o << "    tier       " << s.tier_reason << "\n";
    const std::string launch = c.launch.str();
    if (!launch.empty()) o << "    launch     " << launch << "\n";
    for (const std::string& k : s.skipped) o << "    skipped    " << k << "\n";
    for (const std::string& p : s.policy) o << "    policy     " << p << "\n";
    // A reason that rejects every choice of a device (no kernel image for its architecture) is
    // said once for the device.
    bool first = true;
    for (size_t i = 0; i < s.rejected.size();) {
      const Alternative& a = s.rejected[i];
      size_t j = i + 1;
      bool same = true;
      for (; j < s.rejected.size() && s.rejected[j].device == a.device; ++j)
        same = same && s.rejected[j].reason == a.reason && s.rejected[j].by_policy == a.by_policy;
      const bool whole = same && j - i > 1;
      for (size_t k = i; k < (whole ? i + 1 : j); ++k) {
        const Alternative& x = s.rejected[k];
        o << (first ? "    rejected   " : "               ") << x.device;
        if (whole)
          o << " (all " << j - i << " choices)";
        else if (x.tier)
          o << " " << tier_name(*x.tier) << " " << precision_name(x.precision);
        o << ": " << x.reason << (x.by_policy ? " [policy]" : "") << "\n";
        first = false;
      }
      i = j;
    }
    if (!s.once)
      o << "    estimate   " << format_us(s.est_us)
        << (s.est_basis.empty() ? "" : " (kernel: " + s.est_basis + ")") << "\n";
  }

  const auto copies = plan.copies();
  o << "copies between devices: ";
  if (copies.empty())
    o << "none\n";
  else
    o << copies.size() << ", " << format_bytes(plan.copy_bytes()) << "\n";
  for (const PlanStep* s : copies)
    o << "  " << plan.values[u(s->inputs[0])].name << ": " << plan.device_name(s->src_device)
      << " -> " << plan.device_name(s->device) << ", " << format_bytes(s->bytes) << "\n";
  uint64_t up = 0, up_once = 0, down = 0, borrowed = 0;
  for (const PlanStep& s : plan.steps) {
    if (s.kind != StepKind::transfer) continue;
    if (s.src_device == kHost && plan.values[u(s.output)].borrowed)
      borrowed += s.bytes;
    else if (s.src_device == kHost)
      (s.once ? up_once : up) += s.bytes;
    if (s.device == kHost) down += s.bytes;
  }
  o << "host transfers: " << format_bytes(up) << " up and " << format_bytes(down)
    << " down per run, " << format_bytes(up_once) << " of constants up once"
    << (borrowed ? ", " + format_bytes(borrowed) + " of constants borrowed in place (no copy)"
                 : std::string())
    << "\n";

  if (!plan.states.empty()) {
    o << "states (kept across runs): " << plan.states.size() << "\n";
    for (const auto& [name, id] : plan.states) {
      const PlanValue& v = plan.values[u(id)];
      o << "  " << name << " " << v.desc.str() << " on " << plan.device_name(v.device) << ", "
        << format_bytes(v.storage_bytes()) << "\n";
    }
  }
  o << "memory:\n";
  for (size_t d = 0; d < plan.memory.size(); ++d) {
    const DeviceMemoryPlan& m = plan.memory[d];
    o << "  " << plan.device_name(static_cast<int>(d)) << ": peak " << format_bytes(m.peak_bytes)
      << " (" << m.slots.size() << " buffers, constants " << format_bytes(m.constant_bytes)
      << (m.borrowed_bytes
              ? " of which " + format_bytes(m.borrowed_bytes) + " borrowed from the host"
              : std::string())
      << (m.state_bytes ? ", states " + format_bytes(m.state_bytes) : std::string()) << ", at most "
      << format_bytes(m.max_live_bytes) << " live), budget "
      << (m.budget_bytes ? format_bytes(m.budget_bytes) : std::string("unknown")) << " ("
      << m.budget_source << ")\n";
  }
  if (!plan.notes.empty()) {
    o << "notes:\n";
    for (const std::string& n : plan.notes) o << "  " << n << "\n";
  }
  return o.str();
}

std::string plan_json(const Plan& plan) {
  using J = nlohmann::ordered_json;
  J j;
  j["graph"] = plan.graph;
  j["policy"] = plan.policy.str();
  j["estimated_us"] = plan.est_us;
  J devices = J::array();
  for (const PlanDevice& d : plan.devices)
    devices.push_back({{"id", d.id},
                       {"label", d.label},
                       {"name", d.caps.name},
                       {"backend", backend_name(d.caps.backend)},
                       {"arch", d.caps.arch},
                       {"cost_model", cost_inputs(d)}});
  j["devices"] = devices;
  auto dev = [&](int d) { return d < 0 ? std::string("host") : plan.devices[u(d)].id; };
  J steps = J::array();
  for (const PlanStep& s : plan.steps) {
    J x = {{"kind", step_kind_name(s.kind)}, {"name", s.name}, {"once", s.once}};
    if (s.kind == StepKind::transfer) {
      x["from"] = dev(s.src_device);
      x["to"] = dev(s.device);
      x["bytes"] = s.bytes;
      x["borrowed"] = plan.values[u(s.output)].borrowed;
    } else {
      x["device"] = dev(s.device);
      x["op"] = op_name(s.op.op.kind);
      x["inserted"] = s.node < 0;
    }
    if (s.kind == StepKind::kernel) {
      const KernelChoice& c = s.op.choice;
      x["tier"] = tier_name(c.tier);
      x["precision"] = precision_name(c.precision);
      x["requested"] = precision_name(s.requested);
      x["launch"] = c.launch.str();
      x["device_reason"] = s.device_reason;
      x["precision_reason"] = s.precision_reason;
      x["tier_reason"] = s.tier_reason;
      x["skipped"] = s.skipped;
      x["policy"] = s.policy;
      J rejected = J::array();
      for (const Alternative& a : s.rejected)
        rejected.push_back({{"device", a.device},
                            {"tier", a.tier ? std::string(tier_name(*a.tier)) : std::string()},
                            {"precision", precision_name(a.precision)},
                            {"usable", a.usable},
                            {"by_policy", a.by_policy},
                            {"reason", a.reason}});
      x["rejected"] = rejected;
      x["estimated_us"] = s.est_us;
      x["estimate_basis"] = s.est_basis;
    }
    steps.push_back(std::move(x));
  }
  j["steps"] = steps;
  J memory = J::array();
  for (size_t d = 0; d < plan.memory.size(); ++d) {
    const DeviceMemoryPlan& m = plan.memory[d];
    memory.push_back({{"device", plan.devices[d].id},
                      {"peak_bytes", m.peak_bytes},
                      {"constant_bytes", m.constant_bytes},
                      {"borrowed_bytes", m.borrowed_bytes},
                      {"state_bytes", m.state_bytes},
                      {"max_live_bytes", m.max_live_bytes},
                      {"budget_bytes", m.budget_bytes},
                      {"budget_source", m.budget_source},
                      {"buffers", m.slots}});
  }
  j["memory"] = memory;
  J states = J::array();
  for (const auto& [name, id] : plan.states) {
    const PlanValue& v = plan.values[u(id)];
    states.push_back({{"name", name},
                      {"device", dev(v.device)},
                      {"dtype", dtype_name(v.desc.dtype)},
                      {"shape", std::vector<int64_t>(v.desc.dims().begin(), v.desc.dims().end())},
                      {"bytes", v.storage_bytes()}});
  }
  j["states"] = states;
  j["copy_bytes"] = plan.copy_bytes();
  j["notes"] = plan.notes;
  // Tensor names may hold any bytes (graphs built through the API): not-UTF-8 becomes U+FFFD.
  return j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace duet
