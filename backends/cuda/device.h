// A CUDA device over the Driver interface: caching allocator, pinned staging for copies, one
// stream for execution, argument validation, and lost-device handling. Built in every
// configuration, so tests run it on a fake driver where there is no GPU.
#pragma once

#include <memory>

#include "allocator.h"
#include "driver.h"
#include "duet/registry.h"
#include "rules.h"

namespace duet::cuda {

struct DeviceOptions {
  uint64_t staging_slot_bytes = 4ull << 20;  // pinned host memory per staging slot
  int staging_slots = 4;                     // copies in flight per direction
  uint64_t cache_limit = UINT64_MAX;         // bytes the allocator may keep cached
  bool cublas = true;  // load cuBLASLt (about 50 ms and 200 MiB of mapped library pages)
  // The bound on the dequantized weight tile of a block-quantized matmul through cuBLASLt
  // (qgemm.h): the chunks of K are as long as fit it.
  uint64_t dequant_tile_bytes = 32ull << 20;
  std::string id_prefix = "cuda";  // device ids are "<prefix>:<ordinal>" (emulated: "emu-t4")
  bool graphs = true;  // record work as CUDA graphs when asked (Device::begin_recording)
  // Consecutive int_dot mat-vecs that read the same activations (a decode step's q, k and v;
  // gate and up) run as one group (kernels::launch_group): their execute() calls are held until
  // an op that cannot join, a copy, a synchronize or a recording's end, then launched together.
  bool group_matvecs = true;
  // An rmsnorm whose output is the activations of the int_dot mat-vecs right after it
  // (kernels::fuses_norm) quantizes them in its own kernel: the group skips its q8_act launch.
  // The norm's execute() is held until the next op arrives, as the mat-vecs' are.
  bool fuse_norm_quant = true;
  // A residual add whose sum is the input of such an rmsnorm (kernels::fuses_add) runs inside the
  // norm's kernel, which still writes the sum: one launch fewer. The add's execute() is held
  // until the norm arrives. While timing (--timing), the add's event comes after the norm's and
  // the mat-vecs' kernels, so the add is charged their time.
  bool fuse_add_norm = true;
  // A silu_mul whose output is the activations of the int_dot mat-vec right after it (a decode
  // step's ffn_down; kernels::fuses_eltwise) quantizes them in its own kernel: the mat-vec skips
  // its q8_act launch. The silu_mul's execute() is held as the norm's is.
  bool fuse_silu_quant = true;
  // A rope whose output the next op writes into a KV cache in place (kernels::rope_feeds_write),
  // and the write_slice after that (a decode step's V), run as one kernel: the rotated rows go
  // straight to the cache. The rope's and the writes' execute() are held as the mat-vecs' are.
  bool fuse_rope_write = true;
  // Programmatic dependent launch on sm_90+ (kernels::Launch::programmatic): each of duet's
  // kernels may be scheduled while the one before it in the stream finishes, and waits for it
  // inside, hiding the gap between back-to-back kernels (a decode step is hundreds of them). Off
  // by default until measured on a GPU (docs/cuda.md#programmatic-dependent-launch).
  bool programmatic_launch = false;
  // Reads "cuda.staging_mib", "cuda.staging_slots", "cuda.cache_limit_mib", "cuda.cublas",
  // "cuda.graphs", "cuda.group_matvecs", "cuda.fuse_norm_quant", "cuda.fuse_add_norm",
  // "cuda.fuse_silu_quant", "cuda.fuse_rope_write" and "cuda.programmatic_launch" (and the
  // DUET_CUDA_STAGING_MIB, DUET_CUDA_CACHE_LIMIT_MIB, DUET_CUDA_CUBLAS, DUET_CUDA_GRAPHS,
  // DUET_CUDA_GROUP_MATVECS, DUET_CUDA_FUSE_NORM_QUANT, DUET_CUDA_FUSE_ADD_NORM,
  // DUET_CUDA_FUSE_SILU_QUANT, DUET_CUDA_FUSE_ROPE_WRITE, DUET_CUDA_PDL environment fallbacks).
  static DeviceOptions from(const BackendOptions& o);
};

// What a CUDA device offers beyond the Device interface (for tests, benchmarks and tools).
class CudaDevice : public Device {
 public:
  virtual AllocatorStats memory_stats() const = 0;
  // Returns every cached block to the driver.
  virtual void empty_cache() = 0;
  // Blocks released while another library's queue may still use them (Device::lend), not yet
  // back in the allocator.
  virtual size_t held_back() const = 0;
  // Why the device was marked lost; empty while it works.
  virtual const std::string& lost_reason() const = 0;
};

std::unique_ptr<CudaDevice> make_device(std::shared_ptr<Driver> driver, const DeviceProps& props,
                                        DeviceCaps caps, const BuildArchs& archs,
                                        const DeviceOptions& options);

// Opens every device the driver reports, with the kernel-image status and cuBLASLt availability
// in each record; a device without a kernel image is opened (its rules refuse every op with the
// reason, so the planner routes around it) and named in a note.
Result<BackendOpenResult> open_backend(std::shared_ptr<Driver> driver, const BuildArchs& archs,
                                       const DeviceOptions& options);

}  // namespace duet::cuda
