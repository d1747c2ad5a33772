// Inputs for running a model: read from a .safetensors file by input name, or drawn at random.
// Shared by `duet run`, `duet check MODEL` and the tests.
#pragma once

#include <map>
#include <string>

#include "duet/graph.h"
#include "duet/host_tensor.h"

namespace duet::check {

// The tensors of an inputs .safetensors file; I64 tensors (the ids ONNX models take) become i32
// when every value fits.
Result<std::map<std::string, HostTensor>> read_inputs_file(const std::string& path);

// The graph's inputs: `given` (from the inputs file at `path`, names checked against the graph)
// or, without one, deterministic random values (floats in +-[0.05, 1], integers in the range of
// the embedding they index). `note` says which.
Result<std::map<std::string, HostTensor>> graph_inputs(
    const Graph& g, const std::map<std::string, HostTensor>* given, const std::string& path,
    std::string& note);

// Deterministic random values for every input of `g` (floats in +-[0.05, 1], integers in the range
// of the embedding they index); seed 0 gives the values graph_inputs draws.
Result<std::map<std::string, HostTensor>> random_graph_inputs(const Graph& g, uint64_t seed);

}  // namespace duet::check
