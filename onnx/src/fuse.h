// Patterns that exporters spell out op by op and duet runs as one op: GELU (erf and tanh forms,
// as PyTorch writes them below opset 20), SiLU (x * sigmoid(x)) and attention
// (softmax(q @ kt * scale + mask) @ v, from opset 13). Each match becomes one node
// of the domain kFusedDomain, reading the pattern's input and writing its output; a pattern whose
// inner values are read elsewhere or are graph outputs is left as it is.
#pragma once

#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace duet::onnx_import {

inline constexpr const char* kFusedDomain = "duet.fused";

// The graph's nodes (moved out of `g`) with the patterns replaced; a note per pattern kind.
std::vector<onnx::NodeProto> fuse(onnx::GraphProto& g, int opset, std::vector<std::string>* notes);

}  // namespace duet::onnx_import
