// The `duet` command's subcommands. Each file adds one subcommand to the app; the action it
// returns runs when that subcommand was given and returns the process exit status:
// 0 success, 1 the work failed (a check failed, a graph cannot be planned or run), 2 bad input
// (unknown device, op, profile, malformed file or policy), 70 an internal error.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>

namespace duet::cli {

struct Command {
  CLI::App* app = nullptr;
  std::shared_ptr<std::function<int()>> run;
};

Command add_devices(CLI::App& app);
Command add_check(CLI::App& app);
Command add_plan(CLI::App& app);
Command add_run(CLI::App& app);
Command add_bench(CLI::App& app);
Command add_calibrate(CLI::App& app);
Command add_gguf(CLI::App& app);
Command add_ops(CLI::App& app);
Command add_convert(CLI::App& app);
Command add_quantize(CLI::App& app);
Command add_inputs(CLI::App& app);

// Prints "duet <command>: <message>" on stderr and returns `status`.
int fail(const CLI::App& command, const std::string& message, int status = 1);

}  // namespace duet::cli
