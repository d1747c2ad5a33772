// Runs a program as the ranks of `mpirun -np N --oversubscribe` on this machine, for the tests
// of distributed runs: its exit status, its ranks' output (stdout and stderr) and how long it took.
#pragma once

#include <string>

namespace duet::test {

struct Launch {
  int exit_code = -1;
  std::string output;
  double seconds = 0;
};

// `env` is prefixed to the command ("DUET_DIST_TIMEOUT=1"); `args` follow the program.
Launch mpirun(int ranks, const std::string& program, const std::string& args,
              const std::string& env = {});

}  // namespace duet::test
