// A Driver without a GPU, for testing the CUDA device's host logic: "device memory" is host
// memory, work queued on a stream runs only when an event or the stream is synchronized (so a
// copy that reads a staging buffer too late, or a read that does not wait, shows up as wrong
// data), kernels run on the kernels' host emulator, and GEMMs on a plain column-major loop.
// Failures (out of memory, sticky errors, launch errors) can be injected. Streams 1 and 2 are
// CUDA's legacy and per-thread default streams, made on first use.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "driver.h"

namespace duet::cuda::testing {

// Properties of real cards, as cudaGetDeviceProperties reports them.
DeviceProps v100();
DeviceProps t4();
DeviceProps rtx2080ti();
DeviceProps gtx1660();
DeviceProps mx450();
DeviceProps a100();
DeviceProps rtx3090();
DeviceProps rtx4090();
DeviceProps h100();
DeviceProps h100_4sm();  // an H100 of 4 SMs: small problems run unsplit
DeviceProps rtx5090();
DeviceProps gtx1060();           // Pascal (sm_61): dp4a, no tensor cores
DeviceProps jetson_orin_nano();  // sm_87, 8 SMs, integrated

// D = op(A) op(B) on the host, exactly as cuBLASLt defines it (column-major, strided batches).
void host_gemm(const GemmCall& g, const void* a, const void* b, void* d);

class FakeDriver final : public Driver {
 public:
  explicit FakeDriver(std::vector<DeviceProps> devices);
  ~FakeDriver() override;

  // What status() reports (devices found, CUDA 13.0 driver and runtime by default).
  DriverStatus driver_status;
  std::string blas = "cuBLASLt 13.0.0 (fake)";
  uint64_t capacity = 256ull << 20;  // device memory per device
  bool pinned_works = true;
  size_t copies_to_host = 0;    // copy_to_host calls
  size_t copies_to_device = 0;  // copy_to_device calls
  uint64_t bytes_to_host = 0;   // and the bytes they moved
  uint64_t bytes_to_device = 0;
  bool emulate_kernels = true;

  // Injected failures: the next call of that kind returns the status. A device_lost status also
  // makes every later call on that device fail, as CUDA's sticky errors do.
  std::optional<Status> fail_next_sync, fail_next_launch;
  size_t launches_before_failure = 0;  // fail_next_launch fails the launch after this many

  struct LaunchRecord {
    Tier tier;
    OpKind op;
    LaunchConfig config;
    void* workspace;
    int sm;
    Stream stream;
    bool programmatic;  // Launch::programmatic
  };
  std::vector<LaunchRecord> launches;
  std::vector<size_t> group_launches;  // members of each launch_group
  int fused_norms = 0;                 // launch_group calls with an rmsnorm
  int fused_adds = 0;                  // launch_group calls with an add before the rmsnorm
  int fused_silus = 0;                 // launch_group calls with an element-wise op quantizing
  std::vector<size_t> rope_writes;     // ops of each launch_rope_write
  std::vector<GemmCall> gemms;
  std::vector<uint64_t> gemm_workspaces;
  int device_allocs = 0, device_frees = 0, pinned_allocs = 0;
  bool graphs_work = true;  // capture_begin succeeds (else: unsupported)
  int graphs_launched = 0, graphs_alive = 0;
  size_t pending() const;  // work queued and not yet run, over all streams

  DriverStatus status() override { return driver_status; }
  Result<DeviceProps> properties(int ordinal) override;
  std::string blas_library() override { return blas; }
  Status use(int ordinal) override;
  int current_device() override;
  Result<MemoryInfo> memory_info() override;
  Result<void*> device_alloc(uint64_t bytes) override;
  void device_free(void* p) override;
  Result<void*> pinned_alloc(uint64_t bytes) override;
  void pinned_free(void* p) override;
  Result<Stream> stream_create() override;
  void stream_destroy(Stream s) override;
  Status stream_sync(Stream s) override;
  Result<Event> event_create() override;
  void event_destroy(Event e) override;
  Status event_record(Event e, Stream s) override;
  Status event_sync(Event e) override;
  // Done when its stream's work up to the record has run (work runs only when synchronized).
  Result<bool> event_done(Event e) override;
  // Timing events stamp the host's clock when the stream's work reaches them.
  Result<Event> timing_event_create() override;
  Result<float> event_elapsed_ms(Event start, Event end) override;
  Status copy_to_device(void* dst, const void* src, uint64_t bytes, Stream s) override;
  Status copy_to_host(void* dst, const void* src, uint64_t bytes, Stream s) override;
  Status launch(Tier tier, const OpDesc& op, std::span<const kernels::View> in,
                const kernels::View& out, const kernels::Launch& l) override;
  // Recorded in `launches` once, as its first member's op, and counted in `group_launches`.
  Status launch_group(Tier tier, std::span<const kernels::GroupMember> members,
                      const kernels::Launch& l, const kernels::GroupMember* norm,
                      const kernels::GroupMember* add) override;
  // Recorded in `launches` once, as the rope, and counted in `rope_writes`.
  Status launch_rope_write(std::span<const kernels::FusedOp> ops,
                           const kernels::Launch& l) override;
  Status gemm(const GemmCall& g, const void* a, const void* b, void* d, Stream s, void* workspace,
              uint64_t workspace_bytes) override;
  // Graphs: the work queued on a capturing stream is kept, not queued; a launch queues it again.
  Status capture_begin(Stream s) override;
  Result<void*> capture_end(Stream s) override;
  Status graph_launch(void* graph, Stream s) override;
  void graph_destroy(void* graph) override;

 private:
  struct Queue {
    int device = 0;
    std::vector<std::function<Status()>> work;
    size_t done = 0;
  };
  Status sticky() const;
  Status run_until(Queue& q, size_t end);
  Status enqueue(Stream s, std::function<Status()> f);
  Queue* queue(Stream s);  // nullptr: no such stream

  // Every call holds it: the device may be used from several threads (one at a time through the
  // executor's lock, but buffers come and go on any thread), as the CUDA runtime allows.
  mutable std::recursive_mutex mu_;
  std::vector<DeviceProps> devices_;
  int current_ = 0;
  std::map<int, std::string> lost_;                   // device -> sticky error
  std::map<void*, std::pair<int, uint64_t>> blocks_;  // pointer -> device, bytes
  std::map<int, uint64_t> used_;
  std::map<Stream, Queue> queues_;
  std::map<Event, std::pair<Stream, size_t>> events_;
  std::map<Event, double> stamps_;  // timing events: seconds when reached, < 0 before
  std::map<Stream, std::vector<std::function<Status()>>> capturing_;
  std::map<void*, std::vector<std::function<Status()>>> graphs_;
  int next_handle_ = 1;
};

}  // namespace duet::cuda::testing
