// The hostile-input reproducers of issue 32 (tools/hostile/hostile.py writes them, small or
// sparse files), each run through the `duet` command: the exit status expected (2 for a file at
// fault), the one-line error naming what was wrong, a short stderr, and never a crash or a hang
// (each run is under `timeout`: exit 124 means it hung).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

std::string in_quotes(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

TEST(Hostile, EveryReproducerIsAClearErrorNeverACrashOrAHang) {
  const fs::path dir = fs::temp_directory_path() / ("duet-hostile-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string make = "/usr/bin/python3 " + std::string(DUET_TOOLS_DIR) +
                           "/hostile/hostile.py " + in_quotes(dir.string());
  ASSERT_EQ(std::system(make.c_str()), 0) << make;
  const auto cases = nlohmann::json::parse(slurp(dir / "cases.json"));
  ASSERT_GT(cases.size(), 20u);
  int ran = 0;
  for (const auto& c : cases) {
    const std::string name = c["name"];
#ifndef DUET_TEST_ONNX_MODELS
    if (c["onnx"].get<bool>()) continue;  // this build reads no ONNX
#endif
    SCOPED_TRACE("case " + name);
    std::string cmd = "cd " + in_quotes(dir.string()) + " && ";
    if (c["stdin"] == "blanks") cmd += "yes ' ' | ";
    cmd += "env -u DUET_POLICY";
    for (const auto& [k, v] : c["env"].items()) cmd += " " + k + "=" + in_quotes(v);
    cmd += " timeout -s KILL 60 " + std::string(DUET_CLI);
    for (const auto& a : c["args"]) cmd += " " + in_quotes(a);
    if (c["stdin"].is_string() && c["stdin"] != "blanks")
      cmd += " < " + in_quotes(c["stdin"]);
    else if (c["stdin"].is_null())
      cmd += " < /dev/null";
    cmd += " > " + in_quotes((dir / ".out").string()) + " 2> " + in_quotes((dir / ".err").string());
    const int rc = std::system(cmd.c_str());
    const std::string out = slurp(dir / ".out"), err = slurp(dir / ".err");
    ASSERT_TRUE(WIFEXITED(rc)) << "the shell died: " << cmd;
    const int status = WEXITSTATUS(rc);
    EXPECT_NE(status, 137) << "hung (killed after 60 s)";
    EXPECT_LT(status, 128) << "crashed: signal " << status - 128 << "\n" << err.substr(0, 2000);
    EXPECT_EQ(status, c["status"].get<int>()) << err.substr(0, 2000);
    EXPECT_NE(err.find(c["stderr"].get<std::string>()), std::string::npos) << err.substr(0, 2000);
    if (c.contains("stdout"))
      EXPECT_NE(out.find(c["stdout"].get<std::string>()), std::string::npos) << out;
    EXPECT_LE(err.size(), c.value("max_stderr", size_t{4096})) << err.substr(0, 2000);
    ++ran;
  }
  EXPECT_GT(ran, 10);
  fs::remove_all(dir);
}

}  // namespace
