// Measuring devices: one small graph per kernel family, planned on each device alone with the
// tier and precision fixed by a policy, run through an Executor (so the device's lock is held as
// for any engine) and timed per kernel step. Devices measured together take turns, round after
// round, and each keeps its best run: a burst of load from other work then slows every device
// alike instead of one device's whole measurement, and the ranking between them holds on a
// busy machine. On the host's cores (the CPU, lavapipe) the shapes are small enough that a family
// takes a few milliseconds per run and large enough that launches do not dominate; a GPU gets
// shapes of a model layer's size (kGpuProbe).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <initializer_list>
#include <string>

#include "duet/calibration.h"
#include "duet/executor.h"
#include "duet/graph.h"
#include "duet/internal/log.h"
#include "duet/planner.h"

namespace duet {

namespace {

using Clock = std::chrono::steady_clock;

// Rounds of two timed runs per measurement: at least kMinRounds, then until kTargetSeconds
// have passed or kMaxRounds.
constexpr int kMinRounds = 5;
constexpr int kMaxRounds = 12;
constexpr double kTargetSeconds = 0.3;
// Tiers whose peak-model estimate is this many times the best tier's are not contenders and
// are not measured (on lavapipe that spares compiling the shared-memory kernels).
constexpr double kContenderFactor = 4.0;
constexpr size_t kMaxTiers = 3;
// A kernel this many times slower than the peak model predicts was disturbed.
constexpr double kDoubtFactor = 8.0;

struct Probe {
  CostFamily family;
  std::string shape;  // for explain
  Graph graph;
};

// The probes' sizes. On a GPU the CPU's sizes are done in a few microseconds, mostly launch, and
// fit its last-level cache: rates measured there would rate a GPU several times below what it
// reaches on a model's shapes. A GPU gets problems of a model layer's size instead.
struct ProbeSize {
  int64_t m, n, k;           // matmul [m,k] x [k,n]
  int64_t heads, seq, head;  // attention q, k, v [1,heads,seq,head]
  int64_t rows, cols;        // add [rows,cols]
};
constexpr ProbeSize kHostProbe{256, 512, 512, 4, 256, 64, 1024, 1024};
constexpr ProbeSize kGpuProbe{1024, 4096, 4096, 16, 1024, 128, 4096, 4096};

std::string dims(std::initializer_list<int64_t> d) {
  std::string s = "[";
  for (int64_t v : d) s += (s.size() > 1 ? "," : "") + std::to_string(v);
  return s + "]";
}

Result<Probe> probe(CostFamily f, DType t, const ProbeSize& z, bool tiny = false) {
  GraphBuilder b("calibration");
  std::string shape;
  const std::string ts(dtype_name(t));
  switch (f) {
    case CostFamily::matmul: {
      ValueId x = b.input("x", t, {z.m, z.k});
      ValueId w = b.input("w", t, {z.k, z.n});
      b.output(b.matmul(x, w, false, "op"));
      shape = ts + dims({z.m, z.k}) + " x " + ts + dims({z.k, z.n});
      break;
    }
    case CostFamily::attention: {
      std::vector<int64_t> s = {1, z.heads, z.seq, z.head};
      ValueId q = b.input("q", t, s), k = b.input("k", t, s), v = b.input("v", t, s);
      b.output(b.attention(q, k, v, false, "op"));
      shape = "q, k, v " + ts + dims({1, z.heads, z.seq, z.head});
      break;
    }
    case CostFamily::memory: {
      const std::vector<int64_t> s =
          tiny ? std::vector<int64_t>{16} : std::vector<int64_t>{z.rows, z.cols};
      ValueId x = b.input("x", t, s), y = b.input("y", t, s);
      b.output(b.add(x, y, "op"));
      shape = "add " + ts + (tiny ? "[16]" : dims({z.rows, z.cols}));
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

// The choices worth measuring for a probe's op on a device: usable, reading the graph's dtype
// as it is and computing at least at its precision; the fastest by the peak model first, and
// those within kContenderFactor of it.
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

// One kernel of one probe on one device, ready to run: its plan fixes the tier and precision.
struct Timer {
  size_t device = 0;
  bool launch = false;  // the tiny op whose time is the launch
  CostFamily family = CostFamily::memory;
  KernelChoice choice;
  std::string shape;
  OpDesc op;
  std::unique_ptr<Executor> exec;
  std::map<std::string, HostTensor> inputs;
  int step = -1;
  double best = INFINITY;
};

Status prepare(Timer& t, Device& device, const Graph& g) {
  const std::string term = "allow=" + device.id() + "." + std::string(tier_name(t.choice.tier)) +
                           ";precision=" + std::string(precision_name(t.choice.precision));
  DUET_ASSIGN_OR_RETURN(Policy policy, parse_policy(term, {}, "calibration"));
  std::vector<PlanDevice> devices = {
      PlanDevice{device.id(), device.caps(), &device.rules(), {}, {}}};
  DUET_ASSIGN_OR_RETURN(Plan plan, make_plan(g, std::move(devices), policy));
  for (size_t i = 0; i < plan.steps.size(); ++i)
    if (plan.steps[i].kind == StepKind::kernel && plan.steps[i].name == "op")
      t.step = static_cast<int>(i);
  if (t.step < 0) return Status(Code::internal, "calibration: the plan has no kernel step");
  Device* d = &device;
  DUET_ASSIGN_OR_RETURN(t.exec, Executor::create(g, std::move(plan), std::span(&d, 1)));
  t.inputs = random_inputs(g);
  DUET_TRY(t.exec->run(t.inputs).status());  // warm-up: pipelines compiled, caches filled
  return {};
}

Status time_once(Timer& t) {
  std::vector<StepTime> times;
  DUET_TRY(t.exec->run_timed(t.inputs, times).status());
  for (const StepTime& s : times)
    if (s.step == t.step) t.best = std::min(t.best, s.seconds);
  return {};
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

// The timers of one device: the launch, the bandwidth, and each family's contenders in f32, and
// in f16 and bf16 where the device computes them faster than f32 (tensor cores, packed half
// arithmetic); elsewhere they are widened to f32 and the f32 rate says it. A GPU whose record
// states no peaks (Vulkan's drivers say none) is measured in f16 too where it stores f16: its
// matrix units, if any, run there.
Status add_timers(std::vector<Timer>& timers, size_t index, Device& device) {
  const DeviceCaps& caps = device.caps();
  const bool gpu = caps.type != DeviceType::cpu;
  const ProbeSize& size = gpu ? kGpuProbe : kHostProbe;
  {
    DUET_ASSIGN_OR_RETURN(Probe tiny, probe(CostFamily::memory, DType::f32, size, true));
    auto picks = contenders(device, tiny.graph.nodes()[0].op);
    if (picks.empty())
      return Status(Code::unsupported, "calibration: " + device.id() + " cannot run " +
                                           describe(tiny.graph.nodes()[0].op));
    Timer t;
    t.device = index;
    t.launch = true;
    t.choice = picks[0];
    DUET_TRY(prepare(t, device, tiny.graph));
    timers.push_back(std::move(t));
  }
  std::vector<DType> dtypes = {DType::f32};
  if (caps.peak_gflops_f16 > caps.peak_gflops_f32 ||
      (gpu && caps.peak_gflops_f32 <= 0 && caps.fp16_storage))
    dtypes.push_back(DType::f16);
  if (caps.bf16_arith && caps.peak_gflops_bf16 > caps.peak_gflops_f32)
    dtypes.push_back(DType::bf16);
  for (CostFamily f : {CostFamily::memory, CostFamily::matmul, CostFamily::attention}) {
    for (DType dt : dtypes) {
      if (f == CostFamily::memory && dt != DType::f32) continue;  // bandwidth: one dtype says it
      DUET_ASSIGN_OR_RETURN(Probe p, probe(f, dt, size));
      const OpDesc& op = p.graph.nodes()[0].op;
      for (const KernelChoice& k : contenders(device, op)) {
        bool measured = false;  // f16 read by an f32 kernel: the f32 probe measures it
        for (const Timer& t : timers)
          measured = measured || (t.device == index && !t.launch && t.family == f &&
                                  t.choice.tier == k.tier && t.choice.precision == k.precision);
        if (measured) continue;
        Timer t;
        t.device = index;
        t.family = f;
        t.choice = k;
        t.shape = p.shape;
        t.op = op;
        const auto started = Clock::now();
        if (Status s = prepare(t, device, p.graph); !s.ok()) {
          log().warn("calibration of {} on {}: {} {} not measured: {}", describe(op), device.id(),
                     tier_name(k.tier), precision_name(k.precision), s.message());
          continue;
        }
        log().debug("{} calibration: {} {} {} prepared in {:.2f} s", device.id(), p.shape,
                    tier_name(k.tier), precision_name(k.precision),
                    std::chrono::duration<double>(Clock::now() - started).count());
        timers.push_back(std::move(t));
      }
    }
  }
  return {};
}

}  // namespace

Result<std::vector<Calibration>> calibrate(std::span<Device* const> devices) {
  const auto t0 = Clock::now();
  std::vector<Timer> timers;
  std::vector<Calibration> out(devices.size());
  for (size_t i = 0; i < devices.size(); ++i) {
    out[i].device_key = calibration_key(devices[i]->caps());
    out[i].measured_at = utc_now();
    DUET_TRY(add_timers(timers, i, *devices[i]));
  }
  // Rounds in which every kernel of every device runs twice, each keeping its best.
  const auto runs_start = Clock::now();
  for (int round = 0; round < kMaxRounds; ++round) {
    const double spent = std::chrono::duration<double>(Clock::now() - runs_start).count();
    if (round >= kMinRounds && spent >= kTargetSeconds) break;
    for (Timer& t : timers)
      for (int k = 0; k < 2; ++k) DUET_TRY(time_once(t));
  }
  for (const Timer& t : timers)
    if (t.launch) out[t.device].launch_us = t.best * 1e6;
  for (const Timer& t : timers) {
    if (t.launch) continue;
    Calibration& c = out[t.device];
    // The launch is counted apart; what is left is the kernel's work.
    const double work = std::max(t.best - c.launch_us * 1e-6, 0.25 * t.best);
    MeasuredRate r;
    r.family = t.family;
    r.tier = t.choice.tier;
    r.precision = t.choice.precision;
    r.efficiency = t.choice.efficiency;
    r.shape = t.shape;
    if (t.family == CostFamily::memory)
      r.gbps = op_bytes(t.op) / work / 1e9;
    else
      r.gflops = op_flops(t.op) / work / 1e9;
    // Far slower than the device's peaks allow: other work took the device (a busy machine).
    const double model = estimate_kernel_us(t.op, t.choice, devices[t.device]->caps()) * 1e-6;
    if (t.best > kDoubtFactor * model && c.doubt.empty()) {
      char b[64];
      std::snprintf(b, sizeof b, "%.0f times", t.best / model);
      c.doubt = std::string(cost_family_name(t.family)) + " " +
                std::string(tier_name(t.choice.tier)) + " " +
                std::string(precision_name(t.choice.precision)) + " ran " + b +
                " slower than the device's peaks predict (other work on the machine?)";
    }
    c.rates.push_back(std::move(r));
  }
  const double cost = std::chrono::duration<double>(Clock::now() - t0).count();
  for (Calibration& c : out) c.cost_s = cost;
  return out;
}

Result<Calibration> calibrate(Device& device) {
  Device* d = &device;
  DUET_ASSIGN_OR_RETURN(std::vector<Calibration> c, calibrate(std::span<Device* const>(&d, 1)));
  return std::move(c[0]);
}

}  // namespace duet
