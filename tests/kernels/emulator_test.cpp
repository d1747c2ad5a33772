// The host emulator's primitives against the PTX ISA: the mma and ldmatrix fragment layouts are
// written out here from the ISA's formulas ("Matrix Fragments for mma.m16n8k16 / m16n8k8 with
// floating point type", "ldmatrix"), independently of the emulator's own tables, and the
// synchronisation primitives are shown to really synchronise (or to fail loudly).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "device/prim.h"
#include "duet/half.h"
#include "emu/emu.h"

namespace duet::kernels {
namespace {

using emu::Dim3;
using emu::Grid;

// Runs `f` (a captureless lambda or function taking const Args&) on a grid.
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

Grid warp_grid(uint64_t smem = 0) {
  return Grid{Dim3{}, 32, smem};
}

// ---- PTX ISA fragment layouts, f16/bf16 (groupID = lane >> 2, threadID_in_group = lane % 4)
struct RC {
  int row, col;
};
RC isa_a_16816(int lane, int i) {  // a0..a7
  const int g = lane >> 2, t = lane % 4;
  const int row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8;
  const int col = i < 4 ? t * 2 + (i & 1) : t * 2 + (i & 1) + 8;
  return {row, col};
}
RC isa_b_16816(int lane, int i) {  // b0..b3
  const int g = lane >> 2, t = lane % 4;
  return {i < 2 ? t * 2 + (i & 1) : t * 2 + (i & 1) + 8, g};
}
RC isa_a_1688(int lane, int i) {  // a0..a3
  const int g = lane >> 2, t = lane % 4;
  return {i < 2 ? g : g + 8, t * 2 + (i & 1)};
}
RC isa_b_1688(int lane, int i) {  // b0, b1
  const int g = lane >> 2, t = lane % 4;
  return {t * 2 + i, g};
}
RC isa_c(int lane, int i) {  // c0..c3
  const int g = lane >> 2, t = lane % 4;
  return {i < 2 ? g : g + 8, t * 2 + (i & 1)};
}

struct MmaArgs {
  const float* A;  // 16 x K
  const float* B;  // K x 8
  const float* C;  // 16 x 8
  float* D;        // 16 x 8
  int K;
  bool bf16;
};

uint16_t to16(float v, bool bf16) {
  return bf16 ? f32_to_bf16(v) : f32_to_f16(v);
}
uint32_t pack(float lo, float hi, bool bf16) {
  return uint32_t(to16(lo, bf16)) | uint32_t(to16(hi, bf16)) << 16;
}

void mma_kernel(const MmaArgs& a) {
  const int l = dev::lane();
  float d[4];
  for (int i = 0; i < 4; ++i) {
    const RC rc = isa_c(l, i);
    d[i] = a.C[rc.row * 8 + rc.col];
  }
  if (a.K == 16) {
    float av[8], bv[4];
    for (int i = 0; i < 8; ++i) {
      const RC rc = isa_a_16816(l, i);
      av[i] = a.A[rc.row * 16 + rc.col];
    }
    for (int i = 0; i < 4; ++i) {
      const RC rc = isa_b_16816(l, i);
      bv[i] = a.B[rc.row * 8 + rc.col];
    }
    const uint32_t ar[4] = {pack(av[0], av[1], a.bf16), pack(av[2], av[3], a.bf16),
                            pack(av[4], av[5], a.bf16), pack(av[6], av[7], a.bf16)};
    if (a.bf16)
      dev::mma_16816(d, ar, pack(bv[0], bv[1], true), pack(bv[2], bv[3], true), dev::Bf16{});
    else
      dev::mma_16816(d, ar, pack(bv[0], bv[1], false), pack(bv[2], bv[3], false), dev::F16{});
  } else {
    float av[4], bv[2];
    for (int i = 0; i < 4; ++i) {
      const RC rc = isa_a_1688(l, i);
      av[i] = a.A[rc.row * 8 + rc.col];
    }
    for (int i = 0; i < 2; ++i) {
      const RC rc = isa_b_1688(l, i);
      bv[i] = a.B[rc.row * 8 + rc.col];
    }
    dev::mma_1688(d, pack(av[0], av[1], false), pack(av[2], av[3], false),
                  pack(bv[0], bv[1], false));
  }
  for (int i = 0; i < 4; ++i) {
    const RC rc = isa_c(l, i);
    a.D[rc.row * 8 + rc.col] = d[i];
  }
}

// D = A B + C with small integers (exact in f16, bf16 and the fp32 sum).
void check_mma(int K, bool bf16) {
  std::vector<float> A(16 * K), B(K * 8), C(16 * 8), D(16 * 8, -1.f);
  for (int i = 0; i < 16 * K; ++i) A[i] = static_cast<float>((i * 7) % 11 - 5);
  for (int i = 0; i < K * 8; ++i) B[i] = static_cast<float>((i * 5) % 13 - 6);
  for (int i = 0; i < 16 * 8; ++i) C[i] = static_cast<float>(i % 9 - 4) * 0.5f;
  MmaArgs args{A.data(), B.data(), C.data(), D.data(), K, bf16};
  ASSERT_TRUE(run(warp_grid(), &mma_kernel, args).ok());
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 8; ++c) {
      double want = C[r * 8 + c];
      for (int k = 0; k < K; ++k) want += double(A[r * K + k]) * B[k * 8 + c];
      EXPECT_EQ(D[r * 8 + c], want) << "row " << r << " col " << c;
    }
}

TEST(EmulatorMma, M16n8k16F16FollowsThePtxFragmentLayout) {
  check_mma(16, false);
}
TEST(EmulatorMma, M16n8k16Bf16FollowsThePtxFragmentLayout) {
  check_mma(16, true);
}
TEST(EmulatorMma, M16n8k8F16FollowsThePtxFragmentLayout) {
  check_mma(8, false);
}

TEST(EmulatorMma, RoundsInputsToTheirSixteenBitType) {
  // 1 + 2^-9 is exact in f16 but rounds to 1 in bf16: the products must see the rounded value.
  std::vector<float> A(256, 0.f), B(128, 0.f), C(128, 0.f), D(128);
  A[0] = 1.f + 1.f / 512.f;
  B[0] = 1.f;
  MmaArgs args{A.data(), B.data(), C.data(), D.data(), 16, true};
  ASSERT_TRUE(run(warp_grid(), &mma_kernel, args).ok());
  EXPECT_EQ(D[0], 1.f);
  args.bf16 = false;
  ASSERT_TRUE(run(warp_grid(), &mma_kernel, args).ok());
  EXPECT_EQ(D[0], 1.f + 1.f / 512.f);
}

// ---- integer mma (.s32.s8.s8.s32), written out from the ISA's "Matrix Fragments for
// mma.m16n8k32" (.s8: a0..a15 in four registers, b0..b7 in two) and "mma.m8n8k16" (.s8: a0..a3,
// b0..b3 in one register each; c0, c1).
RC isa_a_16832(int lane, int i) {
  const int g = lane >> 2, t = lane % 4;
  const int row = (i < 4 || (i >= 8 && i < 12)) ? g : g + 8;
  return {row, t * 4 + (i & 3) + (i >= 8 ? 16 : 0)};
}
RC isa_b_16832(int lane, int i) {
  const int g = lane >> 2, t = lane % 4;
  return {t * 4 + (i & 3) + (i >= 4 ? 16 : 0), g};
}
RC isa_a_8816(int lane, int i) {
  return {lane >> 2, (lane % 4) * 4 + i};
}
RC isa_b_8816(int lane, int i) {
  return {(lane % 4) * 4 + i, lane >> 2};
}
RC isa_c_8816(int lane, int i) {
  return {lane >> 2, (lane % 4) * 2 + i};
}

// "mma.m16n8k16" (.s8: a0..a7 in two registers, rows g and g + 8; b0..b3 in one).
RC isa_a_16816s8(int lane, int i) {
  const int g = lane >> 2, t = lane % 4;
  return {i < 4 ? g : g + 8, t * 4 + (i & 3)};
}
RC isa_b_16816s8(int lane, int i) {
  return {(lane % 4) * 4 + i, lane >> 2};
}

enum class S8Shape { m16n8k32, m16n8k16, m8n8k16 };

struct MmaS8Args {
  const int8_t* A;  // M x K
  const int8_t* B;  // K x 8
  const int32_t* C;
  int32_t* D;  // M x 8
  S8Shape shape;
};

uint32_t pack_s8(const int8_t* A, int cols, RC (*at)(int, int), int lane, int first) {
  uint32_t r = 0;
  for (int j = 0; j < 4; ++j) {
    const RC rc = at(lane, first + j);
    r |= uint32_t(uint8_t(A[rc.row * cols + rc.col])) << (8 * j);
  }
  return r;
}

void mma_s8_kernel(const MmaS8Args& a) {
  const int l = dev::lane();
  if (a.shape == S8Shape::m16n8k16) {
    int d[4];
    for (int i = 0; i < 4; ++i) {
      const RC rc = isa_c(l, i);
      d[i] = a.C[rc.row * 8 + rc.col];
    }
    dev::mma_s8_16816(d, pack_s8(a.A, 16, isa_a_16816s8, l, 0),
                      pack_s8(a.A, 16, isa_a_16816s8, l, 4), pack_s8(a.B, 8, isa_b_16816s8, l, 0));
    for (int i = 0; i < 4; ++i) {
      const RC rc = isa_c(l, i);
      a.D[rc.row * 8 + rc.col] = d[i];
    }
  } else if (a.shape == S8Shape::m16n8k32) {
    int d[4];
    for (int i = 0; i < 4; ++i) {
      const RC rc = isa_c(l, i);
      d[i] = a.C[rc.row * 8 + rc.col];
    }
    const uint32_t ar[4] = {
        pack_s8(a.A, 32, isa_a_16832, l, 0), pack_s8(a.A, 32, isa_a_16832, l, 4),
        pack_s8(a.A, 32, isa_a_16832, l, 8), pack_s8(a.A, 32, isa_a_16832, l, 12)};
    dev::mma_s8_16832(d, ar, pack_s8(a.B, 8, isa_b_16832, l, 0),
                      pack_s8(a.B, 8, isa_b_16832, l, 4));
    for (int i = 0; i < 4; ++i) {
      const RC rc = isa_c(l, i);
      a.D[rc.row * 8 + rc.col] = d[i];
    }
  } else {
    int d[2];
    for (int i = 0; i < 2; ++i) {
      const RC rc = isa_c_8816(l, i);
      d[i] = a.C[rc.row * 8 + rc.col];
    }
    dev::mma_s8_8816(d, pack_s8(a.A, 16, isa_a_8816, l, 0), pack_s8(a.B, 8, isa_b_8816, l, 0));
    for (int i = 0; i < 2; ++i) {
      const RC rc = isa_c_8816(l, i);
      a.D[rc.row * 8 + rc.col] = d[i];
    }
  }
}

// D = A B + C over the full int8 range, with C near the int32 limits (the sum wraps).
void check_mma_s8(S8Shape shape) {
  const int M = shape == S8Shape::m8n8k16 ? 8 : 16, K = shape == S8Shape::m16n8k32 ? 32 : 16;
  std::vector<int8_t> A(M * K), B(K * 8);
  std::vector<int32_t> C(M * 8), D(M * 8, -1);
  for (int i = 0; i < M * K; ++i) A[i] = static_cast<int8_t>((i * 37) % 256 - 128);
  for (int i = 0; i < K * 8; ++i) B[i] = static_cast<int8_t>((i * 91 + 5) % 256 - 128);
  for (int i = 0; i < M * 8; ++i) C[i] = i % 3 == 0 ? 2147483000 : i * 1000 - 50000;
  MmaS8Args args{A.data(), B.data(), C.data(), D.data(), shape};
  ASSERT_TRUE(run(warp_grid(), &mma_s8_kernel, args).ok());
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < 8; ++c) {
      uint32_t want = static_cast<uint32_t>(C[r * 8 + c]);
      for (int k = 0; k < K; ++k) want += static_cast<uint32_t>(int(A[r * K + k]) * B[k * 8 + c]);
      EXPECT_EQ(D[r * 8 + c], static_cast<int32_t>(want)) << "row " << r << " col " << c;
    }
}

TEST(EmulatorMma, M16n8k32S8FollowsThePtxFragmentLayout) {
  check_mma_s8(S8Shape::m16n8k32);
}
TEST(EmulatorMma, M16n8k16S8FollowsThePtxFragmentLayout) {
  check_mma_s8(S8Shape::m16n8k16);
}
TEST(EmulatorMma, M8n8k16S8FollowsThePtxFragmentLayout) {
  check_mma_s8(S8Shape::m8n8k16);
}

// shf.r.wrap: the 32 bits of (hi:lo) >> s.
TEST(EmulatorFunnel, ShiftsThe64BitPairRight) {
  EXPECT_EQ(dev::funnel_r(0x44332211u, 0x88776655u, 0), 0x44332211u);
  EXPECT_EQ(dev::funnel_r(0x44332211u, 0x88776655u, 8), 0x55443322u);
  EXPECT_EQ(dev::funnel_r(0x44332211u, 0x88776655u, 16), 0x66554433u);
  EXPECT_EQ(dev::funnel_r(0x44332211u, 0x88776655u, 24), 0x77665544u);
}

// dp4a.s32.s32: the four signed byte products added to c, wrapping like the hardware.
TEST(EmulatorDp4a, AddsTheFourSignedByteProducts) {
  EXPECT_EQ(dev::dp4a(0x04030201u, 0x01010101u, 10), 20);
  EXPECT_EQ(dev::dp4a(0xFF80FF80u, 0x7F017F01u, 0), 2 * (-128 * 1 + -1 * 127));
  EXPECT_EQ(dev::dp4a(0x80808080u, 0x80808080u, 0), 4 * 16384);
  EXPECT_EQ(dev::dp4a(0x7F7F7F7Fu, 0x7F7F7F7Fu, 2147483647),
            static_cast<int>(0x7FFFFFFFu + 4u * 16129u));
  for (uint32_t s = 1; s < 2000; s += 7) {
    const uint32_t a = s * 2654435761u, b = s * 40503u + 12345u;
    int want = 3;
    for (int i = 0; i < 4; ++i)
      want += int(int8_t(uint8_t(a >> (8 * i)))) * int(int8_t(uint8_t(b >> (8 * i))));
    EXPECT_EQ(dev::dp4a(a, b, 3), want);
  }
}

// ---- ldmatrix: 8x8 matrices of b16; thread l provides the address of row l%8 of matrix l/8;
// lane l receives row l/4, columns 2*(l%4) and 2*(l%4)+1 (transposed: those rows of column
// l/4).
struct LdArgs {
  int num;
  bool trans;
  uint32_t* out;  // [32][4]
};

// Shared memory holds 4 matrices stored with their rows shuffled (row r of matrix m at slot
// (m * 8 + (r * 3) % 8)), element (m, r, c) = m * 1000 + r * 10 + c; lanes pass the shuffled
// row addresses, so a wrong lane-to-row assignment shows.
uint16_t ld_elem(int m, int r, int c) {
  return static_cast<uint16_t>(m * 1000 + r * 10 + c);
}
int ld_slot(int m, int r) {
  return m * 8 + (r * 3) % 8;
}

void ldmatrix_kernel(const LdArgs& a) {
  auto* sm = reinterpret_cast<uint16_t*>(dev::smem());
  const int l = dev::lane();
  for (int m = 0; m < 4; ++m)
    if (l < 8)
      for (int c = 0; c < 8; ++c) sm[ld_slot(m, l) * 8 + c] = ld_elem(m, l, c);
  dev::sync();
  // Lanes past those an .x1/.x2 reads still pass valid addresses (required on sm_75).
  const int m = (l / 8) % a.num, r = l % 8;
  const uint16_t* p = sm + ld_slot(m, r) * 8;
  uint32_t r4[4] = {};
  if (a.num == 4 && !a.trans) dev::ldmatrix_x4(r4, p);
  if (a.num == 4 && a.trans) dev::ldmatrix_x4_trans(r4, p);
  if (a.num == 2) {
    uint32_t r2[2];
    if (a.trans)
      dev::ldmatrix_x2_trans(r2, p);
    else
      dev::ldmatrix_x2(r2, p);
    r4[0] = r2[0];
    r4[1] = r2[1];
  }
  if (a.num == 1) dev::ldmatrix_x1(r4[0], p);
  for (int i = 0; i < 4; ++i) a.out[l * 4 + i] = r4[i];
}

void check_ldmatrix(int num, bool trans) {
  std::vector<uint32_t> out(32 * 4);
  LdArgs a{num, trans, out.data()};
  ASSERT_TRUE(run(warp_grid(4 * 8 * 8 * 2), &ldmatrix_kernel, a).ok());
  for (int l = 0; l < 32; ++l)
    for (int m = 0; m < num; ++m) {
      const int row = l / 4, col = 2 * (l % 4);
      const uint32_t lo = trans ? ld_elem(m, col, row) : ld_elem(m, row, col);
      const uint32_t hi = trans ? ld_elem(m, col + 1, row) : ld_elem(m, row, col + 1);
      EXPECT_EQ(out[l * 4 + m], lo | hi << 16) << "lane " << l << " matrix " << m;
    }
}

TEST(EmulatorLdmatrix, X1FollowsThePtxLayout) {
  check_ldmatrix(1, false);
}
TEST(EmulatorLdmatrix, X2AndX2TransFollowThePtxLayout) {
  check_ldmatrix(2, false);
  check_ldmatrix(2, true);
}
TEST(EmulatorLdmatrix, X4AndX4TransFollowThePtxLayout) {
  check_ldmatrix(4, false);
  check_ldmatrix(4, true);
}

void ldmatrix_outside_kernel(const LdArgs&) {
  uint32_t r[4];
  dev::ldmatrix_x4(r, dev::smem() + 64);  // 64 bytes of shared memory: rows past the end
}
TEST(EmulatorLdmatrix, AnAddressOutsideSharedMemoryFailsTheLaunch) {
  LdArgs a{4, false, nullptr};
  Status s = run(warp_grid(64), &ldmatrix_outside_kernel, a);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("outside"), std::string::npos) << s.message();
}

// ---- cp.async: data lands at the issuing thread's wait, not before.
struct CpArgs {
  const uint32_t* src;  // 16 words, 16-byte aligned
  uint32_t* seen;       // per thread: [before wait][after wait_group 1][after wait_group 0]
};

void cp_async_kernel(const CpArgs& a) {
  auto* sm = reinterpret_cast<uint32_t*>(dev::smem());
  const int t = dev::tid();
  if (t == 0) {
    dev::cp_async16(sm, a.src, 16);
    dev::cp_async_commit();
    dev::cp_async16(sm + 4, a.src + 4, 8);  // 8 bytes, the rest zero-filled
    dev::cp_async_commit();
    a.seen[0] = sm[0];
    dev::cp_async_wait<1>();  // the first group has landed, the second need not have
    a.seen[1] = sm[0];
    a.seen[2] = sm[4];
    dev::cp_async_wait<0>();
    a.seen[3] = sm[4];
    a.seen[4] = sm[5];
    a.seen[5] = sm[6];
  }
}

TEST(EmulatorCpAsync, DataLandsOnlyAtTheWaitOfItsGroup) {
  alignas(16) uint32_t src[16];
  for (int i = 0; i < 16; ++i) src[i] = 100 + i;
  uint32_t seen[6] = {};
  CpArgs a{src, seen};
  ASSERT_TRUE(run(warp_grid(64), &cp_async_kernel, a).ok());
  EXPECT_EQ(seen[0], 0xffffffffu) << "read before the wait sees the poison";
  EXPECT_EQ(seen[1], 100u);
  EXPECT_EQ(seen[2], 0xffffffffu) << "the newer group is still in flight";
  EXPECT_EQ(seen[3], 104u);
  EXPECT_EQ(seen[4], 105u);
  EXPECT_EQ(seen[5], 0u) << "bytes past src-size are zero-filled";
}

void cp_async_misaligned_kernel(const CpArgs& a) {
  dev::cp_async16(dev::smem() + 4, a.src, 16);
}
TEST(EmulatorCpAsync, AMisalignedDestinationFailsTheLaunch) {
  alignas(16) uint32_t src[4] = {};
  CpArgs a{src, nullptr};
  EXPECT_FALSE(run(warp_grid(64), &cp_async_misaligned_kernel, a).ok());
}

// ---- barriers and shared memory
struct SmemArgs {
  int* out;
  bool with_barrier;
};

void neighbour_kernel(const SmemArgs& a) {
  auto* sm = reinterpret_cast<int*>(dev::smem());
  const int t = dev::tid(), n = dev::nthreads();
  sm[t] = t * 3;
  if (a.with_barrier) dev::sync();
  a.out[t] = sm[(t + 1) % n];
}

TEST(EmulatorBarrier, ABarrierMakesEveryWriteVisible) {
  std::vector<int> out(128);
  SmemArgs a{out.data(), true};
  ASSERT_TRUE(run(Grid{Dim3{}, 128, 128 * 4}, &neighbour_kernel, a).ok());
  for (int t = 0; t < 128; ++t) EXPECT_EQ(out[t], ((t + 1) % 128) * 3);
}

TEST(EmulatorBarrier, AMissingBarrierReadsPoisonedSharedMemory) {
  std::vector<int> out(128);
  SmemArgs a{out.data(), false};
  ASSERT_TRUE(run(Grid{Dim3{}, 128, 128 * 4}, &neighbour_kernel, a).ok());
  EXPECT_EQ(out[0], -1) << "thread 0 read thread 1's slot before thread 1 wrote it";
}

// Lanes exchange through shared memory inside one warp: bar.warp.sync is the barrier.
void warp_neighbour_kernel(const SmemArgs& a) {
  auto* sm = reinterpret_cast<int*>(dev::smem());
  const int t = dev::tid();
  sm[t] = t * 5;
  if (a.with_barrier) dev::sync_warp();
  a.out[t] = sm[(t & ~31) + (t + 1) % 32];
}

TEST(EmulatorBarrier, AWarpBarrierMakesTheWarpsWritesVisible) {
  std::vector<int> out(64);
  SmemArgs a{out.data(), true};
  ASSERT_TRUE(run(Grid{Dim3{}, 64, 64 * 4}, &warp_neighbour_kernel, a).ok());
  for (int t = 0; t < 64; ++t) EXPECT_EQ(out[t], ((t & ~31) + (t + 1) % 32) * 5);
  SmemArgs none{out.data(), false};
  ASSERT_TRUE(run(Grid{Dim3{}, 64, 64 * 4}, &warp_neighbour_kernel, none).ok());
  EXPECT_EQ(out[0], -1) << "lane 0 read lane 1's slot before lane 1 wrote it";
}

void divergent_warp_barrier_kernel(const SmemArgs&) {
  if (dev::lane() < 16) dev::sync_warp();
}
TEST(EmulatorBarrier, AWarpBarrierSomeLanesNeverReachIsADeadlock) {
  SmemArgs a{nullptr, true};
  Status s = run(Grid{Dim3{}, 32, 0}, &divergent_warp_barrier_kernel, a);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("bar.warp.sync"), std::string::npos) << s.message();
}

void divergent_barrier_kernel(const SmemArgs&) {
  if (dev::tid() < 64) dev::sync();
}
TEST(EmulatorBarrier, ADivergentBarrierIsReportedAsADeadlock) {
  SmemArgs a{nullptr, true};
  Status s = run(Grid{Dim3{}, 128, 0}, &divergent_barrier_kernel, a);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("deadlock"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("threads 0-63 wait at bar.sync"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("threads 64-127 exited"), std::string::npos) << s.message();
}

// ---- shuffles and votes
struct WarpArgs {
  uint32_t* out;  // [32][6]
};

void warp_kernel(const WarpArgs& a) {
  const int l = dev::lane();
  const uint32_t v = 1000 + l;
  uint32_t* o = a.out + l * 6;
  o[0] = dev::shfl_xor_u32(v, 5);
  o[1] = dev::shfl_idx_u32(v, (l * 7) % 32);
  o[2] = dev::shfl_down_u32(v, 3);
  o[3] = dev::ballot(l % 3 == 0);
  o[4] = dev::vote_any(l == 17);
  o[5] = dev::vote_all(l < 31);
}

TEST(EmulatorWarp, ShufflesAndVotesFollowPtxSemantics) {
  std::vector<uint32_t> out(32 * 6);
  WarpArgs a{out.data()};
  ASSERT_TRUE(run(warp_grid(), &warp_kernel, a).ok());
  uint32_t ballot = 0;
  for (int l = 0; l < 32; l += 3) ballot |= 1u << l;
  for (int l = 0; l < 32; ++l) {
    const uint32_t* o = out.data() + l * 6;
    EXPECT_EQ(o[0], 1000u + (l ^ 5));
    EXPECT_EQ(o[1], 1000u + (l * 7) % 32);
    EXPECT_EQ(o[2], 1000u + (l + 3 < 32 ? l + 3 : l)) << "down past the warp keeps its own";
    EXPECT_EQ(o[3], ballot);
    EXPECT_EQ(o[4], 1u);
    EXPECT_EQ(o[5], 0u);
  }
}

void diverging_warp_kernel(const WarpArgs&) {
  if (dev::lane() < 16)
    dev::shfl_xor_u32(1, 1);
  else
    dev::ballot(true);
}
TEST(EmulatorWarp, LanesAtDifferentCollectivesFailTheLaunch) {
  WarpArgs a{nullptr};
  Status s = run(warp_grid(), &diverging_warp_kernel, a);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("diverged"), std::string::npos) << s.message();
}

// ---- grids: every block runs once, on several OS threads
struct GridArgs {
  int* hits;  // per block
  unsigned long long* min;
};

void grid_kernel(const GridArgs& a) {
  const int b = dev::bid_x() + dev::nbid_x() * dev::bid_y();
  if (dev::tid() == 0) a.hits[b] += 1;
  dev::atomic_min_u64(a.min, 1000 + static_cast<unsigned long long>(b * 64 + dev::tid()));
}

TEST(EmulatorGrid, EveryBlockRunsExactlyOnce) {
  std::vector<int> hits(7 * 5, 0);
  unsigned long long mn = ~0ull;
  GridArgs a{hits.data(), &mn};
  ASSERT_TRUE(run(Grid{Dim3{7, 5, 1}, 64, 0}, &grid_kernel, a).ok());
  for (int h : hits) EXPECT_EQ(h, 1);
  EXPECT_EQ(mn, 1000u);
}

TEST(EmulatorGrid, RejectsBlocksThatAreNotWholeWarps) {
  GridArgs a{nullptr, nullptr};
  EXPECT_FALSE(run(Grid{Dim3{}, 48, 0}, &grid_kernel, a).ok());
}

}  // namespace
}  // namespace duet::kernels
