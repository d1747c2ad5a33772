// Build-time checks of the GPU kernels, for every tier and every architecture of this build, from
// what the real compilation left behind (kernels/cmake/nvcc_report.sh):
//   - the ptxas resource report: no local memory (spills or stack frame) in the flash and tiled
//     kernels, registers x the largest block the selection launches within the register file,
//     static plus the largest dynamic shared memory the selection asks within the architecture's
//     limit;
//   - the PTX: the instructions each tier must use (flash: mma.sync m16n8k16 bf16/f16, cp.async,
//     ldmatrix; tiled: f16 mma m16n8k8 and ldmatrix only, no cp.async, no bf16; int_dot:
//     dp4a, no cp.async; int8_mma: mma m8n8k16 s8 in sm_75 code, m16n8k32 and
//     m16n8k16 s8, ldmatrix and cp.async in sm_80+ code; wgmma: wgmma.mma_async, the TMA's
//     cp.async.bulk.tensor, mbarriers, fence.proxy.async and setmaxnreg, in sm_90a code only),
//     and no sm_80-only instruction (bf16, cp.async, m16n8k16, m16n8k32) anywhere in sm_75 code.
//     An architecture-specific target (90a) counts as its architecture (90).
#include <cxxabi.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>

#include "duet/kernels/arch.h"
#include "duet/kernels/select.h"

namespace duet::kernels {
namespace {

namespace fs = std::filesystem;

std::vector<int> build_archs() {
  std::vector<int> v;
  std::stringstream s(DUET_TEST_CUDA_ARCHS);
  std::string a;
  while (std::getline(s, a, ','))
    if (!a.empty()) v.push_back(std::stoi(a));
  return v;
}

// Opt-in shared memory per block (CUDA programming guide, compute capabilities table).
uint64_t smem_limit(int sm) {
  switch (sm) {
    case 75:
      return 64 * 1024;
    case 80:
    case 87:
      return 163 * 1024;
    case 90:
    case 100:
    case 103:
    case 110:
      return 227 * 1024;
    default:  // 86, 88, 89, 120, 121
      return 99 * 1024;
  }
}

struct Entry {
  std::string source;  // "flash_attention_bf16"
  std::string name;    // demangled
  int sm = 0;          // 90 for sm_90a
  int registers = 0;
  int stack = 0, spill_stores = 0, spill_loads = 0;
  int static_smem = 0;
};

std::string demangle(const std::string& m) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(
      abi::__cxa_demangle(m.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && d ? std::string(d.get()) : m;
}

// The files of the report folder whose kernel source still exists. A build folder keeps the
// reports of sources that were renamed or removed since it was made (nothing deletes them), and
// those describe no kernel of this build.
std::vector<fs::path> report_files() {
  std::vector<fs::path> out;
  for (const auto& f : fs::directory_iterator(DUET_TEST_REPORT_DIR)) {
    const std::string file = f.path().filename().string();
    const std::string source = file.substr(0, file.find('.'));
    if (fs::exists(fs::path(DUET_TEST_KERNEL_SOURCE_DIR) / (source + ".cu")))
      out.push_back(f.path());
  }
  return out;
}

std::vector<Entry> read_reports() {
  std::vector<Entry> out;
  const std::regex compiling(R"(Compiling entry function '([^']+)' for 'sm_(\d+)a?')");
  const std::regex frame(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  const std::regex used(R"(Used (\d+) registers)");
  const std::regex smem(R"((\d+) bytes smem)");
  for (const auto& path : report_files()) {
    const std::string file = path.filename().string();
    if (file.size() < 10 || file.substr(file.size() - 10) != ".ptxas.txt") continue;
    const std::string source = file.substr(0, file.size() - 10);
    std::ifstream in(path);
    std::string line;
    Entry* cur = nullptr;
    while (std::getline(in, line)) {
      std::smatch m;
      if (std::regex_search(line, m, compiling)) {
        out.push_back({source, demangle(m[1]), std::stoi(m[2])});
        cur = &out.back();
      } else if (cur && std::regex_search(line, m, frame)) {
        cur->stack = std::stoi(m[1]);
        cur->spill_stores = std::stoi(m[2]);
        cur->spill_loads = std::stoi(m[3]);
      } else if (cur && std::regex_search(line, m, used)) {
        cur->registers = std::stoi(m[1]);
        if (std::regex_search(line, m, smem)) cur->static_smem = std::stoi(m[1]);
      }
    }
  }
  return out;
}

const std::vector<Entry>& reports() {
  static const std::vector<Entry> r = read_reports();
  return r;
}

bool tensor_core(const Entry& e) {
  return e.source.rfind("flash_", 0) == 0 || e.source.rfind("pipelined_", 0) == 0 ||
         e.source.rfind("tiled_", 0) == 0 || e.source.rfind("wgmma_", 0) == 0;
}

// Whether the build list has the architecture-specific target sm_XXa.
bool build_has_specific(int sm) {
  const std::string list = std::string(",") + DUET_TEST_CUDA_ARCHS + ",";
  return list.find("," + std::to_string(sm) + "a,") != std::string::npos;
}

// The launch the selection makes for a kernel instance on an architecture, at its most demanding:
// the largest block and the most shared memory over a few problem shapes.
struct Demand {
  int threads = 0;
  uint64_t smem = 0;
};

DeviceCaps caps_for(int sm) {
  DeviceCaps c;
  c.backend = BackendKind::cuda;
  c.cc_major = sm / 10;
  c.cc_minor = sm % 10;
  c.compute_units = 100;
  c.tensor_cores = true;
  c.bf16_arith = sm >= 80;
  c.shared_mem_per_block = 48 * 1024;
  c.shared_mem_per_block_optin = smem_limit(sm);
  return c;
}

Demand selection_demand(const Entry& e) {
  Demand d;
  const DeviceCaps caps = caps_for(e.sm);
  BuildArchs all{{e.sm}, 0, {e.sm}};
  const Tier tier = e.source.rfind("flash_", 0) == 0       ? Tier::flash
                    : e.source.rfind("pipelined_", 0) == 0 ? Tier::pipelined
                    : e.source.rfind("wgmma_", 0) == 0     ? Tier::wgmma
                                                           : Tier::tiled;
  auto take = [&](const OpDesc& op) {
    for (const KernelChoice& k : choices(caps, op, all))
      if (k.ok && k.tier == tier) {
        d.threads = std::max(d.threads, k.launch.block_threads);
        d.smem = std::max(d.smem, k.launch.shared_bytes);
      }
  };
  const std::smatch m = [&] {
    std::smatch r;
    std::regex_search(e.name, r, std::regex(R"(attention_(?:tc|wgmma)<[^,]+, (\d+)[,>])"));
    return r;
  }();
  if (!m.empty()) {
    const int64_t D = std::stoi(m[1]);
    for (int64_t L : {1, 64, 4096}) {
      const DType t = DType::f16;
      auto op = make_op(
          OpKind::attention, {},
          {TensorDesc::contiguous(t, {1, 8, L, D}), TensorDesc::contiguous(t, {1, 8, 4096, D}),
           TensorDesc::contiguous(t, {1, 8, 4096, D})});
      if (op.ok()) take(*op);
    }
  } else if (e.name.find("matmul_tc") != std::string::npos) {
    for (int64_t M : {16, 4096}) {
      auto op = make_op(OpKind::matmul, {},
                        {TensorDesc::contiguous(DType::f16, {M, 4096}),
                         TensorDesc::contiguous(DType::f16, {4096, 4096})});
      if (op.ok()) take(*op);
    }
  }
  return d;
}

// Each tier's objects are built for the architectures from its tier_min_sm (duet/kernels/arch.h)
// and for no older one: kernels/CMakeLists.txt's lists agree with the record.
TEST(PtxasReport, CoversEveryTensorCoreInstanceOnEveryArchitecture) {
  std::map<std::pair<std::string, int>, int> count;
  for (const Entry& e : reports()) count[{e.source, e.sm}]++;
  const int flash = tier_min_sm(Tier::flash), pipelined = tier_min_sm(Tier::pipelined);
  EXPECT_EQ(tier_min_sm(Tier::tiled), 75) << "the tiled objects are built for every architecture";
  for (int sm : build_archs()) {
    EXPECT_EQ((count[{"tiled_attention", sm}]), 5) << "sm_" << sm;
    EXPECT_EQ((count[{"tiled_matmul", sm}]), 2) << "sm_" << sm;
    EXPECT_GE((count[{"generic", sm}]), 9) << "sm_" << sm;
    EXPECT_EQ((count[{"flash_attention_f16", sm}]), sm >= flash ? 5 : 0) << "sm_" << sm;
    EXPECT_EQ((count[{"flash_attention_bf16", sm}]), sm >= flash ? 5 : 0) << "sm_" << sm;
    EXPECT_EQ((count[{"pipelined_matmul", sm}]), sm >= pipelined ? 4 : 0) << "sm_" << sm;
    // q8_act and the mat-vec's 44 instances (11 formats x 1, 2, 4 or 8 activation rows) from
    // sm_61; the int8 mma kernel's eight (two architectures x four kinds of format) from sm_75;
    // the generic mat-vec's three dtypes and the staged cast's two instances everywhere.
    EXPECT_EQ((count[{"int_dot_qmatvec", sm}]), sm >= tier_min_sm(Tier::int_dot) ? 45 : 0)
        << "sm_" << sm;
    EXPECT_EQ((count[{"int8_mma_qmatmul", sm}]), sm >= tier_min_sm(Tier::int8_mma) ? 8 : 0)
        << "sm_" << sm;
    EXPECT_EQ((count[{"matvec", sm}]), 3) << "sm_" << sm;
    EXPECT_EQ((count[{"quant_cast", sm}]), 2) << "sm_" << sm;
    // f16 and bf16 at head dims 64 and 128, in sm_90a code only.
    EXPECT_EQ((count[{"wgmma_attention", sm}]), build_has_specific(sm) && sm == 90 ? 4 : 0)
        << "sm_" << sm;
  }
}

TEST(PtxasReport, FlashAndTiledKernelsUseNoLocalMemory) {
  for (const Entry& e : reports()) {
    if (!tensor_core(e)) continue;
    EXPECT_EQ(e.spill_stores + e.spill_loads, 0) << e.name << " on sm_" << e.sm << " spills";
    EXPECT_EQ(e.stack, 0) << e.name << " on sm_" << e.sm << " has a stack frame (local memory)";
  }
}

// The kernels for block-quantized weights, and the generic mat-vec, which keeps its rows in
// registers the same way.
bool quantized(const Entry& e) {
  for (const char* k : {"gen_qmatmul_kernel", "gen_qrows_kernel", "q8_act_kernel", "qmv_kernel",
                        "mmq_kernel", "qdequant_kernel", "matvec_kernel"})
    if (e.name.find(k) != std::string::npos) return true;
  return false;
}

// The quantized kernels of every tier keep the decoded weights of a group in registers on every
// architecture (no spills, no stack), and fit their blocks of up to 256 threads.
TEST(PtxasReport, QuantizedKernelsDecodeIntoRegisters) {
  int seen = 0;
  for (const Entry& e : reports()) {
    if (!quantized(e)) continue;
    ++seen;
    EXPECT_EQ(e.spill_stores + e.spill_loads, 0) << e.name << " on sm_" << e.sm << " spills";
    EXPECT_EQ(e.stack, 0) << e.name << " on sm_" << e.sm << " has a stack frame (local memory)";
    EXPECT_LE(e.registers * 256, 65536) << e.name << " on sm_" << e.sm;
  }
  EXPECT_GE(seen, 6);
}

// An rmsnorm fused with the mat-vecs after it keeps its row in registers and quantizes it there
// (RowParams::q8): no spills at 1024 threads a block.
TEST(PtxasReport, FusedRmsnormKeepsItsRowInRegisters) {
  int seen = 0;
  for (const Entry& e : reports()) {
    if (e.name.find("::rmsnorm_q8_kernel(") == std::string::npos) continue;
    ++seen;
    EXPECT_EQ(e.spill_stores + e.spill_loads, 0) << e.name << " on sm_" << e.sm << " spills";
    EXPECT_EQ(e.stack, 0) << e.name << " on sm_" << e.sm << " has a stack frame (local memory)";
  }
  EXPECT_EQ(seen, static_cast<int>(build_archs().size()));
  // A rope with its cache writes spills nothing either (its stack frame is the double-precision
  // sin and cos's, as rope_kernel's).
  seen = 0;
  for (const Entry& e : reports()) {
    if (e.name.find("::rope_write_kernel(") == std::string::npos) continue;
    ++seen;
    EXPECT_EQ(e.spill_stores + e.spill_loads, 0) << e.name << " on sm_" << e.sm << " spills";
  }
  EXPECT_EQ(seen, static_cast<int>(build_archs().size()));
}

// docs/performance.md's table of the quantized kernels' resources, per architecture, from the
// ptxas reports of this build: run this test and paste what it prints.
TEST(PtxasReport, PrintsTheQuantizedKernelTable) {
  std::map<std::string, std::string> rows;
  for (const Entry& e : reports()) {
    if (!quantized(e)) continue;
    std::string name = e.name.substr(0, e.name.find('('));
    name = name.substr(name.rfind("::") + 2);
    if (e.name.find("Sm80Arch") != std::string::npos) name += " (sm_80+)";
    if (e.name.find("Sm75Arch") != std::string::npos) name += " (before sm_80)";
    for (const auto& [tag, what] :
         {std::pair{"false, false>", " q8_0 q4_0 q5_0 q4_z"},
          std::pair{"false, true>", " q4_1 q5_1 q4_k q5_k"},
          std::pair{"true, false>", " q6_k q3_k"}, std::pair{"true, true>", " q2_k"}})
      if (e.name.find(tag) != std::string::npos) name += what;
    std::ostringstream s;
    s << "| " << e.source << " | " << name << " | sm_" << e.sm << " | " << e.registers << " | "
      << e.spill_stores << "/" << e.spill_loads << " | " << e.stack << " | " << e.static_smem
      << " |";
    rows[e.source + name + std::to_string(e.sm)] = s.str();
  }
  std::printf("| object | kernel | arch | registers | spill st/ld | stack | static smem |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- |\n");
  for (const auto& [k, r] : rows) std::printf("%s\n", r.c_str());
  SUCCEED();
}

TEST(PtxasReport, LaunchesFitTheRegisterFileAndSharedMemory) {
  for (const Entry& e : reports()) {
    if (!tensor_core(e)) continue;
    const Demand d = selection_demand(e);
    ASSERT_GT(d.threads, 0) << "the selection never launches " << e.name << " on sm_" << e.sm;
    EXPECT_LE(static_cast<int64_t>(e.registers) * d.threads, 65536)
        << e.name << " on sm_" << e.sm << ": " << e.registers << " registers x " << d.threads
        << " threads";
    EXPECT_LE(e.static_smem + d.smem, smem_limit(e.sm))
        << e.name << " on sm_" << e.sm << ": " << e.static_smem << " static + " << d.smem
        << " dynamic bytes of shared memory";
  }
}

// The figures for the record (docs/performance.md), printed by the test.
TEST(PtxasReport, PrintsTheResourceTable) {
  std::map<std::string, std::string> rows;
  for (const Entry& e : reports()) {
    if (!tensor_core(e)) continue;
    const Demand d = selection_demand(e);
    std::ostringstream s;
    s << "sm_" << e.sm << "  regs " << e.registers << "  spill " << e.spill_stores << "/"
      << e.spill_loads << "  stack " << e.stack << "  smem " << e.static_smem << "+" << d.smem
      << " (" << d.threads << " threads)";
    rows[e.name + "  " + s.str()] = "";
  }
  for (const auto& [r, unused] : rows) std::printf("%s\n", r.c_str());
  SUCCEED();
}

// ---- PTX

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// PTX files of a source, by architecture.
std::map<int, std::string> ptx_of(const std::string& source) {
  std::map<int, std::string> out;
  const std::regex name(source + R"(\.compute_(\d+)a?\.ptx)");
  for (const auto& path : report_files()) {
    std::smatch m;
    const std::string file = path.filename().string();
    if (std::regex_match(file, m, name)) out[std::stoi(m[1])] = read(path);
  }
  return out;
}

bool has(const std::string& ptx, const std::string& s) {
  return ptx.find(s) != std::string::npos;
}

TEST(Ptx, FlashKernelsUseMmaM16n8k16CpAsyncAndLdmatrix) {
  for (const auto& [src, type] :
       {std::pair{"flash_attention_bf16", "bf16.bf16"}, std::pair{"flash_attention_f16", "f16.f16"},
        std::pair{"pipelined_matmul", "bf16.bf16"}, std::pair{"pipelined_matmul", "f16.f16"}}) {
    const auto ptx = ptx_of(src);
    for (int sm : build_archs()) {
      if (sm >= 80) {
        EXPECT_TRUE(ptx.count(sm)) << src << " has no PTX for sm_" << sm;
      }
    }
    for (const auto& [sm, text] : ptx) {
      EXPECT_GE(sm, 80) << src << " was compiled for sm_" << sm;
      EXPECT_TRUE(has(text, std::string("mma.sync.aligned.m16n8k16.row.col.f32.") + type + ".f32"))
          << src << " sm_" << sm;
      EXPECT_TRUE(has(text, "cp.async.cg.shared.global")) << src << " sm_" << sm;
      EXPECT_TRUE(has(text, "cp.async.wait_group")) << src << " sm_" << sm;
      EXPECT_TRUE(has(text, "ldmatrix.sync.aligned.m8n8.x4")) << src << " sm_" << sm;
      EXPECT_TRUE(has(text, "ldmatrix.sync.aligned.m8n8.x4.trans")) << src << " sm_" << sm;
    }
  }
}

TEST(Ptx, TiledKernelsUseOnlyF16MmaM16n8k8AndLdmatrix) {
  for (const char* src : {"tiled_attention", "tiled_matmul"}) {
    const auto ptx = ptx_of(src);
    for (int sm : build_archs()) EXPECT_TRUE(ptx.count(sm)) << src << " has no PTX for sm_" << sm;
    for (const auto& [sm, text] : ptx) {
      EXPECT_TRUE(has(text, "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32")) << src;
      EXPECT_TRUE(has(text, "ldmatrix.sync.aligned.m8n8.x4")) << src;
      EXPECT_FALSE(has(text, "m16n8k16")) << src << " sm_" << sm;
      EXPECT_FALSE(has(text, "cp.async")) << src << " sm_" << sm;
      EXPECT_FALSE(has(text, ".bf16")) << src << " sm_" << sm << " has a bf16 instruction";
    }
  }
}

// Each integer tier has the instructions it is named for: dp4a in every image of the mat-vec,
// which reads its weights from global memory (no cp.async); the int8 mma kernels m8n8k16 s8 in
// sm_75 code, and in sm_80+ code m16n8k32 s8 (m16n8k16 s8 for the formats with a scale per 16),
// ldmatrix and cp.async; each architecture's code holds only its own instance.
TEST(Ptx, IntegerTiersUseTheirInstructions) {
  const auto dp4a = ptx_of("int_dot_qmatvec"), mma = ptx_of("int8_mma_qmatmul");
  for (int sm : build_archs()) {
    EXPECT_EQ(dp4a.count(sm), sm >= 61 ? 1u : 0u) << "int_dot_qmatvec for sm_" << sm;
    EXPECT_EQ(mma.count(sm), sm >= 75 ? 1u : 0u) << "int8_mma_qmatmul for sm_" << sm;
  }
  for (const auto& [sm, text] : dp4a) {
    EXPECT_TRUE(has(text, "dp4a.s32.s32")) << "sm_" << sm;
    EXPECT_FALSE(has(text, "mma.sync")) << "sm_" << sm;
    EXPECT_FALSE(has(text, "cp.async")) << "sm_" << sm;
  }
  for (const auto& [sm, text] : mma) {
    EXPECT_EQ(has(text, "mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32"), sm < 80) << "sm_" << sm;
    EXPECT_EQ(has(text, "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"), sm >= 80)
        << "sm_" << sm;
    EXPECT_EQ(has(text, "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32"), sm >= 80)
        << "sm_" << sm;
    EXPECT_TRUE(has(text, "ldmatrix.sync.aligned.m8n8.x4.shared.b16")) << "sm_" << sm;
    EXPECT_EQ(has(text, "cp.async.cg.shared.global"), sm >= 80) << "sm_" << sm;
    EXPECT_FALSE(has(text, ".bf16")) << "sm_" << sm;
  }
}

TEST(Ptx, NoSm75CodeHasABf16Instruction) {
  int files = 0;
  for (const auto& path : report_files()) {
    const std::string file = path.filename().string();
    if (file.find(".compute_75.ptx") == std::string::npos) continue;
    ++files;
    const std::string text = read(path);
    EXPECT_FALSE(has(text, ".bf16")) << file;
    EXPECT_FALSE(has(text, "cp.async")) << file;
    EXPECT_FALSE(has(text, "m16n8k16")) << file;
    EXPECT_FALSE(has(text, "m16n8k32")) << file;
  }
  const auto archs = build_archs();
  if (std::find(archs.begin(), archs.end(), 75) != archs.end()) {
    EXPECT_EQ(files, 8) << "tiled_attention, tiled_matmul, generic, generic_attention, matvec, "
                           "quant_cast, int_dot_qmatvec and int8_mma_qmatmul are built for sm_75";
  }
}

// The Hopper tier has the instructions it is named for, and no other object has any of them.
TEST(Ptx, WgmmaKernelsUseWgmmaTheTmaAndMbarriersInSm90aCodeOnly) {
  const auto ptx = ptx_of("wgmma_attention");
  EXPECT_EQ(ptx.count(90), build_has_specific(90) ? 1u : 0u);
  for (const auto& [sm, text] : ptx) {
    EXPECT_EQ(sm, 90);
    for (const char* i :
         {"wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16",
          "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16",
          "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16", "wgmma.fence.sync.aligned",
          "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned",
          "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
          "mbarrier.try_wait.parity.shared::cta.b64", "mbarrier.arrive.expect_tx.shared::cta.b64",
          "fence.proxy.async.shared::cta", "setmaxnreg.inc.sync.aligned.u32 240",
          "setmaxnreg.dec.sync.aligned.u32 24"})
      EXPECT_TRUE(has(text, i)) << "wgmma_attention sm_" << sm << " lacks " << i;
  }
  for (const auto& path : report_files()) {
    const std::string file = path.filename().string();
    if (file.rfind("wgmma_", 0) == 0 || file.find(".ptx") == std::string::npos) continue;
    const std::string text = read(path);
    EXPECT_FALSE(has(text, "wgmma.")) << file;
    EXPECT_FALSE(has(text, "setmaxnreg")) << file;
    EXPECT_FALSE(has(text, "cp.async.bulk")) << file;
  }
}

TEST(Ptx, GenericKernelsAreSimt) {
  for (const char* src : {"generic", "generic_attention", "matvec", "quant_cast"}) {
    const auto ptx = ptx_of(src);
    for (int sm : build_archs()) EXPECT_TRUE(ptx.count(sm)) << src << " has no PTX for sm_" << sm;
    for (const auto& [sm, text] : ptx) {
      EXPECT_FALSE(has(text, "mma.sync")) << src << " sm_" << sm;
      EXPECT_FALSE(has(text, "dp4a")) << src << " sm_" << sm;
      // The block formats' cast rounds with cvt.rn.bf16x2 where the architecture has it.
      if (std::string(src) != "quant_cast" || sm < 80) {
        EXPECT_FALSE(has(text, ".bf16")) << src << " sm_" << sm;
      }
    }
  }
  // The cast of block formats reads its groups straight from global memory (no staging) and
  // rounds pairs with one cvt on sm_80+.
  for (const auto& [sm, text] : ptx_of("quant_cast")) {
    EXPECT_FALSE(has(text, "cp.async")) << "sm_" << sm;
    EXPECT_EQ(has(text, "cvt.rn.bf16x2.f32"), sm >= 80) << "sm_" << sm;
  }
}

// Programmatic dependent launch (Launch::programmatic): in code for sm_90+, every kernel entry
// waits for the grid before it (griddepcontrol.wait) before its first access to global memory,
// and then lets the next grid launch; no earlier architecture's code has either instruction.
TEST(Ptx, EveryKernelWaitsForItsPredecessorBeforeTouchingGlobalMemoryOnSm90) {
  const std::regex file_name(R"((.*)\.compute_(\d+)a?\.ptx)");
  const std::regex global(R"(\b(ld|st|atom|red|cp\.async)[.a-z0-9:]*\.global\b|cp\.async\.bulk)");
  int checked = 0;
  for (const auto& path : report_files()) {
    std::smatch m;
    const std::string file = path.filename().string();
    if (!std::regex_match(file, m, file_name)) continue;
    const int sm = std::stoi(m[2]);
    const std::string text = read(path);
    if (sm < 90) {
      EXPECT_FALSE(has(text, "griddepcontrol")) << file;
      continue;
    }
    // Each entry's body: from ".entry" to the next ".entry" (or the end).
    for (size_t at = text.find(".entry"); at != std::string::npos;) {
      const size_t next = text.find(".entry", at + 6);
      const std::string body = text.substr(at, next == std::string::npos ? next : next - at);
      const std::string name = body.substr(7, body.find('(') - 7);
      const size_t wait = body.find("griddepcontrol.wait");
      ASSERT_NE(wait, std::string::npos) << file << ": " << name << " never waits";
      std::smatch g;
      const std::string before = body.substr(0, wait);
      EXPECT_FALSE(std::regex_search(before, g, global))
          << file << ": " << name << " touches global memory before it waits: " << g.str();
      EXPECT_TRUE(has(body, "griddepcontrol.launch_dependents")) << file << ": " << name;
      ++checked;
      at = next;
    }
  }
  if (checked == 0) GTEST_SKIP() << "no sm_90+ PTX in this build (DUET_CUDA_ARCHS)";
}

// The generic tier's SIMT attention keeps its tiles' accumulators in registers.
TEST(PtxasReport, GenericAttentionKernelsUseNoLocalMemory) {
  int seen = 0;
  for (const Entry& e : reports()) {
    if (e.source != "generic_attention") continue;
    ++seen;
    EXPECT_EQ(e.spill_stores + e.spill_loads, 0) << e.name << " on sm_" << e.sm << " spills";
    EXPECT_EQ(e.stack, 0) << e.name << " on sm_" << e.sm << " has a stack frame";
    EXPECT_LE(e.registers * 128, 65536) << e.name << " on sm_" << e.sm;
  }
  EXPECT_EQ(seen, 10 * static_cast<int>(build_archs().size()));
}

}  // namespace
}  // namespace duet::kernels
