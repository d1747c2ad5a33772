// The one door between kernel code and the hardware. Every kernel in kernels/src/device/ is
// written against these functions only (never threadIdx, __syncthreads, __shared__ or inline PTX
// directly), so the same source compiles twice:
//   - by nvcc for the GPU, where each function is a line of inline PTX (prim_device.h);
//   - by the host C++ compiler for the emulator, where each function is an exact emulation that
//     runs every CUDA thread of a block as a fiber (prim_host.h, kernels/src/emu/).
// Shared memory is the block's dynamic shared memory (smem()); a `__shared__` array would be
// per-thread in the host build.
#pragma once

#include <cstdint>
#include <cstring>

#include "device/params.h"

// The code of the two builds lives in different inline namespaces of duet::kernels::dev, so a
// program may link the GPU kernels and the emulator together (the nvcc host stub of a kernel and
// its emulator build would otherwise share one mangled name). The argument structs of
// params.h, which the host planner fills for both, stay in duet::kernels::dev itself.
#if defined(__CUDACC__)
#define DUET_DEV_BEGIN           \
  namespace duet::kernels::dev { \
  inline namespace gpu_build {
#else
#define DUET_DEV_BEGIN           \
  namespace duet::kernels::dev { \
  inline namespace emu_build {
#endif
#define DUET_DEV_END \
  }                  \
  }

#if defined(__CUDACC__)
#define DUET_DEV __device__ __forceinline__
#define DUET_HD __host__ __device__ __forceinline__
#define DUET_KERNEL __global__ void
#define DUET_KERNEL_BOUNDED(threads) __global__ void __launch_bounds__(threads)
// At most `threads` a block and at least `blocks` blocks an SM: caps the registers a thread.
#define DUET_KERNEL_BOUNDED_MIN(threads, blocks) __global__ void __launch_bounds__(threads, blocks)
// One block per SM with a register cap at entry: what setmaxnreg needs to take effect.
#define DUET_KERNEL_ONE_BLOCK(threads) __global__ void __launch_bounds__(threads, 1)
// A kernel parameter whose address is taken (TMA tensor maps): it stays in the parameter space.
#define DUET_GRID_CONSTANT __grid_constant__
// Loops over register arrays must unroll, or the array goes to local memory.
#define DUET_UNROLL _Pragma("unroll")
// Copy loops must not unroll where registers are scarce: the loads would be hoisted into them.
#define DUET_NO_UNROLL _Pragma("unroll 1")
#else
#define DUET_DEV inline
#define DUET_HD inline
#define DUET_KERNEL void
#define DUET_KERNEL_BOUNDED(threads) void
#define DUET_KERNEL_BOUNDED_MIN(threads, blocks) void
#define DUET_KERNEL_ONE_BLOCK(threads) void
#define DUET_GRID_CONSTANT
#define DUET_UNROLL
#define DUET_NO_UNROLL
#endif

DUET_DEV_BEGIN

// The 16-bit storage types of the tensor-core kernels, as tags.
struct F16 {
  static constexpr bool bf16 = false;
};
struct Bf16 {
  static constexpr bool bf16 = true;
};

// 16 bytes moved as one vector (ld.global.v4 / st.shared.v4 / cp.async 16).
struct alignas(16) Vec16 {
  uint32_t w[4];
};

inline constexpr int kWarp = 32;

// Whether this is device code compiled for an architecture older than sm (major*10 + minor),
// or for sm or newer: kernel instances the selection never launches on such a device compile to
// nothing there. Both false in the emulator's build, which runs every instance.
DUET_HD constexpr bool device_arch_below(int sm) {
#if defined(__CUDA_ARCH__)
  return __CUDA_ARCH__ < sm * 10;
#else
  (void)sm;
  return false;
#endif
}
DUET_HD constexpr bool device_arch_at_least(int sm) {
#if defined(__CUDA_ARCH__)
  return __CUDA_ARCH__ >= sm * 10;
#else
  (void)sm;
  return false;
#endif
}

DUET_DEV_END

#if defined(__CUDACC__)
#include "prim_device.h"
#include "prim_sm90_device.h"
#else
#include "prim_host.h"
#include "prim_sm90_host.h"
#endif

DUET_DEV_BEGIN

// Derived helpers, identical in both builds.
DUET_DEV int lane() {
  return tid() & (kWarp - 1);
}
DUET_DEV int warp() {
  return tid() / kWarp;
}
DUET_DEV int nwarps() {
  return nthreads() / kWarp;
}

DUET_DEV float warp_max4(float v) {  // over the 4 lanes of an mma quad (same groupID)
  v = fmaxf(v, shfl_xor(v, 1));
  return fmaxf(v, shfl_xor(v, 2));
}
DUET_DEV float warp_sum4(float v) {
  v += shfl_xor(v, 1);
  return v + shfl_xor(v, 2);
}
DUET_DEV float warp_sum(float v) {
  for (int m = 16; m > 0; m >>= 1) v += shfl_xor(v, m);
  return v;
}
DUET_DEV float warp_max(float v) {
  for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, shfl_xor(v, m));
  return v;
}

DUET_DEV_END
