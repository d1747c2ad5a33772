// Patterns that exporters spell out op by op and duet runs as one op: GELU (erf and tanh forms,
// as PyTorch writes them below opset 20), SiLU (x * sigmoid(x)), attention
// (softmax(q @ kt * scale + mask) @ v, from opset 13, the mask added or a masked_fill's Where),
// LayerNorm and RMSNorm written with ReduceMean, Pow and Sqrt (below opset 17), and a Conv whose
// output only a BatchNormalization reads (the norm folded into its weights when they are known).
// Each match becomes one node of the domain
// kFusedDomain, reading the pattern's inputs and writing its output; a pattern whose inner values
// are read elsewhere or are graph outputs is left as it is.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <onnx/onnx_pb.h>

namespace duet::onnx_import {

inline constexpr const char* kFusedDomain = "duet.fused";

// The op types the fusion pass gives its nodes that ONNX does not define with the same meaning:
// ONNX's own Attention (opset 23) takes K untransposed and scales by 1/sqrt(D) by default;
// Silu and RmsNormalization are not ONNX op types (ONNX's is RMSNormalization). A node of
// ONNX's domain with one of these types is not mapped, not read as the fused pattern.
inline bool fused_only(std::string_view op_type) {
  return op_type == "Attention" || op_type == "Silu" || op_type == "RmsNormalization" ||
         op_type == "ConvBatchNormalization";
}

class Array;
// The data of an initializer already read, by name (nullptr when there is none).
using KnownLookup = std::function<const Array*(const std::string&)>;

// The graph's nodes (moved out of `g`) with the patterns replaced; a note per pattern kind.
std::vector<onnx::NodeProto> fuse(onnx::GraphProto& g, int opset, const KnownLookup& known,
                                  std::vector<std::string>* notes);

}  // namespace duet::onnx_import
