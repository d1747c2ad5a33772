// Inputs for running a model: read from a .safetensors file or a folder of .npy files by input
// name, or drawn at random. Shared by `duet run`, `duet check MODEL` and the tests.
#pragma once

#include <map>
#include <string>

#include "duet/graph.h"
#include "duet/host_tensor.h"
#include "duet/safetensors.h"

namespace duet::check {

// Where given inputs came from, for messages: a .safetensors file, or .npy files (a folder of
// them, one per tensor, or one file).
struct InputsSource {
  std::string path;                          // as given
  bool folder = false;                       // a folder of .npy files
  std::map<std::string, std::string> files;  // .npy only: tensor name -> its file's name
  // "inputs file 'in.safetensors'", "inputs folder 'in'".
  std::string what() const;
  // Where a tensor was read: what(), with the file of a folder's tensor ("inputs folder 'in',
  // file 'x.npy'").
  std::string where(const std::string& tensor) const;
};

// The file name of a tensor in a folder of .npy files: bytes other than letters, digits, '.',
// '_' and '-' (and a leading '.') become %XX, so "a/b" is "a%2Fb.npy" and "../x" cannot leave the
// folder. npy_tensor_name reverses it ("a%2Fb.npy" -> "a/b").
std::string npy_file_name(const std::string& tensor);
std::string npy_tensor_name(const std::string& file_name);

// The tensors of an inputs file (a .safetensors file, or .npy arrays gathered into one); I64
// tensors (the ids ONNX models take) become i32 when every value fits.
Result<std::map<std::string, HostTensor>> inputs_from(const SafetensorsFile& f,
                                                      const InputsSource& source);
Result<std::map<std::string, HostTensor>> read_inputs_file(const std::string& path);

// The graph's inputs: `given` (read from `source`, names checked against the graph) or, without
// one, deterministic random values (floats in +-[0.05, 1], positive where an op reading them asks
// for positive values, integers in the range of the embedding they index). `note` says which.
Result<std::map<std::string, HostTensor>> graph_inputs(
    const Graph& g, const std::map<std::string, HostTensor>* given, const InputsSource& source,
    std::string& note);

// Deterministic random values for every input of `g` (as graph_inputs draws them); seed 0 gives
// the values graph_inputs draws.
Result<std::map<std::string, HostTensor>> random_graph_inputs(const Graph& g, uint64_t seed);

}  // namespace duet::check
