// Host-callable entry points of the CUDA kernels. The same kernel sources are compiled twice:
// for the GPU by nvcc (namespace gpu, library duet_kernels_gpu, only when CUDA is built) and for
// the host emulator by the C++ compiler (namespace emu, library duet_kernels_emu, always built),
// so that CI runs the very kernels it cannot run on a GPU. No CUDA type appears here.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "duet/device.h"

namespace duet::kernels {

// Kernels are launched by tier (duet::Tier, duet/tier.h): generic for every op; tiled (sm_75)
// and flash (sm_80+) for attention; tiled (sm_75) and pipelined (sm_80+) for matmul.

// A tensor argument: the address of element [0,...] (descriptor offset applied) and its layout
// in elements.
struct View {
  void* data = nullptr;
  DType dtype = DType::f32;
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
};
View make_view(const TensorDesc& desc, void* storage_base);

struct Launch {
  LaunchConfig config;        // chosen by the rules from the device's limits
  void* stream = nullptr;     // cudaStream_t on the GPU; ignored by the emulator
  void* workspace = nullptr;  // scratch of workspace_bytes() bytes (device memory on the GPU)
  int sm = 0;                 // the device's compute capability, major*10 + minor
  // Where the op's error word goes (ops with error_bytes(op) == 8), already holding "no error"
  // (all bits set): the launch then skips the call that resets the word in the workspace, and the
  // caller reads it back itself. Null: the first bytes of the workspace, reset by the launch.
  unsigned long long* error = nullptr;
  // Programmatic dependent launch (sm_90+ only; ignored below and by the emulator): each kernel
  // of this launch may start while the kernel before it in the stream still runs, and waits for
  // it inside (every kernel's first step, device/prim_device.h). Off unless the backend turns it
  // on (DeviceOptions::programmatic_launch).
  bool programmatic = false;
};

// Scratch an op needs at this launch configuration (e.g. split-KV partial results). Pass a
// workspace of at least this size (device memory on the GPU) in Launch::workspace.
uint64_t workspace_bytes(Tier tier, const OpDesc& op, const LaunchConfig& config);

// Data errors found by a kernel (embedding: an id outside [0, V)). The first error_bytes(op)
// bytes of the workspace carry them (or Launch::error); the launch initialises them (not
// Launch::error's). After the launch completes, the backend copies those bytes to the host and
// launch_result() turns them into the op's Status. 0 for ops that cannot fail on their data.
// emu::launch does this itself.
uint64_t error_bytes(const OpDesc& op);
Status launch_result(const OpDesc& op, const void* error_bytes_on_host, std::string_view device);

// Mat-vecs that read the same activations, launched together (launch_group): a decode step's
// q, k and v projections, or gate and up. The activations are quantized once for all of them,
// and the members of one block format share one mat-vec launch whose blocks span the union of
// their output rows, each block reading its member's weight in place and writing its member's
// output (no weight is copied or joined).
struct GroupMember {
  const OpDesc* op = nullptr;
  std::span<const View> inputs;
  View output;
};
// Whether `b` (inputs `b_in`) may join a group whose first member is `a` (inputs `a_in`), both at
// `tier`: block-quantized matmuls at the int_dot tier, at most kGroupRows rows of A, reading the
// same view of the same activations with the same shapes of A and of the output's rows. Their
// block formats and N may differ.
inline constexpr int kGroupRows = 8;
bool shares_activations(Tier tier, const OpDesc& a, std::span<const View> a_in, const OpDesc& b,
                        std::span<const View> b_in);
// Whether the rmsnorm `norm` (generic tier) may quantize its output for a group whose first
// member is `mv` (int_dot) in the same kernel (launch_group's `norm`), so that the group skips
// its q8_act launch: mv's activations are the whole of norm's output (same address, dense, f32,
// K a multiple of 32), and the norm's rows fit its kernel's registers. The output is still
// written, so other readers of it see no difference.
bool fuses_norm(const GroupMember& norm, const OpDesc& mv, std::span<const View> mv_in);
// Whether the add `add` (generic tier) may be folded into that norm (launch_group's `add`): its
// output is the norm's whole input (same address, dense, f32) and both its operands are f32 of
// the output's shape (no broadcast) with unit-stride rows. The sum is still written, so the
// residual stream's later readers see no difference.
bool fuses_add(const GroupMember& add, const GroupMember& norm);
// Whether the element-wise op `op` (generic tier: a decode step's silu_mul) may quantize its
// output for a group whose first member is `mv` (int_dot) in the same kernel (launch_group's
// `norm`), so that the group skips its q8_act launch: mv's activations are the whole of op's
// output (same address, dense, f32, K a multiple of 32). The output is still written.
bool fuses_eltwise(const GroupMember& op, const OpDesc& mv, std::span<const View> mv_in);

// A rope and the write_slice storing its output into a KV cache (and, optionally, the write_slice
// after it: a decode step's V), in one kernel at the generic tier (launch_rope_write): the rotated
// rows go to the rope's output and straight to the cache rows at the step's position. Each op
// reports its own bad position in its own error word, which the caller presets (Launch::error).
struct FusedOp {
  const OpDesc* op = nullptr;
  std::span<const View> inputs;
  View output;
  unsigned long long* error = nullptr;
};
// Whether `write` may follow `rope` in that kernel: it writes the rope's whole output (same
// address, dense, f32) into its state in place.
bool rope_feeds_write(const GroupMember& rope, const GroupMember& write);
// Whether `write` may be the kernel's second write: a write_slice in place.
bool joins_rope_write(const GroupMember& write);

// Launches the kernels computing `op` at tier `tier` with the choice's launch configuration.
// Inputs are views in the op's input order (strided as op.inputs say), the output is dense.
// Errors name the op and what was wrong (wrong dtype for the tier, unaligned rows, a missing
// kernel image for the device, ...). The GPU version is asynchronous on `launch.stream`.
namespace gpu {
Status launch(Tier tier, const OpDesc& op, std::span<const View> inputs, const View& output,
              const Launch& launch);
// A group (each pair of members passing shares_activations), with the first member's launch
// configuration and a workspace of its workspace_bytes(); with `norm` (passing fuses_norm for the
// first member), the rmsnorm before them, which quantizes their activations itself; with `add`
// (passing fuses_add for `norm`) too, the add before the norm, in the norm's kernel. `norm` may
// also be an element-wise op passing fuses_eltwise (then without `add`).
Status launch_group(Tier tier, std::span<const GroupMember> members, const Launch& launch,
                    const GroupMember* norm = nullptr, const GroupMember* add = nullptr);
// A rope and its writes (2 or 3 ops passing rope_feeds_write and joins_rope_write).
Status launch_rope_write(std::span<const FusedOp> ops, const Launch& launch);
}  // namespace gpu

// The same kernels run by the host emulator (kernels/src/emu/emu.h): the views point to host
// memory, the call returns when the kernels have run. `launch.sm` selects the architecture the
// tier is checked against (flash and pipelined need 80, tiled 75); 0 skips the check.
namespace emu {
Status launch(Tier tier, const OpDesc& op, std::span<const View> inputs, const View& output,
              const Launch& launch);
Status launch_group(Tier tier, std::span<const GroupMember> members, const Launch& launch,
                    const GroupMember* norm = nullptr, const GroupMember* add = nullptr);
Status launch_rope_write(std::span<const FusedOp> ops, const Launch& launch);
// Kernels the emulator has run in this process (each launch of a call's plan counts one).
uint64_t kernels_run();
}  // namespace emu

}  // namespace duet::kernels
