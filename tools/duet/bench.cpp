#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "check/check.h"
#include "duet/backends.h"
#include "duet/bandwidth.h"
#include "duet/calibration.h"
#include "duet/commands.h"
#include "duet/common.h"
#include "duet/internal/files.h"
#include "duet/internal/text.h"
#include "duet/planner.h"
#include "duet/quantize.h"

namespace duet::cli {

// Named for the command, so that the sources compile together in a unity build.
namespace bench_command {
namespace {

struct Options {
  ModelArgs model;  // a graph file or ONNX model whose ops are timed instead of the built-in set
  std::vector<std::string> devices, ops, dtypes, tiers;
  std::string json_path, plot_path;
  int repeats = 10;
  double min_seconds = 1.0;
  bool list = false;
};

struct Row {
  std::string name, device, tier, precision;
  int count = 1;  // the graph nodes the row stands for (identical ops are timed once)
  int runs = 0;   // timed samples
  int batch = 1;  // runs a sample times back to back, before one synchronize (GPUs)
  double median = 0, min = 0, max = 0;  // seconds a run
  double first = 0;  // seconds of the warm-up run: pipelines and kernels made, first touches
  // Seconds a run by the device's own clock (timestamps around its kernels, one batch), beside
  // the host's `median`; 0 where the device has no kernel timing (CPU devices).
  double kernel = 0;
  double warm = 0;  // seconds of warm-up batches before the timed ones (GPUs)
  double gflops = 0, gbps = 0, flop_fraction = 0, bw_fraction = 0;
  double estimate = 0;        // seconds: the planner's cost model for this kernel on this device
  bool memory_bound = false;  // flops per byte below the device's peak flops per byte of bandwidth
  std::string error;
};

// What a device's rows are judged by: its capability record, with the peaks and bandwidth of
// another route to the same GPU where its own record states none (Vulkan's drivers state none;
// the CUDA route to the same GPU derives them from the architecture and clocks), and its
// calibration (the cost model's measured rates) for the estimates.
struct Rated {
  DeviceCaps caps;
  std::string rates_from;  // the device whose peaks are borrowed, or empty
  Calibration calibration;
};

Rated rated(const Registry& reg, Device& d, Calibration calibration) {
  Rated r{d.caps(), {}, std::move(calibration)};
  DeviceCaps& c = r.caps;
  if (c.type == DeviceType::cpu || !c.uuid || (c.peak_gflops_f32 > 0 && c.memory_gbps > 0))
    return r;
  for (Device* o : reg.devices()) {
    const DeviceCaps& t = o->caps();
    if (o == &d || t.uuid != c.uuid || t.peak_gflops_f32 <= 0) continue;
    if (c.peak_gflops_f32 <= 0) {
      c.peak_gflops_f32 = t.peak_gflops_f32;
      c.peak_gflops_f16 = t.peak_gflops_f16;
      c.peak_gflops_bf16 = t.peak_gflops_bf16;
    }
    if (c.memory_gbps <= 0) c.memory_gbps = t.memory_gbps;
    r.rates_from = o->id();
    break;
  }
  return r;
}

// What the rows' fractions are measured against: the host's measured read bandwidth for devices
// that read host memory, the capability record's figures otherwise.
struct Yardstick {
  ReadBandwidth host;
  double host_ridge = 0;  // the host CPU's peak f32 flops per byte of measured bandwidth

  double bandwidth(const DeviceCaps& c) const {
    return c.type == DeviceType::cpu && host.gbps > 0 ? host.gbps : c.memory_gbps;
  }
};

check::Case make(std::string name, OpKind k, std::vector<TensorDesc> in, OpAttrs a = {}) {
  check::Case c;
  c.name = std::move(name);
  c.kind = k;
  c.attrs = std::move(a);
  c.fills.assign(in.size(), check::Fill::unit);
  c.inputs = std::move(in);
  return c;
}

// The benchmark set: the shapes the performance notes quote, plus memory-bound ops.
std::vector<check::Case> bench_cases() {
  auto D = [](DType t, std::initializer_list<int64_t> s) { return TensorDesc::contiguous(t, s); };
  std::vector<check::Case> v;
  for (DType t : {DType::f32, DType::f16}) {
    const std::string ts(dtype_name(t));
    v.push_back(make("matmul " + ts + " 1024x1024x1024", OpKind::matmul,
                     {D(t, {1024, 1024}), D(t, {1024, 1024})}));
    OpAttrs tb;
    tb.transpose_b = true;  // activations [N=512, K] times a weight stored [M=4096, K]
    v.push_back(make("matmul " + ts + " M4096 N512 K14336", OpKind::matmul,
                     {D(t, {512, 14336}), D(t, {4096, 14336})}, tb));
    OpAttrs causal;
    causal.causal = true;
    v.push_back(make("attention " + ts + " B1 H16 L1024 D64 causal", OpKind::attention,
                     {D(t, {1, 16, 1024, 64}), D(t, {1, 16, 1024, 64}), D(t, {1, 16, 1024, 64})},
                     causal));
    v.push_back(make("attention " + ts + " decode Hq64 Hkv8 Lk7680 D64", OpKind::attention,
                     {D(t, {1, 64, 1, 64}), D(t, {1, 8, 7680, 64}), D(t, {1, 8, 7680, 64})}));
  }
  // Prefill attention at the shapes GPU attention kernels are compared at (PyTorch's SDPA in
  // tools/gpu): sequences of 2k to 8k, head dims 128 and 64, causal and not.
  OpAttrs causal;
  causal.causal = true;
  for (DType t : {DType::f16, DType::bf16}) {
    const std::string ts(dtype_name(t));
    for (int64_t d : {128, 64}) {
      const TensorDesc x = D(t, {1, 32, 4096, d});
      v.push_back(make("attention " + ts + " B1 H32 L4096 D" + std::to_string(d) + " causal",
                       OpKind::attention, {x, x, x}, causal));
    }
    const TensorDesc y = D(t, {4, 16, 2048, 64});
    v.push_back(make("attention " + ts + " B4 H16 L2048 D64", OpKind::attention, {y, y, y}));
  }
  const TensorDesc l8k = D(DType::f16, {1, 16, 8192, 128});
  v.push_back(
      make("attention f16 B1 H16 L8192 D128 causal", OpKind::attention, {l8k, l8k, l8k}, causal));
  v.push_back(make("matmul f32 2048x2048x2048", OpKind::matmul,
                   {D(DType::f32, {2048, 2048}), D(DType::f32, {2048, 2048})}));
  // Prefill through a linear layer in bf16 and f32: the low-precision arithmetic's gain.
  for (DType t : {DType::f32, DType::bf16})
    v.push_back(make("matmul " + std::string(dtype_name(t)) + " M512 N2048 K2048", OpKind::matmul,
                     {D(t, {512, 2048}), D(t, {2048, 2048})}));
  // Decode: one row (and a batch of 8) through a weight stored [N, K] as checkpoints store it,
  // and attention of one query against a long cache; each reads far more than the last-level
  // cache holds, so it is bound by memory bandwidth.
  OpAttrs tb;
  tb.transpose_b = true;
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    v.push_back(make("matmul " + std::string(dtype_name(t)) + " decode M1 N4096 K14336",
                     OpKind::matmul, {D(t, {1, 14336}), D(t, {4096, 14336})}, tb));
  v.push_back(make("matmul f16 decode M8 N4096 K14336", OpKind::matmul,
                   {D(DType::f16, {8, 14336}), D(DType::f16, {4096, 14336})}, tb));
  // Quantized weights: decode (one row, and 8) and prefill (512 rows) through the same layer,
  // beside the f32 rows above. The weights are random blocks (timing does not need fitted ones).
  // Every block format has its rows (--dtype picks).
  for (DType q : kQuantizedDTypes) {
    const std::string qs(dtype_name(q));
    v.push_back(make("matmul " + qs + " decode M1 N4096 K14336", OpKind::matmul,
                     {D(DType::f32, {1, 14336}), D(q, {4096, 14336})}, tb));
    v.back().fills[1] = check::Fill::blocks;
    v.push_back(make("matmul " + qs + " decode M8 N4096 K14336", OpKind::matmul,
                     {D(DType::f32, {8, 14336}), D(q, {4096, 14336})}, tb));
    v.back().fills[1] = check::Fill::blocks;
    v.push_back(make("matmul " + qs + " M4096 N512 K14336", OpKind::matmul,
                     {D(DType::f32, {512, 14336}), D(q, {4096, 14336})}, tb));
    v.back().fills[1] = check::Fill::blocks;
  }
  // The block formats beside the f16 rows of the same shapes, f16 activations on both sides
  // (Vulkan's q4_0 kernels against its f16 ones; on CUDA the prefill rows also time cuBLAS on
  // dequantized f16 weight tiles, which an f32 activation's precision floor refuses).
  v.push_back(make("matmul q4_0 f16 decode M1 N4096 K14336", OpKind::matmul,
                   {D(DType::f16, {1, 14336}), D(DType::q4_0, {4096, 14336})}, tb));
  v.back().fills[1] = check::Fill::blocks;
  for (DType q : {DType::q4_0, DType::q8_0, DType::q4_k, DType::q6_k}) {
    v.push_back(make("matmul " + std::string(dtype_name(q)) + " f16 M4096 N512 K14336",
                     OpKind::matmul, {D(DType::f16, {512, 14336}), D(q, {4096, 14336})}, tb));
    v.back().fills[1] = check::Fill::blocks;
  }
  struct Decode {
    const char* kind;
    int64_t hq, hkv, lk, d;
  };
  // K and V of 128 MiB in f16: four times a 32 MiB last-level cache.
  for (const Decode& a : {Decode{"MHA", 32, 32, 8192, 128}, Decode{"GQA", 32, 8, 32768, 128},
                          Decode{"MHA", 32, 32, 16384, 64}, Decode{"GQA", 64, 8, 65536, 64}}) {
    for (DType t : {DType::f16, DType::f32}) {
      if (t == DType::f32 && a.d != 128) continue;  // f32 beside f16 for one head dim
      const std::string name = "attention " + std::string(dtype_name(t)) + " decode " + a.kind +
                               " Hq" + std::to_string(a.hq) +
                               (a.hq == a.hkv ? "" : " Hkv" + std::to_string(a.hkv)) + " Lk" +
                               std::to_string(a.lk) + " D" + std::to_string(a.d);
      const TensorDesc kv = D(t, {1, a.hkv, a.lk, a.d});
      v.push_back(make(name, OpKind::attention, {D(t, {1, a.hq, 1, a.d}), kv, kv}));
    }
  }
  const TensorDesc big = D(DType::f32, {2048, 4096});
  v.push_back(make("add f32 2048x4096", OpKind::add, {big, big}));
  v.push_back(make("silu f32 2048x4096", OpKind::silu, {big}));
  OpAttrs tanh_form;
  tanh_form.gelu_approx = GeluApprox::tanh;
  v.push_back(make("gelu f32 2048x4096", OpKind::gelu, {big}));
  v.push_back(make("gelu tanh f32 2048x4096", OpKind::gelu, {big}, tanh_form));
  v.push_back(make("sigmoid f32 2048x4096", OpKind::sigmoid, {big}));
  v.push_back(make("tanh f32 2048x4096", OpKind::tanh, {big}));
  v.push_back(make("erf f32 2048x4096", OpKind::erf, {big}));
  v.push_back(make("softmax f32 2048x4096", OpKind::softmax, {big}));
  v.push_back(make("rmsnorm f32 2048x4096", OpKind::rmsnorm, {big, D(DType::f32, {4096})}));
  // One decode step's row: what a kernel's latency costs, not its bandwidth.
  v.push_back(make("rmsnorm f32 1x4096 (decode)", OpKind::rmsnorm,
                   {D(DType::f32, {1, 4096}), D(DType::f32, {4096})}));
  const TensorDesc ffn = D(DType::f32, {1, 14336});
  v.push_back(make("silu_mul f32 1x14336 (decode)", OpKind::silu_mul, {ffn, ffn}));
  v.push_back(make("rope f32 1x32x512x128", OpKind::rope, {D(DType::f32, {1, 32, 512, 128})}));
  OpAttrs to16;
  to16.to = DType::f16;
  v.push_back(make("cast f32->f16 2048x4096", OpKind::cast, {big}, to16));
  // The copy bandwidth a device reaches (256 MiB read, 256 MiB written: beyond any cache), the
  // yardstick of the memory-bound rows above measured in the same run.
  v.push_back(make("copy f32 16384x4096", OpKind::copy, {D(DType::f32, {16384, 4096})}));
  return v;
}

using Inputs = std::vector<std::shared_ptr<const HostTensor>>;

// One row group of the table: an op and how to make its inputs (drawn when the case runs, so
// that only one case's inputs are held at a time).
struct BenchCase {
  std::string name;
  Result<OpDesc> op = Status(Code::internal, "unset");
  std::function<Result<Inputs>()> inputs;
  int count = 1;  // graph nodes with this very op (kind, attributes and input layouts)
};

BenchCase builtin_case(check::Case c) {
  BenchCase b;
  b.name = c.name;
  b.op = check::case_op(c);
  b.inputs = [c = std::move(c)]() -> Result<Inputs> {
    Inputs in;
    for (HostTensor& t : check::case_inputs(c))
      in.push_back(std::make_shared<const HostTensor>(std::move(t)));
    return in;
  };
  return b;
}

// An input drawn for a graph's op: floats in +-[0.05, 1] (positive where the op asks for
// positive inputs); ids below the row count of the table
// they index (0 elsewhere); block formats quantized from such floats.
Result<std::shared_ptr<const HostTensor>> draw_input(const OpDesc& op, size_t i) {
  const TensorDesc& d = op.inputs[i];
  check::Case c;
  c.name = op.name + "/" + std::to_string(i);
  c.kind = op.kind;
  if (is_quantized(d.dtype)) {
    c.inputs = {TensorDesc::contiguous(DType::f32, d.dims())};
    const std::vector<HostTensor> f = check::case_inputs(c);
    DUET_ASSIGN_OR_RETURN(
        HostTensor q,
        quantize(f[0], d.dtype, op.input_names.size() > i ? op.input_names[i] : c.name));
    return std::make_shared<const HostTensor>(std::move(q));
  }
  c.inputs = {d};
  // Inside the op's domain, as its checks draw them (log, sqrt and pow of positive values).
  c.fills = {check::fill_for(op.kind, i)};
  if (!is_float(d.dtype)) {
    c.fills = {check::Fill::ids};
    c.ids_range = op.kind == OpKind::embedding && i == 1 ? op.inputs[0].dim(0) : 1;
  }
  std::vector<HostTensor> t = check::case_inputs(c);
  return std::make_shared<const HostTensor>(std::move(t[0]));
}

// The ops of a graph (views, which run no kernel, left out), each distinct op once with the
// number of nodes it stands for. Constants with data are timed with their own values (quantized
// weights included); everything else is drawn.
std::vector<BenchCase> graph_cases(const Graph& g) {
  std::vector<BenchCase> v;
  for (const GraphNode& n : g.nodes()) {
    if (is_view(n.kind())) continue;
    auto same = std::find_if(v.begin(), v.end(), [&](const BenchCase& b) {
      return b.op->kind == n.op.kind && b.op->attrs == n.op.attrs && b.op->inputs == n.op.inputs;
    });
    if (same != v.end()) {
      ++same->count;
      continue;
    }
    BenchCase b;
    b.name = n.name + " (" + std::string(op_name(n.kind())) + ")";
    b.op = n.op;
    std::vector<std::shared_ptr<const HostTensor>> constants;
    for (int id : n.inputs) {
      const GraphValue& value = g.value(id);
      constants.push_back(value.kind == ValueKind::constant ? value.data : nullptr);
    }
    b.inputs = [op = n.op, constants]() -> Result<Inputs> {
      Inputs in;
      for (size_t i = 0; i < op.inputs.size(); ++i) {
        if (i < constants.size() && constants[i]) {
          in.push_back(constants[i]);
          continue;
        }
        DUET_ASSIGN_OR_RETURN(auto t, draw_input(op, i));
        in.push_back(std::move(t));
      }
      return in;
    };
    v.push_back(std::move(b));
  }
  return v;
}

double peak_for(const DeviceCaps& c, Precision p) {
  switch (p) {
    case Precision::f16:
      return c.peak_gflops_f16;
    case Precision::bf16:
      return c.peak_gflops_bf16;
    default:
      return c.peak_gflops_f32;
  }
}

// A fraction of the device's peak, or "-" (JSON null) where the device does not state its peak
// (Vulkan exposes no throughput figures).
std::string percent(double fraction) {
  if (fraction <= 0) return "-";
  char s[16];
  std::snprintf(s, sizeof s, "%.1f%%", 100 * fraction);
  return s;
}

nlohmann::json fraction_or_null(double fraction) {
  return fraction > 0 ? nlohmann::json(fraction) : nlohmann::json(nullptr);
}

// Whether the choice multiplies at least as precisely as the case's dtype asks: the planner
// takes a lower precision only when a policy forces it, so the rows time what a plan would run.
bool at_least_asked_precision(const KernelChoice& k, const OpDesc& op) {
  for (const TensorDesc& t : op.inputs)
    if (is_float(t.dtype))
      return significant_bits(k.precision) >= significant_bits(precision_of(t.dtype));
  return true;
}

// A GPU's last-level cache holds a decode row's weight (50 MB on an H100 or H200 against 33 MB of
// q4_0 4096x14336): runs rotate through copies spanning this much so that they read memory.
constexpr uint64_t kGpuRotationBytes = 512ull << 20;

// How long a timed batch of runs lasts on a device that is not a CPU (see bench_one).
constexpr double kBatchSeconds = 2e-3;

// A GPU row's batches before the timed ones: a GPU that idled while the row's inputs were drawn
// and uploaded lowers its clocks and raises them again over seconds of work (an H200 through
// Vulkan, 2026-11-28: SM clock 345 MHz a second after a burst, then 525, 630 ... 1395 MHz over 7
// s of a bench's rows; the decode mat-vecs timed there 3-4x slower than at its 1980 MHz). Warm-up
// batches run for at least kGpuWarmSeconds, then until kGpuSettledBatches in a row are no faster
// than the fastest before them (within 2%), or for kGpuWarmMaxSeconds at most.
constexpr double kGpuWarmSeconds = 0.1, kGpuWarmMaxSeconds = 3.0;
constexpr int kGpuSettledBatches = 20;

// Copies of a row's inputs that runs rotate through, so that a row whose inputs would fit the
// last-level cache still reads them from memory, as a model's layers do: enough copies to span
// the bandwidth yardstick's buffer (several times the cache) on a host-memory device, or
// kGpuRotationBytes (within a quarter of its memory) on another; at most 16.
int input_copies(const Device& d, const Inputs& inputs, const Yardstick& y) {
  uint64_t bytes = 0;
  for (const auto& t : inputs) bytes += t->storage_bytes();
  if (bytes == 0) return 1;
  uint64_t span = 0;
  if (d.caps().type == DeviceType::cpu)
    span = y.host.bytes;
  else if (d.caps().memory_bytes > 0)
    span = std::min<uint64_t>(kGpuRotationBytes, d.caps().memory_bytes / 4);
  if (span == 0) return 1;
  return static_cast<int>(std::clamp<uint64_t>((span + bytes - 1) / bytes, 1, 16));
}

Row bench_one(Device& d, const Rated& rd, const KernelChoice& k, const BenchCase& c,
              const Inputs& inputs, const Options& o, const Yardstick& y) {
  const OpDesc& op = *c.op;
  Row r{c.name, d.id(), std::string(tier_name(k.tier)), std::string(precision_name(k.precision)),
        c.count};
  std::vector<std::shared_ptr<Buffer>> keep;
  const int copies = input_copies(d, inputs, y);
  std::vector<std::vector<TensorRef>> sets(static_cast<size_t>(copies));
  for (std::vector<TensorRef>& refs : sets)
    for (size_t i = 0; i < inputs.size(); ++i) {
      auto b = d.allocate(inputs[i]->storage_bytes());
      if (!b.ok()) {
        r.error = b.status().message();
        return r;
      }
      if (Status s = d.write(**b, 0, inputs[i]->storage(), inputs[i]->storage_bytes()); !s.ok()) {
        r.error = s.message();
        return r;
      }
      refs.push_back({op.inputs[i], b->get()});
      keep.push_back(*b);
    }
  auto out = d.allocate(static_cast<uint64_t>(op.output.nbytes()));
  if (!out.ok()) {
    r.error = out.status().message();
    return r;
  }
  const TensorRef out_ref{op.output, out->get()};
  const PlannedOp planned{op, k};
  size_t run = 0;
  // The time of `n` runs back to back (rotating through the input copies) and one synchronize,
  // a run's share of it.
  auto runs_of = [&](int n) -> Result<double> {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) DUET_TRY(d.execute(planned, sets[run++ % sets.size()], out_ref));
    DUET_TRY(d.synchronize());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / n;
  };
  if (auto warm = runs_of(1); !warm.ok()) {  // warm-up: pipelines, caches, page faults
    r.error = warm.status().message();
    return r;
  } else {
    r.first = *warm;
  }
  // A device that runs ops asynchronously (a GPU) is timed over batches: one run of a small op
  // alone includes its launch, the synchronize and the error words' copy back (on an H200 the
  // smallest rows read 0.028 ms, and every block format's mat-vec 0.046-0.057 ms whatever its
  // bytes), while runs queued back to back take the device's time. A batch lasts about
  // kBatchSeconds.
  if (d.caps().type != DeviceType::cpu) {
    auto single = runs_of(1);
    if (!single.ok()) {
      r.error = single.status().message();
      return r;
    }
    r.batch = static_cast<int>(std::clamp(kBatchSeconds / std::max(*single, 1e-9), 1.0, 256.0));
    double warm = 0, best = 0;
    for (int settled = 0;
         warm < kGpuWarmMaxSeconds && (warm < kGpuWarmSeconds || settled < kGpuSettledBatches);) {
      auto t = runs_of(r.batch);
      if (!t.ok()) {
        r.error = t.status().message();
        return r;
      }
      warm += *t * r.batch;
      settled = best > 0 && *t >= 0.98 * best ? settled + 1 : 0;
      best = best > 0 ? std::min(best, *t) : *t;
    }
    r.warm = warm;
  }
  std::vector<double> times;
  double total = 0;
  while (static_cast<int>(times.size()) < o.repeats &&
         (times.size() < 3 || total < o.min_seconds)) {
    auto t = runs_of(r.batch);
    if (!t.ok()) {
      r.error = t.status().message();
      return r;
    }
    times.push_back(*t);
    total += *t * r.batch;
  }
  // One batch more under the device's kernel timing, where it has one: the kernels' time by its
  // own clock, without the host's share of the batch (recording, submission, synchronize).
  if (d.caps().type != DeviceType::cpu && d.begin_kernel_timing().ok()) {
    auto t = runs_of(r.batch);
    Result<std::vector<KernelSpan>> spans = d.end_kernel_timing();
    if (t.ok() && spans.ok() && !spans->empty()) {
      double s = 0;
      for (const KernelSpan& k : *spans) s += k.seconds;
      r.kernel = s / r.batch;
    }
  }
  std::sort(times.begin(), times.end());
  r.runs = static_cast<int>(times.size());
  r.median = times[times.size() / 2];
  r.min = times.front();
  r.max = times.back();
  r.gflops = op_flops(op) / r.median * 1e-9;
  r.gbps = op_bytes(op) / r.median * 1e-9;
  r.estimate = estimate_kernel_us(op, k, rd.caps, &rd.calibration) * 1e-6;
  const double peak = peak_for(rd.caps, k.precision), bw = y.bandwidth(rd.caps);
  if (peak > 0) r.flop_fraction = r.gflops / peak;
  if (bw > 0) r.bw_fraction = r.gbps / bw;
  // Memory-bound when the op does fewer flops per byte than the device can per byte it reads;
  // a device that states no peak (Vulkan) is judged by the host CPU's ratio.
  const double ridge = peak > 0 && bw > 0 ? peak / bw : y.host_ridge;
  const double bytes = op_bytes(op);
  r.memory_bound = bytes > 0 && op_flops(op) / bytes < ridge;
  return r;
}

// gnuplot's string quoting: double quotes, backslashes and quotes escaped.
std::string gp_quote(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}

// A bar chart of the rows: cases grouped along x, one colour per device, tier and precision
// (the legend), compute-bound cases in GFLOP/s above, memory-bound ones in GB/s below (each by
// the bound of its first row).
Status plot(const std::vector<Row>& rows, const std::string& path) {
  namespace fs = std::filesystem;
  std::vector<std::string> series, compute, memory;
  auto add_unique = [](std::vector<std::string>& v, const std::string& s) {
    if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
  };
  auto series_of = [](const Row& r) { return r.device + " " + r.tier + " " + r.precision; };
  for (const Row& r : rows) {
    if (!r.error.empty()) continue;
    add_unique(series, series_of(r));
    const bool seen = std::find(compute.begin(), compute.end(), r.name) != compute.end() ||
                      std::find(memory.begin(), memory.end(), r.name) != memory.end();
    if (!seen) (r.memory_bound ? memory : compute).push_back(r.name);
  }
  if (series.empty()) return Status(Code::invalid_argument, "--plot: no row ran, nothing to draw");
  const fs::path dir = fs::temp_directory_path() / ("duet-plot-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // One data file per panel: a row per case, a column per series ('?' where it did not run).
  auto write_panel = [&](const std::vector<std::string>& cases, bool mem, const fs::path& file) {
    std::ofstream data(file);
    data << "case";
    for (const std::string& s : series) data << ' ' << gp_quote(s);
    data << '\n';
    for (const std::string& c : cases) {
      data << gp_quote(c);
      for (const std::string& s : series) {
        double v = -1;
        for (const Row& r : rows)
          if (r.error.empty() && r.name == c && series_of(r) == s) v = mem ? r.gbps : r.gflops;
        if (v < 0)
          data << " ?";
        else
          data << ' ' << v;
      }
      data << '\n';
    }
  };
  size_t longest = 0;
  for (const Row& r : rows) longest = std::max(longest, r.name.size());
  const size_t most = std::max(compute.size(), memory.size());
  const int panels = (compute.empty() ? 0 : 1) + (memory.empty() ? 0 : 1);
  // Room for every bar, for the legend on the right and for the labels under each panel, slanted
  // by 60 degrees (about 7 px per character: 6 px of height, 3.5 px of width, so that the last
  // label stays within the legend's margin).
  const int width =
      static_cast<int>(std::clamp<size_t>(420 + most * (series.size() * 16 + 24), 1000, 4000));
  const int label_lines = static_cast<int>(std::min<size_t>(longest, 80) * 6 / 14 + 2);
  const int height = panels * (360 + label_lines * 14);
  const std::string tmp_png = path + ".partial";
  if (!std::ofstream(tmp_png)) {
    const std::string why = std::strerror(errno);
    fs::remove_all(dir);
    return Status(Code::io_error, "cannot write " + path + ": " + why);
  }
  std::ofstream script(dir / "plot.gp");
  script << "set terminal pngcairo size " << width << "," << height << " noenhanced font ',9'\n"
         << "set output " << gp_quote(tmp_png) << "\n"
         << "set datafile missing '?'\nset style data histograms\n"
         << "set style histogram clustered gap 1\nset style fill solid 0.85 border -1\n"
         << "set xtics rotate by -60 left nomirror\nset grid ytics\nset yrange [0:*]\n"
         << "set key outside right top vertical Left reverse title 'device tier precision'\n"
         << "set lmargin 10\nset bmargin " << label_lines << "\n";
  if (panels > 1) script << "set multiplot layout 2,1\n";
  auto draw = [&](const std::vector<std::string>& cases, bool mem) {
    if (cases.empty()) return;
    const fs::path file = dir / (mem ? "memory.txt" : "compute.txt");
    write_panel(cases, mem, file);
    script << "set ylabel '" << (mem ? "GB/s" : "GFLOP/s") << "'\n"
           << "set title 'duet bench: "
           << (mem ? "memory-bound ops, GB/s moved" : "compute-bound ops, GFLOP/s") << "'\n"
           << "plot for [i=2:" << series.size() + 1 << "] " << gp_quote(file.string())
           << " using i:xtic(1) title columnheader(i) lc i-1\n";
  };
  draw(compute, false);
  draw(memory, true);
  if (panels > 1) script << "unset multiplot\n";
  script.close();
  // gnuplot's chatter stays out of the table; on failure its first line says why.
  const fs::path log = dir / "gnuplot.log";
  const std::string cmd =
      "gnuplot '" + (dir / "plot.gp").string() + "' >'" + log.string() + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::string first;
  if (rc != 0) {
    std::ifstream in(log);
    while (first.empty() && std::getline(in, first)) {
    }
  }
  fs::remove_all(dir);
  if (rc != 0) {
    std::remove(tmp_png.c_str());
    return Status(Code::io_error,
                  "gnuplot failed" + (first.empty() ? std::string() : ": " + first) +
                      " (is gnuplot installed? tools/setup.sh installs gnuplot-nox)");
  }
  if (std::rename(tmp_png.c_str(), path.c_str()) != 0)
    return Status(Code::io_error, "cannot write " + path);
  return {};
}

int run_bench(const CLI::App& cmd, const Options& o) {
  for (const auto& [option, path] :
       {std::pair<const char*, const std::string*>{"--json", &o.json_path},
        {"--plot", &o.plot_path}})
    if (Status s = check_output_target(*path, option); !s.ok()) return fail(cmd, s.message(), 2);
  if (Status s = validate_ops(o.ops); !s.ok()) return fail(cmd, s.message(), 2);
  if (Status s = validate_dtypes(o.dtypes); !s.ok()) return fail(cmd, s.message(), 2);
  for (const std::string& t : o.tiers)
    if (!parse_tier(t))
      return fail(cmd, "--tier '" + t + "' is not a tier (" + tier_names() + ")", 2);
  if (o.repeats < 1) return fail(cmd, "--repeats must be at least 1", 2);
  Registry reg = open_registry();
  auto devices = select_devices(reg, o.devices);
  if (!devices.ok()) return fail(cmd, devices.status().message(), 2);

  std::vector<BenchCase> cases;
  if (!o.model.path.empty()) {
    auto graph = load_graph_file(o.model, true);
    if (!graph.ok()) return fail(cmd, graph.status().message(), 2);
    int nodes = 0;
    for (BenchCase& c : graph_cases(*graph)) {
      nodes += c.count;
      if (selected(o.ops, op_name(c.op->kind)) && dtypes_selected(o.dtypes, c.op->inputs))
        cases.push_back(std::move(c));
    }
    std::printf("graph '%s': %s (views left out), %zu distinct %s timed%s\n", graph->name().c_str(),
                counted(nodes, "op").c_str(), cases.size(), cases.size() == 1 ? "one" : "ones",
                o.ops.empty() && o.dtypes.empty() ? "" : " (--op/--dtype select)");
  } else {
    for (check::Case& c : bench_cases())
      if (selected(o.ops, op_name(c.kind)) && dtypes_selected(o.dtypes, c.inputs))
        cases.push_back(builtin_case(std::move(c)));
  }
  for (const BenchCase& c : cases)
    if (!c.op.ok()) return fail(cmd, c.op.status().message(), 70);
  auto label = [](const BenchCase& c) {
    return c.count > 1 ? c.name + " x" + std::to_string(c.count) : c.name;
  };
  int width = 2;
  for (const BenchCase& c : cases) width = std::max(width, static_cast<int>(label(c).size()));
  if (o.list) {
    std::printf("%-*s %12s %12s %s\n", width, "case", "GFLOP", "MB", "op");
    for (const BenchCase& c : cases) {
      OpDesc unnamed = *c.op;
      unnamed.name.clear();
      std::printf("%-*s %12.3f %12.1f %s\n", width, label(c).c_str(), op_flops(*c.op) * 1e-9,
                  op_bytes(*c.op) * 1e-6, describe(unnamed).c_str());
    }
    return 0;
  }

  // The yardstick for memory-bound rows, measured on as many threads as the CPU device runs.
  Yardstick y;
  const Device* host = reg.find("cpu:0");
  y.host = measure_read_bandwidth(host ? host->caps().compute_units : 0);
  if (host && y.host.gbps > 0) y.host_ridge = host->caps().peak_gflops_f32 / y.host.gbps;
  if (y.host.gbps > 0)
    std::printf(
        "memory read bandwidth: %.1f GB/s (fastest of %s over %s on %s; median "
        "%.1f); %%bw of CPU-type devices is against it\n",
        y.host.gbps, counted(y.host.passes, "pass").c_str(), format_bytes(y.host.bytes).c_str(),
        counted(y.host.threads, "thread").c_str(), y.host.median_gbps);

  // Measured together (each device's calibration probes take turns), once, then cached. What is
  // printed so far is flushed first: a run stopped during a long calibration still shows it.
  std::fflush(stdout);
  const auto calibration_start = std::chrono::steady_clock::now();
  const std::vector<Calibration> calibrations = calibrations_for(*devices);
  const double calibration_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - calibration_start).count();
  if (calibration_s >= 1)
    std::printf("calibration took %.1f s (DUET_CALIBRATION=off skips it; see duet calibrate)\n",
                calibration_s);
  std::vector<Rated> rates;
  for (size_t di = 0; di < devices->size(); ++di) {
    Device* d = (*devices)[di];
    rates.push_back(rated(reg, *d, calibrations[di]));
    const Rated& r = rates.back();
    if (!r.rates_from.empty())
      std::printf("%s: %%peak and %%bw against the peaks of %s (the same GPU)\n", d->id().c_str(),
                  r.rates_from.c_str());
    std::printf("%s: est ms from %s\n", d->id().c_str(),
                r.calibration.empty() ? "the capability record's peaks"
                                      : ("its calibration (" + r.calibration.source + ")").c_str());
    if (d->caps().type != DeviceType::cpu)
      std::printf(
          "%s: a run's time is a batch's of runs back to back (about %.0f ms) divided by its "
          "runs, not one run's with its launch and synchronize, timed once batches stop getting "
          "faster (the clocks up; %.1f-%.0f s of warm-up a row); kernel ms: a batch's kernels by "
          "the device's timestamps\n",
          d->id().c_str(), kBatchSeconds * 1e3, kGpuWarmSeconds, kGpuWarmMaxSeconds);
  }

  std::vector<Row> rows;
  std::fflush(stdout);
  std::printf("%-*s %-10s %-9s %-5s %10s %16s %9s %8s %6s %6s %-7s %9s %9s\n", width, "op",
              "device", "tier", "prec", "median ms", "min..max ms", "GFLOP/s", "GB/s", "%peak",
              "%bw", "bound", "est ms", "kernel ms");
  for (const BenchCase& c : cases) {
    const OpDesc& op = *c.op;
    Result<Inputs> inputs = Status(Code::internal, "not drawn");
    for (size_t di = 0; di < devices->size(); ++di) {
      Device* d = (*devices)[di];
      for (const KernelChoice& k : d->choices(op)) {
        // A kernel reading other dtypes would time a different op (the planner casts first).
        if (!k.ok || k.tier == Tier::reference || !k.reads_as_given(op) ||
            !at_least_asked_precision(k, op) || !selected(o.tiers, tier_name(k.tier)))
          continue;
        if (!inputs.ok()) inputs = c.inputs();
        if (!inputs.ok()) return fail(cmd, inputs.status().with_context(c.name).message(), 2);
        Row r = bench_one(*d, rates[di], k, c, *inputs, o, y);
        if (!r.error.empty()) {
          std::printf("%-*s %-10s %-9s %-5s  error: %s\n", width, label(c).c_str(),
                      r.device.c_str(), r.tier.c_str(), r.precision.c_str(), r.error.c_str());
        } else {
          char range[40];
          std::snprintf(range, sizeof range, "%.3f..%.3f", r.min * 1e3, r.max * 1e3);
          char kernel[24] = "-";
          if (r.kernel > 0) std::snprintf(kernel, sizeof kernel, "%.3f", r.kernel * 1e3);
          std::printf("%-*s %-10s %-9s %-5s %10.3f %16s %9.2f %8.2f %6s %6s %-7s %9.3f %9s\n",
                      width, label(c).c_str(), r.device.c_str(), r.tier.c_str(),
                      r.precision.c_str(), r.median * 1e3, range, r.gflops, r.gbps,
                      percent(r.flop_fraction).c_str(), percent(r.bw_fraction).c_str(),
                      r.memory_bound ? "memory" : "compute", r.estimate * 1e3, kernel);
        }
        std::fflush(stdout);
        rows.push_back(std::move(r));
      }
    }
  }
  // What the first run of each row cost beside its timed runs: on a GPU mostly the pipelines or
  // kernels made for it (a cold pipeline cache on Vulkan).
  for (Device* d : *devices) {
    double total = 0;
    const Row* longest = nullptr;
    for (const Row& r : rows) {
      if (r.device != d->id() || !r.error.empty()) continue;
      total += r.first;
      if (!longest || r.first > longest->first) longest = &r;
    }
    if (longest)
      std::printf(
          "%s: first runs (kernels made, first touches) %.3f s in all; longest %.3f s (%s, "
          "%s)\n",
          d->id().c_str(), total, longest->first, longest->name.c_str(), longest->tier.c_str());
  }
  // A graph's ops in total on each device, each op by its fastest tier there, times its count:
  // the kernel time of one pass, without transfers between devices.
  if (!o.model.path.empty()) {
    for (Device* d : *devices) {
      double total = 0;
      size_t timed = 0;
      for (const BenchCase& c : cases) {
        double best = 0;
        for (const Row& r : rows)
          if (r.error.empty() && r.device == d->id() && r.name == c.name &&
              (best == 0 || r.median < best))
            best = r.median;
        total += best * c.count;
        timed += best > 0;
      }
      if (timed == 0) continue;
      std::printf(
          "total on %s: %.3f ms (fastest tier per op, times its count; %zu of %s "
          "run there)\n",
          d->id().c_str(), total * 1e3, timed, counted(int64_t(cases.size()), "op").c_str());
    }
  }
  if (!o.json_path.empty()) {
    nlohmann::json j = nlohmann::json::object();
    j["read_bandwidth"] = y.host.gbps > 0 ? nlohmann::json{{"gbps", y.host.gbps},
                                                           {"median_gbps", y.host.median_gbps},
                                                           {"threads", y.host.threads},
                                                           {"passes", y.host.passes},
                                                           {"bytes", y.host.bytes}}
                                          : nlohmann::json(nullptr);
    nlohmann::json& jr = j["rows"] = nlohmann::json::array();
    for (const Row& r : rows)
      jr.push_back({{"op", r.name},
                    {"count", r.count},
                    {"device", r.device},
                    {"tier", r.tier},
                    {"precision", r.precision},
                    {"runs", r.runs},
                    {"batch", r.batch},
                    {"median_s", r.median},
                    {"min_s", r.min},
                    {"max_s", r.max},
                    {"first_s", r.first},
                    {"gflops", r.gflops},
                    {"gbps", r.gbps},
                    {"peak_fraction", fraction_or_null(r.flop_fraction)},
                    {"bandwidth_fraction", fraction_or_null(r.bw_fraction)},
                    {"bound", r.memory_bound ? "memory" : "compute"},
                    {"estimate_s", r.estimate},
                    {"kernel_s", r.kernel > 0 ? nlohmann::json(r.kernel) : nlohmann::json(nullptr)},
                    {"warm_s", r.warm},
                    {"error", r.error}});
    if (Status s = write_file_atomically(o.json_path, j.dump(2) + "\n"); !s.ok())
      return fail(cmd, s.message());
  }
  if (!o.plot_path.empty())
    if (Status s = plot(rows, o.plot_path); !s.ok()) return fail(cmd, s.message());
  for (const Row& r : rows)
    if (!r.error.empty()) return 1;
  return 0;
}

}  // namespace
}  // namespace bench_command

Command add_bench(CLI::App& app) {
  using namespace bench_command;
  auto* sub =
      app.add_subcommand("bench",
                         "Time ops on every device and kernel tier: median of repeats after a "
                         "warm-up (on GPUs, of batches of back-to-back runs), GFLOP/s, GB/s and "
                         "the fraction of the device's peak");
  auto o = std::make_shared<Options>();
  sub->add_option("graph", o->model.path,
                  "A duet-graph JSON file or ONNX model: time its ops (each distinct op once) "
                  "instead of the built-in cases");
  add_dim_option(*sub, o->model);
  sub->add_option("--device", o->devices, "Device id to benchmark (repeatable; default: all)");
  sub->add_option("--op", o->ops, "Op to benchmark (repeatable; default: all)");
  sub->add_option("--dtype", o->dtypes, "Input dtype (repeatable; default: all)");
  sub->add_option("--tier", o->tiers, "Kernel tier to time (repeatable; default: every tier)");
  sub->add_option("--json", o->json_path, "Write every row to this JSON file");
  sub->add_option("--plot", o->plot_path,
                  "Draw the rows to this PNG: bars per case, a colour per device, tier and "
                  "precision, GFLOP/s or GB/s by what bounds the op (needs gnuplot)");
  sub->add_option("--repeats", o->repeats,
                  "Most timed runs per row (at least 3 unless fewer given)")
      ->capture_default_str();
  sub->add_option("--min-seconds", o->min_seconds, "Keep repeating until this much time is spent")
      ->capture_default_str();
  sub->add_flag("--list", o->list, "List the cases (flops, bytes, shapes) without running them");
  auto run = std::make_shared<std::function<int()>>([sub, o] { return run_bench(*sub, *o); });
  return {sub, run};
}

}  // namespace duet::cli
