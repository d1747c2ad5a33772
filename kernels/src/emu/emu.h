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

#include "duet/status.h"

namespace duet::kernels::emu {

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

// ---- atomics on global memory (blocks run concurrently on several OS threads)
void atomic_min_u64(unsigned long long* p, unsigned long long v);

}  // namespace duet::kernels::emu
