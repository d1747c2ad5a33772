// The GPU side of prim.h: inline PTX. Included only by nvcc (through prim.h).
//
// Each instruction is emitted only where the architecture has it: the guards test __CUDA_ARCH__
// against the first architectures of duet/kernels/arch_since.h, the numbers the host's record
// (duet/kernels/arch.h) reads too. bf16 instructions exist from sm_80, so no sm_75 image ever
// contains one (the PTX check in tests/kernels verifies it). The flash tier is additionally
// compiled only for sm_80+ images.
#pragma once

#include "duet/kernels/arch_since.h"

DUET_DEV_BEGIN

// ---- indices
DUET_DEV int tid() {
  return static_cast<int>(threadIdx.x);
}
DUET_DEV int nthreads() {
  return static_cast<int>(blockDim.x);
}
DUET_DEV int bid_x() {
  return static_cast<int>(blockIdx.x);
}
DUET_DEV int bid_y() {
  return static_cast<int>(blockIdx.y);
}
DUET_DEV int bid_z() {
  return static_cast<int>(blockIdx.z);
}
DUET_DEV int nbid_x() {
  return static_cast<int>(gridDim.x);
}
DUET_DEV int nbid_y() {
  return static_cast<int>(gridDim.y);
}

// ---- shared memory and barriers
DUET_DEV unsigned char* smem() {
  extern __shared__ __align__(16) unsigned char duet_dynamic_smem[];
  return duet_dynamic_smem;
}
DUET_DEV uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
DUET_DEV void sync() {
  __syncthreads();
}
// bar.warp.sync: the lanes of a warp meet, and each sees what the others wrote to shared memory
// before it (a warp's own staging buffers need no block barrier).
DUET_DEV void sync_warp() {
  __syncwarp();
}

// ---- programmatic dependent launch (sm_90+; docs/cuda.md#programmatic-dependent-launch)
// Every kernel calls this first, before it touches global memory. Launched with the programmatic
// stream serialization attribute (Launch::programmatic), a kernel may start while the kernel
// before it in the stream is still running: griddepcontrol.wait holds it until that grid has
// completed and its memory is visible, so nothing is read early and nothing the predecessor still
// reads is overwritten; griddepcontrol.launch_dependents then lets the next kernel's blocks be
// scheduled as this one's finish. Launched without the attribute (or before sm_90) both do nothing.
DUET_DEV void grid_dependency_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// ---- warp shuffles and votes (full warp)
DUET_DEV float shfl_xor(float v, int mask) {
  return __shfl_xor_sync(0xffffffffu, v, mask);
}
DUET_DEV float shfl_idx(float v, int src) {
  return __shfl_sync(0xffffffffu, v, src);
}
DUET_DEV uint32_t shfl_xor_u32(uint32_t v, int mask) {
  return __shfl_xor_sync(0xffffffffu, v, mask);
}
DUET_DEV uint32_t shfl_idx_u32(uint32_t v, int src) {
  return __shfl_sync(0xffffffffu, v, src);
}
DUET_DEV uint32_t shfl_down_u32(uint32_t v, int delta) {
  return __shfl_down_sync(0xffffffffu, v, delta);
}
DUET_DEV uint32_t ballot(bool p) {
  return __ballot_sync(0xffffffffu, p);
}
DUET_DEV bool vote_any(bool p) {
  return __any_sync(0xffffffffu, p);
}
DUET_DEV bool vote_all(bool p) {
  return __all_sync(0xffffffffu, p);
}

// ---- tensor cores: D = A * B + D, fp32 accumulation
DUET_DEV void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, F16) {
#if __CUDA_ARCH__ >= DUET_SM_MMA_F16_M16N8K16 * 10
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();  // m16n8k16 needs sm_80; the sm_75 kernels use mma_1688
#endif
}
DUET_DEV void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, Bf16) {
#if __CUDA_ARCH__ >= DUET_SM_BF16 * 10
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();  // bf16 needs sm_80: never emitted into an sm_75 image
#endif
}
// m16n8k8 with f16 inputs: the Turing (sm_75) tensor-core instruction.
DUET_DEV void mma_1688(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t b0) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(b0));
}

// ---- int8 tensor cores: D = A * B + D, s8 x s8 with s32 accumulation (wrapping)
// m16n8k32 (sm_80+): A 16x32 as four registers of 4 bytes, B 32x8 as two.
DUET_DEV void mma_s8_16832(int (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if __CUDA_ARCH__ >= DUET_SM_MMA_S8_M16N8K32 * 10
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();  // m16n8k32 needs sm_80; the sm_75 kernels use mma_s8_8816
#endif
}
// m8n8k16 (sm_75+): A 8x16 and B 16x8 as one register of 4 bytes each, D 8x8 as two.
DUET_DEV void mma_s8_8816(int (&d)[2], uint32_t a, uint32_t b) {
#if __CUDA_ARCH__ >= DUET_SM_MMA_S8_M8N8K16 * 10
  asm volatile("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
               : "+r"(d[0]), "+r"(d[1])
               : "r"(a), "r"(b));
#else
  __trap();
#endif
}

// m16n8k16 (sm_80+): A 16x16 as two registers (rows g and g + 8), B 16x8 as one.
DUET_DEV void mma_s8_16816(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t b) {
#if __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a0), "r"(a1), "r"(b));
#else
  __trap();  // m16n8k16 s8 needs sm_80
#endif
}

// ---- dp4a (sm_61+): c + the four products of the signed bytes of a and b.
DUET_DEV int dp4a(uint32_t a, uint32_t b, int c) {
#if __CUDA_ARCH__ >= DUET_SM_DP4A * 10
  int r;
  asm("dp4a.s32.s32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
#else
  __trap();
  return 0;
#endif
}

// ---- ldmatrix: 8x8 b16 matrices from shared memory; lane l gives the address of row l%8 of
// matrix l/8 (x1: lanes 0-7, x2: 0-15, x4: all); on sm_75 every lane must hold a valid address.
DUET_DEV void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
DUET_DEV void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
DUET_DEV void ldmatrix_x2(uint32_t (&r)[2], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr(p)));
}
DUET_DEV void ldmatrix_x2_trans(uint32_t (&r)[2], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr(p)));
}
DUET_DEV void ldmatrix_x1(uint32_t& r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
               : "=r"(r)
               : "r"(smem_addr(p)));
}

// ---- cp.async (sm_80+): 16 bytes global -> shared; bytes past src_bytes are zero-filled.
DUET_DEV void cp_async16(void* dst, const void* src, int src_bytes) {
#if __CUDA_ARCH__ >= DUET_SM_CP_ASYNC * 10
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes)
               : "memory");
#else
  __trap();
#endif
}
DUET_DEV void cp_async_commit() {
#if __CUDA_ARCH__ >= DUET_SM_CP_ASYNC * 10
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N>
DUET_DEV void cp_async_wait() {
#if __CUDA_ARCH__ >= DUET_SM_CP_ASYNC * 10
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// ---- bit fields: the 32 bits of (hi:lo) >> s, s in [0, 32) (shf.r.wrap)
DUET_DEV uint32_t funnel_r(uint32_t lo, uint32_t hi, int s) {
  return __funnelshift_r(lo, hi, s);
}

// ---- vector memory
DUET_DEV Vec16 load16(const void* p) {
  return *static_cast<const Vec16*>(p);
}
DUET_DEV void store16(void* p, const Vec16& v) {
  *static_cast<Vec16*>(p) = v;
}
DUET_DEV void store_u32(void* p, uint32_t v) {  // p 4-byte aligned
  *static_cast<uint32_t*>(p) = v;
}
DUET_DEV uint32_t load_u32(const void* p) {  // p 4-byte aligned
  return *static_cast<const uint32_t*>(p);
}
DUET_DEV uint16_t load_u16(const void* p) {  // p 2-byte aligned
  return *static_cast<const uint16_t*>(p);
}

// ---- conversions between fp32 and the 16-bit types
DUET_DEV uint32_t pack2(float lo, float hi, F16) {
  uint32_t r;
#if __CUDA_ARCH__ >= DUET_SM_CVT_PACKED * 10
  asm("cvt.rn.f16x2.f32 %0, %2, %1;\n" : "=r"(r) : "f"(lo), "f"(hi));  // a -> upper half
#else
  unsigned short l, h;
  asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(l) : "f"(lo));
  asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(h) : "f"(hi));
  asm("mov.b32 %0, {%1, %2};\n" : "=r"(r) : "h"(l), "h"(h));
#endif
  return r;
}
DUET_DEV uint32_t pack2(float lo, float hi, Bf16) {
#if __CUDA_ARCH__ >= DUET_SM_BF16 * 10
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %2, %1;\n" : "=r"(r) : "f"(lo), "f"(hi));
  return r;
#else
  __trap();
  return 0;
#endif
}

// An f16 as f32 (exact; cvt.f32.f16).
DUET_DEV float half_to_float(uint16_t h) {
  float f;
  asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(static_cast<unsigned short>(h)));
  return f;
}

// The two f16 of a word as f32 (exact; cvt.f32.f16).
DUET_DEV void unpack2(uint32_t w, float& lo, float& hi, F16) {
  unsigned short l = static_cast<unsigned short>(w), h = static_cast<unsigned short>(w >> 16);
  asm("cvt.f32.f16 %0, %1;\n" : "=f"(lo) : "h"(l));
  asm("cvt.f32.f16 %0, %1;\n" : "=f"(hi) : "h"(h));
}

// One value rounded to a 16-bit type (for epilogue stores).
DUET_DEV uint16_t round16(float v, F16) {
  unsigned short r;
  asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(r) : "f"(v));
  return r;
}
DUET_DEV uint16_t round16(float v, Bf16) {
#if __CUDA_ARCH__ >= DUET_SM_BF16 * 10
  unsigned short r;
  asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(r) : "f"(v));
  return r;
#else
  __trap();
  return 0;
#endif
}

// ---- fast math (approximate on the GPU; the emulator uses the exact functions)
DUET_DEV float exp2_fast(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
  return r;
}
DUET_DEV float log2_fast(float x) {
  float r;
  asm("lg2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
  return r;
}

// ---- atomics
DUET_DEV void atomic_min_u64(unsigned long long* p, unsigned long long v) {
  atomicMin(p, v);
}

DUET_DEV_END
