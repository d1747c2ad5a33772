#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

struct CliRun {
  int status = -1;
  std::string out, err;
};

// Runs the duet binary with `args` (a shell-quoted string), capturing stdout and stderr.
CliRun duet(const std::string& args) {
  const fs::path dir = fs::temp_directory_path() / ("duet-cli-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string cmd = std::string(DUET_CLI) + " " + args + " >" + (dir / "out").string() +
                          " 2>" + (dir / "err").string();
  CliRun r;
  const int rc = std::system(cmd.c_str());
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  auto slurp = [](const fs::path& p) {
    std::ifstream f(p);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  fs::remove_all(dir);
  return r;
}

int lines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

TEST(Cli, EveryCommandHasHelp) {
  for (const char* c : {"", "devices", "check", "bench"}) {
    CliRun r = duet(std::string(c) + " --help");
    EXPECT_EQ(r.status, 0) << c;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << c;
  }
}

TEST(Cli, UnknownFlagIsOneLineOnStderrAndNonZero) {
  CliRun r = duet("devices --frobnicate");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("frobnicate"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST(Cli, UnknownDeviceIsNamed) {
  CliRun r = duet("check --device vulkan:9");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("vulkan:9"), std::string::npos) << r.err;
}

TEST(Cli, UnknownOpAndDtypeAreNamed) {
  CliRun op = duet("bench --op conv3d");
  EXPECT_EQ(op.status, 2);
  EXPECT_NE(op.err.find("conv3d"), std::string::npos) << op.err;
  CliRun dt = duet("check --dtype f8");
  EXPECT_EQ(dt.status, 2);
  EXPECT_NE(dt.err.find("f8"), std::string::npos) << dt.err;
}

TEST(Cli, DevicesListsTheCpuAndTheReasonsForMissingBackends) {
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
}

TEST(Cli, CheckWritesJsonAndPassesOnTheCpu) {
  const fs::path json =
      fs::temp_directory_path() / ("duet-check-" + std::to_string(::getpid()) + ".json");
  CliRun r = duet("check --device cpu:0 --op softmax --op matmul --json " + json.string());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("0 failed"), std::string::npos) << r.out;
  std::ifstream f(json);
  auto j = nlohmann::json::parse(f);
  EXPECT_GT(j["passed"].get<int>(), 0);
  EXPECT_EQ(j["failed"].get<int>(), 0);
  fs::remove(json);
}

TEST(Cli, AnUnwritableJsonPathFailsWithoutLeavingAPartialFile) {
  const fs::path dir = fs::temp_directory_path() / ("duet-ro-" + std::to_string(::getpid()));
  const fs::path json = dir / "missing-subdir" / "out.json";
  CliRun r = duet("check --device cpu:0 --op relu --json " + json.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("cannot write"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(json));
  EXPECT_FALSE(fs::exists(json.string() + ".partial"));
}

TEST(Cli, BenchReportsGflopsForTheCpu) {
  CliRun r = duet("bench --device cpu:0 --op add --repeats 3 --min-seconds 0");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("GFLOP/s"), std::string::npos);
  EXPECT_NE(r.out.find("add f32 2048x4096"), std::string::npos) << r.out;
}

}  // namespace
