// Pieces shared by the `duet` subcommands.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "check/inputs.h"
#include "duet/graph.h"
#include "duet/plan.h"
#include "duet/policy.h"
#include "duet/registry.h"

namespace duet::cli {

// The devices named by `ids` (all devices when empty), or an error naming the unknown id.
Result<std::vector<Device*>> select_devices(const Registry& reg,
                                            const std::vector<std::string>& ids);
// An error naming the first unknown op or dtype.
Status validate_ops(const std::vector<std::string>& ops);
Status validate_dtypes(const std::vector<std::string>& dtypes);
// Writes `content` to a temporary file beside `path` and renames it into place, so a failure
// never leaves a partial file that looks complete.
Status write_file_atomically(const std::string& path, const std::string& content);
// Exit status for a failed step: 2 when the input was at fault (malformed, unknown names,
// impossible arguments), 1 when valid work failed.
int exit_status_for(const Status& s);
// Exit status for a graph that could not be planned (or an engine not created) under `policy`:
// 2 when the policy is what made it impossible (the graph plans on `devices` without it: an
// impossible override is bad input), else exit_status_for(failure).
int plan_failure_status(const Graph& graph, const std::vector<PlanDevice>& devices,
                        const Policy& policy, const Status& failure);
// Whether `list` is empty (no filter) or contains `value`.
bool selected(const std::vector<std::string>& list, std::string_view value);
// Whether a case's dtypes pass a --dtypes filter: its first input's, or a block format it reads.
bool dtypes_selected(const std::vector<std::string>& list, const std::vector<TensorDesc>& inputs);

// The policy a command runs under: --policy when given (DUET_POLICY is then not read), else
// DUET_POLICY, else none. `source` says which won, in words, for the command's output.
struct ChosenPolicy {
  Policy policy;
  std::string
      source;  // "--policy", "--policy (DUET_POLICY='...' ignored)", "DUET_POLICY", "default"
  std::string line() const;  // "policy: deny=cuda.flash (from --policy)"
};
Result<ChosenPolicy> choose_policy(const std::optional<std::string>& cli_text);

// A model file, duet-graph JSON or ONNX, with an error that names the file when it cannot be read
// or parsed. ONNX only: `dims` ("batch=4") size symbolic dimensions, `inputs` (the tensors of an
// inputs file) fix the inputs' shapes, and the importer's remarks are appended to `notes`.
struct ModelArgs {
  std::string path;
  std::vector<std::string> dims;
};
Result<Graph> load_graph_file(const ModelArgs& model, bool load_constants,
                              const std::map<std::string, HostTensor>* inputs = nullptr,
                              std::vector<std::string>* notes = nullptr);
// A model ready to run, as `duet run` and `duet check MODEL` load it: the --inputs tensors read
// (when a path is given), the model with every constant's data, and its inputs (the given ones,
// else drawn at random); `notes` are the importer's remarks, `inputs_note` says where the inputs
// came from. Every error here is the user's input (exit 2).
struct LoadedModel {
  Graph graph;
  std::map<std::string, HostTensor> inputs;
  std::vector<std::string> notes;
  std::string inputs_note;
};
Result<LoadedModel> load_model_and_inputs(const ModelArgs& model, const std::string& inputs_path);

// The tensors of an --inputs argument: a .safetensors file, a folder of .npy files (one per input,
// named after it: check::npy_file_name) or one .npy file (named after the file). `source` says
// where each came from, for messages (convert.cpp).
Result<std::map<std::string, HostTensor>> read_inputs(const std::string& path,
                                                      check::InputsSource& source);

// Adds --dim to a command that reads model files.
void add_dim_option(CLI::App& cmd, ModelArgs& model);

// Splits "a,b,,c" into {"a", "b", "c"}.
std::vector<std::string> split_list(const std::vector<std::string>& items);

}  // namespace duet::cli
