// The cost model: a roofline of the op's flops against its bytes, at the rates the device
// reaches, plus a launch. Rates come from the device's calibration where it was measured, else
// from its capability record's peaks scaled by the kernel's efficiency class (set by its
// backend's rules: KernelChoice::efficiency). Copies go through host memory. docs/planner.md,
// "Cost model".
#include "cost_model.h"

#include <algorithm>
#include <cstdio>
#include <string_view>

#include "duet/planner.h"

namespace duet {

namespace {

// Assumed when a capability record does not know its throughput.
constexpr double kDefaultGflops = 50.0;
constexpr double kDefaultMemoryGbps = 20.0;
constexpr double kDefaultLinkGbps = 8.0;
constexpr double kTransferLatencyUs = 10.0;

// A GPU-style API (Vulkan) running on the host's cores: lavapipe, SwiftShader.
bool gpu_api_on_cpu(const DeviceCaps& c) {
  return c.type == DeviceType::cpu && c.backend != BackendKind::cpu;
}

// The share of the device's peak a kernel reaches on a large problem: the efficiency class its
// backend's rules gave it (each kernel family's own), or, for a choice made by hand, a modest one.
double efficiency(const KernelChoice& choice) {
  constexpr double kUnsaid = 0.2;
  return choice.efficiency > 0 ? choice.efficiency : kUnsaid;
}

// The share of the memory bandwidth streaming kernels reach: on a CPU-type Vulkan device every
// store is a loop over the lanes (lavapipe: add at 0.2 of the host's bandwidth).
double bandwidth_efficiency(const DeviceCaps& c) {
  return gpu_api_on_cpu(c) ? 0.2 : 0.8;
}

double peak_gflops(Precision p, const DeviceCaps& c) {
  double v = 0;
  switch (p) {
    case Precision::f16:
      v = c.peak_gflops_f16;
      break;
    case Precision::bf16:
      v = c.peak_gflops_bf16;
      break;
    case Precision::f32:
      v = c.peak_gflops_f32;
      break;
    case Precision::f64:
      v = c.peak_gflops_f32 / 16.0;
      break;
  }
  if (v <= 0) v = c.peak_gflops_f32 > 0 ? c.peak_gflops_f32 : kDefaultGflops;
  return v;
}

double memory_gbps(const DeviceCaps& c) {
  return c.memory_gbps > 0 ? c.memory_gbps : kDefaultMemoryGbps;
}

double model_launch_us(const DeviceCaps& c) {
  if (c.type != DeviceType::cpu) return 5.0;
  return gpu_api_on_cpu(c) ? 30.0 : 2.0;  // a submission and a fence on lavapipe
}

// One leg of a copy through host memory.
double leg_us(uint64_t bytes, const DeviceCaps* c) {
  if (!c) return 0.0;
  const double b = static_cast<double>(bytes);
  if (c->type == DeviceType::cpu) return b / (memory_gbps(*c) * 1e3);
  const double link = c->host_link_gbps > 0 ? c->host_link_gbps : kDefaultLinkGbps;
  return b / (link * 1e3) + kTransferLatencyUs;
}

std::string number(double v, const char* unit) {
  char b[48];
  std::snprintf(b, sizeof b, v >= 100 ? "%.0f %s" : v >= 10 ? "%.1f %s" : "%.2f %s", v, unit);
  return b;
}

// The precision a choice's arithmetic is rated at (KernelChoice::arithmetic).
Precision rated(const KernelChoice& choice) {
  return choice.arithmetic.value_or(choice.precision);
}

// Bytes a choice moves beyond the op's own inputs and output: cuBLAS on a block-quantized
// weight writes the weight's dequantized tiles to its workspace and reads them back, chunk by
// chunk, before and during the GEMM (backends/cuda/qgemm.h).
double staged_bytes(const OpDesc& op, const KernelChoice& choice) {
  if (choice.tier != Tier::cublas || op.kind != OpKind::matmul || op.inputs.size() < 2 ||
      !is_quantized(op.inputs[1].dtype))
    return 0.0;
  return 2.0 * static_cast<double>(op.inputs[1].numel()) *
         static_cast<double>(dtype_size(precision_storage(rated(choice))));
}

// The share of the streaming bandwidth a choice's reads reach (KernelChoice::memory_share).
double memory_share(const KernelChoice& choice) {
  return choice.memory_share > 0 ? std::min(choice.memory_share, 1.0) : 1.0;
}

}  // namespace

namespace planning {

Rates rates_for(CostFamily f, const KernelChoice& choice, const DeviceCaps& caps,
                const Calibration* measured) {
  Rates r;
  r.gflops = peak_gflops(rated(choice), caps) * efficiency(choice);
  r.gbps = memory_gbps(caps) * bandwidth_efficiency(caps);
  r.launch_us = model_launch_us(caps);
  r.basis = "peak x " + std::string(tier_name(choice.tier)) + " efficiency";
  if (!measured || measured->empty()) return r;
  if (measured->launch_us > 0) r.launch_us = measured->launch_us;
  for (const MeasuredRate& m : measured->rates)
    if (m.family == CostFamily::memory && m.gbps > 0) {
      r.gbps = m.gbps;
      break;
    }
  if (f == CostFamily::memory) {
    r.basis = "measured bandwidth";
    return r;
  }
  // The measured rate of this tier and precision; else of this tier at another precision,
  // scaled by the peaks; else of another tier, scaled by the tiers' efficiencies.
  const MeasuredRate* best = measured->find(f, choice.tier, rated(choice));
  double scale = 1.0;
  if (!best)
    for (const MeasuredRate& m : measured->rates)
      if (m.family == f && m.tier == choice.tier && m.gflops > 0) {
        best = &m;
        scale = peak_gflops(rated(choice), caps) / peak_gflops(m.precision, caps);
        break;
      }
  if (!best)
    for (const MeasuredRate& m : measured->rates)
      if (m.family == f && m.gflops > 0 && m.efficiency > 0) {
        best = &m;
        scale = peak_gflops(rated(choice), caps) * efficiency(choice) /
                (peak_gflops(m.precision, caps) * m.efficiency);
        break;
      }
  if (!best || best->gflops <= 0) return r;
  r.gflops = best->gflops * scale;
  r.basis = "measured " + std::string(cost_family_name(f)) + " " +
            std::string(tier_name(best->tier)) + " " +
            std::string(precision_name(best->precision)) + (scale != 1.0 ? ", scaled" : "");
  return r;
}

double launch_us(const DeviceCaps& c, const Calibration* measured) {
  return measured && measured->launch_us > 0 ? measured->launch_us : model_launch_us(c);
}

double estimate_cast_us(uint64_t bytes, const DeviceCaps& caps, const Calibration* measured) {
  KernelChoice any;
  any.tier = Tier::generic;
  const Rates r = rates_for(CostFamily::memory, any, caps, measured);
  return static_cast<double>(bytes) * 2.0 / (r.gbps * 1e3) + r.launch_us;
}

}  // namespace planning

double estimate_kernel_us(const OpDesc& op, const KernelChoice& choice, const DeviceCaps& caps,
                          const Calibration* measured) {
  if (is_view(op.kind)) return 0.0;
  const CostFamily f = cost_family(op.kind);
  const planning::Rates r = planning::rates_for(f, choice, caps, measured);
  const double compute = op_flops(op) / (r.gflops * 1e3);
  const double memory = op_bytes(op) / (r.gbps * memory_share(choice) * 1e3);
  return std::max(compute, memory) + staged_bytes(op, choice) / (r.gbps * 1e3) +
         r.launch_us * (1 + std::max(choice.extra_launches, 0));
}

std::string estimate_basis(const OpDesc& op, const KernelChoice& choice, const DeviceCaps& caps,
                           const Calibration* measured) {
  if (is_view(op.kind)) return "a view: no kernel";
  const CostFamily f = cost_family(op.kind);
  const planning::Rates r = planning::rates_for(f, choice, caps, measured);
  const double flops = op_flops(op), bytes = op_bytes(op);
  const double share = memory_share(choice);
  const double compute = flops / (r.gflops * 1e3), memory = bytes / (r.gbps * share * 1e3);
  const bool measured_launch = measured && measured->launch_us > 0;
  std::string notes;
  if (measured && !measured->empty()) notes = "measured";
  if (share < 1)
    notes +=
        (notes.empty() ? "" : ", ") + number(share * 100, "%") + " of it: too few loads in flight";
  std::string s = compute >= memory
                      ? number(flops / 1e9, "GFLOP") + " at " + number(r.gflops, "GFLOP/s") + " (" +
                            r.basis + ")"
                      : number(bytes / 1e6, "MB") + " at " + number(r.gbps * share, "GB/s") +
                            (notes.empty() ? "" : " (" + notes + ")");
  if (const double staged = staged_bytes(op, choice); staged > 0)
    s += " + " + number(staged / 1e6, "MB") + " of dequantized weight tiles at " +
         number(r.gbps, "GB/s");
  const int launches = 1 + std::max(choice.extra_launches, 0);
  return s + " + " + (launches > 1 ? std::to_string(launches) + " x " : "") +
         format_us(r.launch_us) + (launches > 1 ? " launches" : " launch") +
         (measured_launch ? " (measured)" : "");
}

double estimate_transfer_us(uint64_t bytes, const DeviceCaps* from, const DeviceCaps* to) {
  return leg_us(bytes, from) + leg_us(bytes, to);
}

}  // namespace duet
