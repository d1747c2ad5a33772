// duet check MODEL: a user's model checked op by op on every device and tier (check_model.cpp).
#pragma once

#include <string>
#include <vector>

#include "duet/commands.h"
#include "duet/common.h"

namespace duet::cli {

struct ModelCheckOptions {
  ModelArgs model;
  std::string inputs_path, json_path, policy;
  bool policy_given = false;
  std::vector<std::string> devices;
};

int check_model(const CLI::App& cmd, const ModelCheckOptions& o);

}  // namespace duet::cli
