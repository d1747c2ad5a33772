// Measuring a device: one small graph per kernel family, planned on the device alone with the
// tier and precision fixed by a policy, run through an Executor (so the device's lock is held as
// for any engine) and timed per kernel step. The shapes are small enough that a family takes a
// few milliseconds per run on lavapipe and large enough that launches do not dominate.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>

#include "duet/calibration.h"
#include "duet/executor.h"
#include "duet/graph.h"
#include "duet/internal/log.h"
#include "duet/planner.h"

namespace duet {

namespace {

using Clock = std::chrono::steady_clock;

// Timed runs per measurement: at least kMinRuns, then until kTargetSeconds of them or kMaxRuns.
constexpr int kMinRuns = 3;
constexpr int kMaxRuns = 15;
constexpr double kTargetSeconds = 0.05;
// Tiers whose peak-model estimate is this many times the best tier's are not contenders and
// are not measured (on lavapipe that spares compiling the shared-memory kernels).
constexpr double kContenderFactor = 4.0;
constexpr int kMaxTiers = 3;

struct Probe {
  CostFamily family;
  std::string shape;  // for explain
  Graph graph;
};

Result<Probe> probe(CostFamily f, DType t, bool tiny = false) {
  GraphBuilder b("calibration");
  std::string shape;
  const std::string ts(dtype_name(t));
  switch (f) {
    case CostFamily::matmul: {
      ValueId x = b.input("x", t, {256, 512});
      ValueId w = b.input("w", t, {512, 512});
      b.output(b.matmul(x, w, false, "op"));
      shape = ts + "[256,512] x " + ts + "[512,512]";
      break;
    }
    case CostFamily::attention: {
      std::vector<int64_t> s = {1, 4, 256, 64};
      ValueId q = b.input("q", t, s), k = b.input("k", t, s), v = b.input("v", t, s);
      b.output(b.attention(q, k, v, false, "op"));
      shape = "q, k, v " + ts + "[1,4,256,64]";
      break;
    }
    case CostFamily::memory: {
      const std::vector<int64_t> s =
          tiny ? std::vector<int64_t>{16} : std::vector<int64_t>{1024, 1024};
      ValueId x = b.input("x", t, s), y = b.input("y", t, s);
      b.output(b.add(x, y, "op"));
      shape = "add " + ts + (tiny ? "[16]" : "[1024,1024]");
      break;
    }
  }
  DUET_ASSIGN_OR_RETURN(Graph g, b.build());
  return Probe{f, shape, std::move(g)};
}

std::map<std::string, HostTensor> random_inputs(const Graph& g) {
  std::map<std::string, HostTensor> in;
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (int id : g.inputs()) {
    const GraphValue& v = g.value(id);
    HostTensor t = HostTensor::empty(v.desc);
    std::vector<double> x(static_cast<size_t>(t.numel()));
    for (double& e : x) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      e = 0.25 + 0.5 * static_cast<double>(state >> 40) / static_cast<double>(1ull << 24);
    }
    t.from_doubles(x);
    in[v.name] = std::move(t);
  }
  return in;
}

// The fastest of several timed runs of the graph's kernel on `device` with `tier` at `p`
// (seconds, from the kernel's start until the device finished it).
Result<double> time_kernel(Device& device, const Graph& g, Tier tier, Precision p) {
  const std::string term =
      "allow=" + device.id() + "." + std::string(tier_name(tier)) + ";precision=" + std::string(precision_name(p));
  DUET_ASSIGN_OR_RETURN(Policy policy, parse_policy(term, {}, "calibration"));
  std::vector<PlanDevice> devices = {
      PlanDevice{device.id(), device.caps(), &device.rules(), {}, {}}};
  DUET_ASSIGN_OR_RETURN(Plan plan, make_plan(g, std::move(devices), policy));
  int step = -1;
  for (size_t i = 0; i < plan.steps.size(); ++i)
    if (plan.steps[i].kind == StepKind::kernel && plan.steps[i].name == "op")
      step = static_cast<int>(i);
  if (step < 0) return Status(Code::internal, "calibration: the plan has no kernel step");
  Device* d = &device;
  DUET_ASSIGN_OR_RETURN(auto exec, Executor::create(g, std::move(plan), std::span(&d, 1)));
  const auto inputs = random_inputs(g);
  DUET_TRY(exec->run(inputs).status());  // warm-up: pipelines compiled, caches filled
  double best = INFINITY, total = 0;
  for (int run = 0; run < kMaxRuns && (run < kMinRuns || total < kTargetSeconds); ++run) {
    std::vector<StepTime> times;
    DUET_TRY(exec->run_timed(inputs, times).status());
    for (const StepTime& t : times)
      if (t.step == step) {
        best = std::min(best, t.seconds);
        total += t.seconds;
      }
  }
  if (!std::isfinite(best)) return Status(Code::internal, "calibration: the kernel was not timed");
  return best;
}

// The precisions and tiers worth measuring for a family at dtype t: usable choices that read
// the graph's dtype as it is and compute at least at its precision, the fastest by the
// peak model first, those within kContenderFactor of it.
std::vector<KernelChoice> contenders(const Device& device, const OpDesc& op) {
  const Precision asked = precision_of(op.inputs[0].dtype);
  std::vector<std::pair<double, KernelChoice>> ok;
  for (KernelChoice& c : device.choices(op)) {
    if (!c.ok || c.precision == Precision::f64 || !covers(c.precision, asked) ||
        !c.reads_as_given(op))
      continue;
    bool seen = false;
    for (auto& [t, k] : ok) seen = seen || (k.tier == c.tier && k.precision == c.precision);
    if (!seen) ok.emplace_back(estimate_kernel_us(op, c, device.caps()), std::move(c));
  }
  std::stable_sort(ok.begin(), ok.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<KernelChoice> out;
  for (auto& [t, c] : ok)
    if (out.size() < kMaxTiers && t <= ok.front().first * kContenderFactor)
      out.push_back(std::move(c));
  return out;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

}  // namespace

Result<Calibration> calibrate(Device& device) {
  const auto t0 = Clock::now();
  Calibration c;
  c.device_key = calibration_key(device.caps());
  c.measured_at = utc_now();

  // The launch: a kernel with almost nothing to do.
  {
    DUET_ASSIGN_OR_RETURN(Probe tiny, probe(CostFamily::memory, DType::f32, true));
    const OpDesc& op = tiny.graph.nodes()[0].op;
    auto picks = contenders(device, op);
    if (picks.empty())
      return Status(Code::unsupported,
                    "calibration: " + device.id() + " cannot run " + describe(op));
    DUET_ASSIGN_OR_RETURN(double s,
                          time_kernel(device, tiny.graph, picks[0].tier, picks[0].precision));
    c.launch_us = s * 1e6;
  }
  // f16 and bf16 are measured where the device computes them faster than f32 (tensor cores,
  // packed half arithmetic); elsewhere they are widened to f32, and the f32 rate says it.
  const DeviceCaps& caps = device.caps();
  std::vector<DType> dtypes = {DType::f32};
  if (caps.peak_gflops_f16 > caps.peak_gflops_f32) dtypes.push_back(DType::f16);
  if (caps.bf16_arith && caps.peak_gflops_bf16 > caps.peak_gflops_f32)
    dtypes.push_back(DType::bf16);
  for (CostFamily f : {CostFamily::memory, CostFamily::matmul, CostFamily::attention}) {
    for (DType t : dtypes) {
      if (f == CostFamily::memory && t != DType::f32) continue;  // bandwidth: one dtype says it
      DUET_ASSIGN_OR_RETURN(Probe p, probe(f, t));
      const OpDesc& op = p.graph.nodes()[0].op;
      for (const KernelChoice& k : contenders(device, op)) {
        if (c.find(f, k.tier, k.precision)) continue;  // f16 read by an f32 kernel: measured
        const auto started = Clock::now();
        auto s = time_kernel(device, p.graph, k.tier, k.precision);
        if (!s.ok()) {
          log().warn("calibration of {} on {}: {} {} not measured: {}", describe(op), device.id(),
                     tier_name(k.tier), precision_name(k.precision), s.status().message());
          continue;
        }
        // The launch is counted apart; what is left is the kernel's work.
        const double work = std::max(*s - c.launch_us * 1e-6, 0.25 * *s);
        MeasuredRate r;
        r.family = f;
        r.tier = k.tier;
        r.precision = k.precision;
        r.shape = p.shape;
        if (f == CostFamily::memory)
          r.gbps = op_bytes(op) / work / 1e9;
        else
          r.gflops = op_flops(op) / work / 1e9;
        log().debug("{} calibration: {} {} {} in {:.2f} s", device.id(), p.shape, tier_name(k.tier),
                    precision_name(k.precision),
                    std::chrono::duration<double>(Clock::now() - started).count());
        c.rates.push_back(std::move(r));
      }
    }
  }
  c.cost_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return c;
}

}  // namespace duet
