// The fixture of the `duet` command's tests: runs the binary, captures its streams and exit
// status, in a folder of its own per test.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace duet_cli_test {

// y = relu(x * 2) - b, x f32[2,3], b inline: exact in f32 on every device.
inline const char* const kGraph = R"({"format": "duet-graph", "version": 1, "name": "tiny",
  "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}],
  "constants": [{"name": "b", "dtype": "f32", "shape": [3], "values": [0.5, -1, 2]}],
  "nodes": [{"name": "x2", "op": "scale", "inputs": ["x"], "attrs": {"alpha": 2}},
            {"name": "r", "op": "relu", "inputs": ["x2"]},
            {"name": "y", "op": "sub", "inputs": ["r", "b"]}],
  "outputs": ["y"]})";

// Causal attention over bf16 q, k, v [1, 8, 128, 64].
inline const char* const kBf16Attention =
    R"({"format": "duet-graph", "version": 1, "name": "attention",
  "inputs": [{"name": "q", "dtype": "bf16", "shape": [1, 8, 128, 64]},
             {"name": "k", "dtype": "bf16", "shape": [1, 8, 128, 64]},
             {"name": "v", "dtype": "bf16", "shape": [1, 8, 128, 64]}],
  "nodes": [{"name": "attn", "op": "attention", "inputs": ["q", "k", "v"],
             "attrs": {"causal": true}}],
  "outputs": ["attn"]})";

namespace fs = std::filesystem;

struct CliRun {
  int status = -1;
  std::string out, err;
};

// A folder of its own for each test, removed afterwards.
class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("duet-cli-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name), std::ios::binary) << text;
    return path(name);
  }

  // Runs the duet binary with `args` (a shell-quoted string) and `env` assignments in front
  // ("DUET_POLICY=..."), capturing stdout and stderr. DUET_POLICY is unset unless given.
  CliRun duet(const std::string& args, const std::string& env = "") const {
    const std::string cmd = "env -u DUET_POLICY " + env + " " + std::string(DUET_CLI) + " " + args +
                            " >" + path(".out") + " 2>" + path(".err");
    CliRun r;
    const int rc = std::system(cmd.c_str());
    r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    r.out = slurp(path(".out"));
    r.err = slurp(path(".err"));
    return r;
  }

  static std::string slurp(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }

  // Files in the test's folder other than the captured streams.
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      const std::string n = e.path().filename().string();
      if (n != ".out" && n != ".err") out.push_back(n);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  fs::path dir_;
};

inline int lines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

}  // namespace duet_cli_test
