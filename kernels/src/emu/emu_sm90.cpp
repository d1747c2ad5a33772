// The Hopper instructions under the emulator: named barriers, mbarriers with transaction counts,
// TMA bulk tensor copies, the async-proxy fence, wgmma (shared-memory matrix descriptors with
// their swizzle modes, A from registers or shared memory, asynchronous accumulators), stmatrix
// and setmaxnreg. The layouts are the PTX ISA's ("Asynchronous Warpgroup Level Matrix Shared
// Memory Layout", "Matrix Descriptor Format", "Tensor copy ... swizzling modes").
//
// What is checked, beyond computing the results:
//   - a bulk copy's destination is poisoned at issue and its data lands only when every thread
//     of the block is blocked and one waits on its mbarrier (the latest a GPU could deliver it),
//     so a read before the wait, or a copy into a buffer still being read, shows as NaN; a store
//     or copy over an mbarrier's 8 bytes fails;
//   - wgmma's accumulators hold NaN from issue to the wait that retires them; registers of the
//     accumulator written in between, A registers changed, or shared operands overwritten before
//     that wait fail the launch; a wgmma with no wgmma.fence since the last wait fails;
//   - shared bytes written by ordinary stores (and cp.async) are read by wgmma only after the
//     writer's fence.proxy.async;
//   - an mbarrier phase that never completes is a deadlock, reported with the waiters.
// Not modelled: register counts (setmaxnreg only checks that the warpgroup agrees), the
// fence.mbarrier_init ordering, and any timing.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "duet/half.h"
#include "emu/worker.h"

namespace duet::kernels::emu {

namespace {

constexpr uint32_t kNanBits = 0x7fc0dead;  // what in-flight accumulators hold

// ---- matrix descriptors
struct Desc {
  uint32_t start = 0, lbo = 0, sbo = 0;
  int base_offset = 0;
  int swizzle = 0;  // bytes: 0, 32, 64, 128
};

Desc decode(uint64_t d) {
  Desc r;
  r.start = static_cast<uint32_t>(d & 0x3fff) << 4;
  r.lbo = static_cast<uint32_t>((d >> 16) & 0x3fff) << 4;
  r.sbo = static_cast<uint32_t>((d >> 32) & 0x3fff) << 4;
  r.base_offset = static_cast<int>((d >> 49) & 7);
  const int mode = static_cast<int>((d >> 62) & 3);
  r.swizzle = mode == 0 ? 0 : mode == 1 ? 128 : mode == 2 ? 64 : 32;
  return r;
}

// Swizzle<B,4,3> of the address: bits [7, 7+B) XOR into bits [4, 4+B), B = log2(bytes / 16).
uint32_t swizzle(uint32_t addr, int bytes) {
  const uint32_t b = bytes == 128 ? 3 : bytes == 64 ? 2 : bytes == 32 ? 1 : 0;
  return addr ^ (((addr >> 7) & ((1u << b) - 1)) << 4);
}

// The shared address of element (mn, k), k in [0, 16), of a 16-bit operand. The canonical
// layouts, in 16-byte units (T = 8 elements each), W = swizzle bytes / 16:
//   K-major,  no swizzle: ((8,m),(T,2)) : ((1T,SBO),(1,LBO))
//   K-major,  swizzled:   ((8,m),(T,2)) : ((W T,SBO),(1,T))
//   MN-major, no swizzle: ((T,1,m),(8,k)) : ((1,T,SBO),(1T,LBO))
//   MN-major, swizzled:   ((T,W,m),(8,k)) : ((1,T,LBO),(W T,SBO))
// with the swizzle applied to the whole address.
uint32_t operand_addr(const Desc& d, bool mn_major, int mn, int k) {
  const uint32_t w = static_cast<uint32_t>(d.swizzle / 16);
  uint32_t off = 0;
  if (!mn_major) {
    const uint32_t r = mn % 8, j = mn / 8, c = k / 8, e = k % 8;
    off = w == 0 ? r * 16 + j * d.sbo + c * d.lbo + e * 2 : r * w * 16 + j * d.sbo + c * 16 + e * 2;
  } else {
    const uint32_t e = mn % 8, q = mn / 8, r = k % 8, i = k / 8;
    if (w == 0)
      off = e * 2 + q * d.sbo + r * 16 + i * d.lbo;
    else
      off = e * 2 + (q % w) * 16 + (q / w) * d.lbo + r * w * 16 + i * d.sbo;
  }
  return swizzle(d.start + off, d.swizzle);
}

float half_value(uint16_t bits, WgmmaType t) {
  return t == WgmmaType::bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
}

// Accumulator fragment of m64nNk16: thread i of the warpgroup, register j.
void acc_rc(int i, int j, int* row, int* col) {
  const int w = i / kLanes, l = i % kLanes, g = l >> 2, t = l & 3;
  const int blk = j / 4, r = j % 4;
  *row = 16 * w + g + 8 * (r >> 1);
  *col = 8 * blk + 2 * t + (r & 1);
}
// A fragment from registers (the m16n8k16 A layout per warp): thread i, half h of register q.
void a_rc(int i, int q, int h, int* row, int* col) {
  const int w = i / kLanes, l = i % kLanes, g = l >> 2, t = l & 3;
  *row = 16 * w + g + 8 * (q & 1);
  *col = 2 * t + h + 8 * (q >> 1);
}

float bits_to_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint32_t float_to_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

bool holds_nan_marker(const float* d, int n) {
  for (int j = 0; j < n; ++j)
    if (float_to_bits(d[j]) != kNanBits) return false;
  return true;
}

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

}  // namespace

// ---- named barriers

void named_barrier(int id, int count, bool wait) {
  worker().named_barrier(id, count, wait);
}

// ---- mbarriers

MBarrier* Worker::find_mbarrier(uint32_t addr) {
  for (MBarrier& b : mbarriers_)
    if (b.addr == addr) return &b;
  return nullptr;
}

MBarrier& Worker::mbarrier(const void* p, const char* what) {
  check_smem(p, 8, 8, what);
  MBarrier* b = find_mbarrier(window(p));
  if (!b)
    fail([&](std::string& e) {
      e += std::string(what) + ": no mbarrier was initialised at shared address " +
           std::to_string(window(p));
    });
  return *b;
}

void Worker::complete_if_done(MBarrier& b) {
  if (b.pending != 0 || b.tx != 0) return;
  ++b.phase;
  b.pending = b.expected;
  const void* obj = reinterpret_cast<const void*>(static_cast<uintptr_t>(b.addr));
  for (Thread& o : threads_)
    if (o.state == State::waiting && o.waiting_at == kMbarWait && o.wait_obj == obj &&
        static_cast<int>(b.phase & 1) != o.wait_arg)
      o.state = State::ready;
}

void Worker::land_copies(MBarrier& b) {
  std::vector<TmaCopy> copies;
  copies.swap(b.inflight);
  for (const TmaCopy& c : copies) {
    const TmaDesc& d = c.desc;
    const int eb = d.elem_bytes;
    const int64_t row_bytes = int64_t{d.box[0]} * eb;
    int64_t rows = 1;
    for (int k = 1; k < d.rank; ++k) rows *= d.box[k];
    for (int64_t r = 0; r < rows; ++r) {
      int64_t idx[5] = {}, rem = r;
      for (int k = 1; k < d.rank; ++k) {
        idx[k] = rem % d.box[k];
        rem /= d.box[k];
      }
      bool inside = true;
      int64_t src_off = 0;
      for (int k = 1; k < d.rank; ++k) {
        const int64_t g = c.coord[k] + idx[k];
        inside = inside && g >= 0 && g < d.dim[k];
        src_off += g * d.stride[k];
      }
      for (int64_t e = 0; e < d.box[0]; ++e) {
        const int64_t g0 = c.coord[0] + e;
        const uint32_t logical = c.dst + static_cast<uint32_t>(r * row_bytes + e * eb);
        // Inside the destination checked at issue: the swizzle permutes within 128 bytes.
        unsigned char* dst = smem_.data() + (swizzle(logical, d.swizzle) - kSmemWindowBase);
        if (inside && g0 >= 0 && g0 < d.dim[0])
          std::memcpy(dst, static_cast<const unsigned char*>(d.base) + src_off + g0 * eb,
                      static_cast<size_t>(eb));
        else
          std::memset(dst, 0, static_cast<size_t>(eb));
      }
    }
    const uint32_t bytes = static_cast<uint32_t>(rows * row_bytes);
    clear_generic(c.dst, bytes);
    b.tx -= bytes;
  }
  complete_if_done(b);
}

bool Worker::land_waited_copies() {
  bool landed = false;
  for (MBarrier& b : mbarriers_) {
    if (b.inflight.empty()) continue;
    const void* obj = reinterpret_cast<const void*>(static_cast<uintptr_t>(b.addr));
    for (const Thread& o : threads_)
      if (o.state == State::waiting && o.waiting_at == kMbarWait && o.wait_obj == obj) {
        land_copies(b);
        landed = true;
        break;
      }
  }
  return landed;
}

void Worker::wait_mbarrier(MBarrier& b, int parity) {
  Thread& t = self();
  const uint32_t addr = b.addr;
  for (;;) {
    MBarrier* cur = find_mbarrier(addr);
    if (!cur)
      fail([&](std::string& e) {
        e += "the mbarrier at shared address " + std::to_string(addr) + " vanished while waited on";
      });
    if (static_cast<int>(cur->phase & 1) != parity) return;
    t.wait_obj = reinterpret_cast<const void*>(static_cast<uintptr_t>(addr));
    t.wait_arg = parity;
    wait_here(t, kMbarWait);
  }
}

void mbar_init(void* bar, int count) {
  Worker& w = worker();
  w.check_smem(bar, 8, 8, "mbarrier.init");
  if (count < 1 || count >= (1 << 20))
    w.fail_with("mbarrier.init with count " + std::to_string(count) + " (1 to 2^20 - 1)");
  const uint32_t a = w.window(bar);
  for (const MBarrier& o : w.mbarriers())
    if (o.addr != a && o.addr < a + 8 && a < o.addr + 8)
      w.fail_with("mbarrier.init at shared address " + std::to_string(a) +
                  " overlaps the mbarrier at " + std::to_string(o.addr));
  MBarrier* b = w.find_mbarrier(a);
  if (!b) {
    w.mbarriers().push_back({});
    b = &w.mbarriers().back();
  }
  *b = MBarrier{};
  b->addr = a;
  b->expected = b->pending = count;
  std::memset(bar, 0, 8);
  w.clear_generic(a, 8);
}

void mbar_arrive(void* bar, int64_t tx_bytes) {
  Worker& w = worker();
  MBarrier& b = w.mbarrier(bar, tx_bytes ? "mbarrier.arrive.expect_tx" : "mbarrier.arrive");
  if (tx_bytes < 0 || tx_bytes >= (int64_t{1} << 20))
    w.fail_with("mbarrier.expect_tx of " + std::to_string(tx_bytes) + " bytes (0 to 2^20 - 1)");
  // Arrivals for the next phase while this one waits only for its bytes: the copies issued on it
  // must have landed by now (they complete whether or not anyone waits).
  if (b.pending == 0 && !b.inflight.empty()) w.land_copies(b);
  if (b.pending == 0)
    w.fail_with("mbarrier.arrive on the mbarrier at shared address " + std::to_string(b.addr) +
                ": more arrivals than its count " + std::to_string(b.expected) +
                " before its phase completed");
  b.tx += tx_bytes;
  --b.pending;
  w.complete_if_done(b);
  // A release: whoever waited for it (a producer refilling the buffer) runs before the releasing
  // thread goes on.
  if (tx_bytes == 0) w.yield_to_other_warps();
}

void mbar_wait(void* bar, int parity) {
  Worker& w = worker();
  if (parity != 0 && parity != 1)
    w.fail_with("mbarrier.try_wait.parity with parity " + std::to_string(parity));
  w.wait_mbarrier(w.mbarrier(bar, "mbarrier.try_wait"), parity);
}

void fence_proxy_async() {
  worker().fence_proxy_async();
}

// ---- TMA

void tma_load(void* dst, const TensorMap& map, const int* coord, void* bar) {
  Worker& w = worker();
  TmaDesc d;
  std::memcpy(&d, map.bytes, sizeof d);
  auto bad = [&](const std::string& why) { w.fail_with("cp.async.bulk.tensor: " + why); };
  if (d.rank < 1 || d.rank > 5) bad("tensor map of rank " + std::to_string(d.rank));
  if (d.elem_bytes != 1 && d.elem_bytes != 2 && d.elem_bytes != 4)
    bad("elements of " + std::to_string(d.elem_bytes) + " bytes");
  if (reinterpret_cast<uintptr_t>(d.base) % 16 != 0) bad("global address not 16-byte aligned");
  int64_t bytes = d.elem_bytes;
  for (int k = 0; k < d.rank; ++k) {
    if (d.box[k] < 1 || d.box[k] > 256)
      bad("box dim " + std::to_string(k) + " of " + std::to_string(d.box[k]) + " (1 to 256)");
    if (d.dim[k] < 1) bad("tensor dim " + std::to_string(k) + " of " + std::to_string(d.dim[k]));
    if (k > 0 && (d.stride[k] % 16 != 0 || d.stride[k] <= 0))
      bad("stride " + std::to_string(d.stride[k]) + " of dim " + std::to_string(k) +
          " (a positive multiple of 16 bytes)");
    bytes *= d.box[k];
  }
  const int inner = d.box[0] * d.elem_bytes;
  if (d.swizzle != 0 && d.swizzle != 32 && d.swizzle != 64 && d.swizzle != 128)
    bad("swizzle of " + std::to_string(d.swizzle) + " bytes");
  if (d.swizzle ? inner != d.swizzle : inner % 16 != 0)
    bad("box rows of " + std::to_string(inner) + " bytes with swizzle " +
        std::to_string(d.swizzle) +
        " (the emulator models rows of exactly the swizzle span, or multiples of 16 bytes "
        "unswizzled)");
  // The swizzle pattern repeats every 8 rows of the span: buffers start on that boundary.
  const int align = d.swizzle ? 8 * d.swizzle : 128;
  w.check_smem(dst, static_cast<int>(bytes), align, "cp.async.bulk.tensor destination");
  MBarrier& b = w.mbarrier(bar, "cp.async.bulk.tensor (its mbarrier)");
  const uint32_t a = w.window(dst);
  for (const MBarrier& o : w.mbarriers())
    if (o.addr < a + bytes && a < o.addr + 8)
      w.fail_with("cp.async.bulk.tensor into shared [" + std::to_string(a) + ", +" +
                  std::to_string(bytes) + ") overwrites the mbarrier at " + std::to_string(o.addr));
  std::memset(dst, kPoison, static_cast<size_t>(bytes));
  TmaCopy c;
  c.dst = a;
  c.desc = d;
  for (int k = 0; k < d.rank; ++k) c.coord[k] = coord[k];
  c.issuer = w.self().tid;
  b.inflight.push_back(c);
}

// ---- wgmma

void wgmma_fence() {
  worker().group_collective(
      "wgmma.fence", 0, [](Group&, int) {}, [](Group&) {});
  worker().self().wgmma_fenced = true;
}

void wgmma(WgmmaType type, int n, float* d, const uint32_t* a_regs, uint64_t desc_a,
           uint64_t desc_b, bool scale_d, int trans_b) {
  Worker& w = worker();
  if (n < 8 || n > 256 || n % 8 != 0)
    w.fail_with("wgmma m64n" + std::to_string(n) + "k16: N must be a multiple of 8 up to 256");
  if (!w.self().wgmma_fenced)
    w.fail_with(
        "wgmma.mma_async without a wgmma.fence since the warpgroup's last wgmma.wait_group "
        "(its registers may be read before earlier writes)");
  const uint64_t variant = static_cast<uint64_t>(type) | uint64_t(n) << 8 |
                           uint64_t(a_regs != nullptr) << 20 | uint64_t(scale_d) << 21 |
                           uint64_t(trans_b != 0) << 22;
  w.group_collective(
      "wgmma.mma_async", variant,
      [&](Group& g, int i) {
        g.d[i] = d;
        g.a[i] = a_regs;
        g.desc[i][0] = a_regs ? 0 : desc_a;
        g.desc[i][1] = desc_b;
      },
      [&](Group& g) {
        for (int i = 1; i < kGroupThreads; ++i)
          if (g.desc[i][0] != g.desc[0][0] || g.desc[i][1] != g.desc[0][1])
            w.fail_with("wgmma: threads of a warpgroup gave different matrix descriptors (" +
                        hex(g.desc[0][1]) + " and " + hex(g.desc[i][1]) + ")");
        const int nd = n / 2;
        PendingMma pm;
        pm.n = nd;
        pm.value.assign(static_cast<size_t>(kGroupThreads * nd), 0.f);
        // Operands, as doubles.
        std::vector<double> A(64 * 16), B(16 * static_cast<size_t>(n));
        auto read = [&](uint64_t desc, bool mn_major, int mn, int k, const char* what) {
          const Desc ds = decode(desc);
          if (ds.base_offset != 0)
            w.fail_with(std::string(what) +
                        " descriptor with a matrix base offset (not emulated: start swizzled "
                        "tiles on their 8-row boundary)");
          const uint32_t addr = operand_addr(ds, mn_major, mn, k);
          w.check_async_read(addr & ~15u, 16, "wgmma");
          uint16_t v;
          std::memcpy(&v, w.at(addr, 2, what), 2);
          pm.smem_addr.push_back(addr);
          pm.smem_seen.push_back(v);
          return static_cast<double>(half_value(v, type));
        };
        if (a_regs) {
          for (int i = 0; i < kGroupThreads; ++i)
            for (int q = 0; q < 4; ++q) {
              pm.a_seen[i][q] = g.a[i][q];
              for (int h = 0; h < 2; ++h) {
                int row, col;
                a_rc(i, q, h, &row, &col);
                const auto bits = static_cast<uint16_t>(h ? g.a[i][q] >> 16 : g.a[i][q] & 0xffff);
                A[static_cast<size_t>(row * 16 + col)] = half_value(bits, type);
              }
            }
          for (int i = 0; i < kGroupThreads; ++i) pm.a[i] = g.a[i];
        } else {
          for (int m = 0; m < 64; ++m)
            for (int k = 0; k < 16; ++k)
              A[static_cast<size_t>(m * 16 + k)] = read(desc_a, false, m, k, "wgmma A");
        }
        for (int k = 0; k < 16; ++k)
          for (int c = 0; c < n; ++c)
            B[static_cast<size_t>(k * n + c)] = read(desc_b, trans_b != 0, c, k, "wgmma B");
        // The accumulator input: the newest in-flight result for these registers, else the
        // registers themselves.
        PendingMma* prev = nullptr;
        auto same_regs = [&](PendingMma& o) {
          if (o.n != nd) return false;
          for (int i = 0; i < kGroupThreads; ++i)
            if (o.d[i] != g.d[i]) return false;
          return true;
        };
        for (auto it = g.open.rbegin(); !prev && it != g.open.rend(); ++it)
          if (same_regs(*it)) prev = &*it;
        for (auto gi = g.groups.rbegin(); !prev && gi != g.groups.rend(); ++gi)
          for (auto it = gi->rbegin(); !prev && it != gi->rend(); ++it)
            if (same_regs(*it)) prev = &*it;
        for (int i = 0; i < kGroupThreads; ++i) {
          if (prev && !holds_nan_marker(g.d[i], nd))
            w.fail_with("wgmma: thread " + std::to_string(i) +
                        " wrote accumulator registers of an earlier wgmma still in flight "
                        "(missing wgmma.wait_group)");
          pm.d[i] = g.d[i];
        }
        std::vector<double> C(64 * static_cast<size_t>(n), 0.0);
        if (scale_d)
          for (int i = 0; i < kGroupThreads; ++i)
            for (int j = 0; j < nd; ++j) {
              int row, col;
              acc_rc(i, j, &row, &col);
              C[static_cast<size_t>(row * n + col)] =
                  prev ? prev->value[static_cast<size_t>(i * nd + j)] : g.d[i][j];
            }
        if (prev) prev->n = -prev->n;  // superseded: its result feeds this one, never lands
        // Products of 16-bit values are exact in double; the sum is rounded once to fp32.
        for (int i = 0; i < kGroupThreads; ++i)
          for (int j = 0; j < nd; ++j) {
            int row, col;
            acc_rc(i, j, &row, &col);
            double s = C[static_cast<size_t>(row * n + col)];
            for (int k = 0; k < 16; ++k)
              s += A[static_cast<size_t>(row * 16 + k)] * B[static_cast<size_t>(k * n + col)];
            pm.value[static_cast<size_t>(i * nd + j)] = static_cast<float>(s);
          }
        for (int i = 0; i < kGroupThreads; ++i)
          for (int j = 0; j < nd; ++j) g.d[i][j] = bits_to_float(kNanBits);
        g.open.push_back(std::move(pm));
      });
}

void wgmma_commit() {
  worker().group_collective(
      "wgmma.commit_group", 0, [](Group&, int) {},
      [](Group& g) {
        g.groups.push_back(std::move(g.open));
        g.open.clear();
      });
}

void wgmma_wait(int newest_pending_allowed) {
  Worker& w = worker();
  w.group_collective(
      "wgmma.wait_group", static_cast<uint64_t>(newest_pending_allowed), [](Group&, int) {},
      [&](Group& g) {
        while (static_cast<int>(g.groups.size()) > newest_pending_allowed) {
          for (PendingMma& pm : g.groups.front()) {
            for (size_t e = 0; e < pm.smem_addr.size(); ++e) {
              uint16_t v;
              std::memcpy(&v, w.at(pm.smem_addr[e], 2, "wgmma"), 2);
              if (v != pm.smem_seen[e])
                w.fail_with("shared address " + std::to_string(pm.smem_addr[e]) +
                            ", an operand of a wgmma in flight, was overwritten before the "
                            "wgmma.wait_group that retires it");
            }
            for (int i = 0; i < kGroupThreads; ++i)
              if (pm.a[i] && std::memcmp(pm.a[i], pm.a_seen[i], sizeof pm.a_seen[i]) != 0)
                w.fail_with("wgmma: thread " + std::to_string(i) +
                            " changed its A registers before the wgmma.wait_group that retires "
                            "the wgmma reading them");
            if (pm.n < 0) continue;  // superseded by a later wgmma on the same registers
            for (int i = 0; i < kGroupThreads; ++i) {
              if (!holds_nan_marker(pm.d[i], pm.n))
                w.fail_with("wgmma: thread " + std::to_string(i) +
                            " wrote accumulator registers while the wgmma writing them was in "
                            "flight");
              std::memcpy(pm.d[i], &pm.value[static_cast<size_t>(i * pm.n)],
                          static_cast<size_t>(pm.n) * 4);
            }
          }
          g.groups.pop_front();
        }
      });
  w.self().wgmma_fenced = false;
}

void setmaxnreg(bool inc, int regs) {
  Worker& w = worker();
  if (regs < 24 || regs > 256 || regs % 8 != 0)
    w.fail_with("setmaxnreg " + std::to_string(regs) + " (24 to 256, a multiple of 8)");
  w.group_collective(
      inc ? "setmaxnreg.inc" : "setmaxnreg.dec", static_cast<uint64_t>(regs), [](Group&, int) {},
      [](Group&) {});
}

// ---- stmatrix: lane l gives the address of row l % 8 of matrix l / 8; register m holds row
// l / 4, columns 2 (l % 4) and +1 of matrix m (transposed: column l / 4, rows 2 (l % 4), +1).
void stmatrix(int num, bool trans, const uint32_t* r, void* p) {
  Worker& w = worker();
  w.check_smem(p, 16, 16, "stmatrix");
  w.collective(
      trans ? "stmatrix.trans" : "stmatrix", num,
      [&](Warp& x, int l) {
        x.addr[l] = p;
        for (int m = 0; m < num; ++m) x.in[l][m] = r[m];
      },
      [&](Warp& x) {
        auto put = [&](int m, int row, int col, uint32_t v) {
          auto* base = static_cast<unsigned char*>(const_cast<void*>(x.addr[m * 8 + row]));
          const auto h = static_cast<uint16_t>(v);
          std::memcpy(base + col * 2, &h, 2);
        };
        for (int l = 0; l < kLanes; ++l)
          for (int m = 0; m < num; ++m) {
            const int row = l / 4, col = (l % 4) * 2;
            const uint32_t v = x.in[l][m];
            if (trans) {
              put(m, col, row, v & 0xffff);
              put(m, col + 1, row, v >> 16);
            } else {
              put(m, row, col, v & 0xffff);
              put(m, row, col + 1, v >> 16);
            }
          }
        for (int l = 0; l < 8 * num; ++l) w.note_generic_store(x.addr[l], 16);
      });
}

}  // namespace duet::kernels::emu
