#include "kernels/gemm.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <unordered_map>

namespace duet::cpu::kernels {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

const std::byte* at(const MatrixOperand& x, int64_t elem) {
  return x.base + elem * elem_size(x.type);
}

// Below this many flops the work runs on the calling thread: waking the pool costs more.
constexpr double kParallelFlops = 2e6;

// At most this many rows: no packing, B is read in place (see skinny_gemm).
constexpr int64_t kSkinnyRows = 8;

// Row counts the few-row kernels take: gemv 1, 2, 4 or 8; skinny 1, 2 or 4.
int64_t kernel_rows(int64_t m, bool rows_of_b) {
  const int64_t p = m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : 8;
  return rows_of_b ? std::min<int64_t>(p, 4) : p;
}

// A product with few rows (a decode step through a linear layer): packing B would cost more
// than the product, which is bound by reading B once. B of any float type is read in place and
// widened in registers; threads take column ranges, so the weight streams once over all of
// them. Rows of B contiguous (B [K, N]) go through Kernels::skinny, up to four rows of A per
// pass over B; rows of B^T contiguous (a weight stored [N, K]) through Kernels::gemv, all rows
// (up to 8) in one pass. Rows of A are made dense f32 (a small copy when they are not already,
// padded with zero rows to a count the kernels take; results of padding rows are dropped).
void skinny_gemm(const Kernels& kt, const GemmArgs& g, ThreadPool& pool, Scratch& sc,
                 bool parallel) {
  const int64_t M = g.M, N = g.N, K = g.K;
  const bool rows_of_b = g.b.cs == 1;
  const int64_t group = rows_of_b ? 4 : 8;  // rows of A per pass over B
  const int64_t threads = pool.size();
  const int64_t want = parallel ? 2 * threads : 1;
  const int64_t nsplit =
      g.batches >= want ? 1 : std::min(ceil_div(want, g.batches), std::max<int64_t>(1, N / 64));
  pool.parallel_for(g.batches * nsplit, 1, [&](int64_t s, int64_t e) {
    thread_local std::vector<float> a_storage, c_storage;
    for (int64_t t = s; t < e; ++t) {
      const int64_t bi = t / nsplit, ns = t % nsplit;
      const int64_t n0 = ns * N / nsplit, n1 = (ns + 1) * N / nsplit;
      if (n0 == n1) continue;
      const int64_t a_off = g.a.offsets[static_cast<size_t>(bi)];
      const std::byte* b = at(g.b, g.b.offsets[static_cast<size_t>(bi)]);
      for (int64_t r0 = 0; r0 < M; r0 += group) {
        const int64_t rows = std::min(group, M - r0), kr = kernel_rows(rows, rows_of_b);
        const float* a = nullptr;
        int64_t lda = 0;
        if (g.a.type == Elem::f32 && g.a.cs == 1 && kr == rows) {
          a = reinterpret_cast<const float*>(at(g.a, a_off + r0 * g.a.rs));
          lda = g.a.rs;
        } else {
          float* buf = sc.grow(a_storage, kr * K, "rows of A in f32");
          if (!buf) return;
          for (int64_t r = 0; r < rows; ++r)
            kt.load_line(at(g.a, a_off + (r0 + r) * g.a.rs), g.a.type, g.a.cs, K, buf + r * K);
          std::fill(buf + rows * K, buf + kr * K, 0.0f);
          a = buf;
          lda = K;
        }
        float* c = g.c + bi * g.c_batch_stride + r0 * g.ldc + n0;
        float* out = c;
        int64_t ldo = g.ldc;
        if (kr != rows) {  // padding rows: compute into scratch, keep the real rows
          out = sc.grow(c_storage, kr * (n1 - n0), "padded rows of C");
          if (!out) return;
          ldo = n1 - n0;
        }
        if (rows_of_b)
          kt.skinny(a, lda, static_cast<int>(kr), b + n0 * elem_size(g.b.type), g.b.type, g.b.rs, K,
                    n1 - n0, out, ldo);
        else
          kt.gemv(a, lda, static_cast<int>(kr), b + n0 * g.b.cs * elem_size(g.b.type), g.b.type,
                  g.b.cs, K, n1 - n0, out, ldo);
        if (out != c)
          for (int64_t r = 0; r < rows; ++r)
            std::copy(out + r * ldo, out + r * ldo + (n1 - n0), c + r * g.ldc);
      }
    }
  });
}

// How panels are packed and multiplied, in 4-byte units: one f32 per k, or (bf16) one pair of
// bf16 values per two k for the vdpbf16ps tile.
struct Panels {
  const Kernels& kt;
  bool bf16;

  int64_t units(int64_t depth) const { return bf16 ? (depth + 1) / 2 : depth; }
  void pack(const void* src, Elem t, int64_t lane_stride, int64_t k_stride, int lanes, int width,
            int64_t depth, float* dst, float* scratch) const {
    if (bf16)
      kt.pack_bf16(src, t, lane_stride, k_stride, lanes, width, depth, dst, scratch);
    else
      kt.pack(src, t, lane_stride, k_stride, lanes, width, depth, 1.0f, dst, scratch);
  }
  void tile(int64_t depth, const float* a, const float* b, float* c, int64_t ldc, int m, int n,
            bool accumulate) const {
    if (bf16)
      kt.tile_bf16(units(depth), a, b, c, ldc, m, n, accumulate);
    else
      kt.tile(depth, a, kt.mr, b, kt.nr, c, ldc, m, n, accumulate);
  }
};

}  // namespace

// Loop structure (BLIS; docs/cpu-backend.md): the output is cut into tasks (batch x row range x
// column range) that threads take dynamically, all in one parallel region. For each k block, a
// task packs a row block of A (about mc rows: one kc-deep mr x kc sliver per mr rows, in L2) and
// sweeps column blocks of nc (the B block that lives in L2), A slivers (in L1) and B slivers. B is
// packed once into kc x nr slivers shared by all tasks, on demand: the first tasks to reach a
// column block pack its slivers together (ensure_b). In bf16 (g.bf16 where the ISA has the
// vdpbf16ps tile) the panels hold pairs of k, so a k block of the same bytes is twice as deep.
void gemm(const Kernels& kt, const GemmArgs& g, ThreadPool& pool, Scratch& sc) {
  const int64_t M = g.M, N = g.N, K = g.K;
  const int MR = kt.mr, NR = kt.nr;
  const int64_t threads = pool.size();
  const Panels pan{kt, g.bf16 && kt.tile_bf16 != nullptr};
  const int64_t kc = pan.bf16 ? 2 * kt.kc : kt.kc;
  const int64_t kblocks = ceil_div(K, kc);
  // k blocks of kcs (even in bf16, so that only the last block has an odd depth).
  int64_t kcs = ceil_div(K, kblocks);
  if (pan.bf16) kcs += kcs % 2;
  const int64_t kunits = pan.units(kcs);  // 4-byte units per lane of a full k block
  const int64_t npan = ceil_div(N, NR), np = npan * NR;
  const int64_t mpan = ceil_div(M, MR);
  const bool parallel = threads > 1 && 2.0 * static_cast<double>(M) * static_cast<double>(N) *
                                               static_cast<double>(K) *
                                               static_cast<double>(g.batches) >=
                                           kParallelFlops;

  if (M <= kSkinnyRows && (g.b.cs == 1 || g.b.rs == 1)) {
    skinny_gemm(kt, g, pool, sc, parallel);
    return;
  }

  // Broadcast batches read the same B: pack each distinct B once.
  std::vector<int64_t> b_index(static_cast<size_t>(g.batches));
  std::vector<int64_t> distinct;
  {
    std::unordered_map<int64_t, int64_t> seen;
    for (int64_t i = 0; i < g.batches; ++i) {
      const int64_t off = g.b.offsets[static_cast<size_t>(i)];
      auto [it, fresh] = seen.try_emplace(off, static_cast<int64_t>(distinct.size()));
      if (fresh) distinct.push_back(off);
      b_index[static_cast<size_t>(i)] = it->second;
    }
  }
  thread_local std::vector<float> packed_b_storage;
  const int64_t b_size = kblocks * kunits * np;
  float* const pb =
      sc.grow(packed_b_storage, static_cast<int64_t>(distinct.size()) * b_size, "packed B panels");
  if (!pb) return;
  // One state per B sliver (distinct B x k block x column panel): 0 free, 1 being packed, 2 ready.
  std::vector<std::atomic<uint8_t>> b_state(distinct.size() * static_cast<size_t>(kblocks * npan));

  // Makes the slivers of column panels [q0, q1) of k block pc of distinct B bd ready: packs every
  // sliver nobody has claimed, then waits for those other threads are packing. A thread never
  // waits while holding a claim, so this cannot deadlock, also when the pool runs inline.
  auto ensure_b = [&](int64_t bd, int64_t pc, int64_t q0, int64_t q1, float* scratch) {
    std::atomic<uint8_t>* st = b_state.data() + (bd * kblocks + pc) * npan;
    const int64_t k0 = pc * kcs, kcp = std::min(kcs, K - k0);
    for (int64_t jp = q0; jp < q1; ++jp) {
      uint8_t expected = 0;
      if (st[jp].load(std::memory_order_acquire) != 0 ||
          !st[jp].compare_exchange_strong(expected, 1, std::memory_order_acq_rel))
        continue;
      const int64_t n0 = jp * NR;
      pan.pack(at(g.b, distinct[static_cast<size_t>(bd)] + k0 * g.b.rs + n0 * g.b.cs), g.b.type,
               g.b.cs, g.b.rs, static_cast<int>(std::min<int64_t>(NR, N - n0)), NR, kcp,
               pb + bd * b_size + pc * kunits * np + jp * pan.units(kcp) * NR, scratch);
      st[jp].store(2, std::memory_order_release);
    }
    for (int64_t jp = q0; jp < q1; ++jp)
      for (int spins = 0; st[jp].load(std::memory_order_acquire) != 2; ++spins)
        if (spins > 64) std::this_thread::yield();
  };

  // Tasks: large row ranges, about two per thread (fewer when the batches alone give enough),
  // then column ranges when the rows run out. A task walks its rows in blocks of about mc
  // inside each k block, so a packed B k block (from L3) serves every row of the task while it
  // is hot; many small tasks would each stream all of B again (measured: 2048^3 on 2 threads,
  // 10% slower with one task per mc rows).
  int64_t nmb = 1, nns = 1;
  if (parallel) {
    const int64_t want = 2 * threads;
    if (g.batches < want) nmb = std::min(mpan, ceil_div(want, g.batches));
    if (g.batches * nmb < want)
      nns = std::min(ceil_div(want, g.batches * nmb), std::max<int64_t>(1, npan / 4));
    // A count of tasks the threads divide evenly.
    for (int64_t extra = 0; extra < threads && nmb + extra <= mpan; ++extra)
      if ((g.batches * (nmb + extra) * nns) % threads == 0) {
        nmb += extra;
        break;
      }
  }
  const int64_t tasks = g.batches * nmb * nns;
  const int64_t ncp = std::max(1, kt.nc / NR);
  const int64_t mcp = std::max(1, kt.mc / MR);  // A panels per row block (the L2-resident A)

  pool.parallel_for(tasks, parallel ? 1 : tasks, [&](int64_t s, int64_t e) {
    thread_local std::vector<float> a_storage, scratch_storage;
    float* scratch = sc.grow(scratch_storage, 2 * (kcs + std::max(MR, NR)) + 8, "packing lines");
    float* abuf = sc.grow(a_storage, mcp * MR * kunits, "packed A panels");
    if (!scratch || !abuf) return;
    for (int64_t t = s; t < e; ++t) {
      const int64_t ns = t % nns, mb = (t / nns) % nmb, bi = t / (nns * nmb);
      const int64_t p0 = mb * mpan / nmb, p1 = (mb + 1) * mpan / nmb;
      const int64_t q0 = ns * npan / nns, q1 = (ns + 1) * npan / nns;
      const int64_t bd = b_index[static_cast<size_t>(bi)];
      const float* bmat = pb + bd * b_size;  // filled by ensure_b
      float* cmat = g.c + bi * g.c_batch_stride;
      const int64_t a_off = g.a.offsets[static_cast<size_t>(bi)];
      for (int64_t pc = 0; pc < kblocks; ++pc) {
        const int64_t k0 = pc * kcs, kcp = std::min(kcs, K - k0), ku = pan.units(kcp);
        const float* bblock = bmat + pc * kunits * np;
        // Row blocks of the task: equal shares of at most mcp panels.
        const int64_t nblk = ceil_div(p1 - p0, mcp);
        for (int64_t ib = 0; ib < nblk; ++ib) {
          const int64_t i0 = p0 + ib * (p1 - p0) / nblk, i1 = p0 + (ib + 1) * (p1 - p0) / nblk;
          for (int64_t ip = i0; ip < i1; ++ip) {
            const int64_t r0 = ip * MR;
            pan.pack(at(g.a, a_off + r0 * g.a.rs + k0 * g.a.cs), g.a.type, g.a.rs, g.a.cs,
                     static_cast<int>(std::min<int64_t>(MR, M - r0)), MR, kcp,
                     abuf + (ip - i0) * MR * ku, scratch);
          }
          for (int64_t jc = q0; jc < q1; jc += ncp) {
            const int64_t je = std::min(q1, jc + ncp);
            if (ib == 0) ensure_b(bd, pc, jc, je, scratch);
            for (int64_t ip = i0; ip < i1; ++ip) {
              const float* ap = abuf + (ip - i0) * MR * ku;
              const int64_t r0 = ip * MR;
              const int m = static_cast<int>(std::min<int64_t>(MR, M - r0));
              for (int64_t jp = jc; jp < je; ++jp) {
                const int64_t n0 = jp * NR;
                pan.tile(kcp, ap, bblock + jp * ku * NR, cmat + r0 * g.ldc + n0, g.ldc, m,
                         static_cast<int>(std::min<int64_t>(NR, N - n0)), pc > 0);
              }
            }
          }
        }
      }
    }
  });
}

}  // namespace duet::cpu::kernels
