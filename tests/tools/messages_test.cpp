// What the `duet` command says when something is wrong: each exit status of docs/cli.md's table,
// errors on one line naming what the thing is, unknown values listed with the valid ones, bad
// environment values warned about once, and a device's record saved as a profile that loads.
#include <string>

#include <nlohmann/json.hpp>

#include "tools/cli_fixture.h"

namespace {

using duet_cli_test::Cli;
using duet_cli_test::CliRun;
using duet_cli_test::kBf16Attention;
using duet_cli_test::lines;
namespace fs = std::filesystem;

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// ---- exit status: 0 success, 1 the work failed, 2 bad input --------------------------------

TEST_F(Cli, ExitZeroWhenTheWorkIsDone) {
  const std::string g = write("a.json", kBf16Attention);
  CliRun r = duet("plan " + g + " --profile rtx3090");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST_F(Cli, ExitOneWhenAValidGraphCannotBePlannedOnTheDevices) {
  // 43 GB tensors on a 24 GB card, no policy: valid input, work that cannot be done.
  std::string big = kBf16Attention;
  for (size_t at = big.find("[1, 8, 128, 64]"); at != std::string::npos;
       at = big.find("[1, 8, 128, 64]"))
    big.replace(at, 15, "[64, 32, 4096, 2560]");
  CliRun r = duet("plan " + write("big.json", big) + " --profile rtx3090");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("memory"), std::string::npos) << r.err;
}

TEST_F(Cli, ExitTwoForAnImpossibleOverrideOnOneLineNamingTheOp) {
  // The README's example: bf16 forced onto a Turing card, which has no bf16.
  const std::string g = write("a.json", kBf16Attention);
  CliRun r = duet("plan " + g + " --profile rtx2080ti --policy 'device=cuda:0;precision=bf16'");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("attention 'attn'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cuda:0 (rtx2080ti): "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("flash bf16: flash attention: requires sm_80, device is sm_75"),
            std::string::npos)
      << r.err;
  // The same through DUET_POLICY.
  r = duet("plan " + g + " --profile rtx2080ti", "DUET_POLICY='device=cuda:0;precision=bf16'");
  EXPECT_EQ(r.status, 2) << r.err;
}

// duet check MODEL under a policy no placement satisfies is bad input, as for plan and run (each
// device's run used to be "not run" and the exit 1); so is a choice of ops and dtypes without a
// case. A policy that only some devices' runs satisfy is not.
TEST_F(Cli, ExitTwoForACheckThatNoPlacementOrCaseCanSatisfy) {
  const std::string g = write("tiny.json", duet_cli_test::kGraph);
  for (const char* policy : {"device=cuda:7", "deny=cpu"}) {
    CliRun r = duet("check " + g + " --device cpu:0 --policy " + policy);
    EXPECT_EQ(r.status, 2) << policy << ": " << r.out << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("leaves no device to run on: cpu:0"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  CliRun r = duet("check " + g + " --policy device=cpu");
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("1 within tolerance"), std::string::npos) << r.out;
  r = duet("check --op softmax --dtype i8");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.err.find("their cases' dtypes: bf16, f16, f32"), std::string::npos) << r.err;
}

TEST_F(Cli, ExitTwoForUnknownNamesWithTheValidOnesListed) {
  CliRun op = duet("check --op foo");
  EXPECT_EQ(op.status, 2);
  EXPECT_EQ(lines(op.err), 1) << op.err;
  for (const char* o : {"op 'foo'", "matmul", "attention", "write_slice"})
    EXPECT_NE(op.err.find(o), std::string::npos) << o << ": " << op.err;

  const std::string g = write("a.json", kBf16Attention);
  CliRun profile = duet("plan " + g + " --profile rtx9999");
  EXPECT_EQ(profile.status, 2);
  EXPECT_EQ(lines(profile.err), 1) << profile.err;
  EXPECT_NE(profile.err.find("profile 'rtx9999'"), std::string::npos) << profile.err;
  EXPECT_NE(profile.err.find("rtx2080ti"), std::string::npos) << profile.err;
  EXPECT_EQ(profile.err.find("tensor"), std::string::npos) << profile.err;

  CliRun device = duet("check --device vulkan:99");
  EXPECT_EQ(device.status, 2);
  EXPECT_NE(device.err.find("cpu:0"), std::string::npos) << device.err;

  CliRun dtype = duet("check --dtype f99");
  EXPECT_EQ(dtype.status, 2);
  EXPECT_NE(dtype.err.find("bf16"), std::string::npos) << dtype.err;
}

TEST_F(Cli, FieldsOfFilesAreCalledFields) {
  std::string v9 = R"({"format": "duet-graph", "version": 9, "name": "x", "outputs": []})";
  CliRun r = duet("plan " + write("g.json", v9));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("graph file '" + path("g.json") + "': field 'version'"), std::string::npos)
      << r.err;
  write("p.json", R"({"backend": "cpu", "name": "x", "memroy_bytes": 1, "source": "s"})");
  r = duet("plan " + write("t.json", kBf16Attention) + " --profile " + path("p.json"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("profile '" + path("p.json") + "': field 'memroy_bytes'"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("tensor"), std::string::npos) << r.err;
}

// ---- environment ----------------------------------------------------------------------------

TEST_F(Cli, BadEnvironmentValuesAreWarnedAboutOnceSayingWhatIsUsed) {
  CliRun r = duet("check --device cpu:0 --op relu",
                  "DUET_LOG=bogus DUET_CPU_THREADS=abc DUET_VULKAN_VALIDATION=maybe "
                  "DUET_PROFILES=/nonexistent-duet-profiles");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(count(r.err, "DUET_LOG='bogus'"), 1u) << r.err;
  EXPECT_NE(r.err.find("using warn"), std::string::npos) << r.err;
  EXPECT_EQ(count(r.err, "DUET_CPU_THREADS='abc'"), 1u) << r.err;
  EXPECT_NE(r.err.find("using every core"), std::string::npos) << r.err;
  EXPECT_EQ(count(r.err, "DUET_VULKAN_VALIDATION='maybe'"), 1u) << r.err;
  // Good values are used silently.
  r = duet("check --device cpu:0 --op relu", "DUET_LOG=warn DUET_CPU_THREADS=1");
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(r.err.empty()) << r.err;
}

// ---- profiles --------------------------------------------------------------------------------

TEST_F(Cli, ADeviceOfThisMachineSavedAsAProfileLoadsAndPlans) {
  CliRun r = duet("devices --profile cpu:0");
  ASSERT_EQ(r.status, 0) << r.err;
  write("mine.json", r.out);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_NE(j["source"].get<std::string>().find("duet devices"), std::string::npos);
  const std::string g = write("a.json", kBf16Attention);
  r = duet("plan " + g + " --profile " + path("mine.json"));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("cpu:0"), std::string::npos) << r.out;
  // By name from a DUET_PROFILES folder too.
  r = duet("plan " + g + " --profile mine", "DUET_PROFILES=" + dir_.string());
  EXPECT_EQ(r.status, 0) << r.err;

  // A record of `duet devices --json` as is: its id is accepted, its source must be filled in.
  r = duet("devices --json");
  ASSERT_EQ(r.status, 0);
  nlohmann::json record;
  const nlohmann::json all = nlohmann::json::parse(r.out);
  for (const auto& d : all["devices"])
    if (d["id"] == "cpu:0") record = d;
  ASSERT_TRUE(record.contains("id")) << r.out;
  write("probed.json", record.dump());
  r = duet("plan " + g + " --profile " + path("probed.json"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("field 'source'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("duet devices --profile"), std::string::npos) << r.err;
  record["source"] = "my workstation, 2026-11-24";
  write("probed.json", record.dump());
  r = duet("plan " + g + " --profile " + path("probed.json"));
  EXPECT_EQ(r.status, 0) << r.err;

  r = duet("devices --profile vulkan:99");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("vulkan:99"), std::string::npos) << r.err;
}

}  // namespace
