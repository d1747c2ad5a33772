// The host emulator of the CUDA execution model, for the kernels in kernels/src/device/.
//
// run() executes a grid: blocks are spread over a few OS threads, and inside a block every CUDA
// thread is a fiber with its own stack, scheduled cooperatively. A fiber runs until it reaches a
// barrier or a warp-collective primitive and waits there until the whole block (barrier) or all
// 32 lanes of its warp (collective) have arrived, so synchronisation is real, not assumed:
//   - barrier(): bar.sync over the whole block; a thread that exited before a barrier the others
//     wait at is reported as a deadlock (divergent barrier);
//   - mma(), ldmatrix(), shfl(), vote(): computed once all 32 lanes arrived, from the fragment
//     layouts of the PTX ISA; lanes arriving at different collectives are reported (divergence);
//   - cp_async(): the destination is poisoned at issue and the data lands only when the issuing
//     thread waits for its group (cp_async_wait), so a missing wait or barrier reads poison;
//   - shared memory is poisoned (0xFF: NaN in f32/f16/bf16) when a block starts.
// Errors (divergence, deadlock, misaligned or out-of-range shared addresses) fail the launch
// with a message naming the kernel, block and threads.
#pragma once

#include <cstdint>
#include <string_view>

#include "device/params.h"
#include "duet/status.h"

namespace duet::kernels::emu {

using dev::TensorMap;
using dev::TmaDesc;

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// ---- running a grid
using Entry = void (*)(const void* params);
struct Grid {
  Dim3 blocks;
  int threads = 0;          // per block, a multiple of 32, at most 1024
  uint64_t smem_bytes = 0;  // dynamic shared memory per block
};
Status run(std::string_view kernel, const Grid& grid, Entry entry, const void* params);

// Number of OS threads blocks are spread over (DUET_EMU_THREADS, default: hardware threads).
int worker_count();

// ---- what the calling CUDA thread sees (valid only inside run())
int self_tid();
int self_ntid();
Dim3 self_bid();
Dim3 self_grid();
unsigned char* self_smem();

// ---- synchronisation and warp collectives
void barrier();
// bar.warp.sync over the calling thread's warp (all 32 lanes must arrive).
void warp_barrier();

enum class Shfl : uint8_t { idx, bfly, down, up };
uint32_t shfl(uint32_t value, Shfl mode, int arg);
enum class Vote : uint8_t { any, all, ballot };
uint32_t vote(Vote mode, bool p);

enum class Mma : uint8_t { m16n8k16_f16, m16n8k16_bf16, m16n8k8_f16 };
// d (4 fp32 per lane) += a * b, with a/b this lane's fragment registers (m16n8k16: a[4], b[2];
// m16n8k8: a[2], b[1]).
void mma(Mma kind, float* d, const uint32_t* a, const uint32_t* b);
// Integer mma.sync .s32.s8.s8.s32 (sums wrap modulo 2^32 like the hardware's): m16n8k32 reads
// a[4], b[2] and accumulates d[4]; m16n8k16 reads a[2], b[1] into d[4]; m8n8k16 reads a[1], b[1]
// and accumulates d[2].
enum class MmaS8 : uint8_t { m16n8k32, m16n8k16, m8n8k16 };
void mma_s8(MmaS8 kind, int* d, const uint32_t* a, const uint32_t* b);
// dp4a.s32.s32: c + the products of the four signed bytes of a and b (not a collective).
int dp4a(uint32_t a, uint32_t b, int c);
// ldmatrix.m8n8.x{num}{.trans}.b16: r[num] registers; p is this lane's row address.
void ldmatrix(int num, bool trans, uint32_t* r, const void* p);

// ---- asynchronous copies (cp.async.cg, 16 bytes)
void cp_async(void* dst, const void* src, int bytes, int src_bytes);
void cp_async_commit();
void cp_async_wait(int newest_pending_allowed);

// ---- shared-memory addresses: the window address of a shared pointer (smem_addr on a GPU;
// offsets start at kSmemWindowBase, worker.h), and ordinary stores into shared memory, which
// the async proxy (wgmma, TMA) may read only after the writer's fence.proxy.async.
uint32_t smem_addr(const void* p);
void note_store(const void* p, int bytes);

// ---- Hopper (sm_90 / sm_90a), emu_sm90.cpp
// bar.sync / bar.arrive on named barrier id (1..15) for `count` threads.
void named_barrier(int id, int count, bool wait);
// mbarriers: init with an arrival count; arrive, optionally announcing `tx_bytes` of bulk copies
// (arrive.expect_tx); wait (a try_wait.parity loop) until the phase of that parity completed.
void mbar_init(void* bar, int count);
void mbar_arrive(void* bar, int64_t tx_bytes);
void mbar_wait(void* bar, int parity);
void fence_proxy_async();
// cp.async.bulk.tensor.Nd (tile mode) global -> shared, completing on `bar`: the box at `coord`
// (elements, innermost first; parts outside the tensor are zeros). The destination is poisoned
// at issue and the data lands when a thread waits on the barrier.
void tma_load(void* dst, const TensorMap& map, const int* coord, void* bar);
// wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}: d (N/2 floats per thread) = A * B (+ d
// when scale_d); A from shared memory (desc_a) or, with a_regs, from four registers per thread;
// B from shared memory (desc_b), K-major (trans_b 0) or N-major (1). Asynchronous: the result
// lands in d at the wgmma.wait_group that retires its commit group; until then d holds NaN.
enum class WgmmaType : uint8_t { f16, bf16 };
void wgmma(WgmmaType type, int n, float* d, const uint32_t* a_regs, uint64_t desc_a,
           uint64_t desc_b, bool scale_d, int trans_b);
void wgmma_fence();
void wgmma_commit();
void wgmma_wait(int newest_pending_allowed);
// setmaxnreg.{inc,dec}.sync.aligned.u32: a warpgroup collective; registers are not modelled.
void setmaxnreg(bool inc, int regs);
// stmatrix.sync.aligned.m8n8.x{num}{.trans}.shared.b16: the inverse of ldmatrix.
void stmatrix(int num, bool trans, const uint32_t* r, void* p);

// ---- atomics on global memory (blocks run concurrently on several OS threads)
void atomic_min_u64(unsigned long long* p, unsigned long long v);

}  // namespace duet::kernels::emu
