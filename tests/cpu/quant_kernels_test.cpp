// The CPU backend's quantized-weight kernels on every ISA path this machine runs (forced through
// DUET_CPU_ISA), against the float64 reference of the weights' exact dequantization: every format,
// one to four rows (the row dots of decode), more rows (the tile product of prefill), odd N,
// K past a tile's extent, random block bytes and quantizer blocks; then embedding and cast.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

#include "check/check.h"
#include "duet/backends.h"
#include "kernels/isa.h"
#include "kernels/qgemm.h"
#include "kernels/quant.h"
#include "reference/reference.h"

namespace duet {
inline void PrintTo(DType t, std::ostream* os) {
  *os << dtype_name(t);
}
namespace cpu::kernels {
inline void PrintTo(Isa isa, std::ostream* os) {
  *os << isa_name(isa);
}
}  // namespace cpu::kernels

namespace {

using cpu::kernels::Isa;

Device& cpu_device() {
  static Registry reg = open_registry();
  return *reg.find("cpu:0");
}

class ForcedIsa {
 public:
  explicit ForcedIsa(Isa isa) {
    if (const char* old = std::getenv("DUET_CPU_ISA")) old_ = old;
    setenv("DUET_CPU_ISA", std::string(cpu::kernels::isa_name(isa)).c_str(), 1);
  }
  ~ForcedIsa() {
    if (old_)
      setenv("DUET_CPU_ISA", old_->c_str(), 1);
    else
      unsetenv("DUET_CPU_ISA");
  }
  ForcedIsa(const ForcedIsa&) = delete;
  ForcedIsa& operator=(const ForcedIsa&) = delete;

 private:
  std::optional<std::string> old_;
};

void expect_matches_reference(const check::Case& c) {
  SCOPED_TRACE(c.name);
  auto op = check::case_op(c);
  ASSERT_TRUE(op.ok()) << op.status().message();
  auto inputs = check::case_inputs(c);
  auto ref = reference::evaluate(*op, inputs);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  auto choice = cpu_device().supports(*op, Precision::f32);
  ASSERT_TRUE(choice.ok()) << choice.status().message();
  check::Outcome o = check::run_case(cpu_device(), *choice, *op, inputs, *ref);
  EXPECT_TRUE(o.passed) << c.name << " [" << cpu::kernels::isa_name(cpu::kernels::active_isa())
                        << "]: " << o.message << " (nmse " << o.metrics.nmse << ")";
}

check::Case mm(DType q, DType t, int64_t m, int64_t n, int64_t k, check::Fill wfill) {
  check::Case c;
  c.name = "qmm/" + std::string(dtype_name(q)) + "/" + std::string(dtype_name(t)) + "/" +
           std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
           (wfill == check::Fill::blocks ? ".random" : "");
  c.kind = OpKind::matmul;
  c.attrs.transpose_b = true;
  c.inputs = {TensorDesc::contiguous(t, {m, k}), TensorDesc::contiguous(q, {n, k})};
  c.fills = {check::Fill::unit, wfill};
  return c;
}

struct Param {
  Isa isa;
  DType format;
};
void PrintTo(const Param& p, std::ostream* os) {
  *os << cpu::kernels::isa_name(p.isa) << "/" << dtype_name(p.format);
}

std::vector<Param> params() {
  std::vector<Param> v;
  for (Isa i : {Isa::generic, Isa::avx2, Isa::avx512, Isa::neon})
    if (cpu::kernels::isa_supported(i))
      for (DType q : kQuantizedDTypes) v.push_back({i, q});
  return v;
}

class QuantKernels : public testing::TestWithParam<Param> {
 protected:
  void SetUp() override { forced_.emplace(GetParam().isa); }
  void TearDown() override { forced_.reset(); }
  std::optional<ForcedIsa> forced_;
};

TEST_P(QuantKernels, RowsOfEveryCountMatchTheReference) {
  const DType q = GetParam().format;
  const int64_t be = dtype_block_elems(q);
  // 1..8 rows: the row dots (up to 4 on AVX2); 9 and 17: the tile product's partial row groups.
  for (int64_t m : {1, 2, 3, 4, 5, 8, 9, 17})
    for (check::Fill f : {check::Fill::unit, check::Fill::blocks})
      expect_matches_reference(mm(q, DType::f32, m, 37, 3 * be, f));
}

TEST_P(QuantKernels, OddWidthsAndALongKMatchTheReference) {
  const DType q = GetParam().format;
  const int64_t be = dtype_block_elems(q);
  // N of 1 and past a tile of 64 rows; K over the 4096 of one tile (two k passes, one partial).
  for (int64_t n : {1, 65})
    expect_matches_reference(mm(q, DType::bf16, 2, n, be, check::Fill::blocks));
  expect_matches_reference(mm(q, DType::f16, 1, 5, 4096 + 2 * be, check::Fill::unit));
  expect_matches_reference(mm(q, DType::f32, 6, 19, 4096 + be, check::Fill::blocks));
}

TEST_P(QuantKernels, EmbeddingAndCastAreExact) {
  const DType q = GetParam().format;
  const int64_t be = dtype_block_elems(q);
  check::Case e;
  e.name = "qemb/" + std::string(dtype_name(q));
  e.kind = OpKind::embedding;
  e.inputs = {TensorDesc::contiguous(q, {9, 2 * be}), TensorDesc::contiguous(DType::i32, {4, 3})};
  e.fills = {check::Fill::blocks, check::Fill::ids};
  e.ids_range = 9;
  expect_matches_reference(e);
  for (DType to : {DType::f32, DType::f16}) {
    check::Case c;
    c.name = "qcast/" + std::string(dtype_name(q)) + "/" + std::string(dtype_name(to));
    c.kind = OpKind::cast;
    c.attrs.to = to;
    c.inputs = {TensorDesc::contiguous(q, {2, 3, be})};
    c.fills = {check::Fill::blocks};
    expect_matches_reference(c);
  }
}

INSTANTIATE_TEST_SUITE_P(All, QuantKernels, testing::ValuesIn(params()),
                         [](const testing::TestParamInfo<Param>& i) {
                           return std::string(cpu::kernels::isa_name(i.param.isa)) + "_" +
                                  std::string(dtype_name(i.param.format));
                         });

TEST(QuantKernelTables, EachIsaPathHasItsOwnTable) {
  using cpu::kernels::quant_kernels_for;
  EXPECT_EQ(quant_kernels_for(Isa::generic).isa, Isa::generic);
#if defined(__aarch64__)
  EXPECT_EQ(quant_kernels_for(Isa::neon).isa, Isa::neon);
  EXPECT_EQ(quant_kernels_for(cpu::kernels::detected_isa()).isa, Isa::neon);
#else
  if (cpu::kernels::isa_supported(Isa::avx2)) {
    EXPECT_EQ(quant_kernels_for(Isa::avx2).isa, Isa::avx2);
  }
  // AVX-512 without VNNI falls back to AVX2's table, never to a kernel the CPU cannot run.
  const Isa got = quant_kernels_for(Isa::avx512).isa;
  EXPECT_TRUE(got == Isa::avx512 || got == Isa::avx2 || got == Isa::generic);
  // Every AVX-512 level above it (the one detected on a CPU with AVX512-BF16 among them) gets the
  // VNNI table where the CPU has VNNI, never a lesser one.
  for (Isa i : {Isa::avx512, Isa::avx512bf16})
    if (cpu::kernels::isa_supported(i) && got == Isa::avx512) {
      EXPECT_EQ(quant_kernels_for(i).isa, Isa::avx512) << cpu::kernels::isa_name(i);
    }
  EXPECT_EQ(quant_kernels_for(cpu::kernels::detected_isa()).isa,
            quant_kernels_for(std::min(cpu::kernels::detected_isa(), Isa::avx512)).isa);
#endif
}

// Every SIMD table, whether or not this CPU runs it (the tables are only read here), has its own
// kernels for every block format and every shape class: decode (1 row and the most its row dots
// take) through row dots, prefill through tiles unpacked by its own decoder. A format that would
// fall back to the portable unpacker, or to tiles for decode, fails here.
TEST(QuantKernelTables, EverySimdTableDecodesEveryFormatItself) {
  using cpu::kernels::QuantPath;
#if defined(__aarch64__)
  const std::vector<const cpu::kernels::QuantKernels*> tables = {
      &cpu::kernels::neon_quant_kernels()};
#elif defined(__x86_64__) || defined(__i386__)
  const std::vector<const cpu::kernels::QuantKernels*> tables = {
      &cpu::kernels::avx2_quant_kernels(), &cpu::kernels::avx512_quant_kernels()};
#else
  const std::vector<const cpu::kernels::QuantKernels*> tables;
#endif
  for (const cpu::kernels::QuantKernels* qk : tables)
    for (DType q : kQuantizedDTypes) {
      SCOPED_TRACE(std::string(cpu::kernels::isa_name(qk->isa)) + " " + std::string(dtype_name(q)));
      EXPECT_GE(qk->row_dot_rows, 4);
      EXPECT_EQ(cpu::kernels::quant_path(*qk, q, 1), QuantPath::row_dot);
      EXPECT_EQ(cpu::kernels::quant_path(*qk, q, qk->row_dot_rows), QuantPath::row_dot);
      EXPECT_EQ(cpu::kernels::quant_path(*qk, q, qk->row_dot_rows + 1), QuantPath::tile);
      EXPECT_EQ(cpu::kernels::quant_path(*qk, q, 512), QuantPath::tile);
    }
}

}  // namespace
}  // namespace duet
