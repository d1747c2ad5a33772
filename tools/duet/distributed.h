// `duet run --distributed` and `duet plan --distributed`: the commands as ranks of an MPI run
// (docs/distributed.md). Built when MPI is (tools/duet/distributed.cpp); without it they answer
// that the build has no MPI.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "duet/common.h"

namespace duet::cli {

struct DistributedArgs {
  ModelArgs model;
  std::string inputs_path, outputs_path;
  ChosenPolicy policy;
  bool every_rank = false;
  bool pipelined = false;  // duet run: the repeats pipelined over the stages
  bool explain = false;
  bool plan_only = false;  // duet plan: print the stage plan and stop
  int repeats = 1;
  double timeout_s = 0;  // 0: the default (DUET_DIST_TIMEOUT, else 120 s)
};

// Runs the command as this process's rank; returns its exit status (ends every rank on an error).
int run_distributed(const CLI::App& cmd, const DistributedArgs& args);

// Adds --distributed, --every-rank, --pipelined and --timeout to a command.
void add_distributed_options(CLI::App& cmd, bool& distributed, DistributedArgs& args);

}  // namespace duet::cli
