// The importer's working state: every ONNX value by name (known at import time, or a duet value
// computed at run time), the graph being built, and the view of one node that the op mappings
// (map_*.cpp) work through.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "array.h"
#include "duet/graph.h"
#include "duet/onnx.h"
#include "proto.h"

namespace duet::onnx_import {

// An ONNX value during import: known (its data is at hand: initializers, Constant nodes, folded
// shape arithmetic) or computed at run time by the duet value `id`. A known value used by a
// run-time op also gets an `id`: a graph constant, made once.
struct Value {
  std::shared_ptr<const Array> known;
  ValueId id;
  int elem = kUndefined;  // the ONNX element type (int64 values run as i32)
};

class Importer;

// One node as the mappings see it.
class Node {
 public:
  Node(Importer& im, const onnx::NodeProto& proto, int opset) : im_(im), p_(proto), opset_(opset) {}

  const onnx::NodeProto& proto() const { return p_; }
  std::string_view type() const { return p_.op_type(); }
  int opset() const { return opset_; }

  // Inputs. Optional inputs may be absent (an empty name, or past the end).
  size_t num_inputs() const { return static_cast<size_t>(p_.input_size()); }
  bool has(size_t i) const;
  const Value& in(size_t i) const;
  bool known(size_t i) const { return in(i).known != nullptr; }
  bool all_known() const;
  const Array& array(size_t i) const { return *in(i).known; }
  int elem(size_t i) const { return in(i).elem; }
  std::vector<int64_t> shape(size_t i) const;
  int rank(size_t i) const { return static_cast<int>(shape(i).size()); }
  // A known integer input (shapes, axes, indices), or an error saying it must be known.
  Result<std::vector<int64_t>> ints(size_t i, std::string_view what) const;
  // Input i at run time: its duet value (known values become graph constants).
  Result<ValueId> runtime(size_t i);
  const TensorDesc& desc(ValueId v) const;
  // A graph constant holding `a`, named "<output 0>/<purpose>".
  Result<ValueId> constant(Array a, std::string_view purpose);

  // Attributes.
  bool has_attr(std::string_view name) const { return attr(name) != nullptr; }
  int64_t attr_int(std::string_view name, int64_t dflt) const;
  float attr_float(std::string_view name, float dflt) const;
  std::string attr_string(std::string_view name, std::string dflt) const;
  std::optional<std::vector<int64_t>> attr_ints(std::string_view name) const;
  const onnx::AttributeProto* attr(std::string_view name) const;
  // A tensor attribute's data (external data read relative to the model).
  Result<Array> tensor_attr(const onnx::AttributeProto& a) const;

  // Outputs. An output is used when a later node reads it or it is a graph output.
  size_t num_outputs() const { return static_cast<size_t>(p_.output_size()); }
  bool output_used(size_t i) const;
  // Empty past the node's outputs (a malformed node may have none).
  const std::string& output_name(size_t i) const {
    static const std::string none;
    return i < num_outputs() ? p_.output(static_cast<int>(i)) : none;
  }

  // Adds a duet op. The value of output `out` is named after it; helpers (`purpose` given) get
  // "<output 0>/<purpose>". Errors are read from build status after the mapping returns.
  ValueId op(OpKind kind, std::vector<ValueId> inputs, OpAttrs attrs = {},
             std::string_view purpose = {}, size_t out = 0);
  // `x` viewed as `shape` (same count): a reshape view, after a dense copy when x's strides
  // cannot express it.
  ValueId reshape(ValueId x, std::vector<int64_t> shape, std::string_view purpose = {},
                  size_t out = 0);
  // The result of output i: computed at run time, or known, or input j itself (shared, not
  // copied).
  void set(size_t i, ValueId v, int elem);
  void forward(size_t i, size_t j);
  // A value evaluated at import: counted against the import's memory budget while it lives.
  void set_known(size_t i, Array a);
  // A Constant node's value: the model's own data, not counted.
  void set_constant(size_t i, Array a);
  // Whether a value of `dims` and element type `elem` may be evaluated at import: its count
  // (no overflow, at most 2^28 elements) and its bytes plus `work` bytes per element of working
  // memory within what the import's memory budget has left. Every fold asks before it allocates.
  Status room_for(const std::vector<int64_t>& dims, int elem, int work = 8) const;

  // The mapping's errors: `unsupported` for what duet cannot do (yet), `invalid` for a model
  // that breaks the ONNX specification.
  Status unsupported(std::string_view why) const;
  // An import note (what `duet check` and `duet plan` print), naming this node.
  void note(std::string_view text) const;
  Status invalid(std::string_view why) const;

 private:
  Importer& im_;
  const onnx::NodeProto& p_;
  int opset_;
};

// A mapping: the op type's translation onto duet ops (or its fold, when every input is known).
using MapFn = Status (*)(Node&);
struct Mapping {
  std::string_view type;
  MapFn fn;
};
// The mappings of each family (map_math.cpp, map_shape.cpp, map_nn.cpp, map_conv.cpp).
std::span<const Mapping> math_mappings();
std::span<const Mapping> shape_mappings();
std::span<const Mapping> nn_mappings();
std::span<const Mapping> conv_mappings();

class Importer {
 public:
  Importer(std::string what, DataFolder data, const OnnxOptions& options)
      : what_(std::move(what)), data_(std::move(data)), options_(options) {}

  Result<Graph> run(onnx::ModelProto& model);
  // How the graph is made again at other input shapes (Graph::Remake); none: they are refused.
  void remake(Graph::Remake f) { remake_ = std::move(f); }

 private:
  friend class Node;

  Status read_initializers(onnx::GraphProto& g);
  Status declare_inputs(const onnx::GraphProto& g);
  Status map_node(const onnx::NodeProto& n);
  Status finish_outputs(const onnx::GraphProto& g);
  std::string shape_note() const;
  void note(std::string text);

  // A name not yet used in the duet graph: `base` itself when free, else `base#n`. A graph
  // output's name is kept for the value of that name (`owner`).
  std::string unique(const std::string& base, bool owner = false);
  ValueId add_op(OpKind kind, std::vector<ValueId> inputs, OpAttrs attrs, std::string name);
  // Value `v` as a graph constant (made once). Large data moves into the graph: the value is no
  // longer known at import, so the importer never holds a model's weights twice.
  Result<ValueId> materialize(const std::string& name, Value& v);

  std::string what_;
  DataFolder data_;      // where external data lies
  uint64_t budget_ = 0;  // what values evaluated at import may take at once
  std::shared_ptr<uint64_t> folded_ = std::make_shared<uint64_t>(0);  // what they take now
  const OnnxOptions& options_;
  Graph::Remake remake_;
  int opset_ = 0;
  std::unique_ptr<GraphBuilder> b_;
  std::vector<std::string> names_;  // the duet name of each value id
  std::map<std::string, Value, std::less<>> values_;
  std::map<std::string, int, std::less<>> readers_;      // how many nodes read each value
  std::set<std::string, std::less<>> outputs_;           // graph output names
  std::set<std::string, std::less<>> taken_;             // duet names handed out
  std::set<std::string, std::less<>> reserved_;          // graph output names, kept for their owner
  std::map<std::string, int64_t, std::less<>> symbols_;  // symbolic dims and the sizes given
};

}  // namespace duet::onnx_import
