// Internals of the Vulkan backend, shared by its translation units. Nothing here leaves the
// backend: the public surface is vulkan_backend.h.
#pragma once

#include <volk.h>

#include <array>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <semaphore>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "duet/device.h"
#include "duet/registry.h"

namespace duet::vulkan {

// ---- loader.cpp -------------------------------------------------------------------------------
// Opens the Vulkan loader library `name` (default "libvulkan.so.1") at run time and points volk at
// it. Fails with the reason when the library or its entry point is missing.
Status load_loader(const std::string& name);
// Sets volk's instance-level function pointers from the first instance made through the loader
// (and the debug-utils ones from the first instance that enables that extension).
void load_instance_functions(VkInstance instance, bool debug_utils);

std::string vk_result_name(VkResult r);
// "vkCreateDevice failed: VK_ERROR_OUT_OF_DEVICE_MEMORY" as a Status with the given code.
Status vk_error(const char* call, VkResult r, const std::string& device = {});

// ---- instance.cpp -----------------------------------------------------------------------------
// A VkInstance, optionally with the Khronos validation layer, whose messages are collected so
// that the devices can turn them into errors.
class Instance {
 public:
  static Result<std::shared_ptr<Instance>> create(bool validation, std::vector<std::string>* notes);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  VkInstance handle() const { return instance_; }
  bool validation() const { return messenger_ != VK_NULL_HANDLE; }
  // The validation layer's Vulkan version (its specVersion), 0 without validation: a layer
  // older than an extension reports the extension's structures as errors.
  uint32_t validation_layer_version() const { return validation() ? layer_version_ : 0; }
  // Validation messages (warnings and errors) received since the last call.
  std::vector<std::string> take_messages();
  void add_message(std::string m);

 private:
  Instance() = default;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  uint32_t layer_version_ = 0;
  std::mutex mu_;
  std::vector<std::string> messages_;
};

// ---- caps.cpp ---------------------------------------------------------------------------------
// What the backend needs to know about a physical device beyond DeviceCaps to create and drive it.
struct PhysicalInfo {
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  VkPhysicalDeviceProperties props{};
  VkPhysicalDeviceMemoryProperties memory{};
  std::vector<std::string> extensions;
  uint32_t queue_family = UINT32_MAX;
  // Timestamps of that queue family: valid bits (0: none) and nanoseconds per tick.
  uint32_t timestamp_bits = 0;
  float timestamp_period = 0;
  bool storage16 = false, storage8 = false, float16 = false, int8 = false, int16 = false;
  bool subgroup_size_control = false, int_dot = false, int_dot_accelerated = false;
  bool coopmat = false;  // VK_KHR_cooperative_matrix with the cooperativeMatrix feature
  // Uniform texel buffers with the formats the "register_blocked" kernels read (0 texels:
  // unusable).
  uint32_t max_texels = 0;
  uint64_t texel_align = 16;  // alignment of a texel buffer view's offset, in bytes
  DeviceCaps caps;
  bool has_extension(const char* name) const;
};
// VK_KHR_cooperative_matrix postdates Debian 12's Vulkan headers (1.3.239): its feature
// structure, spelled out from the registry.
inline constexpr const char* kCoopMatExtension = "VK_KHR_cooperative_matrix";
inline constexpr VkStructureType kCoopMatFeaturesType = static_cast<VkStructureType>(1000506000);
struct CoopMatFeatures {
  VkStructureType sType;
  void* pNext;
  VkBool32 cooperativeMatrix;
  VkBool32 cooperativeMatrixRobustBufferAccess;
};
// Reads every property and feature the engine uses; fails when the device cannot run compute.
// `layer_version`: the validation layer's version where validation is on (0 otherwise); a layer
// that predates VK_KHR_cooperative_matrix leaves the coopmat kernels off.
Result<PhysicalInfo> probe(VkInstance instance, VkPhysicalDevice pd, uint32_t layer_version = 0);
// Lower-case hex digits of n bytes (UUIDs in cache file names and caps).
std::string hex(const uint8_t* p, size_t n);

// ---- memory.cpp -------------------------------------------------------------------------------
// Large device memory blocks, each with one VkBuffer over it, sub-allocated first-fit. Tensors
// larger than a block get a block of their own.
struct Block {
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkBuffer buffer = VK_NULL_HANDLE;
  uint64_t size = 0;
  std::byte* mapped = nullptr;        // when host-visible
  std::map<uint64_t, uint64_t> free;  // offset -> size
  uint64_t used = 0;
  bool dedicated = false;
};

struct Allocation {
  Block* block = nullptr;
  uint64_t offset = 0, size = 0;
};

class Allocator {
 public:
  // `mapped` asks for host-visible memory (then mapped persistently), preferably device-local;
  // `host_cached` instead for host-visible memory the host caches (reads back at memory speed),
  // preferably not device-local: none found leaves the allocator without a type (allocations
  // fail; has_type() says so).
  Allocator(VkDevice device, const PhysicalInfo& info, bool mapped, uint64_t block_size,
            std::string device_id, bool host_cached = false);
  ~Allocator();
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  Result<Allocation> allocate(uint64_t bytes);
  void release(const Allocation& a);
  bool host_visible() const { return mapped_; }
  bool has_type() const { return type_index_ != UINT32_MAX; }
  // The property flags of the memory type blocks are allocated from (0 without one).
  VkMemoryPropertyFlags flags() const { return flags_; }
  uint64_t block_size() const { return block_size_; }
  size_t block_count() const { return blocks_.size(); }

 private:
  Result<Block*> new_block(uint64_t size, bool dedicated);
  VkDevice device_;
  uint32_t type_index_ = UINT32_MAX;
  VkMemoryPropertyFlags flags_ = 0;
  bool mapped_;
  uint64_t block_size_;
  uint64_t alignment_;
  std::string id_;
  std::vector<std::unique_ptr<Block>> blocks_;
  std::mutex mu_;
};

// Finds a memory type with `want` flags (and preferably `prefer`); UINT32_MAX when none.
uint32_t find_memory_type(const VkPhysicalDeviceMemoryProperties& m, uint32_t type_bits,
                          VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer = 0);

// ---- the device's shared core -----------------------------------------------------------------
// The logical device and what buffers need to free themselves; shared by the device and every
// buffer so that destruction order does not matter.
struct Core {
  std::shared_ptr<Instance> instance;
  PhysicalInfo info;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  std::string id;
  std::unique_ptr<Allocator> allocator;
  ~Core();
};

class VkBuf final : public Buffer {
 public:
  VkBuf(std::shared_ptr<Core> core, Allocation a, uint64_t size)
      : core_(std::move(core)), a_(a), size_(size) {}
  ~VkBuf() override {
    if (owning_) core_->allocator->release(a_);
  }
  // The same memory, not owned: what a held op (VulkanDevice's grouped mat-vecs) records later,
  // when the caller may have dropped the buffer object (never its memory's pending work).
  static std::shared_ptr<VkBuf> alias(const VkBuf& b) {
    auto a = std::make_shared<VkBuf>(b.core_, b.a_, b.size_);
    a->owning_ = false;
    return a;
  }
  uint64_t size() const override { return size_; }
  VkBuffer vk() const { return a_.block->buffer; }
  uint64_t base() const { return a_.offset; }  // offset of this buffer in vk()
  std::byte* mapped() const { return a_.block->mapped ? a_.block->mapped + a_.offset : nullptr; }
  const Core* owner() const { return core_.get(); }

 private:
  std::shared_ptr<Core> core_;
  Allocation a_;
  uint64_t size_;
  bool owning_ = true;
};

// ---- pipelines.cpp ----------------------------------------------------------------------------
inline constexpr uint32_t kBindings = 7;  // 0 params, 1 output, 2..5 inputs, 6 scratch
// Bindings kBindings.. are uniform texel buffers (read-only operands of the "register_blocked"
// kernels).
inline constexpr uint32_t kTexelBindings = 4;
// After them, two storage buffers (shaders/scalar.glsl): the op's run-time scalar (an i32: rope's
// position, attention's key count, write_slice's offset) and the error words through which a
// shader reports a bad run-time value.
inline constexpr uint32_t kScalarBinding = kBindings + kTexelBindings;
inline constexpr uint32_t kErrorBinding = kScalarBinding + 1;
inline constexpr uint32_t kAllBindings = kErrorBinding + 1;
// Binding 0 (the parameters) is a uniform buffer, 1..kBindings-1 storage buffers, then uniform
// texel buffers, then the two storage buffers above.
inline VkDescriptorType descriptor_type(uint32_t binding) {
  return binding == 0 ? VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER
         : binding < kBindings || binding >= kScalarBinding
             ? VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
             : VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
}

// The specialization constant `DENSE` of shaders/common.glsl: bit k set when tensor k of the
// parameter block is dense, so that toff() is an addition instead of six integer divisions.
inline constexpr uint32_t kDenseConstantId = 31;

// Compute pipelines by (shader, specialization constants), created once and cached; a
// VkPipelineCache persisted on disk per device UUID and driver version. Pipelines are made on
// worker threads (at most threads() at once, all through the one VkPipelineCache, which the
// driver synchronizes): the recorder asks for a batch's pipelines as it records and waits for
// them only when it submits, so a plan's first run compiles its kernels in parallel. A pipeline
// is made once per key whatever the order of requests; a failure is kept and named (shader,
// device, VkResult).
class Pipelines {
 public:
  using Key = std::tuple<std::string, std::vector<uint32_t>, std::optional<uint32_t>>;
  using Made = std::shared_future<Result<VkPipeline>>;

  // `threads`: pipelines made at once (1: on the caller's thread, when asked).
  Pipelines(std::shared_ptr<Core> core, std::string cache_dir, int threads);
  ~Pipelines();
  Status init();
  // `spec[i]` specializes constant_id i; `dense`, when given, constant_id kDenseConstantId (see
  // Dispatch::dense_spec). request() returns at once: the pipeline, made or being made (an
  // unknown shader name is an error here, before any work starts); get() waits for it.
  Result<Made> request(const std::string& shader, const std::vector<uint32_t>& spec,
                       std::optional<uint32_t> dense = std::nullopt);
  Result<VkPipeline> get(const std::string& shader, const std::vector<uint32_t>& spec,
                         std::optional<uint32_t> dense = std::nullopt);
  VkPipelineLayout layout() const { return layout_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }
  // Writes the pipeline cache to disk (also done on destruction).
  Status save();
  const std::string& cache_path() const { return path_; }
  bool loaded_from_disk() const { return loaded_bytes_ > 0; }
  int threads() const { return threads_; }

  // What making pipelines cost this device so far: pipelines made (failures included), the
  // seconds their vkCreateComputePipelines calls took (summed over threads) and the CPU seconds
  // of the threads that called them, the seconds recording waited for them (wall time), and the
  // slowest.
  struct Stats {
    size_t created = 0;
    double create_s = 0, create_cpu_s = 0, wait_s = 0;
    std::string slowest;
    double slowest_s = 0;
  };
  Stats stats() const;
  void add_wait(double seconds);
  size_t created() const { return stats().created; }
  // One line for the log at exit: "12 pipelines made in 3.41 s (3.12 s of CPU ...) on 8 threads
  // (recording waited 0.62 s; slowest matmul_blocked_f32 1.20 s), pipeline cache cold".
  std::string summary() const;

 private:
  Result<VkPipeline> make(const Key& key, VkShaderModule module);

  std::shared_ptr<Core> core_;
  std::string dir_, path_;
  int threads_ = 1;
  size_t loaded_bytes_ = 0;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  mutable std::mutex m_;  // guards what follows
  std::map<std::string, VkShaderModule> modules_;
  std::map<Key, Made> pipelines_;
  std::unique_ptr<std::counting_semaphore<>> slots_;  // workers making a pipeline now
  Stats stats_;
};

// Pipelines made at once: $DUET_VULKAN_PIPELINE_THREADS, else the cores (at most 8).
int default_pipeline_threads();

// The pipeline cache directory: option "vulkan.cache_dir", else $DUET_VULKAN_CACHE_DIR, else
// $XDG_CACHE_HOME/duet, else ~/.cache/duet.
std::string default_cache_dir(const BackendOptions& o);

// ---- dispatch.cpp -----------------------------------------------------------------------------
// A tensor as one shader binding sees it: up to rank 4, right-aligned, offset from the window.
struct GpuTensor {
  std::array<uint32_t, 4> shape{1, 1, 1, 1};
  std::array<uint32_t, 4> stride{0, 0, 0, 0};
  uint32_t offset = 0;
  uint32_t numel = 1;
  uint32_t dense = 0;  // 1: row-major without gaps, so element i is at offset + i
  uint32_t pad = 0;
};

// Mirrors `Params` in shaders/common.glsl (std140, laid out as std430 would be).
struct Params {
  GpuTensor td[5];
  std::array<uint32_t, 4> u{}, u2{}, u3{};
  std::array<float, 4> f{};
  // The run-time scalar: 1 + its element offset in the scalar binding (0: none), and the error
  // slot its shader reports a bad value in.
  std::array<uint32_t, 4> rt{};
};
static_assert(sizeof(Params) == 5 * 48 + 80, "Params must match shaders/common.glsl");

// A range of a VkBuffer bound to a shader binding.
struct Window {
  VkBuffer buffer = VK_NULL_HANDLE;
  uint64_t offset = 0, range = 0;
  bool write = false;
};

// A range of a VkBuffer read through a uniform texel buffer view of `format`.
struct TexelWindow {
  VkBuffer buffer = VK_NULL_HANDLE;
  uint64_t offset = 0, range = 0;
  VkFormat format = VK_FORMAT_UNDEFINED;
};

struct Dispatch {
  std::string shader;
  std::vector<uint32_t> spec;
  std::array<Window, kBindings> bind{};             // bind[0] (params) is filled by the recorder
  std::array<TexelWindow, kTexelBindings> texel{};  // at bindings kBindings + i
  Window scalar, errors;                            // at kScalarBinding and kErrorBinding
  Params params{};
  std::vector<std::byte> extra;  // appended after the params and bound at `extra_binding`
  int extra_binding = -1;
  std::array<uint32_t, 3> groups{1, 1, 1};
  // Specialize DENSE from params.td[k].dense (shaders that index through toff()). One pipeline
  // per pattern of dense tensors; the common all-dense case then runs without index arithmetic.
  bool dense_spec = false;
};

// Records dispatches into one command buffer with the barriers that hazards need; submits on
// flush(). Parameter blocks live in a host-visible ring; descriptor sets in a pool reset per batch.
class Recorder {
 public:
  Recorder(std::shared_ptr<Core> core, Pipelines& pipelines);
  ~Recorder();
  Status init();
  Status record(const Dispatch& d);
  // Submits what was recorded and waits for it.
  Status flush();
  // Writes host data into [offset, offset + bytes) of `buffer` in the command stream: after the
  // work recorded before it, before the work recorded after it (vkCmdUpdateBuffer between two
  // barriers), so that the host need not wait for that work. `bytes` and `offset` multiples of
  // 4, `bytes` at most kMaxUpdateBytes.
  static constexpr uint64_t kMaxUpdateBytes = 65536;
  Status update(VkBuffer buffer, uint64_t offset, const void* data, uint64_t bytes);
  // Copies `bytes` from `src` to `dst` in the command stream, after the work recorded before it
  // (a barrier first); the host may read `dst` after the next flush().
  Status copy(VkBuffer src, uint64_t src_offset, VkBuffer dst, uint64_t dst_offset, uint64_t bytes);
  // Captures (Device recordings): from begin_capture() (which submits what was recorded before)
  // to end_capture(), dispatches go into a command buffer of their own, with their own
  // descriptor pools, parameter blocks, texel views and error slots, kept until release(id);
  // replay(id) submits it (after what was recorded since) and waits, then reports its error
  // slots. Refused while kernel timing is on. Nothing may flush while capturing: a dispatch that
  // would (update, copy) fails.
  Status begin_capture();
  Result<int> end_capture();
  Status replay(int id);
  void release(int id);
  bool capturing() const { return capturing_; }
  // Whether recorded, unsubmitted work touches [offset, offset + bytes) of `buffer`.
  bool touches(VkBuffer buffer, uint64_t offset, uint64_t bytes) const;
  bool pending() const { return recording_; }
  // Error slots of ops that report errors from the device (embedding ids, run-time scalars out
  // of range); 2 words per slot: a flag and the offending value. The message is `what`, then
  // `value_word` and the value, then `suffix`.
  Result<uint32_t> error_slot(std::string what, std::string value_word = "id",
                              std::string suffix = " is out of range");
  Window error_window() const;
  // Messages of slots that were set by the last flush; clears them.
  std::vector<std::string> take_errors();

  // Kernel timing (VulkanDevice::begin_kernel_timing): a timestamp at the start of each command
  // buffer and after each op recorded into it; nothing else about batching changes. Every
  // command buffer of a session first resets the query pool (vkCmdResetQueryPool), and flush()
  // reads the timestamps of its batch once the fence has signalled. An op cut by a flush in the
  // middle is closed before the submission and continued in the next command buffer.
  Status begin_timing(uint32_t valid_bits, double period_ns, uint32_t queries);
  bool timing() const { return timing_; }
  Status op_start();
  Status op_end();
  // After flush(): the spans of the session's ops, in order; ends the session.
  std::vector<KernelSpan> end_timing();

  // Counters for tests and benchmarks, and the shader and specialization constants of the last
  // few dispatches recorded (oldest first).
  uint64_t submissions = 0, dispatches = 0, barriers = 0, updates = 0, copies = 0;
  std::vector<std::pair<std::string, std::vector<uint32_t>>> recent;
  std::optional<uint32_t> last_dense;  // the DENSE mask of the last dispatch, if specialized

 private:
  struct Range {
    VkBuffer buffer;
    uint64_t lo, hi;
  };
  static bool overlaps(const std::vector<Range>& set, const Range& r);
  // Commands go into the command buffer as they come, until a dispatch's pipeline is still being
  // made: from there on they wait on a tape, in order, which flush() plays into the command
  // buffer once every pipeline of the batch is made.
  template <class F>
  void command(F f) {
    if (waiting_.empty())
      f(cmd_);
    else
      tape_.emplace_back(std::move(f));
  }
  // Waits for the batch's pipelines and plays the tape; on a failure drops the batch (nothing of
  // it runs) and returns the failure.
  Status settle();
  void drop_batch();
  Status begin();
  Status reserve(uint64_t bytes, uint64_t* offset);
  uint32_t timestamp();  // writes the next query of the batch; returns its index
  Status collect();      // reads the batch's timestamps into spans_
  Result<VkBufferView> view(const TexelWindow& w);
  void destroy_views();
  Status make_pool(VkDescriptorPool* pool);
  // What a capture owns. Parameter blocks are filled from the front; `sets_left` counts the
  // last pool's sets.
  struct Capture {
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    std::vector<VkDescriptorPool> pools;
    uint32_t sets_left = 0;
    std::vector<Allocation> params;
    uint64_t params_used = 0;
    std::vector<VkBufferView> views;
    Allocation errors{};
    struct Slot {
      std::string what, value_word, suffix;
    };
    std::vector<Slot> slots;
  };
  void free_capture(Capture& c);
  // Room for a parameter block and a table after it in the capture's blocks: their offsets in
  // the block returned.
  Result<Allocation> capture_reserve(uint64_t pbytes, uint64_t extra, uint64_t* poff,
                                     uint64_t* eoff);
  bool capturing_ = false;
  Capture cap_;
  VkCommandBuffer plain_cmd_ = VK_NULL_HANDLE;
  std::map<int, Capture> captures_;
  int next_capture_ = 0;

  std::shared_ptr<Core> core_;
  Pipelines& pipelines_;
  std::vector<Pipelines::Made> waiting_;
  std::vector<std::function<void(VkCommandBuffer)>> tape_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkDescriptorPool dpool_ = VK_NULL_HANDLE;
  uint32_t sets_left_ = 0;
  bool recording_ = false;
  // Host-visible ring of parameter blocks (and small per-dispatch tables).
  Allocation ring_{};
  std::unique_ptr<Allocator> host_alloc_;
  uint64_t ring_used_ = 0;
  uint64_t ring_align_ = 256;
  // Error slots (embedding ids out of range).
  Allocation errors_{};
  struct ErrorText {
    std::string what, value_word, suffix;
  };
  std::vector<ErrorText> error_what_;
  std::vector<std::string> deferred_errors_;
  std::vector<Range> reads_since_barrier_, writes_since_barrier_, batch_;
  // Texel buffer views of the recorded batch (destroyed once it completes), and one that unused
  // texel bindings point at.
  std::vector<VkBufferView> views_;
  VkBufferView unused_view_ = VK_NULL_HANDLE;
  // Kernel timing.
  struct Piece {
    size_t op;
    uint32_t start, end;  // queries of the batch
  };
  VkQueryPool queries_ = VK_NULL_HANDLE;
  uint32_t query_capacity_ = 0, queries_used_ = 0;
  uint32_t boundary_ = 0;  // the query that ends the last op (or starts the batch)
  bool timing_ = false, op_open_ = false;
  uint64_t mask_ = ~0ull;
  double period_ns_ = 1;
  std::optional<uint64_t> origin_;
  std::vector<Piece> pieces_;
  std::vector<KernelSpan> spans_;
};

// ---- ops/record.cpp ---------------------------------------------------------------------------
class VulkanDevice;
// Records one planned op (split into windowed dispatches where tensors exceed a binding's range):
// the recorder of its op family (ops/) for the kernel the rules chose (kernel.h).
Status record_op(VulkanDevice& dev, const PlannedOp& op, std::span<const TensorRef> inputs,
                 const TensorRef& output);

// ---- ops/group.cpp ----------------------------------------------------------------------------
// An op whose execute() the device holds (DeviceOptions::group_matvecs): the refs point at
// aliases of the caller's buffers, kept here until it is recorded.
struct HeldOp {
  PlannedOp op;
  std::vector<TensorRef> inputs;
  TensorRef output;
  std::vector<std::shared_ptr<VkBuf>> keep;
};
// The most mat-vecs one grouped dispatch takes (matvec.comp's GROUP variant: three weights).
inline constexpr size_t kMaxGroup = 3;
// Whether `op` may start or join a group: a matmul of a block-quantized weight on the `matvec`
// kernel (decode), activations not transposed.
bool may_group(const PlannedOp& op, std::span<const TensorRef> inputs);
// Whether `op` joins the group `held` (not full): the same kernel choice and weight format, the
// same activations (buffer and view), and an output that overlaps neither the activations nor
// another member's output (the members run at once, with no barrier between them).
bool joins_group(std::span<const HeldOp> held, const PlannedOp& op,
                 std::span<const TensorRef> inputs, const TensorRef& output);
// Records the held ops: one mat-vec alone as record_op does, several as one dispatch of
// matvec.comp's GROUP variant (each alone where a tensor needs a window split).
Status record_group(VulkanDevice& dev, std::span<const HeldOp> held);
// Whether `op` is an add an rmsnorm after it may fold (DeviceOptions::fuse_add_norm): two
// float inputs of the output's shape and dtype (no broadcast), a dense output.
bool may_fold_add(const PlannedOp& op, std::span<const TensorRef> inputs, const TensorRef& output);
// Whether the rmsnorm `op` folds the held add `add`: its input is the add's output (the same
// view), no tensor overlaps another (the fused kernel writes the sum and the norm at once), each
// fits one window.
bool folds_add(VulkanDevice& dev, const HeldOp& add, const PlannedOp& op,
               std::span<const TensorRef> inputs, const TensorRef& output);
// Whether `op` is a rope a cache write may follow (DeviceOptions::fuse_rope_write): f32, rank 4,
// a run-time position, a dense output.
bool may_hold_rope(const PlannedOp& op, std::span<const TensorRef> inputs, const TensorRef& output);
// Whether `op` joins the held rope (`held[0]`, and the K write `held[1]` when there is one): a
// write_slice in place of f32 rows into a dense f32 cache at the rope's position, of the rope's
// output (K, the first) or of any rows (V, the second); nothing one of them writes overlaps
// what another reads or writes; every tensor in one window.
bool joins_rope_write(VulkanDevice& dev, std::span<const HeldOp> held, const PlannedOp& op,
                      std::span<const TensorRef> inputs, const TensorRef& output);
// Records the held rope alone, or with its writes as one dispatch (rope_write.comp).
Status record_rope_write(VulkanDevice& dev, std::span<const HeldOp> held);
// Whether `op` is a cast a cache write may follow (DeviceOptions::fuse_rope_write: an f16 or bf16
// cache, whose writes the planner gives a cast first): f32 to f16 or bf16, a dense output.
bool may_hold_cast(const PlannedOp& op, std::span<const TensorRef> inputs, const TensorRef& output);
// Whether `op` is a write_slice in place of the held cast's output into a dense cache of its
// dtype, the cache apart from the cast's tensors, every tensor in one window.
bool joins_cast_write(VulkanDevice& dev, const HeldOp& cast, const PlannedOp& op,
                      std::span<const TensorRef> inputs, const TensorRef& output);
// Records the cast and the write as one dispatch (cast_write.comp).
Status record_cast_write(VulkanDevice& dev, const HeldOp& cast, const PlannedOp& op,
                         std::span<const TensorRef> inputs, const TensorRef& output);
// Records the add and the rmsnorm as one dispatch (norm.comp's ADD variants).
Status record_add_norm(VulkanDevice& dev, const HeldOp& add, const PlannedOp& op,
                       std::span<const TensorRef> inputs, const TensorRef& output);

// The decode fusions' switches (docs/vulkan.md, "Decode fusions").
struct DeviceOptions {
  // Consecutive mat-vecs (`matvec` kernel, block-quantized weights) that read the same
  // activations (a decode step's q, k and v; gate and up) run as one dispatch: their execute()
  // calls are held until an op that cannot join, a copy, a synchronize or a recording's end.
  // Off while kernel timing is on (each op then has its own span).
  bool group_matvecs = true;
  // An int_dot matmul whose activations the int_dot matmul recorded just before it quantized
  // (the same tensor, nothing recorded or written since) reads that quantize_q8 output again:
  // one quantize_q8 dispatch (and one barrier) for q, k and v, one for gate and up.
  bool share_q8 = true;
  // A residual add whose sum is the input of the rmsnorm right after it runs inside the norm's
  // dispatch, which still writes the sum: one dispatch and one barrier fewer. The add's
  // execute() is held until the next op arrives. Off while kernel timing is on.
  bool fuse_add_norm = true;
  // A rope whose output the next op writes into a KV cache in place, and the write of V after
  // that, run as one dispatch: the rotated rows go to the rope's output and the cache at once.
  // With an f16 or bf16 cache (the planner casts each row before its write) each cast and its
  // write run as one instead. The held ops' execute() return at once. Off while kernel timing
  // is on.
  bool fuse_rope_write = true;
  // Reads "vulkan.group_matvecs", "vulkan.share_q8", "vulkan.fuse_add_norm" and
  // "vulkan.fuse_rope_write", else DUET_VULKAN_GROUP_MATVECS, DUET_VULKAN_SHARE_Q8,
  // DUET_VULKAN_FUSE_ADD_NORM and DUET_VULKAN_FUSE_ROPE_WRITE (switches, default on).
  static DeviceOptions from(const BackendOptions& o);
};

// ---- device.cpp -------------------------------------------------------------------------------
class VulkanDevice final : public Device {
 public:
  // `block_bytes`: the size of the allocator's memory blocks (0: 256 MiB, less where the driver
  // caps allocations).
  // `copied_reads`: reads of mapped memory through a copy into host-cached memory (1), plain
  // memcpy (0), or the former where the mapped memory is not host-cached (-1).
  VulkanDevice(std::shared_ptr<Core> core, std::string cache_dir, bool force_staging,
               uint64_t block_bytes = 0, int copied_reads = -1, DeviceOptions options = {});
  ~VulkanDevice() override;
  Status init();

  const std::string& id() const override { return core_->id; }
  const DeviceCaps& caps() const override { return caps_; }
  const BackendRules& rules() const override;

  Result<std::shared_ptr<Buffer>> allocate(uint64_t bytes) override;
  bool owns(const Buffer& b) const override;
  Status synchronize() override;
  // Device timestamps around each op (Recorder::begin_timing), where the queue family has them.
  Status begin_kernel_timing() override;
  Result<std::vector<KernelSpan>> end_kernel_timing() override;
  // Recordings: the recorder's captures (one command buffer each, resubmitted by replay), and
  // the scratch buffers their dispatches use, kept with them.
  Status begin_recording() override;
  Result<int> end_recording() override;
  Status replay(int recording) override;
  void release_recording(int recording) override;

  // For ops/ and the tests.
  Recorder& recorder() { return *recorder_; }
  DeviceOptions& options() { return options_; }
  // The decode fusions so far: grouped dispatches and the mat-vecs in them, quantize_q8
  // dispatches saved (DeviceOptions::share_q8).
  uint64_t groups = 0, grouped = 0, shared_q8 = 0, fused_adds = 0, rope_writes = 0, cast_writes = 0;
  // The q8 activations of the last int_dot matmul (ops/quantized.cpp): valid while the
  // recorder's counters are `at` (nothing recorded since) and the device has not synchronized.
  struct SharedQ8 {
    VkBuffer buffer = VK_NULL_HANDLE;
    uint64_t base = 0;
    TensorDesc a;
    bool pairs = false;
    TexelWindow q8;
    std::array<uint64_t, 4> at{};
  };
  std::optional<SharedQ8> q8;
  // The recorder's counters that say whether anything was recorded since.
  std::array<uint64_t, 4> record_marks() const;
  Pipelines& pipelines() { return *pipelines_; }
  Core& core() { return *core_; }
  // Caps used to derive launch shapes: the probed record, or one forced by a test.
  void override_caps(const DeviceCaps& c) { caps_ = c; }
  // Largest window one binding may span, and the alignment of window offsets.
  uint64_t max_window() const { return max_window_; }
  void set_max_window(uint64_t bytes) { max_window_ = bytes; }
  uint64_t window_alignment() const { return window_align_; }
  // Most texels one texel buffer view may span (0: texel buffers unusable), and the alignment
  // of a view's offset in bytes (at least 16, so that vector texels hold whole elements).
  uint64_t max_texels() const { return max_texels_; }
  void set_max_texels(uint64_t n) { max_texels_ = n; }
  uint64_t texel_alignment() const { return texel_align_; }
  // A scratch buffer kept alive until the next synchronize().
  Result<std::shared_ptr<VkBuf>> scratch(uint64_t bytes);
  // The cos/sin table of rope.comp for (theta, rotated dims), made once and kept.
  Result<VkBuf*> rope_table(float theta, int rope_dims);
  Status check_validation();
  // For tests: the timestamp bits the device is taken to have (0: a device without timestamps),
  // and the queries per command buffer (1 per op and 1 per batch; a batch that fills them is
  // submitted early).
  void set_timestamp_bits(uint32_t bits) { timestamp_bits_ = bits; }
  void set_timing_queries(uint32_t n) { timing_queries_ = n; }

 protected:
  Status write_checked(Buffer& dst, uint64_t offset, const void* src, uint64_t bytes) override;
  Status read_checked(Buffer& src, uint64_t offset, void* dst, uint64_t bytes) override;
  Status execute_checked(const PlannedOp& op, std::span<const TensorRef> inputs,
                         const TensorRef& output) override;

 private:
  Status copy_staged(VkBuf& buf, uint64_t offset, void* host, uint64_t bytes, bool to_device);
  // A read of mapped device memory the host does not cache (resizable BAR: every load a round
  // trip over PCIe, a decode step's 0.5 MB of logits several ms) as a copy into host-cached
  // memory on the device's queue, then a memcpy.
  Status read_copied(VkBuf& buf, uint64_t offset, void* host, uint64_t bytes);
  // Records the held mat-vecs (DeviceOptions::group_matvecs).
  Status flush_held();

  std::shared_ptr<Core> core_;
  DeviceCaps caps_;
  std::unique_ptr<Pipelines> pipelines_;
  std::unique_ptr<Recorder> recorder_;
  bool staging_ = false;
  // Reads of `copied_reads_from_` bytes or more go through read_copied (0: never); readback_ is
  // its host-cached buffer, made at the first such read.
  uint64_t copied_reads_from_ = 0;
  std::unique_ptr<Allocator> readback_alloc_;
  Allocation readback_{};
  uint64_t block_bytes_ = 0;
  uint64_t max_window_ = 0, window_align_ = 16;
  uint64_t max_texels_ = 0, texel_align_ = 16;
  std::vector<std::shared_ptr<VkBuf>> scratch_;
  std::vector<std::shared_ptr<VkBuf>> capture_scratch_;  // of the recording under way
  std::map<int, std::vector<std::shared_ptr<VkBuf>>> recording_scratch_;
  std::map<std::pair<uint32_t, int>, std::shared_ptr<Buffer>> rope_tables_;
  std::string cache_dir_;
  uint32_t timestamp_bits_ = 0;
  uint32_t timing_queries_ = 4096;
  uint64_t timing_submissions_ = 0;  // the recorder's count when the session began
  DeviceOptions options_;
  std::vector<HeldOp> held_;
  std::optional<HeldOp> add_;   // an add held for the rmsnorm after it (fuse_add_norm)
  std::vector<HeldOp> rope_;    // a rope and the cache writes after it (fuse_rope_write)
  std::optional<HeldOp> cast_;  // a cast held for the cache write after it (fuse_rope_write)
  // groups, grouped, shared_q8, fused_adds, rope_writes, cast_writes at the last debug line
  std::array<uint64_t, 6> logged_{};
  std::array<uint64_t, 2> counted_{};  // the recorder's dispatches and barriers, likewise
};

}  // namespace duet::vulkan
