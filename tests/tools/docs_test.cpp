// The documentation as the program makes it: docs/ops.md is what `duet ops --markdown` prints,
// every op's example graph runs under `duet run` as printed, and every command sample of README.md
// and docs/*.md marked runnable (docs/writing-docs.md) prints what it shows, and the C++ samples
// marked <!-- compile --> compile.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "check/inputs.h"
#include "duet/backends.h"
#include "duet/engine.h"
#include "duet/graph_file.h"
#include "duet/op.h"

namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

struct Output {
  int status = -1;
  std::string out, err;
};

class Docs : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("duet-docs-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `duet ARGS` in the test's folder, without the user's policy or profile folders.
  Output duet(const std::string& args) const {
    const std::string cmd = "cd " + dir_.string() + " && env -u DUET_POLICY -u DUET_PROFILES " +
                            DUET_CLI + " " + args + " >.out 2>.err";
    const int rc = std::system(cmd.c_str());
    return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, slurp(dir_ / ".out"), slurp(dir_ / ".err")};
  }

  fs::path dir_;
};

// The first line where two texts differ, for a message that says what drifted.
std::string first_difference(const std::string& want, const std::string& got) {
  std::istringstream a(want), b(got);
  std::string la, lb;
  for (int n = 1;; ++n) {
    const bool ea = !std::getline(a, la), eb = !std::getline(b, lb);
    if (ea && eb) return "none";
    if (ea != eb || la != lb)
      return "line " + std::to_string(n) + ":\n  docs/ops.md: " + (ea ? "(end)" : la) +
             "\n  generated:   " + (eb ? "(end)" : lb);
  }
}

TEST_F(Docs, OpsReferenceIsWhatTheProgramGenerates) {
  Output r = duet("ops --markdown");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string doc = slurp(fs::path(DUET_SOURCE_DIR) / "docs" / "ops.md");
  EXPECT_TRUE(doc == r.out) << "docs/ops.md is out of date; regenerate it with\n  "
                            << "build/tools/duet ops --markdown > docs/ops.md\nfirst difference at "
                            << first_difference(doc, r.out);
  for (int i = 0; i < duet::kNumOpKinds; ++i)
    EXPECT_NE(doc.find("\n## " + std::string(duet::op_name(static_cast<duet::OpKind>(i))) + "\n"),
              std::string::npos)
        << duet::op_name(static_cast<duet::OpKind>(i));
}

// Each example as `duet run` runs it: the text `duet ops --example` prints, written to a file,
// read as a graph file, given the random inputs the command draws and run on this machine's
// devices. The command itself runs one of them (and prints every example as the op's facts give
// it); the others run in this process on one registry: a `duet run` process per op opened every
// device, with the validation layers, once per op: 16.6 CPU-seconds against 2.7 (2026-11-28).
TEST_F(Docs, EveryOpsExampleRuns) {
  duet::Registry reg = duet::open_registry();
  ASSERT_FALSE(reg.devices().empty());
  for (int i = 0; i < duet::kNumOpKinds; ++i) {
    const auto k = static_cast<duet::OpKind>(i);
    const std::string op(duet::op_name(k));
    Output example = duet("ops --example " + op);
    ASSERT_EQ(example.status, 0) << op << ": " << example.err;
    EXPECT_EQ(example.out, std::string(duet::op_doc(k).example)) << op;
    const fs::path file = dir_ / (op + ".json");
    std::ofstream(file) << example.out;
    auto graph = duet::load_graph(file.string());
    ASSERT_TRUE(graph.ok()) << op << ": " << graph.status().message();
    std::string note;
    auto inputs = duet::check::graph_inputs(*graph, nullptr, {}, note);
    ASSERT_TRUE(inputs.ok()) << op << ": " << inputs.status().message();
    auto engine = duet::Engine::create(*graph, reg.devices());
    ASSERT_TRUE(engine.ok()) << op << ": " << engine.status().message();
    auto out = (*engine)->run(*inputs);
    ASSERT_TRUE(out.ok()) << op << ": " << out.status().message();
    EXPECT_EQ(out->count("y"), 1u) << op << ": no output y";
  }
  Output r = duet("run matmul.json");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("output y "), std::string::npos) << r.out;
  Output bad = duet("ops --example conv2d");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("matmul"), std::string::npos) << bad.err;
}

// ---- command samples ----------------------------------------------------------------------

// One `$ command` of a sample and the output shown under it.
struct Command {
  std::string text;
  std::vector<std::string> expected;
};

// A fenced `console` block preceded by `<!-- test -->`.
struct Sample {
  std::string where;  // "docs/cli.md:42"
  std::vector<Command> commands;
  std::string error;        // a malformed sample
  bool needs_onnx = false;  // <!-- test: needs onnx -->: skipped in a build without the importer
};

void PrintTo(const Sample& s, std::ostream* os) {
  *os << s.where;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::vector<Sample> samples_of(const fs::path& file, const std::string& name) {
  const std::vector<std::string> lines = split_lines(slurp(file));
  std::vector<Sample> out;
  bool quoted = false;  // inside a ```` fence, which shows markdown (docs/writing-docs.md)
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("````", 0) == 0) quoted = !quoted;
    if (quoted || (lines[i] != "<!-- test -->" && lines[i] != "<!-- test: needs onnx -->"))
      continue;
    Sample s;
    s.where = name + ":" + std::to_string(i + 1);
    s.needs_onnx = lines[i] != "<!-- test -->";
    if (i + 1 >= lines.size() || lines[i + 1] != "```console") {
      s.error = lines[i] + " must come right before a ```console fence";
      out.push_back(std::move(s));
      continue;
    }
    size_t j = i + 2;
    for (; j < lines.size() && lines[j] != "```"; ++j) {
      if (lines[j].rfind("$ ", 0) == 0)
        s.commands.push_back({lines[j].substr(2), {}});
      else if (s.commands.empty())
        s.error = "output before the first `$ ` command";
      else
        s.commands.back().expected.push_back(lines[j]);
    }
    if (j == lines.size()) s.error = "the fence is not closed";
    if (s.commands.empty() && s.error.empty()) s.error = "no `$ ` command";
    out.push_back(std::move(s));
    i = j;
  }
  return out;
}

// Trailing spaces cut and runs of spaces made one, so a column that widens does not matter.
std::string squeeze(const std::string& line) {
  std::string out;
  for (char c : line)
    if (c != ' ' || (!out.empty() && out.back() != ' ')) out += c;
  while (!out.empty() && (out.back() == ' ' || out.back() == '\r')) out.pop_back();
  return out;
}

// An expected line as a pattern: <N> a number, <T> a duration, <*> any text, and a line ending
// in " ..." matches any line that starts with what comes before.
std::regex line_pattern(const std::string& expected) {
  static const std::string kNumber = "[-+]?(?:[0-9]+(?:\\.[0-9]*)?|\\.[0-9]+)(?:[eE][-+]?[0-9]+)?";
  static const std::map<std::string, std::string> kMasks = {
      {"<N>", kNumber}, {"<T>", kNumber + " ?(?:ns|us|\xc2\xb5s|ms|s|min)"}, {"<*>", ".*"}};
  std::string line = squeeze(expected), re;
  bool open_end = false;
  if (line.size() >= 4 && line.compare(line.size() - 4, 4, " ...") == 0) {
    line.resize(line.size() - 4);
    open_end = true;
  }
  for (size_t i = 0; i < line.size();) {
    bool masked = false;
    for (const auto& [mask, pattern] : kMasks)
      if (line.compare(i, mask.size(), mask) == 0) {
        re += pattern;
        i += mask.size();
        masked = true;
        break;
      }
    if (masked) continue;
    const char c = line[i++];
    if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) re += '\\';
    re += c;
  }
  return std::regex(open_end ? re + "( .*)?" : re);
}

// Whether `got` from line `a` on matches `want` from line `e` on; "..." alone skips any lines.
bool matches(const std::vector<std::string>& want, size_t e, const std::vector<std::string>& got,
             size_t a) {
  if (e == want.size()) return a == got.size();
  if (squeeze(want[e]) == "..." || squeeze(want[e]) == " ...") {
    for (size_t k = a; k <= got.size(); ++k)
      if (matches(want, e + 1, got, k)) return true;
    return false;
  }
  return a < got.size() && std::regex_match(squeeze(got[a]), line_pattern(want[e])) &&
         matches(want, e + 1, got, a + 1);
}

std::vector<std::pair<std::string, fs::path>> documents() {
  const fs::path root(DUET_SOURCE_DIR);
  std::vector<std::pair<std::string, fs::path>> out = {{"README.md", root / "README.md"}};
  std::vector<fs::path> docs;
  for (const auto& e : fs::directory_iterator(root / "docs"))
    if (e.path().extension() == ".md") docs.push_back(e.path());
  std::sort(docs.begin(), docs.end());
  for (const fs::path& p : docs) out.push_back({"docs/" + p.filename().string(), p});
  return out;
}

std::vector<Sample> all_samples() {
  std::vector<Sample> out;
  for (const auto& [name, file] : documents())
    for (Sample& s : samples_of(file, name)) out.push_back(std::move(s));
  return out;
}

// Each runnable sample runs in a scratch folder of its own, as a reader at the repository root
// would run it: `duet` (and `duet-llama`) on PATH, `build/tools/duet`, `examples/`, `tests/`,
// `profiles/` and `tools/` there.
class DocSample : public Docs, public ::testing::WithParamInterface<Sample> {};

TEST_P(DocSample, PrintsWhatItShows) {
  const Sample& s = GetParam();
  ASSERT_TRUE(s.error.empty()) << s.where << ": " << s.error;
#ifndef DUET_HAVE_ONNX
  if (s.needs_onnx) GTEST_SKIP() << "this build has no ONNX importer (libonnx was not found)";
#endif
  const fs::path root(DUET_SOURCE_DIR), cli(DUET_CLI);
  fs::create_directories(dir_ / "build" / "tools");
  fs::create_symlink(cli, dir_ / "build" / "tools" / "duet");
  for (const char* d : {"examples", "tests", "profiles", "tools"})
    fs::create_directory_symlink(root / d, dir_ / d);
  for (const Command& c : s.commands) {
    std::ofstream(dir_ / ".command.sh") << c.text << "\n";
    const std::string sh = "cd " + dir_.string() + " && PATH=" + cli.parent_path().string() +
                           ":$PATH env -u DUET_POLICY -u DUET_PROFILES bash .command.sh " +
                           ">.output 2>&1";
    (void)std::system(sh.c_str());
    const std::vector<std::string> got = split_lines(slurp(dir_ / ".output"));
    std::string want_text, got_text;
    for (const auto& l : c.expected) want_text += "  " + l + "\n";
    for (const auto& l : got) got_text += "  " + l + "\n";
    EXPECT_TRUE(matches(c.expected, 0, got, 0)) << s.where << ": `" << c.text << "` printed\n"
                                                << got_text << "where the sample shows\n"
                                                << want_text;
  }
}

// "cli_md_51": the file and line of the sample.
std::string sample_name(const ::testing::TestParamInfo<Sample>& info) {
  std::string n;
  for (char c : info.param.where.substr(info.param.where.rfind('/') + 1))
    n += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Docs, DocSample, ::testing::ValuesIn(all_samples()), sample_name);

TEST(DocSamples, SomeAreMarkedRunnable) {
  EXPECT_GE(all_samples().size(), 5u);
}

// ---- C++ samples -------------------------------------------------------------------------

// A ```cpp block preceded by <!-- compile -->: a whole program, or statements that compile in a
// function body with `using namespace duet;`.
struct CxxSample {
  std::string where;
  std::vector<std::string> lines;
};

std::vector<CxxSample> cxx_samples() {
  std::vector<CxxSample> out;
  for (const auto& [name, file] : documents()) {
    const std::vector<std::string> lines = split_lines(slurp(file));
    for (size_t i = 0; i + 1 < lines.size(); ++i) {
      if (lines[i] != "<!-- compile -->") continue;
      CxxSample s{name + ":" + std::to_string(i + 1), {}};
      for (size_t j = i + 2; j < lines.size() && lines[j] != "```"; ++j)
        s.lines.push_back(lines[j]);
      if (lines[i + 1] != "```cpp")
        s.lines = {"#error <!-- compile --> must come right before a ```cpp fence"};
      out.push_back(std::move(s));
    }
  }
  return out;
}

// Every marked sample in one translation unit (each in a namespace of its own, its includes
// hoisted), checked by the compiler that builds duet, against the source tree's headers.
TEST_F(Docs, EveryCxxSampleMarkedCompileCompiles) {
  const std::vector<CxxSample> samples = cxx_samples();
  ASSERT_GE(samples.size(), 1u) << "no C++ sample is marked <!-- compile -->";
  std::string includes = "#include <duet/builtin_engine.h>\n#include <duet/planner.h>\n", body;
  for (size_t n = 0; n < samples.size(); ++n) {
    const CxxSample& s = samples[n];
    bool program = false;
    std::string code;
    for (const std::string& l : s.lines) {
      if (l.rfind("#include", 0) == 0) {
        includes += l + "\n";
        continue;
      }
      std::string line = l;
      if (line.rfind("int main(", 0) == 0) {
        line.replace(0, 9, "int sample_main(");
        program = true;
      }
      code += line + "\n";
    }
    body += "// " + s.where + "\nnamespace sample_" + std::to_string(n) + " {\n" +
            (program ? "using namespace duet;\n" + code
                     : "using namespace duet;\n[[maybe_unused]] void sample() {\n" + code + "}\n") +
            "}  // namespace sample_" + std::to_string(n) + "\n";
  }
  std::ofstream(dir_ / "samples.cpp") << includes << body;
  const std::string cmd = std::string(DUET_CXX) + " -std=c++20 -fsyntax-only -I" + DUET_SOURCE_DIR +
                          "/core/include -I" + DUET_SOURCE_DIR + "/api/include -I" +
                          DUET_SOURCE_DIR + "/llm/include -I" + DUET_BINARY_DIR + "/api/include " +
                          (dir_ / "samples.cpp").string() + " >" + (dir_ / ".err").string() +
                          " 2>&1";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << "the C++ samples of " <<
      [&] {
        std::string w;
        for (const auto& s : samples) w += s.where + " ";
        return w;
      }() << "do not compile:\n"
                   << slurp(dir_ / ".err") << "\nas checked:\n"
                   << includes << body;
}

TEST(DocSamples, MasksAndSkipsMatchWhatTheySay) {
  const std::vector<std::string> want = {"kernels <T>, run <T>", "...", "output y f32[2]: mean <N>",
                                         "cpu:0 (<*>) ..."};
  EXPECT_TRUE(matches(want, 0,
                      {"kernels 6.5 us,  run 1.05 ms", "a", "b", "output y f32[2]: mean -1e-05",
                       "cpu:0 (AMD EPYC) f32 simd"},
                      0));
  EXPECT_TRUE(
      matches(want, 0,
              {"kernels 6.5 us, run 1.05 ms", "output y f32[2]: mean 3", "cpu:0 (Intel Xeon)"}, 0));
  EXPECT_FALSE(matches(want, 0, {"kernels 6.5 us, run 1.05 ms", "output y f32[2]: mean x"}, 0));
  EXPECT_FALSE(matches({"a"}, 0, {"a", "b"}, 0));  // an unshown line is a difference
  EXPECT_FALSE(matches({"tier flash"}, 0, {"tier tiled"}, 0));
  EXPECT_TRUE(matches({"1 kernel (a+b)"}, 0, {"1 kernel (a+b)"}, 0));
}

}  // namespace
