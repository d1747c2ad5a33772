// duet: see what this machine can run, and check that its backends agree.
#include <cstdio>
#include <exception>
#include <vector>

#include "duet/commands.h"

namespace duet::cli {
int fail(const CLI::App& command, const std::string& message, int status) {
  std::fprintf(stderr, "duet %s: %s\n", command.get_name().c_str(), message.c_str());
  return status;
}
}  // namespace duet::cli

int main(int argc, char** argv) {
  CLI::App app{"duet: one compute graph on CUDA, Vulkan and the CPU; checks that they agree"};
  app.require_subcommand(1);
  const std::vector<duet::cli::Command> commands = {
      duet::cli::add_devices(app), duet::cli::add_check(app), duet::cli::add_bench(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (const auto& c : commands)
      if (c.app->parsed()) return (*c.run)();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "duet: internal error: %s\n", e.what());
    return 70;
  }
  return 1;
}
