// Runs this test binary once more as a child process and collects the lines it prints, so that
// work which may misbehave (opening devices: a driver that crashes, hangs, or leaks at exit)
// cannot take the calling process down with it.
#pragma once

#include <string>
#include <vector>

namespace duet::test_support {

struct ChildLines {
  std::vector<std::string> lines;  // the child's standard output, line by line
  std::string failure;             // why the child did not finish cleanly; empty when it did
};

// Starts /proc/self/exe with `env` ("NAME=1") added to the environment and the arguments `args`,
// and waits at most `timeout_s` seconds for it to exit with status 0. Its standard error is the
// caller's.
ChildLines run_self(const std::string& env, const std::vector<std::string>& args, int timeout_s);

}  // namespace duet::test_support
