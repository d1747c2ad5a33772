// The cost model: a roofline of the op's flops at the tier's share of the device's peak against
// its bytes at the device's bandwidth, plus a launch; copies go through host memory.
#include "cost_model.h"

#include <algorithm>
#include <string_view>

#include "duet/planner.h"

namespace duet {

namespace {

// Assumed when a capability record does not know its throughput.
constexpr double kDefaultGflops = 50.0;
constexpr double kDefaultMemoryGbps = 20.0;
constexpr double kDefaultLinkGbps = 8.0;
constexpr double kTransferLatencyUs = 10.0;

// The share of the device's peak a tier reaches on the ops it is made for.
double tier_efficiency(Tier tier) {
  switch (tier) {
    case Tier::cublas:
      return 0.7;
    case Tier::flash:
    case Tier::pipelined:
      return 0.6;
    case Tier::coopmat:
    case Tier::simd:
      return 0.5;
    case Tier::tiled:
      return 0.4;
    case Tier::register_blocked:
      return 0.3;
    case Tier::generic:
      return 0.15;
    case Tier::reference:
      return 0.02;
  }
  return 0.2;
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

// One leg of a copy through host memory.
double leg_us(uint64_t bytes, const DeviceCaps* c) {
  if (!c) return 0.0;
  const double b = static_cast<double>(bytes);
  if (c->type == DeviceType::cpu) return b / (memory_gbps(*c) * 1e3);
  const double link = c->host_link_gbps > 0 ? c->host_link_gbps : kDefaultLinkGbps;
  return b / (link * 1e3) + kTransferLatencyUs;
}

}  // namespace

namespace planning {

double launch_us(const DeviceCaps& c) {
  return c.type == DeviceType::cpu ? 1.0 : 5.0;
}

double estimate_cast_us(uint64_t bytes, const DeviceCaps& caps) {
  return static_cast<double>(bytes) * 2.0 / (memory_gbps(caps) * 0.8 * 1e3) + launch_us(caps);
}

}  // namespace planning

using planning::launch_us;

double estimate_kernel_us(const OpDesc& op, const KernelChoice& choice, const DeviceCaps& caps) {
  if (is_view(op.kind)) return 0.0;
  const double flops = op_flops(op), bytes = op_bytes(op);
  const double compute =
      flops / (peak_gflops(choice.precision, caps) * tier_efficiency(choice.tier) * 1e3);
  const double memory = bytes / (memory_gbps(caps) * 0.8 * 1e3);
  return std::max(compute, memory) + launch_us(caps);
}

double estimate_transfer_us(uint64_t bytes, const DeviceCaps* from, const DeviceCaps* to) {
  return leg_us(bytes, from) + leg_us(bytes, to);
}

}  // namespace duet
