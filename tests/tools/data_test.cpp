// Data in and out of the `duet` command without code: `duet convert` between .safetensors and
// NumPy's .npy, `duet inputs` from a graph's declarations, `duet run --print`.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "duet/safetensors.h"
#include "tools/cli_fixture.h"

namespace {

using duet_cli_test::Cli;
using duet_cli_test::CliRun;
using duet_cli_test::kGraph;
using duet_cli_test::lines;
namespace fs = std::filesystem;

// A python3 with NumPy, or "" (tools/make_npy_samples.py needs it).
std::string python_with_numpy() {
  for (const char* py : {"python3", "/usr/bin/python3"})
    if (std::system((std::string(py) + " -c 'import numpy' >/dev/null 2>&1").c_str()) == 0)
      return py;
  return "";
}

// The value tools/make_npy_samples.py gives element i of a sample of safetensors dtype `st`.
double sample_value(const std::string& st, int64_t i) {
  if (st == "BOOL") return i % 2 == 1;
  if (st[0] == 'U') return static_cast<double>(i);
  if (st[0] == 'I') return static_cast<double>(i - 5);
  return static_cast<double>(i - 5) / 4;
}

double element(const duet::SafetensorsFile& f, const duet::SafetensorsEntry& e, int64_t i) {
  const std::byte* p = f.data.data() + e.begin;
  auto get = [&](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, p + static_cast<size_t>(i) * sizeof v, sizeof v);
    return static_cast<double>(v);
  };
  if (e.dtype == "F32") return get(0.0f);
  if (e.dtype == "F64") return get(0.0);
  if (e.dtype == "I8") return get(int8_t{});
  if (e.dtype == "U8" || e.dtype == "BOOL") return get(uint8_t{});
  if (e.dtype == "I32") return get(int32_t{});
  if (e.dtype == "I64") return get(int64_t{});
  if (e.dtype == "F16") {
    uint16_t h;
    std::memcpy(&h, p + static_cast<size_t>(i) * 2, 2);
    // The samples are multiples of 1/4 within +-16: exact in f16, decoded here by hand.
    const int ex = (h >> 10) & 31;
    const double m = ex ? 1 + (h & 1023) / 1024.0 : (h & 1023) / 1024.0;
    return (h & 0x8000 ? -1 : 1) * std::ldexp(m, ex ? ex - 15 : -14);
  }
  ADD_FAILURE() << "dtype " << e.dtype;
  return NAN;
}

// ---- convert ----------------------------------------------------------------------------

TEST_F(Cli, ConvertReadsWhatNumpyWritesAndNumpyReadsWhatItWrites) {
  const std::string py = python_with_numpy();
  std::string samples = DUET_TEST_NPY_SAMPLES;  // checked in, written by the same script
  if (!py.empty()) {
    samples = path("numpy");
    ASSERT_EQ(std::system((py + " " + DUET_TOOLS_DIR + "/make_npy_samples.py " + samples).c_str()),
              0);
  }
  CliRun r = duet("convert " + samples + " " + path("all.safetensors"));
  ASSERT_EQ(r.status, 0) << r.err;
  auto f = duet::read_safetensors(path("all.safetensors"));
  ASSERT_TRUE(f.ok()) << f.status().message();
  const std::map<std::string, std::pair<std::string, std::vector<int64_t>>> want = {
      {"f32", {"F32", {2, 3, 4}}}, {"f16", {"F16", {3, 5}}},   {"f64", {"F64", {7}}},
      {"i8", {"I8", {2, 6}}},      {"u8", {"U8", {9}}},        {"i32", {"I32", {4, 2}}},
      {"i64", {"I64", {3, 4}}},    {"bool", {"BOOL", {2, 5}}}, {"f32_big_endian", {"F32", {2, 3}}},
      {"f64_scalar", {"F64", {}}}};
  ASSERT_EQ(f->tensors.size(), want.size());
  for (const auto& [name, dt_shape] : want) {
    const duet::SafetensorsEntry* e = f->find(name);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_EQ(e->dtype, dt_shape.first) << name;
    EXPECT_EQ(e->shape, dt_shape.second) << name;
    int64_t n = 1;
    for (int64_t d : e->shape) n *= d;
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(element(*f, *e, i), sample_value(e->dtype, i)) << name << " element " << i;
  }

  // Back to a folder of .npy files: each header pads the data to 64 bytes, as NumPy's own.
  r = duet("convert " + path("all.safetensors") + " " + path("back"));
  ASSERT_EQ(r.status, 0) << r.err;
  for (const auto& [name, _] : want) {
    const std::string text = slurp(path("back/" + name + ".npy"));
    ASSERT_GT(text.size(), 10u) << name;
    const size_t hlen = static_cast<unsigned char>(text[8]) | static_cast<unsigned char>(text[9])
                                                                  << 8;
    EXPECT_EQ((10 + hlen) % 64, 0u) << name;
    EXPECT_EQ(text[10 + hlen - 1], '\n') << name;
  }
  if (py.empty()) GTEST_SKIP() << "no python3 with NumPy: NumPy reading duet's files not checked";
  const std::string check =
      "import numpy as np, sys\n"
      "for n in " +
      [&] {
        std::string l = "[";
        for (const auto& [name, _] : want) l += "'" + name + "',";
        return l + "]";
      }() +
      ":\n"
      "    a, b = np.load(sys.argv[1] + '/' + n + '.npy'), np.load(sys.argv[2] + '/' + n + "
      "'.npy')\n"
      "    assert a.shape == b.shape and a.dtype.newbyteorder('=') == b.dtype.newbyteorder('=') "
      "and (a == b).all(), n\n";
  write("check.py", check);
  EXPECT_EQ(std::system((py + " " + path("check.py") + " " + samples + " " + path("back")).c_str()),
            0);
}

TEST_F(Cli, ConvertRoundTripsEveryDuetDtypeAndPicksOneTensorByName) {
  auto make = [](duet::DType t, std::vector<int64_t> shape) {
    duet::HostTensor h = duet::HostTensor::empty(t, shape);
    std::vector<double> v(static_cast<size_t>(h.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i % 7) - 3.25 * (i % 2);
    if (!duet::is_float(t))
      for (double& x : v) x = std::floor(x);
    h.from_doubles(v);
    return h;
  };
  const std::vector<std::pair<std::string, duet::HostTensor>> tensors = {
      {"layers.0/w", make(duet::DType::f32, {3, 4})},
      {"h", make(duet::DType::f16, {5})},
      {"ids", make(duet::DType::i32, {2, 2})},
      {"q", make(duet::DType::i8, {6})},
      {"b", make(duet::DType::bf16, {2, 3})}};
  ASSERT_TRUE(duet::write_safetensors(path("a.safetensors"), tensors).ok());
  CliRun r = duet("convert " + path("a.safetensors") + " " + path("npy"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("'b' is bf16"), std::string::npos) << r.out;  // widened to f32, said so
  EXPECT_TRUE(fs::exists(path("npy/layers.0%2Fw.npy")));  // a '/' in a name stays in the folder
  r = duet("convert " + path("npy") + " " + path("b.safetensors"));
  ASSERT_EQ(r.status, 0) << r.err;
  auto a = duet::load_safetensors(path("a.safetensors"));
  auto b = duet::load_safetensors(path("b.safetensors"));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(b->size(), tensors.size());
  for (const auto& [name, t] : *a) {
    ASSERT_EQ(b->count(name), 1u) << name;
    const duet::HostTensor& u = b->at(name);
    EXPECT_EQ(u.dtype(), name == "b" ? duet::DType::f32 : t.dtype()) << name;
    EXPECT_EQ(u.to_doubles(), t.to_doubles()) << name;  // exact
  }
  // One tensor by name to one .npy file, and back under another name.
  r = duet("convert " + path("a.safetensors") + " --tensor ids " + path("ids.npy"));
  ASSERT_EQ(r.status, 0) << r.err;
  r = duet("convert tokens=" + path("ids.npy") + " " + path("c.safetensors"));
  ASSERT_EQ(r.status, 0) << r.err;
  auto c = duet::load_safetensors(path("c.safetensors"));
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->count("tokens"), 1u);
  EXPECT_EQ(c->at("tokens").to_doubles(), a->at("ids").to_doubles());
  // Several tensors into one .npy file, or a name that is not there: exit 2, nothing written.
  r = duet("convert " + path("a.safetensors") + " " + path("all.npy"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--tensor"), std::string::npos) << r.err;
  r = duet("convert " + path("a.safetensors") + " --tensor nope " + path("x.npy"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("'nope'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ids"), std::string::npos) << r.err;  // the names there are listed
  EXPECT_FALSE(fs::exists(path("all.npy")) || fs::exists(path("x.npy")));
}

TEST_F(Cli, MalformedNpyFilesAreOneLineNamingTheFileAndExitTwo) {
  auto npy = [](const std::string& dict, size_t data_bytes) {
    std::string h = dict;
    while ((10 + h.size() + 1) % 64) h += ' ';
    h += '\n';
    std::string s = "\x93NUMPY\x01";
    s += '\0';
    s += static_cast<char>(h.size() & 0xff);
    s += static_cast<char>(h.size() >> 8);
    return s + h + std::string(data_bytes, '\x01');
  };
  const std::string good = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"truncated_header.npy", good.substr(0, 40)},
      {"not_npy.npy", "PK\x03\x04 this is a zip"},
      {"complex.npy", npy("{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", 24)},
      {"fortran.npy", npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24)},
      {"overflow.npy",
       npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 24)},
      {"huge_dim.npy",
       npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 24)},
      {"short_data.npy", good.substr(0, good.size() - 4)},
      {"no_shape.npy", npy("{'descr': '<f4', 'fortran_order': False, }", 24)},
      {"structured.npy",
       npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }", 24)},
  };
  write("good.npy", good);
  EXPECT_EQ(duet("convert " + path("good.npy") + " " + path("good.safetensors")).status, 0);
  for (const auto& [name, bytes] : cases) {
    write(name, bytes);
    CliRun r = duet("convert " + path(name) + " " + path("out.safetensors"));
    EXPECT_EQ(r.status, 2) << name << ": " << r.err;
    EXPECT_EQ(lines(r.err), 1) << name << ": " << r.err;
    EXPECT_NE(r.err.find("npy file '" + path(name) + "'"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(path("out.safetensors"))) << name;
  }
  EXPECT_NE(duet("convert " + path("fortran.npy") + " " + path("o.safetensors"))
                .err.find("fortran_order"),
            std::string::npos);
  EXPECT_NE(duet("convert " + path("complex.npy") + " " + path("o.safetensors")).err.find("<c8"),
            std::string::npos);
}

// ---- inputs and run --print -----------------------------------------------------------------

TEST_F(Cli, InputsFileFromTheGraphRunsAsIsAndPrintsItsOutput) {
  const std::string g = write("tiny.json", kGraph);
  CliRun r = duet("inputs " + g + " " + path("in.safetensors") + " --fill 1.5");
  ASSERT_EQ(r.status, 0) << r.err;
  auto in = duet::load_safetensors(path("in.safetensors"));
  ASSERT_TRUE(in.ok());
  ASSERT_EQ(in->count("x"), 1u);
  EXPECT_EQ(in->at("x").desc().str(), "f32[2,3]");
  EXPECT_EQ(in->at("x").to_doubles(), std::vector<double>(6, 1.5));
  // relu(2 * 1.5) - b: every value printed, one row per line.
  r = duet("run " + g + " --inputs " + path("in.safetensors") + " --policy device=cpu --print y");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("y f32[2,3] =\n[[2.5,   4,   1],\n [2.5,   4,   1]]\n"), std::string::npos)
      << r.out;
  // Random inputs from a seed: seed 0 is what `duet run` draws by itself, another seed differs.
  ASSERT_EQ(duet("inputs " + g + " " + path("s0.safetensors")).status, 0);
  ASSERT_EQ(duet("inputs " + g + " " + path("s7.safetensors") + " --seed 7").status, 0);
  auto s0 = duet::load_safetensors(path("s0.safetensors"));
  auto s7 = duet::load_safetensors(path("s7.safetensors"));
  ASSERT_TRUE(s0.ok() && s7.ok());
  EXPECT_NE(s0->at("x").to_doubles(), s7->at("x").to_doubles());
  for (double v : s7->at("x").to_doubles()) EXPECT_TRUE(std::abs(v) >= 0.05 && std::abs(v) <= 1);
  const std::string a =
      duet("run " + g + " --policy device=cpu --print y --inputs " + path("s0.safetensors")).out;
  const std::string b = duet("run " + g + " --policy device=cpu --print y").out;
  EXPECT_EQ(a.substr(a.find("y f32[2,3] =")), b.substr(b.find("y f32[2,3] ="))) << a << b;
  // A folder of .npy files instead, and an unknown output to print.
  ASSERT_EQ(duet("inputs " + g + " " + path("npy")).status, 0);
  EXPECT_TRUE(fs::exists(path("npy/x.npy")));
  r = duet("run " + g + " --print nope");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("its outputs: y"), std::string::npos) << r.err;
}

TEST_F(Cli, RunTakesAFolderOfNpyFilesOnePerInputAndNamesAFileThatDoesNotFit) {
  const std::string g = write("tiny.json", kGraph);
  ASSERT_EQ(duet("inputs " + g + " " + path("npy") + " --fill 1.5").status, 0);
  CliRun r = duet("run " + g + " --inputs " + path("npy") + " --policy device=cpu --print y");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("[[2.5,   4,   1],"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("inputs: " + path("npy")), std::string::npos) << r.out;
  // One .npy file for the graph's one input, whatever its name.
  fs::copy_file(path("npy/x.npy"), path("mine.npy"));
  r = duet("run " + g + " --inputs " + path("mine.npy") + " --policy device=cpu --print y");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("[[2.5,   4,   1],"), std::string::npos) << r.out;
  // A file that is not an input, a misnamed file (the input then has none), a wrong shape.
  fs::copy_file(path("npy/x.npy"), path("npy/z.npy"));
  r = duet("run " + g + " --inputs " + path("npy"));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("file 'z.npy': tensor 'z' is not an input"), std::string::npos) << r.err;
  fs::remove(path("npy/z.npy"));
  fs::rename(path("npy/x.npy"), path("npy/x.npy.bak"));
  r = duet("check " + g + " --device cpu:0 --inputs " + path("npy"));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("no file 'x.npy' for input 'x'"), std::string::npos) << r.err;
  std::string bad = kGraph;
  bad.replace(bad.find("[2, 3]"), 6, "[3]");  // x f32[3] instead of [2, 3]
  ASSERT_EQ(duet("inputs " + write("three.json", bad) + " " + path("three")).status, 0);
  fs::copy_file(path("three/x.npy"), path("npy/x.npy"));
  r = duet("run " + g + " --inputs " + path("npy"));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("file 'x.npy': tensor 'x': expected f32[2,3]"), std::string::npos) << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
}

#ifdef DUET_TEST_ONNX_MODELS
TEST_F(Cli, InputsFileForAnOnnxModelSizesItsSymbolicDimensions) {
  const std::string m = std::string(DUET_TEST_ONNX_MODELS) + "/bert_layer.onnx";
  CliRun r = duet("inputs " + m + " " + path("in.safetensors") + " --dim batch=2,sequence=5");
  ASSERT_EQ(r.status, 0) << r.err;
  auto in = duet::load_safetensors(path("in.safetensors"));
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(in->at("input_ids").desc().str(), "i32[2,5]");
  r = duet("run " + m + " --policy device=cpu --inputs " + path("in.safetensors"));
  EXPECT_EQ(r.status, 0) << r.err;
}
#endif

TEST_F(Cli, LargeOutputsArePrintedSummarisedUnlessAskedInFull) {
  const std::string g = write("wide.json", R"({"format": "duet-graph", "version": 1,
    "name": "wide", "inputs": [{"name": "x", "dtype": "i32", "shape": [40, 30]}],
    "nodes": [{"name": "y", "op": "cast", "inputs": ["x"], "attrs": {"to": "f32"}}],
    "outputs": ["y"]})");
  ASSERT_EQ(duet("inputs " + g + " " + path("in.safetensors") + " --fill 7").status, 0);
  const std::string run = "run " + g + " --policy device=cpu --inputs " + path("in.safetensors");
  CliRun r = duet(run + " --print-all");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string v = r.out.substr(r.out.find("y f32[40,30] ="));
  EXPECT_EQ(lines(v), 8) << v;  // the title, 3 rows, "...", 3 rows
  EXPECT_NE(v.find("[[7, 7, 7, ..., 7, 7, 7],"), std::string::npos) << v;
  r = duet(run + " --print y --print-limit 0");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string all = r.out.substr(r.out.find("y f32[40,30] ="));
  EXPECT_EQ(std::count(all.begin(), all.end(), '7'), 1200) << all;
  EXPECT_EQ(all.find("..."), std::string::npos) << all;
  for (size_t at = 0, next; (next = all.find('\n', at)) != std::string::npos; at = next + 1)
    EXPECT_LE(next - at, 75u) << "rows wrap at 75 columns:\n" << all;
}

}  // namespace
