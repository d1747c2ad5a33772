// duet: see what this machine can run, check that its backends agree, plan and run graphs.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "duet/build_identity.h"
#include "duet/commands.h"

namespace duet::cli {
int fail(const CLI::App& command, const std::string& message, int status) {
  // One line, as docs/cli.md promises: a message listing reasons on lines of their own (the
  // planner's per-device refusals) is joined with "; ".
  std::string line;
  for (size_t i = 0; i < message.size(); ++i) {
    if (message[i] != '\n') {
      line += message[i];
      continue;
    }
    while (i + 1 < message.size() && message[i + 1] == ' ') ++i;
    if (!line.empty() && line.back() == ':')
      line += ' ';
    else if (i + 1 < message.size())
      line += "; ";
  }
  std::fprintf(stderr, "duet %s: %s\n", command.get_name().c_str(), line.c_str());
  return status;
}

namespace {
// Parse errors in one line, naming the subcommand: "duet check: --frobnicate: not an option
// (see duet check --help)".
std::string one_line_error(const CLI::App* app, const CLI::Error& e) {
  std::string who = "duet";
  for (const CLI::App* sub : app->get_subcommands()) who += " " + sub->get_name();
  return who + ": " + e.what() + " (see " + who + " --help)\n";
}
}  // namespace
}  // namespace duet::cli

int main(int argc, char** argv) {
  CLI::App app{"duet: one compute graph on CUDA, Vulkan and the CPU; checks that they agree"};
  app.require_subcommand(1);
  app.set_version_flag("--version", duet::build_identity().text());
  app.failure_message(duet::cli::one_line_error);
  const std::vector<duet::cli::Command> commands = {
      duet::cli::add_devices(app), duet::cli::add_check(app),   duet::cli::add_plan(app),
      duet::cli::add_run(app),     duet::cli::add_bench(app),   duet::cli::add_calibrate(app),
      duet::cli::add_gguf(app),    duet::cli::add_ops(app),     duet::cli::add_inputs(app),
      duet::cli::add_convert(app), duet::cli::add_quantize(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;  // usage error
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
