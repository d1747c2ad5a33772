// Planning and engines with the built-in backends: planner devices from capability profiles
// (answered by each backend's rules, built or not), and engines on this machine's devices.
#pragma once

#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "duet/engine.h"
#include "duet/plan.h"
#include "duet/registry.h"

namespace duet {

// Planner devices for capability records, with the built-in rules of each record's backend.
// Ids are numbered per backend in the order given: two CUDA profiles are cuda:0 and cuda:1.
// `labels` (optional, same length) are shown beside the ids.
DUET_API std::vector<PlanDevice> profile_devices(std::span<const DeviceCaps> caps,
                                                 std::span<const std::string> labels = {});
// The same from profile names or paths ("rtx2080ti", "my/gpu.json"), from any list of strings or
// a braced one: profile_devices({"rtx2080ti", "rtx3090"}).
DUET_API Result<std::vector<PlanDevice>> profile_devices(std::span<const std::string> names);
DUET_API Result<std::vector<PlanDevice>> profile_devices(
    std::initializer_list<std::string_view> names);

// The process's registry of this machine's devices, opened on first use.
DUET_API std::shared_ptr<Registry> shared_registry(const BackendOptions& options = {});
// An engine on every device of the shared registry, under `policy` when the program gives one
// (even an empty Policy{}: an explicit choice in the program wins), else under the DUET_POLICY
// environment variable (no overrides when unset; a malformed one is an error naming it), the
// rule of the C API's duet_engine_create and of the duet command's --policy.
DUET_API Result<std::unique_ptr<Engine>> open_engine(Graph graph,
                                                     std::optional<Policy> policy = std::nullopt);

}  // namespace duet
