// The `duet` command as a user runs it: exit codes, one-line errors on stderr, output files that
// are complete or absent.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "duet/gguf.h"
#include "duet/quantize.h"
#include "duet/safetensors.h"
#include "tools/cli_fixture.h"

namespace {

using duet_cli_test::Cli;
using duet_cli_test::CliRun;
using duet_cli_test::kBf16Attention;
using duet_cli_test::kGraph;
using duet_cli_test::lines;
namespace fs = std::filesystem;

duet::HostTensor f32(std::vector<int64_t> shape, std::vector<float> v) {
  duet::HostTensor t = duet::HostTensor::empty(duet::DType::f32, shape);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

// ---- every command -----------------------------------------------------------------------

TEST_F(Cli, EveryCommandHasHelp) {
  for (const char* c : {"", "devices", "check", "plan", "run", "bench", "calibrate", "gguf",
                        "convert", "inputs", "ops"}) {
    CliRun r = duet(std::string(c) + " --help");
    EXPECT_EQ(r.status, 0) << c;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << c;
  }
}

TEST_F(Cli, VersionPrintsTheProjectVersion) {
  CliRun r = duet("--version");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out.rfind("duet ", 0), 0u) << r.out;
}

TEST_F(Cli, UnknownFlagIsOneLineOnStderrAndExitTwo) {
  CliRun r = duet("devices --frobnicate");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("frobnicate"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("duet devices --help"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST_F(Cli, UnknownCommandAndMissingCommandFail) {
  CliRun r = duet("frobnicate");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  CliRun none = duet("");
  EXPECT_EQ(none.status, 2);
  EXPECT_EQ(lines(none.err), 1) << none.err;
}

// ---- devices, check, bench ---------------------------------------------------------------

TEST_F(Cli, UnknownDeviceIsNamed) {
  CliRun r = duet("check --device vulkan:9");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("vulkan:9"), std::string::npos) << r.err;
}

TEST_F(Cli, UnknownOpAndDtypeAreNamed) {
  CliRun op = duet("bench --op conv3d");
  EXPECT_EQ(op.status, 2);
  EXPECT_NE(op.err.find("conv3d"), std::string::npos) << op.err;
  CliRun dt = duet("check --dtype f8");
  EXPECT_EQ(dt.status, 2);
  EXPECT_NE(dt.err.find("f8"), std::string::npos) << dt.err;
}

TEST_F(Cli, DevicesListsTheCpuAndTheReasonsForMissingBackends) {
  CliRun r = duet("devices --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  bool cpu = false;
  for (const auto& d : j["devices"]) cpu |= d["id"] == "cpu:0";
  EXPECT_TRUE(cpu);
  for (const auto& b : j["backends"])
    if (!b["available"].get<bool>()) {
      EXPECT_FALSE(b["reason"].get<std::string>().empty()) << b.dump();
    }
  EXPECT_TRUE(j["gpus"].is_array());
}

TEST_F(Cli, CheckWritesJsonAndPassesOnTheCpu) {
  CliRun r = duet("check --device cpu:0 --op softmax --op matmul --json " + path("c.json"));
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("0 failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cpu:0"), std::string::npos) << r.out;
  std::ifstream f(path("c.json"));
  auto j = nlohmann::json::parse(f);
  EXPECT_GT(j["passed"].get<int>(), 0);
  EXPECT_EQ(j["failed"].get<int>(), 0);
  for (const auto& c : j["cases"]) {
    EXPECT_TRUE(c.contains("nmse")) << c.dump();
    EXPECT_TRUE(c.contains("max_abs")) << c.dump();
  }
}

TEST_F(Cli, CheckTableHasADeviceRowAndATierRow) {
  CliRun r = duet("check --device cpu:0 --op add");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(" cases, 1 device\n"), std::string::npos) << r.out;
  const size_t device = r.out.find("cpu:0");
  const size_t tier = r.out.find("\nop ");
  ASSERT_NE(device, std::string::npos) << r.out;
  ASSERT_NE(tier, std::string::npos) << r.out;
  EXPECT_LT(device, tier) << r.out;
  EXPECT_NE(r.out.find("\nadd "), std::string::npos) << r.out;
}

TEST_F(Cli, AnUnwritableJsonPathFailsWithoutLeavingAPartialFile) {
  const std::string json = path("missing-subdir/out.json");
  CliRun r = duet("check --device cpu:0 --op relu --json " + json);
  EXPECT_EQ(r.status, 2) << "refused before any work";
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--json '" + json + "'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no folder"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("relu"), std::string::npos) << "nothing ran:\n" << r.out;
  EXPECT_FALSE(fs::exists(json));
  EXPECT_TRUE(files().empty());
}

TEST_F(Cli, BenchReportsGflopsForTheCpu) {
  CliRun r = duet("bench --device cpu:0 --op add --repeats 3 --min-seconds 0");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("GFLOP/s"), std::string::npos);
  EXPECT_NE(r.out.find("add f32 2048x4096"), std::string::npos) << r.out;
}

TEST_F(Cli, BenchMeasuresTheMemoryBandwidthAndSaysWhatBoundsEachRow) {
  CliRun r =
      duet("bench --device cpu:0 --op add --repeats 1 --min-seconds 0 --json " + path("b.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("memory read bandwidth"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cpu:0: first runs"), std::string::npos) << r.out;
  std::ifstream f(path("b.json"));
  auto j = nlohmann::json::parse(f);
  EXPECT_GT(j["read_bandwidth"]["gbps"].get<double>(), 0) << j.dump();
  ASSERT_FALSE(j["rows"].empty()) << j.dump();
  for (const auto& row : j["rows"]) {
    EXPECT_EQ(row["bound"], "memory") << row.dump();  // an add reads 12 bytes per flop
    EXPECT_GT(row["bandwidth_fraction"].get<double>(), 0) << row.dump();
    EXPECT_GT(row["first_s"].get<double>(), 0) << row.dump();  // the warm-up run's seconds
  }
}

TEST_F(Cli, BenchListsDecodeShapedCasesWithoutRunningThem) {
  CliRun r = duet("bench --list --dtype f16");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find("memory read bandwidth"), std::string::npos) << r.out;  // nothing ran
  for (const char* name : {"matmul f16 decode M1 N4096 K14336", "matmul f16 decode M8 N4096 K14336",
                           "attention f16 decode MHA Hq32 Lk8192 D128",
                           "attention f16 decode GQA Hq32 Hkv8 Lk32768 D128"})
    EXPECT_NE(r.out.find(name), std::string::npos) << name << "\n" << r.out;
  EXPECT_EQ(r.out.find(" f32 "), std::string::npos) << r.out;  // --dtype filters the list
}

TEST_F(Cli, BenchPlotToAnUnwritablePathFailsNamingIt) {
  const std::string png = path("no-such-dir/b.png");
  CliRun r = duet("bench --device cpu:0 --op add --repeats 1 --min-seconds 0 --plot " + png);
  EXPECT_EQ(r.status, 2) << "refused before any work";
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--plot '" + png + "'"), std::string::npos) << r.err;
  EXPECT_TRUE(files().empty());
}

// Two decode-shaped projections of the same shape and a gate: a user's own graph, constants
// given by shape only.
const char* kDecodeLayer = R"({"format": "duet-graph", "version": 1, "name": "decode-layer",
  "inputs": [{"name": "x", "dtype": "f16", "shape": [1, 256]}],
  "constants": [{"name": "w1", "dtype": "f16", "shape": [128, 256]},
                {"name": "w2", "dtype": "f16", "shape": [128, 256]}],
  "nodes": [{"name": "h1", "op": "matmul", "inputs": ["x", "w1"], "attrs": {"transpose_b": true}},
            {"name": "h2", "op": "matmul", "inputs": ["x", "w2"], "attrs": {"transpose_b": true}},
            {"name": "a", "op": "silu", "inputs": ["h1"]},
            {"name": "y", "op": "mul", "inputs": ["a", "h2"]}],
  "outputs": ["y"]})";

TEST_F(Cli, BenchTimesTheOpsOfAUsersGraphOnceEachWithTheirCount) {
  const std::string g = write("layer.json", kDecodeLayer);
  CliRun r =
      duet("bench " + g + " --device cpu:0 --repeats 2 --min-seconds 0 --json " + path("b.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("graph 'decode-layer': 4 ops"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("total on cpu:0"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("add f32 2048x4096"), std::string::npos) << r.out;  // not the built-ins
  std::ifstream f(path("b.json"));
  auto j = nlohmann::json::parse(f);
  std::map<std::string, int> count;
  for (const auto& row : j["rows"]) {
    EXPECT_EQ(row["error"], "") << row.dump();
    EXPECT_GT(row["median_s"].get<double>(), 0) << row.dump();
    count[row["op"]] = row["count"];
  }
  EXPECT_EQ(count["h1 (matmul)"], 2) << j.dump(2);  // h2 is the same op, timed once
  EXPECT_EQ(count["a (silu)"], 1) << j.dump(2);
  EXPECT_EQ(count["y (mul)"], 1) << j.dump(2);
  EXPECT_EQ(count.count("h2 (matmul)"), 0u) << j.dump(2);

  CliRun only = duet("bench " + g + " --list --op silu");
  ASSERT_EQ(only.status, 0) << only.err;
  EXPECT_NE(only.out.find("silu (f16[1,128] -> f16[1,128])"), std::string::npos) << only.out;
  EXPECT_EQ(only.out.find("matmul ("), std::string::npos) << only.out;
}

TEST_F(Cli, BenchPlotsAGraphsRowsToAPng) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "gnuplot is not installed (tools/setup.sh installs gnuplot-nox)";
  const std::string g = write("layer.json", kDecodeLayer);
  const std::string png = path("b.png");
  CliRun r = duet("bench " + g + " --device cpu:0 --repeats 1 --min-seconds 0 --plot " + png);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(slurp(png).substr(0, 4), "\x89PNG");
  EXPECT_EQ(files(), std::vector<std::string>({"b.png", "layer.json"}));  // no partial file left
}

TEST_F(Cli, BenchOfAMissingOrBrokenGraphIsOneLineAndExitTwo) {
  CliRun missing = duet("bench " + path("nope.json"));
  EXPECT_EQ(missing.status, 2);
  EXPECT_EQ(lines(missing.err), 1) << missing.err;
  EXPECT_NE(missing.err.find("nope.json"), std::string::npos) << missing.err;
  CliRun broken = duet("bench " + write("broken.json", "{\"format\": \"duet-graph\", "));
  EXPECT_EQ(broken.status, 2);
  EXPECT_EQ(lines(broken.err), 1) << broken.err;
}

// ---- plan --------------------------------------------------------------------------------

TEST_F(Cli, CalibrateMeasuresCachesAndSavesAFixedCalibration) {
  const std::string cache = "DUET_CACHE_DIR=" + path("cache") + " DUET_CALIBRATION=";
  CliRun off = duet("calibrate --device cpu:0", "DUET_CALIBRATION=off");
  EXPECT_EQ(off.status, 0) << off.err;
  EXPECT_NE(off.out.find("calibration: off"), std::string::npos) << off.out;

  CliRun first = duet("calibrate --device cpu:0", cache);
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_NE(first.out.find("measured now"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("matmul"), std::string::npos) << first.out;
  // On a machine so busy that a kernel ran far slower than the device's peaks allow, the
  // measurement is doubted (Calibration::doubt): not used, and cached as not used, so the next
  // process does not measure again either way.
  EXPECT_TRUE(fs::exists(path("cache/calibration.json"))) << first.out;
  CliRun again = duet("calibrate --device cpu:0 --save " + path("fixed.json"), cache);
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.out.find("source: cache"), std::string::npos) << again.out;
  CliRun fixed = duet("calibrate --device cpu:0", "DUET_CALIBRATION=" + path("fixed.json"));
  EXPECT_NE(fixed.out.find("source: fixed"), std::string::npos) << fixed.out;
  CliRun refresh = duet("calibrate --device cpu:0 --refresh", cache);
  EXPECT_NE(refresh.out.find("measured now"), std::string::npos) << refresh.out;
  // A plan on this machine says what its estimates rest on (the fixed file has the CPU only,
  // unless its measurement was doubted: then nothing was saved).
  CliRun plan = duet("plan " + write("g.json", kGraph) + " --explain",
                     "DUET_CALIBRATION=" + path("fixed.json"));
  EXPECT_EQ(plan.status, 0) << plan.err;
  if (again.out.find("not used") == std::string::npos) {
    EXPECT_NE(plan.out.find("cost model: measured (fixed"), std::string::npos) << plan.out;
  }
}

TEST_F(Cli, PlanForATuringProfileExplainsTheFallbackToFp16TiledAttention) {
  const std::string g = write("attn.json", kBf16Attention);
  CliRun r = duet("plan " + g + " --profile rtx2080ti --explain");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("tiled"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("flash skipped"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("requires sm_80"), std::string::npos) << r.out;
}

TEST_F(Cli, PlanForTwoProfilesPicksTheAmpereCardForBf16Flash) {
  const std::string g = write("attn.json", kBf16Attention);
  CliRun r = duet("plan " + g + " --profile rtx2080ti,rtx3090 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  bool seen = false;
  for (const auto& s : j["steps"])
    if (s["kind"] == "kernel" && s["op"] == "attention") {
      seen = true;
      EXPECT_EQ(s["device"], "cuda:1") << s.dump();
      EXPECT_EQ(s["tier"], "flash") << s.dump();
      EXPECT_EQ(s["precision"], "bf16") << s.dump();
    }
  EXPECT_TRUE(seen) << r.out;
  EXPECT_EQ(j["devices"].size(), 2u);
}

TEST_F(Cli, PlanOnThisMachinePrintsOneLinePerOp) {
  const std::string g = write("tiny.json", kGraph);
  CliRun r = duet("plan " + g);
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* op : {"scale", "relu", "sub"})
    EXPECT_NE(r.out.find(op), std::string::npos) << op << "\n" << r.out;
  EXPECT_NE(r.out.find("policy: (none)"), std::string::npos) << r.out;
}

TEST_F(Cli, PolicyFromTheEnvironmentIsUsedAndSaidSo) {
  const std::string g = write("attn.json", kBf16Attention);
  CliRun r = duet("plan " + g + " --profile rtx3090", "DUET_POLICY='deny=flash'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("policy: deny=flash (from DUET_POLICY)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(" flash "), std::string::npos) << r.out;
}

TEST_F(Cli, PolicyFlagWinsOverTheEnvironmentAndSaysSo) {
  const std::string g = write("attn.json", kBf16Attention);
  CliRun r =
      duet("plan " + g + " --profile rtx3090 --policy 'precision=f32'", "DUET_POLICY='deny=flash'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("from --policy, which wins over DUET_POLICY='deny=flash'"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(" f32 "), std::string::npos) << r.out;
}

TEST_F(Cli, MalformedPolicyIsOneLineNamingTheTerm) {
  const std::string g = write("tiny.json", kGraph);
  CliRun r = duet("plan " + g + " --policy 'deny=cdua.flash'");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("cdua"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--policy"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
  CliRun env = duet("plan " + g, "DUET_POLICY='precision=f8'");
  EXPECT_EQ(env.status, 2);
  EXPECT_NE(env.err.find("DUET_POLICY"), std::string::npos) << env.err;
}

TEST_F(Cli, UnknownProfileIsNamedWithTheKnownOnes) {
  const std::string g = write("tiny.json", kGraph);
  CliRun r = duet("plan " + g + " --profile rtx9999");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("rtx9999"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rtx2080ti"), std::string::npos) << r.err;
}

TEST_F(Cli, MissingAndMalformedGraphFilesAreNamed) {
  CliRun missing = duet("plan " + path("nope.json"));
  EXPECT_EQ(missing.status, 2);
  EXPECT_EQ(lines(missing.err), 1) << missing.err;
  EXPECT_NE(missing.err.find("nope.json"), std::string::npos) << missing.err;

  CliRun broken = duet("plan " + write("broken.json", "{\"format\": \"duet-graph\", "));
  EXPECT_EQ(broken.status, 2);
  EXPECT_EQ(lines(broken.err), 1) << broken.err;
  EXPECT_NE(broken.err.find("broken.json"), std::string::npos) << broken.err;

  std::string bad_op = kGraph;
  bad_op.replace(bad_op.find("\"relu\""), 6, "\"conv\"");
  CliRun op = duet("run " + write("badop.json", bad_op));
  EXPECT_EQ(op.status, 2);
  EXPECT_EQ(lines(op.err), 1) << op.err;
  EXPECT_NE(op.err.find("conv"), std::string::npos) << op.err;
}

TEST_F(Cli, PlanThatNoDeviceCanRunFailsNamingWhy) {
  const std::string g = write("tiny.json", kGraph);
  CliRun r = duet("plan " + g + " --policy 'deny=cpu,vulkan,cuda'");
  EXPECT_EQ(r.status, 2) << "an impossible override is bad input";
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("no device"), std::string::npos) << r.err;
}

// ---- run ---------------------------------------------------------------------------------

TEST_F(Cli, RunTakesSafetensorsInAndOutAndPrintsEveryOp) {
  const std::string g = write("tiny.json", kGraph);
  ASSERT_TRUE(duet::write_safetensors(path("in.safetensors"),
                                      {{"x", f32({2, 3}, {1, -2, 3, 0.25f, 4, -0.5f})}})
                  .ok());
  CliRun r = duet("run " + g + " --inputs " + path("in.safetensors") + " --outputs " +
                  path("out.safetensors") + " --json " + path("run.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* col : {"x2", "scale", "relu", "sub", "f32", "us"})
    EXPECT_NE(r.out.find(col), std::string::npos) << col << "\n" << r.out;
  auto out = duet::load_safetensors(path("out.safetensors"));
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(out->count("y"), 1u);
  const float want[] = {1.5f, 1, 4, 0, 9, -2};  // relu(2x) - b
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out->at("y").data<float>()[i], want[i]) << i;
  std::ifstream f(path("run.json"));
  auto j = nlohmann::json::parse(f);
  int kernels = 0;
  for (const auto& s : j["steps"]) kernels += s["kind"] == "kernel";
  EXPECT_EQ(kernels, 3) << j.dump(2);
}

TEST_F(Cli, RunWithoutInputsUsesRandomValuesAndSaysSo) {
  const std::string g = write("tiny.json", kGraph);
  CliRun r = duet("run " + g + " --policy device=cpu --repeats 2");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("inputs: random"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cpu:0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("output y f32[2,3]"), std::string::npos) << r.out;
}

TEST_F(Cli, MalformedSafetensorsInputsAreNamed) {
  const std::string g = write("tiny.json", kGraph);
  const std::string junk = write("junk.safetensors", std::string("\x08\0\0\0\0\0\0\0{bad", 12));
  CliRun r = duet("run " + g + " --inputs " + junk);
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("junk.safetensors"), std::string::npos) << r.err;

  CliRun missing = duet("run " + g + " --inputs " + path("absent.safetensors"));
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("absent.safetensors"), std::string::npos) << missing.err;
}

TEST_F(Cli, InputsThatDoNotMatchTheGraphAreNamed) {
  const std::string g = write("tiny.json", kGraph);
  ASSERT_TRUE(duet::write_safetensors(path("wrong.safetensors"), {{"z", f32({1}, {1})}}).ok());
  CliRun r = duet("run " + g + " --inputs " + path("wrong.safetensors"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("'z'"), std::string::npos) << r.err;
  ASSERT_TRUE(duet::write_safetensors(path("none.safetensors"), {}).ok());
  CliRun none = duet("run " + g + " --inputs " + path("none.safetensors"));
  EXPECT_EQ(none.status, 2);
  EXPECT_NE(none.err.find("no tensor 'x'"), std::string::npos) << none.err;
}

TEST_F(Cli, RunThatCannotWriteItsOutputsLeavesNoFile) {
  const std::string g = write("tiny.json", kGraph);
  const std::string out = path("no-such-dir/out.safetensors");
  CliRun r = duet("run " + g + " --outputs " + out);
  EXPECT_EQ(r.status, 2) << "refused before any work";
  EXPECT_NE(r.err.find("--outputs '" + out + "'"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "") << "nothing ran";
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(files(), std::vector<std::string>{"tiny.json"});
}

TEST_F(Cli, RunOnAnUnknownDeviceIsRefused) {
  const std::string g = write("tiny.json", kGraph);
  CliRun r = duet("run " + g + " --policy device=vulkan:9");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("vulkan:9"), std::string::npos) << r.err;
}

// ---- bad input: bounded, refused with exit 2, never clobbering ----------------------------

TEST_F(Cli, AnOutputThatIsNotARegularFileIsRefusedBeforeAnyWork) {
  const std::string g = write("tiny.json", kGraph);
  // A fifo stands for every node that is not a regular file (/dev/full, a socket): it stays.
  const std::string fifo = path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_directories(path("folder"));
  for (const std::string& target : {fifo, path("folder"), std::string("/dev/null")}) {
    for (const char* option : {"--outputs", "--json"}) {
      CliRun r = duet("run " + g + " " + option + " " + target);
      EXPECT_EQ(r.status, 2) << option << " " << target << "\n" << r.err;
      EXPECT_EQ(lines(r.err), 1) << r.err;
      EXPECT_NE(r.err.find(std::string(option) + " '" + target + "'"), std::string::npos) << r.err;
      EXPECT_EQ(r.out, "") << "nothing ran";
    }
  }
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_TRUE(fs::is_directory(path("folder")));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  CliRun check = duet("check --device cpu:0 --op relu --json " + fifo);
  EXPECT_EQ(check.status, 2) << check.err;
  EXPECT_NE(check.err.find("a fifo"), std::string::npos) << check.err;
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_EQ(files(), (std::vector<std::string>{"fifo", "folder", "tiny.json"}));
}

TEST_F(Cli, AnOutputThroughASymbolicLinkReplacesTheFileItNamesAndKeepsTheLink) {
  const std::string g = write("tiny.json", kGraph);
  write("real.json", "old");
  fs::create_symlink("real.json", path("link.json"));
  CliRun r = duet("run " + g + " --json " + path("link.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(path("link.json")));
  EXPECT_NE(slurp(path("real.json")).find("\"steps\""), std::string::npos);
  EXPECT_EQ(files(), (std::vector<std::string>{"link.json", "real.json", "tiny.json"}));
}

TEST_F(Cli, OversizedDeclarationsAreExitTwoBeforeAllocation) {
  // A constant of 2^43 elements with three values: refused on the count, under plan as well.
  const std::string big_const = write("c.json", R"({"format": "duet-graph", "version": 1,
    "name": "c", "inputs": [{"name": "x", "dtype": "f32", "shape": [8]}],
    "constants": [{"name": "c", "dtype": "f32", "shape": [8, 1099511627776], "values": [1, 2, 3]}],
    "nodes": [{"name": "y", "op": "add", "inputs": ["x", "x"]}], "outputs": ["y"]})");
  for (const char* cmd : {"plan ", "run "}) {
    CliRun r = duet(cmd + big_const);
    EXPECT_EQ(r.status, 2) << cmd << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("constant 'c' values"), std::string::npos) << r.err;
  }
  // An input of 1 TiB and no --inputs: the random values are refused before they are drawn.
  const std::string big_input = write("i.json", R"({"format": "duet-graph", "version": 1,
    "name": "i", "inputs": [{"name": "x", "dtype": "f32", "shape": [65536, 65536, 64]}],
    "nodes": [{"name": "y", "op": "add", "inputs": ["x", "x"]}], "outputs": ["y"]})");
  CliRun r = duet("run " + big_input + " --policy device=cpu");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("input 'x' f32[65536,65536,64]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("this machine's memory"), std::string::npos) << r.err;
  // A folder, a device and a fifo as --inputs: named, never read without bound.
  const std::string g = write("tiny.json", kGraph);
  for (const std::string& inputs : {dir_.string(), std::string("/dev/zero")}) {
    CliRun in = duet("run " + g + " --inputs " + inputs);
    EXPECT_EQ(in.status, 2) << inputs << "\n" << in.err;
    EXPECT_EQ(lines(in.err), 1) << in.err;
    EXPECT_NE(in.err.find("'" + inputs + "'"), std::string::npos) << in.err;
  }
}

TEST_F(Cli, GraphFilesAreReadWithinACap) {
  // /dev/zero and a folder as the graph: named at once, never read forever.
  for (const std::string& graph : {std::string("/dev/zero"), dir_.string()}) {
    CliRun r = duet("plan " + graph + " --profile h100");
    EXPECT_EQ(r.status, 2) << graph << "\n" << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(graph), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("malformed JSON"), std::string::npos) << r.err;
  }
  // A graph file larger than the cap (256 MiB) is refused from its size, before it is read.
  {
    std::ofstream f(path("huge.json"));
    f << "{";
  }
  fs::resize_file(path("huge.json"), (uint64_t{256} << 20) + 1);
  CliRun huge = duet("plan " + path("huge.json") + " --profile h100");
  EXPECT_EQ(huge.status, 2) << huge.err;
  EXPECT_NE(huge.err.find("at most 256 MiB"), std::string::npos) << huge.err;
}

TEST_F(Cli, AnInputOfTheWrongDtypeOrShapeNamesTheFileAndExitsTwo) {
  const std::string g = write("tiny.json", kGraph);
  duet::HostTensor i32 = duet::HostTensor::empty(duet::DType::i32, std::vector<int64_t>{2, 3});
  for (int i = 0; i < 6; ++i) i32.data<int32_t>()[i] = i + 1;
  ASSERT_TRUE(duet::write_safetensors(path("dtype.safetensors"), {{"x", i32}}).ok());
  CliRun dtype = duet("run " + g + " --inputs " + path("dtype.safetensors"));
  EXPECT_EQ(dtype.status, 2) << dtype.err;
  EXPECT_EQ(lines(dtype.err), 1) << dtype.err;
  EXPECT_NE(dtype.err.find("inputs file '" + path("dtype.safetensors") + "'"), std::string::npos)
      << dtype.err;
  EXPECT_NE(dtype.err.find("expected f32[2,3]"), std::string::npos) << dtype.err;
  EXPECT_NE(dtype.err.find("got i32[2,3]"), std::string::npos) << dtype.err;

  ASSERT_TRUE(
      duet::write_safetensors(path("shape.safetensors"), {{"x", f32({3, 2}, {1, 2, 3, 4, 5, 6})}})
          .ok());
  CliRun shape = duet("run " + g + " --inputs " + path("shape.safetensors"));
  EXPECT_EQ(shape.status, 2) << "reported, not planned again:\n" << shape.out;
  EXPECT_NE(shape.err.find("got f32[3,2]"), std::string::npos) << shape.err;
}

TEST_F(Cli, FieldsAreNotCalledTensorsAndEmptyPolicyTermsAreRefused) {
  std::string v9 = kGraph;
  v9.replace(v9.find("\"version\": 1"), 12, "\"version\": \"x\"");
  CliRun version = duet("plan " + write("v.json", v9) + " --profile h100");
  EXPECT_EQ(version.status, 2) << version.err;
  EXPECT_NE(
      version.err.find("graph file '" + path("v.json") + "': field 'version': expected an integer"),
      std::string::npos)
      << version.err;
  EXPECT_EQ(version.err.find("tensor 'graph file"), std::string::npos) << version.err;

  const std::string g = write("tiny.json", kGraph);
  for (const char* policy : {"deny=vulkan;;precision=f32", ";deny=vulkan", "deny=vulkan;"}) {
    CliRun r = duet("plan " + g + " --profile h100 --policy '" + policy + "'");
    EXPECT_EQ(r.status, 2) << policy << "\n" << r.err;
    EXPECT_NE(r.err.find("an empty term"), std::string::npos) << r.err;
  }
}

TEST_F(Cli, ConstantsThatOverflowTheirDtypeAreRefused) {
  std::string g = kGraph;
  g.replace(g.find("[0.5, -1, 2]"), 12, "[0.5, 1e39, 2]");
  CliRun r = duet("plan " + write("o.json", g) + " --profile h100");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("constant 'b' values[1]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1e+39"), std::string::npos) << r.err;
  // "inf" says so on purpose, and the largest f32 written shortest reads back as itself.
  g = kGraph;
  g.replace(g.find("[0.5, -1, 2]"), 12, "[\"inf\", 3.4028235e38, -3.4028235e38]");
  EXPECT_EQ(duet("plan " + write("i.json", g) + " --profile h100").status, 0);
}

// Random inputs are drawn inside the domain of the ops that read them (log's input positive, here
// through a reshape); a value that leaves an op's domain inside the graph (sqrt of -z)
// is NaN in the reference too, said once and not counted against the devices.
TEST_F(Cli, RandomInputsRespectTheDomainOfTheOpsReadingThem) {
  const std::string g = write("log.json", R"({"format": "duet-graph", "version": 1, "name": "lg",
    "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]},
               {"name": "z", "dtype": "f32", "shape": [2, 3]}],
    "nodes": [{"name": "r", "op": "reshape", "inputs": ["x"], "attrs": {"shape": [3, 2]}},
              {"name": "l", "op": "log", "inputs": ["r"]},
              {"name": "d", "op": "scale", "inputs": ["z"], "attrs": {"alpha": -1}},
              {"name": "q", "op": "sqrt", "inputs": ["d"]}],
    "outputs": ["l", "q"]})");
  CliRun r = duet("run " + g + " --policy device=cpu");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("output l f32[3,2]"), std::string::npos) << r.out;
  const std::string l = r.out.substr(r.out.find("output l"));
  EXPECT_EQ(l.substr(0, l.find('\n')).find("not finite"), std::string::npos) << r.out;
  r = duet("check " + g + " --device cpu:0");
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("FIRST DIVERGENCE"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("log 'l' is NaN"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("undefined: sqrt 'q' is NaN in the float64 reference"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("1 run on 1 device: 1 within tolerance"), std::string::npos) << r.out;
}

// ---- ONNX models --------------------------------------------------------------------------

#ifdef DUET_TEST_ONNX_MODELS
std::string onnx_model(const std::string& file) {
  return std::string(DUET_TEST_ONNX_MODELS) + "/" + file;
}

TEST_F(Cli, RunsAnOnnxModelOnItsInputsFile) {
  CliRun r = duet("run " + onnx_model("bert_layer.onnx") + " --inputs " +
                  onnx_model("bert_layer.inputs.safetensors") + " --outputs " + path("y.st"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("embedding"), std::string::npos) << r.out;  // int64 ids became i32
  auto got = duet::load_safetensors(path("y.st"));
  auto want = duet::load_safetensors(onnx_model("bert_layer.outputs.safetensors"));
  ASSERT_TRUE(got.ok() && want.ok());
  const std::vector<double> g = got->at("y").to_doubles(), w = want->at("y").to_doubles();
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], 1e-4) << i;
}

TEST_F(Cli, ChecksAnOnnxModelOpByOp) {
  CliRun r = duet("check " + onnx_model("gpt2_block.onnx") + " --inputs " +
                  onnx_model("gpt2_block.inputs.safetensors") + " --json " + path("r.json"));
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("gelu"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FIRST DIVERGENCE"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(slurp(path("r.json")));
  ASSERT_GE(j["runs"].size(), 1u);
  for (const auto& run : j["runs"]) {
    EXPECT_TRUE(run["first_failure"].is_null()) << run.dump();
    EXPECT_GT(run["ops"].size(), 10u);
  }
}

TEST_F(Cli, AnOnnxOpDuetDoesNotMapIsAnErrorNamingItAndExitsTwo) {
  // The GPT-2 block with its Softmax renamed NonZero (same length: still a valid protobuf).
  std::string bytes = slurp(onnx_model("gpt2_block.onnx"));
  const std::string op_type("\x22\x07Softmax", 9);  // NodeProto field 4, 7 bytes
  const size_t at = bytes.find(op_type);
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at + 2, 7, "NonZero");
  const std::string m = write("hard.onnx", bytes);
  for (const char* cmd : {"plan ", "run ", "check "}) {
    CliRun r = duet(cmd + m);
    EXPECT_EQ(r.status, 2) << cmd << r.err;
    EXPECT_NE(r.err.find("'NonZero'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("opset 17"), std::string::npos) << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;
  }
}

TEST_F(Cli, SymbolicDimensionsComeFromDim) {
  CliRun r = duet("plan " + onnx_model("gpt2_block.onnx") + " --dim batch=3,sequence=5 --explain");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("f32[3,5,32]"), std::string::npos) << r.out;
  CliRun one = duet("plan " + onnx_model("gpt2_block.onnx"));
  EXPECT_EQ(one.status, 0) << one.err;
  EXPECT_NE(one.err.find("'batch': set to 1"), std::string::npos) << one.err;
  // A size for a dimension the model does not have, or a size that is not one, names the dim.
  r = duet("plan " + onnx_model("gpt2_block.onnx") + " --dim batch=2,seqence=5");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("'seqence'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("its symbolic dimensions: batch, sequence"), std::string::npos) << r.err;
  for (const char* bad :
       {"batch=0", "batch=-2", "batch=99999999999999999999", "batch=2x", "batch=2 --dim batch=3"}) {
    r = duet("plan " + onnx_model("gpt2_block.onnx") + " --dim " + bad);
    EXPECT_EQ(r.status, 2) << bad << ": " << r.err;
    EXPECT_NE(r.err.find("dimension 'batch'"), std::string::npos) << r.err;
  }
  EXPECT_EQ(duet("plan " + write("tiny.json", kGraph) + " --dim batch=2").status, 2);
  EXPECT_EQ(duet("check " + onnx_model("gpt2_block.onnx") + " --op matmul").status, 2);
}
#endif

// duet quantize: a safetensors file's float matrix becomes blocks (read back as the quantizer's
// values), a vector stays as it was; a --type that is no block format exits 2.
TEST_F(Cli, QuantizeWritesTheFloatMatricesOfAFileAsBlocks) {
  duet::HostTensor w = duet::HostTensor::empty(duet::DType::f32, std::vector<int64_t>{4, 64});
  duet::HostTensor n = duet::HostTensor::empty(duet::DType::f32, std::vector<int64_t>{64});
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = 0.01f * static_cast<float>(i % 13);
  for (int64_t i = 0; i < n.numel(); ++i) n.data<float>()[i] = 1.0f;
  ASSERT_TRUE(duet::write_safetensors(path("m.safetensors"), {{"w", w}, {"n", n}}).ok());
  CliRun r = duet("quantize " + path("m.safetensors") + " " + path("q.gguf") + " --type q4_0");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("1 of 2 tensors quantized to q4_0"), std::string::npos) << r.out;
  auto f = duet::read_gguf(path("q.gguf"));
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto qw = f->tensor("w");
  ASSERT_TRUE(qw.ok());
  EXPECT_EQ(qw->dtype(), duet::DType::q4_0);
  EXPECT_EQ(qw->to_doubles(), duet::quantize(w, duet::DType::q4_0)->to_doubles());
  auto qn = f->tensor("n");
  ASSERT_TRUE(qn.ok());
  EXPECT_EQ(qn->dtype(), duet::DType::f32);
  CliRun bad = duet("quantize " + path("m.safetensors") + " " + path("x.gguf") + " --type f16");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("a block format"), std::string::npos) << bad.err;
}

// duet gguf: a file's header, metadata and tensors in duet's shapes; malformed files exit 2.
TEST_F(Cli, GgufListsWhatAFileHolds) {
  duet::HostTensor f = duet::HostTensor::empty(duet::DType::f32, std::vector<int64_t>{3, 256});
  for (int64_t i = 0; i < f.numel(); ++i) f.data<float>()[i] = 0.01f * static_cast<float>(i % 7);
  auto q = duet::quantize(f, duet::DType::q4_k);
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(duet::write_gguf(path("m.gguf"),
                               {{"general.architecture", duet::GgufValue::of_string("llama")}},
                               {{"blk.0.ffn_up.weight", *q}})
                  .ok());
  CliRun r = duet("gguf " + path("m.gguf"));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("general.architecture"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"llama\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("blk.0.ffn_up.weight  q4_k"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[3,256]"), std::string::npos) << r.out;
  CliRun j = duet("gguf --json " + path("m.gguf"));
  ASSERT_EQ(j.status, 0) << j.err;
  auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["tensors"][0]["type"], "q4_k");
  EXPECT_EQ(doc["tensors"][0]["shape"], nlohmann::json::array({3, 256}));
  const std::string bad = write("bad.gguf", "GGUF\x03\x00\x00\x00");
  CliRun b = duet("gguf " + bad);
  EXPECT_EQ(b.status, 2);
  EXPECT_NE(b.err.find("bad.gguf"), std::string::npos) << b.err;
  EXPECT_EQ(std::count(b.err.begin(), b.err.end(), '\n'), 1) << b.err;
}

}  // namespace
