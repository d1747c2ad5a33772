// What the Vulkan rules' files share: the device limits launch shapes are derived from, the
// checks every choice makes, and each op family's choices (one file per family). Pure functions
// of a capability record; no Vulkan API.
#pragma once

#include <string>
#include <vector>

#include "duet/device.h"
#include "kernel.h"

namespace duet::vulkan::rules_detail {

uint64_t pow2_ceil(uint64_t v);
uint64_t pow2_floor(uint64_t v);
// The most invocations a workgroup may have (128 where the record does not say).
int max_threads(const DeviceCaps& c);
// Workgroup size for one-element-per-invocation kernels: 256, or less where the device caps it.
int flat_block(const DeviceCaps& c);
// The shared memory a workgroup may use (16 KiB where the record does not say).
uint64_t shared_limit(const DeviceCaps& c);
std::string kib(uint64_t b);

// A Vulkan API on the host's cores (lavapipe): shared memory and per-invocation reads are scalar
// loops over the lanes there, which is what orders and rates its kernel families.
bool on_cpu(const DeviceCaps& c);

// The efficiency class of a kernel family on this device (KernelChoice::efficiency): the share
// of the device's peak it reaches on a large problem.
double efficiency(const DeviceCaps& c, Family f);

// A choice of `op` at float dtype `t` for `tier`, a kernel of family `f`: precision, the storage
// dtypes it reads (masks may stay f32, ids stay i32) and writes, the family's efficiency class.
KernelChoice base(const DeviceCaps& c, const OpDesc& op, DType t, Tier tier, Family f);
// The same for a tier that has no kernel family yet (no efficiency class).
KernelChoice base(const OpDesc& op, DType t, Tier tier);
// Whether the device stores `t` (16-bit and 8-bit storage buffers); else why not.
bool storage_ok(const DeviceCaps& c, DType t, std::string* why);
// Whether the device reads the texel buffers the register_blocked and integer-dot kernels read
// their operands through (a record that does not say is assumed to: Vulkan requires the formats).
bool texels_ok(const DeviceCaps& c, std::string* why);
// "f32", or "f16 storage, f32 compute".
std::string compute_name(DType t);

// Each op family's choices: data.cpp, elementwise.cpp, matmul.cpp, attention.cpp, quantized.cpp.
KernelChoice data_choice(const DeviceCaps& c, const OpDesc& op);
KernelChoice write_slice_choice(const DeviceCaps& c, const OpDesc& op);
KernelChoice elementwise_choice(const DeviceCaps& c, const OpDesc& op, DType t);
std::vector<KernelChoice> matmul_choices(const DeviceCaps& c, const OpDesc& op, DType t);
std::vector<KernelChoice> attention_choices(const DeviceCaps& c, const OpDesc& op, DType t);
std::vector<KernelChoice> quantized_choices(const DeviceCaps& c, const OpDesc& op);

// The GPU family's matmul kernels (matmul.cpp), for a float or a block-quantized weight: the
// mat-vec for decode (at most kMatvecRows activation rows) and the cooperative-matrix GEMM.
constexpr int64_t kMatvecRows = 8;
KernelChoice matvec_choice(const DeviceCaps& c, const OpDesc& op, DType t);
KernelChoice coopmat_choice(const DeviceCaps& c, const OpDesc& op, DType t);

}  // namespace duet::vulkan::rules_detail
