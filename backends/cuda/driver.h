// What the CUDA backend needs from CUDA, as one small interface. The real implementation
// (runtime_driver.cpp, CUDA builds only) calls the CUDA runtime and cuBLASLt; tests substitute a
// fake backed by host memory and the kernel emulator, so that the device logic (allocator,
// staging, validation, lost devices, out of memory) is tested on machines without a GPU.
//
// Errors come back as Status with the code the device acts on: out_of_memory, device_lost for
// sticky errors (the CUDA context is unusable: illegal address, launch failure, ...), unsupported,
// internal for the rest.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "caps.h"
#include "duet/kernels/launch.h"
#include "gemm.h"

namespace duet::cuda {

// Whether CUDA can run at all in this process, as found before any device is opened.
struct DriverStatus {
  bool library_found = false;  // libcuda.so.1 (nvcuda.dll) could be loaded
  int driver_version = 0;      // CUDA version the driver supports (13000 = 13.0), 0 = unknown
  int runtime_version = 0;     // CUDA version the build needs
  int device_count = 0;
  std::string count_error;  // why counting devices failed, empty when it did not
};

// OK when CUDA is usable, else the reason the backend is unavailable: "no NVIDIA driver
// (libcuda.so.1 not found)", "driver too old for this build: ...", "no device", ...
Status availability(const DriverStatus& s);

// The engine's code for a cudaError_t value: sticky errors are device_lost.
Code classify_cuda_error(int cuda_error);

struct MemoryInfo {
  uint64_t free = 0, total = 0;
};

using Stream = void*;  // cudaStream_t
using Event = void*;   // cudaEvent_t

class Driver {
 public:
  virtual ~Driver() = default;

  virtual DriverStatus status() = 0;
  virtual Result<DeviceProps> properties(int ordinal) = 0;
  // cuBLASLt: "cuBLASLt 13.0.2 (libcublasLt.so.13)" when it loaded, else "unavailable: why".
  virtual std::string blas_library() = 0;

  // Makes `ordinal` the calling thread's current device (creates its context on first use).
  virtual Status use(int ordinal) = 0;
  // The calling thread's current device (cudaGetDevice), -1 where unknown: what a call made on
  // another library's thread (a DLPack deleter) puts back after use().
  virtual int current_device() { return -1; }
  virtual Result<MemoryInfo> memory_info() = 0;
  virtual Result<void*> device_alloc(uint64_t bytes) = 0;
  virtual void device_free(void* p) = 0;
  virtual Result<void*> pinned_alloc(uint64_t bytes) = 0;
  virtual void pinned_free(void* p) = 0;

  virtual Result<Stream> stream_create() = 0;
  virtual void stream_destroy(Stream s) = 0;
  virtual Status stream_sync(Stream s) = 0;
  virtual Result<Event> event_create() = 0;
  virtual void event_destroy(Event e) = 0;
  virtual Status event_record(Event e, Stream s) = 0;
  virtual Status event_sync(Event e) = 0;
  // Whether the work before the event's last record has completed, without waiting
  // (cudaEventQuery).
  virtual Result<bool> event_done(Event e) = 0;
  // An event that keeps the time it completed at (kernel timing; event_create's events do not),
  // and the milliseconds from `start` to `end`, both recorded and completed.
  virtual Result<Event> timing_event_create() = 0;
  virtual Result<float> event_elapsed_ms(Event start, Event end) = 0;

  // Asynchronous copies on `s` (host memory pinned or not).
  virtual Status copy_to_device(void* dst, const void* src, uint64_t bytes, Stream s) = 0;
  virtual Status copy_to_host(void* dst, const void* src, uint64_t bytes, Stream s) = 0;

  // A kernel of the given tier (kernels::gpu::launch on a GPU).
  virtual Status launch(Tier tier, const OpDesc& op, std::span<const kernels::View> in,
                        const kernels::View& out, const kernels::Launch& l) = 0;
  // Mat-vecs that read the same activations, in one go (kernels::gpu::launch_group on a GPU),
  // with the rmsnorm before them that quantizes those activations (`norm`, may be null) and the
  // residual add before that norm (`add`, may be null; only with `norm`).
  virtual Status launch_group(Tier tier, std::span<const kernels::GroupMember> members,
                              const kernels::Launch& l, const kernels::GroupMember* norm = nullptr,
                              const kernels::GroupMember* add = nullptr) = 0;
  // A rope and the KV-cache writes after it, in one kernel (kernels::gpu::launch_rope_write).
  virtual Status launch_rope_write(std::span<const kernels::FusedOp> ops,
                                   const kernels::Launch& l) = 0;
  // D = op(A) op(B) through cuBLASLt; `a`, `b`, `d` point at element 0 of each operand.
  virtual Status gemm(const GemmCall& g, const void* a, const void* b, void* d, Stream s,
                      void* workspace, uint64_t workspace_bytes) = 0;
  // CUDA graphs: the work queued on `s` between capture_begin and capture_end (this thread's
  // launches, copies and GEMMs) is captured, not run; capture_end gives an executable graph that
  // graph_launch queues on a stream, as often as asked, until graph_destroy. A driver without
  // them says Code::unsupported.
  virtual Status capture_begin(Stream s) {
    (void)s;
    return Status(Code::unsupported, "this CUDA driver cannot capture graphs");
  }
  virtual Result<void*> capture_end(Stream s) {
    (void)s;
    return Status(Code::unsupported, "no capture was begun");
  }
  virtual Status graph_launch(void* graph, Stream s) {
    (void)graph;
    (void)s;
    return Status(Code::unsupported, "this CUDA driver cannot launch graphs");
  }
  virtual void graph_destroy(void* graph) { (void)graph; }

  // Workspace cuBLASLt may use on this device.
  virtual uint64_t gemm_workspace_bytes(const DeviceProps& p) const {
    return p.major >= 9 ? (32ull << 20) : (4ull << 20);
  }
};

}  // namespace duet::cuda
