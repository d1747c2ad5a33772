// Every fact a decision reads is a typed field of the capability record: DeviceCaps::extra is for
// display only, whatever it holds. And each kernel family's efficiency class has one home, the
// backends' rules; docs/planner.md's table is checked against what they say.
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "duet/internal/caps_json.h"
#include "fixtures.h"

namespace duet::testing_planner {
namespace {

namespace fs = std::filesystem;

TensorDesc dense(DType t, std::vector<int64_t> shape) {
  return TensorDesc::contiguous(t, shape);
}

// One op of every kind of choice the rules make: float and block-quantized matmuls (prefill and
// decode), attention, rows, element-wise, data movement.
std::vector<OpDesc> probe_ops() {
  OpAttrs nk;
  nk.transpose_b = true;
  std::vector<OpDesc> ops = {
      *make_op(OpKind::matmul, {}, {dense(DType::f32, {64, 64}), dense(DType::f32, {64, 64})}),
      *make_op(OpKind::matmul, {},
               {dense(DType::f16, {512, 1024}), dense(DType::f16, {1024, 1024})}),
      *make_op(OpKind::matmul, nk,
               {dense(DType::f16, {512, 1024}), dense(DType::q4_0, {1024, 1024})}),
      *make_op(OpKind::matmul, nk, {dense(DType::f32, {1, 1024}), dense(DType::q6_k, {512, 1024})}),
      *make_op(OpKind::attention, {},
               {dense(DType::f16, {1, 8, 128, 64}), dense(DType::f16, {1, 8, 128, 64}),
                dense(DType::f16, {1, 8, 128, 64})}),
      *make_op(OpKind::softmax, {}, {dense(DType::f32, {4, 64})}),
      *make_op(OpKind::add, {}, {dense(DType::f16, {8, 64}), dense(DType::f16, {8, 64})}),
      *make_op(OpKind::embedding, {}, {dense(DType::q4_0, {64, 64}), dense(DType::i32, {5})}),
  };
  return ops;
}

// What a choice decides: everything but the reason's wording (which may quote display facts,
// such as the CPU's instruction sets).
std::string decision(const KernelChoice& k) {
  std::ostringstream s;
  s << tier_name(k.tier) << " " << precision_name(k.precision) << (k.ok ? " ok" : " refused")
    << " reads";
  for (DType t : k.input_dtypes) s << " " << dtype_name(t);
  s << " writes " << dtype_name(k.output_dtype) << " [" << k.launch.str() << "] efficiency "
    << k.efficiency;
  return s.str();
}

std::vector<std::string> decisions(const DeviceCaps& caps, const OpDesc& op) {
  std::vector<std::string> out;
  for (const KernelChoice& k : builtin_rules(caps.backend).choices(caps, op)) {
    out.push_back(decision(k));
    if (k.ok) out.push_back("estimate " + std::to_string(estimate_kernel_us(op, k, caps)));
  }
  return out;
}

TEST(TypedFacts, NoRuleOrCostReadsTheDisplayOnlyExtra) {
  for (const std::string& name : profile_names()) {
    const DeviceCaps as_is = profile(name);
    DeviceCaps none = as_is, contrary = as_is;
    none.extra.clear();
    // Every fact that once was read from extra, said the other way round.
    contrary.extra["integer_dot_accelerated"] = as_is.int_dot_accelerated ? "no" : "yes";
    contrary.extra["max_texel_buffer_elements"] = "0";
    contrary.extra["cooperative_matrix_nv"] = "16x16x16 f16+f32";
    contrary.extra["cublas"] = as_is.gemm_library_loaded ? "unavailable: junk" : "cuBLASLt 99";
    contrary.extra["kernel_image"] = "none: junk";
    contrary.extra["isa"] = "avx512_bf16";
    for (const OpDesc& op : probe_ops()) {
      const std::vector<std::string> want = decisions(as_is, op);
      EXPECT_EQ(decisions(none, op), want) << name << ": " << describe(op);
      EXPECT_EQ(decisions(contrary, op), want) << name << ": " << describe(op);
    }
  }
}

// The code that decides (rules, kernel selection, the planner and its cost model) never reads
// DeviceCaps::extra: a new decision-bearing fact becomes a typed field. (It may add display text
// there with try_emplace, as the CUDA rules complete a profile's kernel-image line.)
TEST(TypedFacts, DecisionCodeNeverLooksIntoExtra) {
  const fs::path src(DUET_SOURCE_DIR);
  const std::vector<fs::path> deciders = {"backends/vulkan/rules", "backends/cuda/rules.cpp",
                                          "kernels/src/select", "core/src/planner"};
  const std::regex reads_extra(R"(\.extra\b(?!\.try_emplace\())");
  int files = 0;
  for (const fs::path& d : deciders) {
    std::vector<fs::path> paths;
    if (fs::is_directory(src / d)) {
      for (const auto& e : fs::directory_iterator(src / d)) paths.push_back(e.path());
    } else {
      paths.push_back(src / d);
    }
    for (const fs::path& p : paths) {
      std::ifstream f(p);
      std::string line;
      for (int n = 1; std::getline(f, line); ++n) {
        EXPECT_FALSE(std::regex_search(line, reads_extra))
            << p.string() << ":" << n << " reads DeviceCaps::extra: " << line;
      }
      ++files;
    }
  }
  EXPECT_GE(files, 10);
}

// Records of an older duet said these facts in extra: they are read from there when the typed
// field is absent, so that such profiles plan as they did.
TEST(TypedFacts, OlderRecordsSayingTypedFactsInExtraAreRead) {
  auto old = parse_profile(R"json({"backend": "vulkan", "int_dot": true, "source": "old dump",
      "extra": {"integer_dot_accelerated": "yes", "max_texel_buffer_elements": "0",
                "cublas": "cuBLASLt 13.0.0 (old)"}})json",
                           "old.json");
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_TRUE(old->int_dot_accelerated);
  ASSERT_TRUE(old->max_texel_elements.has_value());
  EXPECT_EQ(*old->max_texel_elements, 0u);
  EXPECT_TRUE(old->gemm_library_loaded);
  EXPECT_EQ(old->gemm_library, "cuBLASLt 13.0.0 (old)");
  // A typed field wins over extra.
  auto both = parse_profile(R"json({"backend": "vulkan", "int_dot_accelerated": false,
      "source": "s", "extra": {"integer_dot_accelerated": "yes"}})json",
                            "both.json");
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_FALSE(both->int_dot_accelerated);
  // A record that does not say leaves the texel limit unknown, not zero.
  EXPECT_FALSE(profile("rx7900xtx").max_texel_elements.has_value());
}

// docs/planner.md's efficiency table, row by tier: the numbers of each cell are the efficiency
// classes the rules give that tier's choices on that kind of device (column 2: GPUs and the CPU
// backend; column 3: a Vulkan device on the host's cores), every number of the table is given to
// some choice, and every efficiency a choice carries is in the table.
TEST(EfficiencyClasses, PlannerDocsTableIsWhatTheRulesSay) {
  std::ifstream f(fs::path(DUET_SOURCE_DIR) / "docs" / "planner.md");
  std::string line;
  bool in_table = false;
  std::map<std::pair<std::string, int>, std::set<std::string>> doc;  // (tier, column) -> numbers
  const std::regex number(R"(\b\d+\.\d+\b)");
  while (std::getline(f, line)) {
    if (line.rfind("| tier | efficiency on a GPU", 0) == 0) {
      in_table = true;
      continue;
    }
    if (!in_table || line.rfind("| ---", 0) == 0) continue;
    if (line.rfind("|", 0) != 0) break;
    std::vector<std::string> cells;
    std::stringstream ss(line.substr(1));
    for (std::string c; std::getline(ss, c, '|');) cells.push_back(c);
    ASSERT_GE(cells.size(), 3u) << line;
    const std::string tier = std::regex_replace(cells[0], std::regex(R"(^\s+|\s+$)"), "");
    for (int col : {1, 2})
      for (std::sregex_iterator it(cells[static_cast<size_t>(col)].begin(),
                                   cells[static_cast<size_t>(col)].end(), number);
           it != std::sregex_iterator(); ++it)
        doc[{tier, col}].insert(it->str());
  }
  ASSERT_FALSE(doc.empty()) << "docs/planner.md has no efficiency table";
  auto fmt = [](double v) {
    std::ostringstream s;
    s << v;
    return s.str();
  };
  std::map<std::pair<std::string, int>, std::set<std::string>> code;
  for (const std::string& name : profile_names()) {
    const DeviceCaps caps = profile(name);
    const int col = caps.backend == BackendKind::vulkan && caps.type == DeviceType::cpu ? 2 : 1;
    for (const OpDesc& op : probe_ops())
      for (const KernelChoice& k : builtin_rules(caps.backend).choices(caps, op))
        if (k.efficiency > 0) code[{std::string(tier_name(k.tier)), col}].insert(fmt(k.efficiency));
  }
  EXPECT_EQ(doc, code) << "docs/planner.md's efficiency table and the rules disagree";
}

}  // namespace
}  // namespace duet::testing_planner
