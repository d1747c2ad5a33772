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

enum class Tier : uint8_t { generic, tiled, flash };
std::string_view tier_name(Tier t);  // "generic", "tiled", "flash" (the KernelChoice tier names)
bool parse_tier(std::string_view name, Tier* out);

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
};

// Scratch an op needs at this launch configuration (e.g. split-KV partial results).
uint64_t workspace_bytes(Tier tier, const OpDesc& op, const LaunchConfig& config);

namespace gpu {
Status launch(Tier tier, const OpDesc& op, std::span<const View> inputs, const View& output,
              const Launch& launch);
}  // namespace gpu

namespace emu {
Status launch(Tier tier, const OpDesc& op, std::span<const View> inputs, const View& output,
              const Launch& launch);
}  // namespace emu

}  // namespace duet::kernels
