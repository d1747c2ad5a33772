// A graph of v1 ops over named tensors: inputs (given at run time), constants (weights, with
// their data or a reference to a .safetensors or .gguf file), states (persistent tensors: a KV
// cache) and the values ops produce. Built with
// a GraphBuilder, which validates every op as it is added (shape and dtype inference by make_op);
// saved and loaded as versioned JSON (see docs/planner.md, "Graph files").
//
// A node and the value it produces share one name. Views (reshape, transpose, permute, slice)
// are nodes too; they have no kernel and their value aliases the input's storage.
//
// States are tensors that persist across runs: declared by dtype and shape (their capacity, e.g.
// the longest context), allocated once on the device the planner puts them on, zero at first,
// read back, overwritten or reset through the engine (duet/engine.h). A write_slice node whose
// first input is a state writes into it in place, and its value is the state after the write. A
// state is written by at most one node; nodes after the write read the written value, never the
// state itself (so every read sees a defined version of it).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "duet/export.h"
#include "duet/host_tensor.h"
#include "duet/op.h"
#include "duet/status.h"

namespace duet {

enum class ValueKind : uint8_t { input, constant, intermediate, state };
DUET_API std::string_view value_kind_name(ValueKind k);

// Where a constant's data lives on disk: a tensor of a .safetensors or .gguf file, or a GPTQ/AWQ
// module of a safetensors checkpoint (see graph_file.h). A relative `file` is
// relative to the graph file's folder.
struct DUET_API ConstantSource {
  std::string file;
  std::string key;  // tensor name in the file (defaults to the constant's name)
  bool empty() const { return file.empty(); }
  bool operator==(const ConstantSource&) const = default;
};

struct DUET_API GraphValue {
  std::string name;
  ValueKind kind = ValueKind::intermediate;
  TensorDesc desc;    // inputs and constants are dense; views carry their strides
  int producer = -1;  // the node producing an intermediate
  // Constants: the values (dense, of `desc`), or null while not loaded/bound yet.
  std::shared_ptr<const HostTensor> data;
  ConstantSource source;  // constants: where `data` comes from when the graph is saved/loaded
};

struct DUET_API GraphNode {
  std::string name;  // also the name of its output value
  std::vector<int> inputs;
  int output = -1;
  OpDesc op;  // validated: kind, attrs, input descriptors and names, inferred output
  OpKind kind() const { return op.kind; }
};

// A handle to a value while building (an index into Graph::values()).
struct ValueId {
  int id = -1;
  bool valid() const { return id >= 0; }
  bool operator==(const ValueId&) const = default;
};

class DUET_API Graph {
 public:
  const std::string& name() const { return name_; }
  const std::vector<GraphValue>& values() const { return values_; }
  const std::vector<GraphNode>& nodes() const { return nodes_; }  // in dependency order
  const std::vector<int>& inputs() const { return inputs_; }
  const std::vector<int>& outputs() const { return outputs_; }
  std::vector<int> constants() const;
  std::vector<int> states() const;
  // The node that writes state `id` in place, or -1.
  int state_writer(int id) const;

  const GraphValue& value(int id) const { return values_[static_cast<size_t>(id)]; }
  std::optional<int> find(std::string_view name) const;

  // For each value, the index of the last node reading it (-1 when no node reads it).
  std::vector<int> last_uses() const;

  // Gives a constant its data (dense, matching the declared dtype and shape).
  Status bind_constant(std::string_view name, HostTensor data);
  // Names of constants that have no data yet.
  std::vector<std::string> unbound_constants() const;

  // The same graph with new input shapes (dtypes fixed), every op re-inferred. Shapes not
  // given stay as they are. A graph with a shape note is made again by its remake function at
  // other shapes, and without one refuses them, with the note.
  Result<Graph> with_input_shapes(const std::map<std::string, TensorDesc>& shapes) const;
  // Makes the graph again from its source at other input shapes (every input's shape given): an
  // ONNX import, whose shape arithmetic was folded for the sizes it was imported at, is imported
  // again at the new ones.
  using Remake = std::function<Result<Graph>(const std::map<std::string, TensorDesc>& shapes)>;
  // Set where the graph's shapes were fixed when it was made (an ONNX import folds its shape
  // arithmetic for the sizes it was imported at, so other sizes could run but compute wrong
  // values): why, and how to make it at other sizes. "" where the shapes may change.
  const std::string& shape_note() const { return shape_note_; }

  // Same structure: names, kinds, descriptors, attributes, wiring, outputs and constant
  // sources. Constant data is compared by value when both sides have it.
  bool same_as(const Graph& other, std::string* difference = nullptr) const;

 private:
  friend class GraphBuilder;
  std::string name_ = "graph";
  std::string shape_note_;
  std::shared_ptr<const Remake> remake_;
  std::vector<GraphValue> values_;
  std::vector<GraphNode> nodes_;
  std::vector<int> inputs_;
  std::vector<int> outputs_;
};

// Builds a graph. Every method validates at once; the first error is kept and returned by
// build() (later calls are ignored), so a chain of calls needs one check at the end:
//
//   GraphBuilder b("mlp");
//   ValueId x = b.input("x", DType::f16, {8, 64});
//   ValueId w = b.constant("w", weights);
//   b.output(b.silu(b.matmul(x, w), "h"));
//   Result<Graph> g = b.build();
class DUET_API GraphBuilder {
 public:
  explicit GraphBuilder(std::string graph_name = "graph");

  ValueId input(std::string name, DType dtype, std::vector<int64_t> shape);
  // A constant with its data (dense).
  ValueId constant(std::string name, HostTensor data);
  // A constant declared by type and shape, its data to be loaded from `source` or bound later.
  ValueId constant(std::string name, DType dtype, std::vector<int64_t> shape,
                   ConstantSource source = {});
  // A persistent tensor (zero until written; see above).
  ValueId state(std::string name, DType dtype, std::vector<int64_t> shape);
  // Any op; `name` defaults to "<op><n>".
  ValueId op(OpKind kind, std::vector<ValueId> inputs, OpAttrs attrs = {}, std::string name = {});
  // Marks a value as a graph output (outputs are read back in the order marked).
  void output(ValueId v);

  // One helper per op, for readable graph code.
  ValueId matmul(ValueId a, ValueId b, bool transpose_b = false, std::string name = {});
  ValueId add(ValueId a, ValueId b, std::string name = {});
  ValueId sub(ValueId a, ValueId b, std::string name = {});
  ValueId mul(ValueId a, ValueId b, std::string name = {});
  ValueId div(ValueId a, ValueId b, std::string name = {});
  ValueId scale(ValueId x, float alpha, std::string name = {});
  ValueId silu(ValueId x, std::string name = {});
  ValueId gelu(ValueId x, std::string name = {});
  ValueId relu(ValueId x, std::string name = {});
  ValueId exp(ValueId x, std::string name = {});
  ValueId softmax(ValueId x, std::string name = {});
  ValueId rmsnorm(ValueId x, ValueId weight, float eps = 1e-5f, std::string name = {});
  ValueId rope(ValueId x, int64_t offset = 0, std::string name = {});
  // rope with the position of the first row given at run time by `pos` (i32 [1]).
  ValueId rope(ValueId x, ValueId pos, std::string name = {});
  ValueId attention(ValueId q, ValueId k, ValueId v, bool causal = false, std::string name = {});
  // attention over the first kv_len (i32 [1], a run-time value) keys of k and v.
  ValueId attention(ValueId q, ValueId k, ValueId v, ValueId kv_len, bool causal,
                    std::string name = {});
  // Writes x into `state` along `axis` at the run-time offset `pos` (i32 [1]).
  ValueId write_slice(ValueId state, ValueId x, ValueId pos, int axis, std::string name = {});
  ValueId cast(ValueId x, DType to, std::string name = {});
  ValueId copy(ValueId x, std::string name = {});
  ValueId concat(std::vector<ValueId> xs, int axis, std::string name = {});
  ValueId embedding(ValueId table, ValueId ids, std::string name = {});
  ValueId reshape(ValueId x, std::vector<int64_t> shape, std::string name = {});
  ValueId transpose(ValueId x, int dim0, int dim1, std::string name = {});
  ValueId permute(ValueId x, std::vector<int> perm, std::string name = {});
  ValueId slice(ValueId x, int axis, int64_t start, int64_t stop, int64_t step = 1,
                std::string name = {});

  const Status& status() const { return status_; }
  // The descriptor of a value added so far (nullptr for a handle not of this builder), for code
  // that translates other formats and needs shapes as it goes.
  const TensorDesc* desc(ValueId v) const;
  // Graph::shape_note of the graph being built.
  void shape_note(std::string note) { g_.shape_note_ = std::move(note); }
  // Graph::Remake of the graph being built (with a shape note).
  void remake(Graph::Remake f) { g_.remake_ = std::make_shared<const Graph::Remake>(std::move(f)); }
  // The graph, or the first error. Requires at least one output.
  Result<Graph> build();

 private:
  friend class Graph;
  bool take_name(const std::string& name, const char* what);
  bool check_id(ValueId v, const std::string& context);
  ValueId add_value(GraphValue v);
  // A new input or constant named `name` (dense, rank checked and validated), or nothing with
  // the error recorded.
  std::optional<GraphValue> declare(std::string name, ValueKind kind, DType dtype,
                                    const std::vector<int64_t>& shape);

  // The value whose storage `v` reads (through views).
  int storage_of(int v) const;

  Graph g_;
  Status status_;
  std::map<std::string, int, std::less<>> names_;
  int counter_ = 0;
  bool built_ = false;
};

}  // namespace duet
