// The device interface: what the planner knows about a device (its capability record and the
// kernel choices its backend offers for an op), and what the executor asks of it (buffers,
// copies, execution of a planned op). No vendor API type appears here.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "duet/export.h"
#include "duet/op.h"
#include "duet/status.h"
#include "duet/tier.h"

namespace duet {

class HostTensor;

enum class BackendKind : uint8_t { cpu, vulkan, cuda };
DUET_API std::string_view backend_name(BackendKind b);
DUET_API std::optional<BackendKind> parse_backend(std::string_view name);

enum class DeviceType : uint8_t { cpu, integrated_gpu, discrete_gpu, virtual_gpu, other };
DUET_API std::string_view device_type_name(DeviceType t);
DUET_API std::optional<DeviceType> parse_device_type(std::string_view name);

// A hardware matrix unit (tensor core, cooperative matrix): one supported MxNxK shape with its
// operand and accumulator types, e.g. "mma.sync m16n8k16 f16*f16+f32".
struct DUET_API MatrixUnit {
  std::string api;  // "mma.sync", "wmma", "coopmat"
  int m = 0, n = 0, k = 0;
  DType a = DType::f16;
  DType acc = DType::f32;  // f32, or f16 for half accumulation
  bool operator==(const MatrixUnit&) const = default;
};

// Everything the planner and the kernels may know about a device. Filled by a backend from the
// real device, or loaded from a profile (profiles/*.json) for planning without the hardware.
// Fields a backend cannot know stay at their zero/false defaults and mean "absent".
struct DUET_API DeviceCaps {
  // Identity
  BackendKind backend = BackendKind::cpu;
  std::string name;    // "NVIDIA GeForce RTX 2080 Ti"
  std::string vendor;  // "nvidia", "amd", "intel", "apple", "mesa", "cpu"
  uint32_t vendor_id = 0, device_id = 0;
  DeviceType type = DeviceType::other;
  std::string driver_name, driver_version, api_version;
  std::optional<std::array<uint8_t, 16>> uuid;  // matches one GPU seen through CUDA and Vulkan
  std::string pci_bus_id;

  // Architecture. For CUDA devices cc_major/cc_minor is the compute capability; `arch` is a
  // readable name in every backend ("sm_86", "x86-64 avx512", "rdna3").
  int cc_major = 0, cc_minor = 0;
  std::string arch;
  int compute_units = 0;  // SMs, CUs, EUs, cores
  double clock_mhz = 0;

  // Arithmetic and storage
  bool fp16_arith = false, bf16_arith = false, int8_arith = false, int_dot = false;
  bool int_dot_accelerated = false;  // packed 4x8-bit integer dot products run in hardware
  bool fp16_storage = false, bf16_storage = false, int8_storage = false;
  bool tensor_cores = false;  // any matrix unit usable by this backend
  std::vector<MatrixUnit> matrix_units;
  bool async_copy = false;  // global->shared asynchronous copies (cp.async, sm_80+)

  // Limits that kernels derive their launch shapes from
  int subgroup_size = 1;  // warp / wave / SIMD width the kernels should assume
  int subgroup_min = 1, subgroup_max = 1;
  bool subgroup_size_control = false;
  bool subgroup_arithmetic = false;         // subgroup reductions (subgroupAdd) in compute shaders
  uint64_t shared_mem_per_block = 0;        // default per workgroup / block
  uint64_t shared_mem_per_block_optin = 0;  // opt-in maximum (CUDA), else = default
  uint32_t registers_per_block = 0;
  uint32_t max_threads_per_block = 0;        // max workgroup invocations
  std::array<uint32_t, 3> max_block_dims{};  // max workgroup size per dimension
  std::array<uint32_t, 3> max_grid_dims{};   // max workgroup count per dimension
  uint64_t max_buffer_range = 0;             // largest range one binding may address (0 = no limit)
  uint64_t max_allocation = 0;               // largest single allocation (0 = memory_bytes)
  // Largest texel buffer view in elements (Vulkan's maxTexelBufferElements); 0 where the device
  // cannot read the texel formats the kernels use; absent where the record does not say.
  std::optional<uint64_t> max_texel_elements;

  // Memory
  uint64_t memory_bytes = 0;                // device memory usable by the engine
  bool host_visible_device_memory = false;  // device-local memory the host can map (iGPU, lavapipe)
  // The device's kernels read host memory in place (the CPU): a constant held by the host (a
  // memory-mapped model file) is borrowed by the device (Device::borrow), never copied.
  bool reads_host_memory = false;

  // Throughput, for the cost model (GFLOP/s peaks, GB/s bandwidths; 0 = unknown)
  double peak_gflops_f32 = 0, peak_gflops_f16 = 0, peak_gflops_bf16 = 0;
  double memory_gbps = 0;
  double host_link_gbps = 0;  // host <-> device copies (PCIe); 0 for host memory

  // Libraries: a vendor GEMM library the backend loaded (CUDA: cuBLASLt), its name and version,
  // or why it did not load; empty where the record does not say (profiles).
  std::string gemm_library;
  bool gemm_library_loaded = false;

  // Backend-specific facts shown by `duet devices` (kernel image status, extensions, ...), for
  // display only: no rule or cost estimate reads them (tests/planner/typed_facts_test.cpp). A
  // fact a decision needs is a typed field above.
  std::map<std::string, std::string> extra;
  // Where the record came from: "probed", or a profile's source line.
  std::string source = "probed";
};

// Which kernel a backend's rules chose, in the backend's own typed terms: its kernel family and
// the parameters its recorder reads (register blocks, read modes). Each backend declares its own
// (Vulkan: backends/vulkan/kernel.h; CUDA: duet/kernels/kernel.h) as a plain struct and stores it
// with LaunchConfig::set_variant; the core carries it, compares it and shows its name, and never
// looks inside. Nothing is parsed back from the name.
class DUET_API KernelVariant {
 public:
  virtual ~KernelVariant() = default;
  virtual std::string name() const = 0;  // shown in plans: "blocked_16x8", "generic_matmul"
  virtual bool same(const KernelVariant& other) const = 0;
};

// A backend's struct T (with `std::string name() const` and operator==) as a KernelVariant.
template <class T>
class VariantOf final : public KernelVariant {
 public:
  explicit VariantOf(T v) : value(std::move(v)) {}
  std::string name() const override { return value.name(); }
  bool same(const KernelVariant& other) const override {
    const auto* o = dynamic_cast<const VariantOf*>(&other);
    return o && o->value == value;
  }
  const T value;
};

// Launch shape chosen for a kernel from the device's limits. Fields a kernel does not use stay 0.
struct DUET_API LaunchConfig {
  int block_threads = 0;  // threads / invocations per block / workgroup
  int tile_m = 0, tile_n = 0, tile_k = 0;
  int stages = 0;  // pipeline stages (async copies in flight)
  int splits = 0;  // split-K / split-KV partitions
  int subgroup = 0;
  uint64_t shared_bytes = 0;
  std::shared_ptr<const KernelVariant> variant;  // which kernel (null: none named)

  template <class T>
  void set_variant(T v) {
    variant = std::make_shared<const VariantOf<T>>(std::move(v));
  }
  // The backend's typed variant when it is a T, else nullptr.
  template <class T>
  const T* variant_as() const {
    const auto* v = dynamic_cast<const VariantOf<T>*>(variant.get());
    return v ? &v->value : nullptr;
  }
  std::string variant_name() const { return variant ? variant->name() : std::string(); }
  std::string str() const;  // "flash_attention_f16_hd128, block 128, tile 64x64x32, 2 stages, ..."
  bool operator==(const LaunchConfig& o) const;
};

// One way a backend could run an op on a device: a kernel tier at a precision, and whether it
// can (with the reason either way). `input_dtypes` are the storage dtypes the kernel reads; where
// they differ from the graph's, the planner inserts casts.
struct DUET_API KernelChoice {
  Tier tier = Tier::generic;
  Precision precision = Precision::f32;
  bool ok = false;
  std::string reason;  // why it can run ("sm_86 >= sm_80, head dim 128"), or why not
  std::vector<DType> input_dtypes;
  DType output_dtype = DType::f32;
  LaunchConfig launch;
  // The share of the device's peak rate (at this precision) the kernel reaches on a large
  // problem: its family's efficiency class on this kind of device, set by the rules and read by
  // the cost model (docs/planner.md, "Cost model"). 0: not said (a choice made by hand).
  double efficiency = 0;
  // The share of the device's streaming bandwidth (what an element-wise op reaches) the kernel's
  // reads reach at this launch shape; 0: not said (all of it). A kernel with too few loads in
  // flight to cover the memory's latency says less (a mat-vec whose invocations each stream a
  // whole weight row). Read by the cost model.
  double memory_share = 0;
  // Kernels the choice dispatches before its own (a pass that prepares an operand), each a launch
  // in the cost model.
  int extra_launches = 0;
  // The precision the kernel's arithmetic runs at, where it is narrower than the floor it meets
  // (`precision`): cuBLAS on f16 tiles of a block-quantized weight for f32 activations. The cost
  // model rates the choice at this precision's peak and measured rate; unset: `precision`.
  std::optional<Precision> arithmetic;

  // Whether the kernel reads every input of `op` in the dtype it has (no cast needed first).
  bool reads_as_given(const OpDesc& op) const;
};

// Memory owned by one device. Backends subclass it; the core only passes it around.
class DUET_API Buffer {
 public:
  virtual ~Buffer() = default;
  virtual uint64_t size() const = 0;
  // Host pointer when the memory is host-addressable (CPU, mapped memory), else nullptr.
  virtual void* host_ptr() { return nullptr; }
  // Memory the device borrowed from the host (Device::borrow): read by kernels, never written.
  virtual bool read_only() const { return false; }
  // The memory's address in the device's own address space (a CUDA device pointer), for handing
  // it to another library (DLPack); 0 where the device gives none.
  virtual uint64_t device_address() const { return 0; }
};

// A tensor as a kernel sees it: a descriptor (offset in elements) into a buffer.
struct TensorRef {
  TensorDesc desc;
  Buffer* buffer = nullptr;
};

// An op as the planner decided it: what to compute and which kernel choice to use.
struct PlannedOp {
  OpDesc op;
  KernelChoice choice;
};

// The time of one executed op on its device's own clock (Device::end_kernel_timing).
struct KernelSpan {
  // Seconds from the first timestamp of the timing session: when the device began the op (all
  // work before it done) and when it had finished it.
  double start = 0, end = 0;
  // The op's time on the device: end - start, less any time between two submissions when the
  // device had to submit in the middle of the op.
  double seconds = 0;
};

// Selection rules of a backend: pure functions of a capability record, so that the planner can
// ask them about profiles of hardware it does not have. A device answers with its own rules.
class DUET_API BackendRules {
 public:
  virtual ~BackendRules() = default;
  virtual BackendKind backend() const = 0;
  // Every kernel choice the backend knows for this op, best first, each ok or refused with a
  // reason. Choices for all precisions the backend has appear; the planner filters by policy.
  virtual std::vector<KernelChoice> choices(const DeviceCaps& caps, const OpDesc& op) const = 0;
  // Completes a profile's record with what a probed device of this build would report and a
  // profile cannot know (CUDA: which kernel image of this build the device loads).
  virtual void annotate_profile(DeviceCaps& caps) const { (void)caps; }
};

// One device. Execution is asynchronous: execute() may only record work; synchronize() waits for
// everything recorded. Reads synchronize as needed. A device is used from one thread at a time.
//
// The contract every backend keeps (tests/device/ holds each backend's devices to it): write,
// read and execute check their arguments here in the core, once for every backend
// (core/src/device.cpp), and hand the backend only arguments that passed; a refused call does no
// work. A data error found by a kernel (an embedding id out of range) comes from execute or from
// the next synchronize, once, naming the op, the tensor and the value.
class DUET_API Device {
 public:
  virtual ~Device() = default;
  virtual const std::string& id() const = 0;  // "cpu:0", "vulkan:1", "cuda:0"
  virtual const DeviceCaps& caps() const = 0;
  virtual const BackendRules& rules() const = 0;

  std::vector<KernelChoice> choices(const OpDesc& op) const { return rules().choices(caps(), op); }
  // The first usable choice at `precision`, or the reasons none is.
  Result<KernelChoice> supports(const OpDesc& op, Precision precision) const;

  virtual Result<std::shared_ptr<Buffer>> allocate(uint64_t bytes) = 0;
  // Whether `b` is memory allocated by this device.
  virtual bool owns(const Buffer& b) const = 0;

  // A read-only buffer over the storage of a host tensor (a constant in a memory-mapped file),
  // which the device's kernels read in place; the buffer keeps the storage alive. Devices whose
  // kernels cannot read host memory (caps().reads_host_memory false), and storage the kernels
  // cannot read where it lies (misaligned for its dtype), answer unsupported with the reason; the
  // caller then allocates and copies. A borrowed buffer refuses writes.
  Result<std::shared_ptr<Buffer>> borrow(const HostTensor& host);

  // Memory of this device that another library allocated (a PyTorch CUDA tensor's storage), as a
  // buffer of this device used in place: `bytes` from `address` in the device's address space.
  // The buffer holds `keep` (what keeps the memory alive) until it is destroyed. The caller orders
  // the memory's pending writes before this device's work (DLPack: the producer's stream made to
  // wait for native_queue()). Devices that cannot answer unsupported (the default).
  virtual Result<std::shared_ptr<Buffer>> adopt(uint64_t address, uint64_t bytes,
                                                std::shared_ptr<const void> keep);
  // The queue this device runs its work on, as a number (a cudaStream_t), for another library to
  // order its work with this device's; 0 where there is none to give (the default).
  virtual Result<uint64_t> native_queue() { return uint64_t{0}; }
  // Work another library queues on its own queue `queue` (a cudaStream_t, as DLPack's
  // __dlpack__(stream=...) names the consumer's) may use `b`, memory of this device handed to it
  // without a copy. When `b` is destroyed, its memory is not used again until the work queued on
  // `queue` by then has completed: the device marks that point on the queue and holds the memory
  // back without blocking, handing it back to its allocator once the mark is passed (checked as
  // it allocates and synchronizes; waited for when it runs out of memory and when it closes).
  // Several queues may be named; this device's own queue needs no naming. Devices that cannot
  // answer unsupported (the default).
  virtual Status lend(Buffer& b, uint64_t queue);

  // Copies between host memory and a buffer of this device; the range must lie inside it.
  Status write(Buffer& dst, uint64_t offset, const void* src, uint64_t bytes);
  Status read(Buffer& src, uint64_t offset, void* dst, uint64_t bytes);
  // Runs a planned op; `inputs[i]` holds op.inputs[i]. Checked first: the kernel choice is usable
  // and not a view's; as many tensors as the op has inputs; each in a buffer of this device, with
  // the planned dtype and shape, the storage dtype the kernel reads, a valid view inside its
  // buffer; a dense output in the dtype the kernel writes.
  Status execute(const PlannedOp& op, std::span<const TensorRef> inputs, const TensorRef& output);
  virtual Status synchronize() = 0;

  // Kernel timing on the device's own clock (profiling). begin_kernel_timing() starts a session
  // in which every execute() is timed by the device as it runs, in the same batches and
  // submissions an untimed run makes (GPUs: timestamps written into the command stream around
  // each op). end_kernel_timing() waits for the work recorded (as synchronize() does) and returns
  // one span per execute() of the session, in order; the session ends either way. A device that
  // cannot time its kernels answers begin_kernel_timing() with Code::unsupported and the reason
  // (the default); ending a session that was not begun is an error too.
  virtual Status begin_kernel_timing();
  virtual Result<std::vector<KernelSpan>> end_kernel_timing();

  // Recordings (CUDA graphs): the execute() calls between begin_recording() and end_recording()
  // are recorded, not run; replay(id) runs what was recorded, in order with the device's other
  // work, with the buffers and arguments it was recorded with (what those buffers hold, such as
  // a run-time position, is read when it runs), as often as asked, until release_recording(id).
  // Only execute() may come between begin and end; a failed execute() leaves the recording
  // unusable (end it, release nothing, run the work plainly). The caller keeps every buffer a
  // recording names alive while it may be replayed. A device that cannot record, or cannot now
  // (kernel timing on), answers begin_recording() with Code::unsupported and the reason (the
  // default for every backend that has no recordings).
  virtual Status begin_recording();
  virtual Result<int> end_recording();
  virtual Status replay(int recording);
  virtual void release_recording(int recording);

 protected:
  // The backend's part of write, read and execute, called with checked arguments only.
  virtual Status write_checked(Buffer& dst, uint64_t offset, const void* src, uint64_t bytes) = 0;
  // The backend's part of borrow, called with a defined, dense tensor (offset 0).
  virtual Result<std::shared_ptr<Buffer>> borrow_checked(const HostTensor& host);
  virtual Status read_checked(Buffer& src, uint64_t offset, void* dst, uint64_t bytes) = 0;
  virtual Status execute_checked(const PlannedOp& op, std::span<const TensorRef> inputs,
                                 const TensorRef& output) = 0;

 private:
  Status check_copy(const Buffer& b, uint64_t offset, uint64_t bytes, std::string_view what) const;
  Status check_tensor(const OpDesc& op, const TensorRef& ref, const TensorDesc& planned,
                      DType storage, const std::string& name) const;
};

// Error for "this device cannot run this op", in the standard sentence form.
DUET_API Status unsupported(const Device& device, const OpDesc& op, std::string_view why);

// The index of the first block-quantized input of an op (a quantized matmul's weight, a
// quantized embedding table, the source of a cast from a block format), if any.
DUET_API std::optional<size_t> quantized_input(const OpDesc& op);
// For rules that have no kernel reading a block format: the one choice, refused with a reason
// naming the backend and the format.
DUET_API KernelChoice no_quantized_kernel(const OpDesc& op, std::string_view backend);

}  // namespace duet
