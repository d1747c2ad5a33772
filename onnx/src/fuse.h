// Patterns that exporters spell out op by op and duet runs as one op: GELU (erf and tanh forms,
// as PyTorch writes them below opset 20), SiLU (x * sigmoid(x)), attention
// (softmax(q @ kt * scale + mask) @ v, from opset 13), and LayerNorm and RMSNorm written with
// ReduceMean, Pow and Sqrt (below opset 17). Each match becomes one node of the domain
// kFusedDomain, reading the pattern's inputs and writing its output; a pattern whose inner values
// are read elsewhere or are graph outputs is left as it is.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace duet::onnx_import {

inline constexpr const char* kFusedDomain = "duet.fused";

class Array;
// The data of an initializer already read, by name (nullptr when there is none).
using KnownLookup = std::function<const Array*(const std::string&)>;

// The graph's nodes (moved out of `g`) with the patterns replaced; a note per pattern kind.
std::vector<onnx::NodeProto> fuse(onnx::GraphProto& g, int opset, const KnownLookup& known,
                                  std::vector<std::string>* notes);

}  // namespace duet::onnx_import
