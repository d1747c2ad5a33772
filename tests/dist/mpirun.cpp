#include "mpirun.h"

#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>

namespace duet::test {

Launch mpirun(int ranks, const std::string& program, const std::string& args,
              const std::string& env) {
  // Open MPI refuses root unless told (containers, CI); the variables are harmless otherwise.
  const std::string command = "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " +
                              env + " " + DUET_MPIEXEC + " -np " + std::to_string(ranks) +
                              " --oversubscribe " + program + " " + args + " 2>&1";
  Launch out;
  const auto start = std::chrono::steady_clock::now();
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.output.append(buf.data(), n);
  const int status = pclose(pipe);
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace duet::test
