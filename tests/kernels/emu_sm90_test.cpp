// The emulator's Hopper instructions against the PTX ISA: the shared-memory layouts that wgmma's
// matrix descriptors name and that the TMA writes (128-byte swizzle: the 16-byte chunk q of row r
// of a 128-byte-row tile sits at chunk q ^ (r % 8); no swizzle: 8 x 16-byte core matrices) are
// written out here independently of the emulator's decoding, and the asynchronous rules (data
// lands at the mbarrier wait, accumulators at wgmma.wait_group, ordinary stores need
// fence.proxy.async) are shown to hold or to fail loudly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "device/prim.h"
#include "duet/half.h"
#include "emu/emu.h"

namespace duet::kernels {
namespace {

using emu::Dim3;
using emu::Grid;

template <class Args>
Status run(const Grid& g, void (*f)(const Args&), const Args& a) {
  struct Thunk {
    void (*f)(const Args&);
    const Args* a;
  };
  const Thunk t{f, &a};
  return emu::run(
      "test", g,
      [](const void* p) {
        const auto* th = static_cast<const Thunk*>(p);
        th->f(*th->a);
      },
      &t);
}

// The block's shared memory from its first 1024-byte boundary (the window's base is not one).
unsigned char* aligned_smem() {
  unsigned char* b = dev::smem();
  return b + ((1024 - (dev::smem_addr(b) & 1023)) & 1023);
}

uint64_t desc(uint32_t addr, uint32_t lbo, uint32_t sbo, int mode) {
  return uint64_t((addr >> 4) & 0x3fff) | uint64_t((lbo >> 4) & 0x3fff) << 16 |
         uint64_t((sbo >> 4) & 0x3fff) << 32 | uint64_t(mode) << 62;
}

// Byte offset of element (r, c) of a tile of 128-byte rows (64 16-bit columns), 128B-swizzled.
uint32_t sw128(int r, int c) {
  const int q = c / 8, e = c % 8;
  return static_cast<uint32_t>(r * 128 + ((q ^ (r % 8)) * 16) + e * 2);
}

// Small integers: exact in f16, bf16 and every fp32 sum below.
float val(int i, int salt) {
  return static_cast<float>((i * 7 + salt * 3) % 13 - 6);
}

// ---- wgmma: D (64 x N) = A (64 x 16) * B (16 x N) + C
struct MmaArgs {
  int n;           // N
  int a_layout;    // 0: A K-major, 128B swizzle; 1: A K-major, no swizzle; 2: A in registers
  int b_mn_major;  // B N-major (else K-major), 128B swizzle
  int kstep;       // which 16 columns of the 64 of a swizzled row (the start-address offset)
  bool bf16;
  bool scale_d;
  const float* A;  // 64 x 16
  const float* B;  // 16 x n
  const float* C;  // 64 x n
  float* D;        // 64 x n
  int fault;       // 0 none; 1 no wgmma.fence; 2 read before wait; 3 no proxy fence;
                   // 4 write accumulators in flight; 5 overwrite B in flight
};

uint16_t to16(float v, bool bf16) {
  return bf16 ? f32_to_bf16(v) : f32_to_f16(v);
}

void put16(unsigned char* base, uint32_t off, float v, bool bf16) {
  const uint16_t h = to16(v, bf16);
  std::memcpy(base + off, &h, 2);
}

// Accumulator fragment of wgmma m64nNk16 (PTX ISA figure "WGMMA .m64nNk16 register fragment
// layout for accumulator matrix D"): warp w of the group has rows 16w..16w+15; register j holds
// row g (+8 for j % 4 >= 2), column 8 (j / 4) + 2 t (+1 for odd j).
void acc_rc(int thread, int j, int* r, int* c) {
  const int w = thread / 32, l = thread % 32, g = l / 4, t = l % 4;
  *r = 16 * w + g + ((j % 4) >= 2 ? 8 : 0);
  *c = 8 * (j / 4) + 2 * t + (j % 2);
}

void mma_kernel(const MmaArgs& a) {
  unsigned char* sm = aligned_smem();
  unsigned char* as = sm;         // A: 64 rows x 128 bytes (swizzled) or core matrices
  unsigned char* bs = sm + 8192;  // B
  const int t = dev::tid();
  const bool bf = a.bf16;
  // Operands into shared memory by thread 0 (ordinary stores: noted, then fenced).
  if (t == 0) {
    std::vector<unsigned char> img(8192 + 16384, 0);
    for (int r = 0; r < 64; ++r)
      for (int k = 0; k < 16; ++k) {
        const float v = a.A[r * 16 + k];
        if (a.a_layout == 0) put16(img.data(), sw128(r, 16 * a.kstep + k), v, bf);
        // No swizzle, K-major: core matrix (r / 8, k / 8) at (r / 8) * SBO + (k / 8) * LBO,
        // SBO 256, LBO 128; row r % 8 at 16 bytes, element k % 8 at 2.
        if (a.a_layout == 1)
          put16(img.data(),
                static_cast<uint32_t>((r / 8) * 256 + (k / 8) * 128 + (r % 8) * 16 + (k % 8) * 2),
                v, bf);
      }
    for (int k = 0; k < 16; ++k)
      for (int c = 0; c < a.n; ++c) {
        const float v = a.B[k * a.n + c];
        // N-major: key row kk = 16 kstep + k of 64-column blocks 1024 * (rows / 8) apart;
        // K-major: row c of B^T, columns 16 kstep + k.
        const uint32_t off = a.b_mn_major ? (c / 64) * 32 * 128 + sw128(16 * a.kstep + k, c % 64)
                                          : sw128(c, 16 * a.kstep + k);
        put16(img.data() + 8192, off, v, bf);
      }
    for (size_t i = 0; i < img.size(); i += 16) {
      dev::Vec16 v;
      std::memcpy(&v, img.data() + i, 16);
      dev::store16(sm + i, v);
    }
    if (a.fault != 3) dev::fence_proxy_async();
  }
  dev::sync();
  const int ga = t % 128;
  float d[64];  // N up to 128
  for (int j = 0; j < a.n / 2; ++j) {
    int r, c;
    acc_rc(ga, j, &r, &c);
    d[j] = a.C[r * a.n + c];
  }
  uint32_t ar[4];
  for (int q = 0; q < 4; ++q) {
    // The m16n8k16 A fragment per warp: register q holds row g (+8 for odd q), columns
    // 2t, 2t+1 (+8 for q >= 2).
    const int w = ga / 32, l = ga % 32, g = l / 4, tt = l % 4;
    const int r = 16 * w + g + (q % 2) * 8, c = 2 * tt + (q / 2) * 8;
    ar[q] = uint32_t(to16(a.A[r * 16 + c], bf)) | uint32_t(to16(a.A[r * 16 + c + 1], bf)) << 16;
  }
  const uint32_t aa = dev::smem_addr(as), ba = dev::smem_addr(bs);
  const uint64_t da =
      a.a_layout == 0 ? desc(aa + 32 * a.kstep, 16, 1024, 1) : desc(aa, 128, 256, 0);
  const uint64_t db = a.b_mn_major ? desc(ba + 16 * a.kstep * 128, 32 * 128, 1024, 1)
                                   : desc(ba + 32 * a.kstep, 16, 1024, 1);
  if (a.fault != 1) dev::wgmma_fence();
  auto issue = [&](auto& dd) {
    if (a.a_layout == 2) {
      if (bf)
        dev::wgmma_rs(dd, ar, db, a.scale_d, dev::Bf16{});
      else
        dev::wgmma_rs(dd, ar, db, a.scale_d, dev::F16{});
    } else if (bf) {
      dev::wgmma_ss(dd, da, db, a.scale_d, dev::Bf16{});
    } else {
      dev::wgmma_ss(dd, da, db, a.scale_d, dev::F16{});
    }
  };
  if (a.n == 64) {
    float(&dd)[32] = *reinterpret_cast<float(*)[32]>(d);
    issue(dd);
  } else {
    issue(d);
  }
  dev::wgmma_commit();
  if (a.fault == 4) d[0] = 1.f;
  if (a.fault == 5 && t == 0) dev::store16(bs, dev::Vec16{});
  float early = d[0];
  dev::wgmma_wait<0>();
  if (a.fault == 2) d[0] = early;
  for (int j = 0; j < a.n / 2; ++j) {
    int r, c;
    acc_rc(ga, j, &r, &c);
    if (t < 128) a.D[r * a.n + c] = d[j];
  }
}

struct MmaCase {
  std::vector<float> A, B, C, D;
  MmaArgs args;
};

MmaCase mma_case(int n, int a_layout, int b_mn_major, int kstep, bool bf16, bool scale_d,
                 int fault = 0) {
  MmaCase m;
  m.A.resize(64 * 16);
  m.B.resize(16 * static_cast<size_t>(n));
  m.C.resize(64 * static_cast<size_t>(n));
  m.D.assign(64 * static_cast<size_t>(n), -999.f);
  for (size_t i = 0; i < m.A.size(); ++i) m.A[i] = val(static_cast<int>(i), 1);
  for (size_t i = 0; i < m.B.size(); ++i) m.B[i] = val(static_cast<int>(i), 2);
  for (size_t i = 0; i < m.C.size(); ++i) m.C[i] = val(static_cast<int>(i), 3) * 0.5f;
  m.args = {n,          a_layout,   b_mn_major, kstep,      bf16, scale_d,
            m.A.data(), m.B.data(), m.C.data(), m.D.data(), fault};
  return m;
}

Status run_mma(MmaCase& m, int threads = 128) {
  m.args.A = m.A.data();
  m.args.B = m.B.data();
  m.args.C = m.C.data();
  m.args.D = m.D.data();
  return run(Grid{Dim3{}, threads, 8192 + 16384 + 1024}, &mma_kernel, m.args);
}

void expect_product(const MmaCase& m) {
  const int n = m.args.n;
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < n; ++c) {
      double want = m.args.scale_d ? m.C[r * n + c] : 0.0;
      for (int k = 0; k < 16; ++k) want += double(m.A[r * 16 + k]) * m.B[k * n + c];
      ASSERT_EQ(m.D[r * n + c], want) << "row " << r << " col " << c;
    }
}

TEST(EmulatorWgmma, BothOperandsFromSwizzledSharedMemoryKMajor) {
  for (bool bf16 : {false, true})
    for (int kstep : {0, 2}) {
      MmaCase m = mma_case(64, 0, 0, kstep, bf16, true);
      ASSERT_TRUE(run_mma(m).ok());
      expect_product(m);
    }
}

TEST(EmulatorWgmma, AUnswizzledCoreMatricesWithLeadingAndStrideOffsets) {
  MmaCase m = mma_case(64, 1, 0, 1, false, false);
  ASSERT_TRUE(run_mma(m).ok());
  expect_product(m);
}

TEST(EmulatorWgmma, AFromRegistersAndBNMajorAcrossTwoSwizzledColumnBlocks) {
  for (bool bf16 : {false, true}) {
    MmaCase m = mma_case(128, 2, 1, 1, bf16, true);
    ASSERT_TRUE(run_mma(m).ok());
    expect_product(m);
  }
}

TEST(EmulatorWgmma, EachWarpgroupOfTheBlockComputesItsOwnProduct) {
  MmaCase m = mma_case(64, 0, 0, 0, false, true);
  ASSERT_TRUE(run_mma(m, 256).ok());
  expect_product(m);
}

TEST(EmulatorWgmma, AccumulatorsHoldNanUntilTheWait) {
  MmaCase m = mma_case(64, 0, 0, 0, false, true, 2);
  ASSERT_TRUE(run_mma(m).ok());
  EXPECT_TRUE(std::isnan(m.D[0])) << "d[0] read before wgmma.wait_group";
}

TEST(EmulatorWgmma, MisuseFailsTheLaunchWithTheReason) {
  const std::pair<int, const char*> faults[] = {
      {1, "without a wgmma.fence"},
      {3, "no fence.proxy.async"},
      {4, "wrote accumulator registers while the wgmma writing them was in flight"},
      {5, "overwritten before the wgmma.wait_group"},
  };
  for (auto [fault, why] : faults) {
    MmaCase m = mma_case(64, 0, 0, 0, false, true, fault);
    Status s = run_mma(m);
    ASSERT_FALSE(s.ok()) << "fault " << fault;
    EXPECT_NE(s.message().find(why), std::string::npos) << s.message();
  }
}

// ---- TMA and mbarriers
struct TmaArgs {
  dev::TensorMap map;
  int coord[4];
  uint16_t* out;     // the box as shared memory holds it, after the wait
  uint32_t* before;  // a word of the box read before the wait
  bool wait;
};

void tma_kernel(const TmaArgs& a) {
  unsigned char* sm = aligned_smem();
  auto* bar = reinterpret_cast<uint64_t*>(sm + 8192);
  if (dev::tid() == 0) dev::mbar_init(bar, 1);
  dev::sync();
  if (dev::tid() == 0) {
    dev::mbar_arrive_expect_tx(bar, 64 * 16 * 2);
    dev::tma_load_4d(sm, a.map, a.coord[0], a.coord[1], a.coord[2], a.coord[3], bar);
    std::memcpy(a.before, sm, 4);
  }
  if (a.wait) dev::mbar_wait(bar, 0);
  dev::sync();
  if (dev::tid() == 0) std::memcpy(a.out, sm, 64 * 16 * 2);
}

TEST(EmulatorTma, ABoxLandsSwizzledAtTheWaitWithZerosOutsideTheTensor) {
  // [B 2, H 3, L 37, D 80] f16 with padded rows (88 elements) as dims D, L, H, B.
  const int64_t B = 2, H = 3, L = 37, Dm = 80, pitch = 88;
  std::vector<uint16_t> g(static_cast<size_t>(B * H * L * pitch));
  for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<uint16_t>(i % 60000 + 1);
  dev::TmaDesc d;
  d.base = g.data();
  d.rank = 4;
  d.swizzle = 128;
  d.dim[0] = Dm;
  d.dim[1] = L;
  d.dim[2] = H;
  d.dim[3] = B;
  d.stride[0] = 2;
  d.stride[1] = pitch * 2;
  d.stride[2] = L * pitch * 2;
  d.stride[3] = H * L * pitch * 2;
  d.box[0] = 64;
  d.box[1] = 16;
  d.box[2] = d.box[3] = 1;
  std::vector<uint16_t> out(64 * 16);
  uint32_t before = 0;
  TmaArgs a{};
  std::memcpy(a.map.bytes, &d, sizeof d);
  a.out = out.data();
  a.before = &before;
  a.wait = true;
  for (auto [c0, c1] : {std::pair{0, 30}, std::pair{64, 3}}) {
    a.coord[0] = c0;
    a.coord[1] = c1;
    a.coord[2] = 1;
    a.coord[3] = 1;
    ASSERT_TRUE(run(Grid{Dim3{}, 32, 8192 + 1024 + 16}, &tma_kernel, a).ok());
    EXPECT_EQ(before, 0xffffffffu) << "the box is poisoned until the mbarrier wait";
    for (int r = 0; r < 16; ++r)
      for (int c = 0; c < 64; ++c) {
        const int64_t gl = c1 + r, gd = c0 + c;
        const uint16_t want =
            gl < L && gd < Dm ? g[static_cast<size_t>(((1 * H + 1) * L + gl) * pitch + gd)] : 0;
        uint16_t got;
        std::memcpy(&got, reinterpret_cast<const unsigned char*>(out.data()) + sw128(r, c), 2);
        ASSERT_EQ(got, want) << "row " << r << " col " << c << " of box at " << c0 << "," << c1;
      }
  }
  a.wait = false;  // read without waiting: poison
  ASSERT_TRUE(run(Grid{Dim3{}, 32, 8192 + 1024 + 16}, &tma_kernel, a).ok());
  EXPECT_EQ(out[0], 0xffffu);
}

struct BarArgs {
  int count;   // arrivals the barrier expects
  int arrive;  // arrivals made
  int* seen;   // what the waiter saw
};

// Warp 1 waits on phase 0 while warp 0's lanes arrive, after writing.
void mbar_kernel(const BarArgs& a) {
  unsigned char* sm = aligned_smem();
  auto* bar = reinterpret_cast<uint64_t*>(sm);
  auto* data = reinterpret_cast<int*>(sm + 64);
  if (dev::tid() == 0) dev::mbar_init(bar, a.count);
  dev::sync();
  if (dev::warp() == 0) {
    if (dev::lane() < a.arrive) {
      data[dev::lane()] = 10 + dev::lane();
      dev::mbar_arrive(bar);
    }
  } else {
    dev::mbar_wait(bar, 0);
    a.seen[dev::lane()] = data[dev::lane() % a.arrive];
    dev::mbar_wait(bar, 0);  // a completed phase: passes at once
  }
}

TEST(EmulatorMbarrier, AWaiterPassesOnlyAfterEveryArrival) {
  std::vector<int> seen(32, -1);
  BarArgs a{4, 4, seen.data()};
  ASSERT_TRUE(run(Grid{Dim3{}, 64, 2048}, &mbar_kernel, a).ok());
  for (int l = 0; l < 32; ++l) EXPECT_EQ(seen[l], 10 + l % 4);
}

TEST(EmulatorMbarrier, APhaseThatNeverCompletesIsADeadlockNamingTheBarrier) {
  std::vector<int> seen(32, -1);
  BarArgs a{5, 4, seen.data()};
  Status s = run(Grid{Dim3{}, 64, 2048}, &mbar_kernel, a);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("threads 32-63 wait at mbarrier.try_wait"), std::string::npos)
      << s.message();
}

// A phase waits for its transaction bytes as well as its arrivals: an arrival beyond the count
// while the bytes are outstanding is an error.
void overarrive_kernel(const BarArgs&) {
  auto* bar = reinterpret_cast<uint64_t*>(aligned_smem());
  if (dev::tid() == 0) {
    dev::mbar_init(bar, 1);
    dev::mbar_arrive_expect_tx(bar, 64);
    dev::mbar_arrive(bar);
  }
}

TEST(EmulatorMbarrier, MoreArrivalsThanTheCountFail) {
  BarArgs a{1, 1, nullptr};
  Status s = run(Grid{Dim3{}, 32, 2048}, &overarrive_kernel, a);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("more arrivals than its count"), std::string::npos) << s.message();
}

// ---- named barriers, setmaxnreg, stmatrix
struct NamedArgs {
  int count;
  int* out;
  bool diverge;
};

void named_kernel(const NamedArgs& a) {
  auto* sm = reinterpret_cast<int*>(dev::smem());
  const int t = dev::tid();
  if (t < 128) {
    sm[t] = 7 * t;
    dev::named_sync(3, a.count);
    a.out[t] = sm[127 - t];
  }
  if (a.diverge) {
    if (t % 128 < 64)
      dev::setmaxnreg_inc<240>();
    else
      dev::setmaxnreg_dec<24>();
  }
}

TEST(EmulatorNamedBarrier, ASubsetOfTheBlockSynchronisesOnItsOwn) {
  std::vector<int> out(128, -1);
  NamedArgs a{128, out.data(), false};
  ASSERT_TRUE(run(Grid{Dim3{}, 256, 1024}, &named_kernel, a).ok());
  for (int t = 0; t < 128; ++t) EXPECT_EQ(out[t], 7 * (127 - t));
}

TEST(EmulatorNamedBarrier, ACountTheThreadsNeverReachIsADeadlock) {
  std::vector<int> out(128, -1);
  NamedArgs a{160, out.data(), false};
  Status s = run(Grid{Dim3{}, 256, 1024}, &named_kernel, a);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("deadlock"), std::string::npos) << s.message();
}

TEST(EmulatorSetmaxnreg, AWarpgroupThatDisagreesFailsTheLaunch) {
  std::vector<int> out(128, -1);
  NamedArgs a{128, out.data(), true};
  Status s = run(Grid{Dim3{}, 256, 1024}, &named_kernel, a);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("diverged: thread"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("setmaxnreg"), std::string::npos) << s.message();
}

struct StArgs {
  uint16_t* out;  // 4 matrices of 8 x 8
};

// stmatrix x4: lane l gives row l % 8 of matrix l / 8; register m of lane l holds row l / 4,
// columns 2 (l % 4), +1 of matrix m.
void stmatrix_kernel(const StArgs& a) {
  auto* sm = reinterpret_cast<uint16_t*>(dev::smem());
  const int l = dev::lane();
  uint32_t r[4];
  for (int m = 0; m < 4; ++m) {
    const int row = l / 4, col = 2 * (l % 4);
    r[m] = uint32_t(m * 100 + row * 8 + col) | uint32_t(m * 100 + row * 8 + col + 1) << 16;
  }
  // Matrix m at rows 8m..8m+7 of a 16-wide tile; row addresses shuffled per matrix.
  dev::stmatrix_x4(r, sm + ((l / 8) * 8 + (7 - l % 8)) * 16);
  for (int i = l; i < 4 * 8 * 16; i += 32) a.out[i] = sm[i];
}

TEST(EmulatorStmatrix, X4StoresTheLdmatrixLayout) {
  std::vector<uint16_t> out(4 * 8 * 16);
  StArgs a{out.data()};
  ASSERT_TRUE(run(Grid{Dim3{}, 32, 4 * 8 * 16 * 2}, &stmatrix_kernel, a).ok());
  for (int m = 0; m < 4; ++m)
    for (int row = 0; row < 8; ++row)
      for (int col = 0; col < 8; ++col)
        EXPECT_EQ(out[static_cast<size_t>((m * 8 + (7 - row)) * 16 + col)],
                  m * 100 + row * 8 + col);
}

}  // namespace
}  // namespace duet::kernels
