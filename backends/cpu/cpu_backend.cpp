#include "cpu_backend.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

#include "duet/half.h"
#include "duet/host_tensor.h"
#include "duet/internal/env.h"
#include "duet/internal/fault.h"
#include "duet/internal/log.h"
#include "ops/ops.h"
#include "reference/reference.h"

namespace duet::cpu {

namespace {

class CpuBuffer final : public Buffer {
 public:
  explicit CpuBuffer(uint64_t n)
      : size_(n),
        p_(fault::allocation_fails() || n > SIZE_MAX / 2
               ? nullptr
               : static_cast<std::byte*>(
                     ::operator new(static_cast<size_t>(std::max<uint64_t>(n, 1)),
                                    std::align_val_t(64), std::nothrow))) {}
  // Host memory the kernels read in place (a constant in a memory-mapped file); `host` keeps it
  // alive. Its pages may be mapped read-only: the core refuses writes into it.
  explicit CpuBuffer(HostTensor host)
      : size_(host.storage_bytes()), p_(host.storage()), borrowed_(std::move(host)) {}
  ~CpuBuffer() override {
    if (p_ && !borrowed_.defined()) ::operator delete(p_, std::align_val_t(64));
  }
  uint64_t size() const override { return size_; }
  void* host_ptr() override { return p_; }
  bool read_only() const override { return borrowed_.defined(); }
  bool valid() const { return p_ != nullptr; }

 private:
  uint64_t size_;
  std::byte* p_;
  HostTensor borrowed_;
};

// The CPU kernels' efficiency classes (KernelChoice::efficiency): the share of the host's peak
// the vector kernels reach on a large problem, and the float64 reference loops'.
constexpr double kSimdEfficiency = 0.5, kReferenceEfficiency = 0.02;

class CpuRules final : public BackendRules {
 public:
  BackendKind backend() const override { return BackendKind::cpu; }
  // A profile of a CPU is planned as this build's CPU device runs: constants borrowed in place.
  void annotate_profile(DeviceCaps& caps) const override { caps.reads_host_memory = true; }
  std::vector<KernelChoice> choices(const DeviceCaps& caps, const OpDesc& op) const override {
    std::vector<DType> in;
    for (const auto& t : op.inputs) in.push_back(t.dtype);
    KernelChoice fast{.tier = Tier::simd,
                      .precision = Precision::f32,
                      .ok = true,
                      .reason = "f32 compute on the host, every input dtype read directly",
                      .input_dtypes = in,
                      .output_dtype = op.output.dtype,
                      .launch = {},
                      .efficiency = kSimdEfficiency};
    if (auto q = quantized_input(op)) {
      const std::string f(dtype_name(op.inputs[*q].dtype));
      fast.reason = op.kind == OpKind::matmul
                        ? f + " weight read block by block (never dequantized to memory), " +
                              "activations quantized to 8 bits per 32, integer dot products " +
                              "(AVX-512 VNNI, AVX2 or portable, by the CPU)"
                        : f + " rows dequantized exactly, rounded once to the output";
    }
    KernelChoice ref{.tier = Tier::reference,
                     .precision = Precision::f64,
                     .ok = true,
                     .reason = "float64 reference loops (slow; for checking)",
                     .input_dtypes = in,
                     .output_dtype = op.output.dtype,
                     .launch = {},
                     .efficiency = kReferenceEfficiency};
    if (op.kind != OpKind::matmul) return {fast, ref};
    return {fast, bf16_dots(caps, op, in), ref};
  }

 private:
  // Matmul in bf16 products where the CPU has them. The planner takes it for bf16 graphs; for
  // f16 and f32 graphs only when a policy forces bf16, since rounding to bf16 loses precision.
  static KernelChoice bf16_dots(const DeviceCaps& caps, const OpDesc& op, std::vector<DType> in) {
    KernelChoice k{.tier = Tier::simd,
                   .precision = Precision::bf16,
                   .ok = caps.bf16_arith,
                   .reason = "",
                   .input_dtypes = std::move(in),
                   .output_dtype = op.output.dtype,
                   .launch = {},
                   .efficiency = kSimdEfficiency};
    if (quantized_input(op)) {
      k.ok = false;
      k.reason = "bf16 dot products read float tensors only, not block formats";
      return k;
    }
    if (!caps.bf16_arith) {
      const auto isa = caps.extra.find("isa");
      k.reason = "bf16 dot products need AVX512-BF16 (vdpbf16ps); this CPU has " +
                 (isa == caps.extra.end() ? std::string("none") : isa->second);
      return k;
    }
    k.reason =
        "bf16 dot products (AVX512-BF16 vdpbf16ps), f32 accumulation; f32 and f16 inputs are "
        "rounded to bf16 while packing (from f16: the range grows, 3 of 11 significant bits are "
        "lost); products of up to 8 rows are bound by memory and stay in f32";
    return k;
  }
};

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(int threads) : pool_(threads), caps_(probe_caps(pool_.size())) {}
  const std::string& id() const override { return id_; }
  const DeviceCaps& caps() const override { return caps_; }
  const BackendRules& rules() const override { return cpu::rules(); }

  Result<std::shared_ptr<Buffer>> allocate(uint64_t bytes) override {
    auto b = std::make_shared<CpuBuffer>(bytes);
    if (!b->valid())
      return Err(Code::out_of_memory)
          .device(id_)
          .note("allocating " + std::to_string(bytes) + " bytes failed");
    return std::shared_ptr<Buffer>(std::move(b));
  }

  bool owns(const Buffer& b) const override { return dynamic_cast<const CpuBuffer*>(&b); }

  Result<std::shared_ptr<Buffer>> borrow_checked(const HostTensor& host) override {
    // The kernels read elements through typed pointers: the storage must be aligned to its
    // element (blocks: to their f16 scales). GGUF aligns tensors to 32 bytes; safetensors only
    // by the writer's choice.
    const uint64_t align =
        is_quantized(host.dtype()) ? 2 : static_cast<uint64_t>(dtype_size(host.dtype()));
    if (reinterpret_cast<uintptr_t>(host.storage()) % align != 0)
      return Err(Code::unsupported)
          .device(id_)
          .expected("storage aligned to " + std::to_string(align) + " bytes for " +
                    std::string(dtype_name(host.dtype())))
          .got("an address " + std::to_string(reinterpret_cast<uintptr_t>(host.storage()) % align) +
               " bytes past it");
    return std::shared_ptr<Buffer>(std::make_shared<CpuBuffer>(host));
  }

  Status synchronize() override { return {}; }

  // Kernels run inside execute(), so the device's clock is the host's and a span is the call.
  Status begin_kernel_timing() override {
    timing_ = true;
    spans_.clear();
    origin_ = std::chrono::steady_clock::now();
    return {};
  }
  Result<std::vector<KernelSpan>> end_kernel_timing() override {
    if (!timing_) return Device::end_kernel_timing();
    timing_ = false;
    return std::move(spans_);
  }

 protected:
  Status write_checked(Buffer& dst, uint64_t offset, const void* src, uint64_t bytes) override {
    std::memcpy(static_cast<std::byte*>(dst.host_ptr()) + offset, src, static_cast<size_t>(bytes));
    return {};
  }
  Status read_checked(Buffer& src, uint64_t offset, void* dst, uint64_t bytes) override {
    std::memcpy(dst, static_cast<std::byte*>(src.host_ptr()) + offset, static_cast<size_t>(bytes));
    return {};
  }

  Status execute_checked(const PlannedOp& p, std::span<const TensorRef> inputs,
                         const TensorRef& output) override {
    if (!timing_) return run_kernel(p, inputs, output);
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    Status st = run_kernel(p, inputs, output);
    const auto t1 = clock::now();
    KernelSpan s;
    s.start = std::chrono::duration<double>(t0 - origin_).count();
    s.end = std::chrono::duration<double>(t1 - origin_).count();
    s.seconds = s.end - s.start;
    spans_.push_back(s);
    return st;
  }

 private:
  Status run_kernel(const PlannedOp& p, std::span<const TensorRef> inputs,
                    const TensorRef& output) {
    const OpDesc& op = p.op;
    std::vector<HostArg> in;
    for (const TensorRef& r : inputs) in.push_back(host_arg(r));
    HostArg out = host_arg(output);
    Scratch scratch;
    OpArgs args{op, in, out, pool_, id_, scratch, p.choice.precision};
    Status st;
    try {
      st = p.choice.tier == Tier::reference ? run_reference(op, in, out) : dispatch(args);
    } catch (const std::bad_alloc&) {
      // A buffer not grown through the Scratch (bookkeeping sized by the shapes, the reference's
      // float64 copies), on this thread or a pool thread (the pool throws it again here).
      return Err(Code::out_of_memory)
          .op(op_name(op.kind), op.name)
          .device(id_)
          .note("out of host memory while running the op");
    }
    DUET_TRY(st);
    return scratch.status(op, id_);
  }

 private:
  Status dispatch(const OpArgs& args) {
    const OpDesc& op = args.op;
    if (quantized_input(op)) {
      switch (op.kind) {
        case OpKind::matmul:
          return quantized_matmul(args);
        case OpKind::embedding:
          return quantized_embedding(args);
        case OpKind::cast:
          return quantized_cast(args);
        default:
          return unsupported(*this, op, "no kernel reads a block format for this op");
      }
    }
    switch (op.kind) {
      case OpKind::matmul:
        return matmul(args);
      case OpKind::attention:
        return attention(args);
      case OpKind::softmax:
        return softmax(args);
      case OpKind::rmsnorm:
      case OpKind::layernorm:
        return norm(args);
      case OpKind::rope:
        return rope(args);
      case OpKind::reduce_sum:
      case OpKind::reduce_mean:
      case OpKind::reduce_max:
      case OpKind::reduce_min:
      case OpKind::reduce_prod:
        return reduce(args);
      case OpKind::cast:
      case OpKind::copy:
      case OpKind::concat:
      case OpKind::embedding:
      case OpKind::write_slice:
        return data_movement(args);
      default:
        if (op_class(op.kind) == OpClass::elementwise) return elementwise(args);
        return unsupported(*this, op, "no CPU kernel for this op");
    }
  }

  Status run_reference(const OpDesc& op, std::span<const HostArg> in, const HostArg& out) {
    std::vector<HostTensor> hosts;
    for (const HostArg& a : in) {
      auto t = HostTensor::borrow(
          a.desc, a.base,
          static_cast<uint64_t>(dtype_bytes(a.desc.dtype, a.desc.storage_extent())));
      if (!t.ok()) return t.status();
      hosts.push_back(std::move(*t));
    }
    DUET_ASSIGN_OR_RETURN(std::vector<double> y, reference::evaluate(op, hosts));
    void* dst = out.elem0();
    for (size_t i = 0; i < y.size(); ++i)
      store_from_double(dst, out.desc.dtype, static_cast<int64_t>(i), y[i]);
    return {};
  }

  std::string id_ = "cpu:0";
  ThreadPool pool_;
  DeviceCaps caps_;
  bool timing_ = false;
  std::chrono::steady_clock::time_point origin_;
  std::vector<KernelSpan> spans_;
};

}  // namespace

const BackendRules& rules() {
  static const CpuRules r;
  return r;
}

BackendFactory factory() {
  return {"cpu", [](const BackendOptions& o) -> Result<BackendOpenResult> {
            int threads = 0;
            // 0 is every core, as unset.
            threads =
                static_cast<int>(env_int("DUET_CPU_THREADS", 0, 4096, "every core").value_or(0));
            threads = o.get_int("cpu.threads", threads);
            BackendOpenResult r;
            r.devices.push_back(std::make_unique<CpuDevice>(threads));
            return r;
          }};
}

}  // namespace duet::cpu
