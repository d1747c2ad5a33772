// ONNX models in. A ModelProto (default domain, opsets 7 to 18) becomes a duet Graph: graph
// inputs keep their names (so inputs bind by the ONNX names), initializers and Constant nodes
// become constants (external data files too), and every node maps onto duet's op set. Shape
// arithmetic (Shape -> Gather -> Concat -> Reshape and the like) is folded at import, so the
// graph holds only the work done at run time. A node that cannot be mapped is an error naming
// the node, its op type and the opset, never a silent skip. docs/onnx.md lists the ops.
//
// Symbolic dimensions (dim_param) take their sizes from `input_shapes` or `dims`, else 1 (with a
// note), and the shape arithmetic is folded for them. A graph imported from a file is imported
// again from it when run (or Graph::with_input_shapes) at other input shapes; one imported from
// bytes refuses them, saying how to import it again. int64 tensors (indices, shapes) become i32,
// every value checked to fit; float64, bool, string and complex tensors are refused.
//
// Built when libonnx-dev and libprotobuf-dev are found at configure time; otherwise every call
// returns Code::unsupported saying so (onnx_supported() tells beforehand).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "duet/export.h"
#include "duet/graph.h"
#include "duet/host_tensor.h"
#include "duet/status.h"

namespace duet {

// The largest model file read: protobuf's own limit. Weights beyond it live in external data.
inline constexpr uint64_t kOnnxMaxModelBytes = (uint64_t{2} << 30) - 1;

struct DUET_API OnnxOptions {
  // Give constants their data. Planning needs only shapes: false skips the copies into the graph
  // (initializers are still read, external data included: shape arithmetic may read them).
  bool load_constants = true;
  // Sizes of symbolic dimensions by name ("batch" -> 4).
  std::map<std::string, int64_t> dims;
  // Whole shapes of graph inputs by name; they win over the model's shapes and over `dims`.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Graph inputs given their values at import: they become constants, as if they were
  // initializers, and shape arithmetic folds through them (the shape or axes that ONNX's node
  // tests feed as inputs). They are no longer inputs of the graph.
  std::map<std::string, HostTensor> frozen_inputs;
  // When not null, remarks for the user are appended (symbolic dims set to 1, patterns fused).
  std::vector<std::string>* notes = nullptr;
  // The memory that values evaluated at import (folded shape arithmetic and constants) may hold
  // at once, in bytes; 0: DUET_IMPORT_MEMORY when set, else 1 GiB. A model that needs
  // more is refused, naming the node (docs/security.md). The model's own tensors are not counted.
  uint64_t memory_budget = 0;
};

// "batch=2,sequence=7" as sizes of symbolic dimensions (the --dim syntax), or an error naming
// the term.
DUET_API Result<std::map<std::string, int64_t>> parse_onnx_dims(std::string_view text);

// Whether this build reads ONNX.
DUET_API bool onnx_supported();

// A .onnx file; external data files are read relative to its folder.
DUET_API Result<Graph> import_onnx(const std::string& path, const OnnxOptions& options = {});
// A serialised ModelProto; `base_dir` resolves external data, `what` names it in errors.
DUET_API Result<Graph> import_onnx(std::span<const std::byte> model, const std::string& base_dir,
                                   std::string_view what, const OnnxOptions& options = {});

// A serialised TensorProto (the ONNX test data format: input_0.pb, output_0.pb) as a dense host
// tensor; int64 becomes i32 when every value fits. `name` receives the tensor's name.
DUET_API Result<HostTensor> read_onnx_tensor(const std::string& path, std::string* name = nullptr);

}  // namespace duet
