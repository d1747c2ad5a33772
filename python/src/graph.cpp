// Graphs: duet.load() for model files (duet-graph JSON, with constants from .safetensors or
// .gguf files, and ONNX), duet.Graph, and duet.GraphBuilder, which mirrors the C++ GraphBuilder
// (one method per op helper, op() for any op with the attributes graph files use) and raises at
// the call that fails.
#include <pybind11/stl.h>

#include <nlohmann/json.hpp>

#include "common.h"
#include "duet/graph_file.h"
#include "duet/internal/attrs_json.h"
#include "duet/internal/text.h"
#include "duet/model_file.h"
#include "duet/quantize.h"

namespace duetpy {

namespace {

struct PyGraph {
  GraphPtr g;
};

py::list tensor_list(const duet::Graph& g, const std::vector<int>& ids) {
  py::list out;
  for (int id : ids) {
    const duet::GraphValue& v = g.value(id);
    py::dict d;
    d["name"] = v.name;
    d["dtype"] = std::string(duet::dtype_name(v.desc.dtype));
    d["shape"] =
        py::tuple(py::cast(std::vector<int64_t>(v.desc.dims().begin(), v.desc.dims().end())));
    out.append(d);
  }
  return out;
}

duet::DType dtype_arg(const std::string& name) {
  auto t = duet::parse_dtype(name);
  if (!t)
    bad_input("dtype '" + name + "': expected " + duet::dtype_names(duet::kElementDTypes) +
              " or a block format (" + duet::dtype_names(duet::kQuantizedDTypes) + ")");
  return *t;
}

struct PyBuilder;

// A value while building: a handle into its builder.
struct PyValue {
  std::shared_ptr<PyBuilder> owner;
  duet::ValueId id;
};

struct PyBuilder : std::enable_shared_from_this<PyBuilder> {
  explicit PyBuilder(std::string name) : b(std::move(name)) {}
  duet::GraphBuilder b;
  bool built = false;

  duet::ValueId in(const PyValue& v, const char* what) {
    if (v.owner.get() != this)
      bad_input(std::string(what) + ": the value belongs to another GraphBuilder");
    return v.id;
  }
  // The value, or the builder's first error raised.
  PyValue done(duet::ValueId v) {
    if (built) bad_input("GraphBuilder: build() was called; start a new builder");
    check(b.status());
    return PyValue{shared_from_this(), v};
  }
};

using BuilderPtr = std::shared_ptr<PyBuilder>;

// The builder's one-input and two-input op helpers, bound alike.
using Unary = duet::ValueId (duet::GraphBuilder::*)(duet::ValueId, std::string);
using Binary = duet::ValueId (duet::GraphBuilder::*)(duet::ValueId, duet::ValueId, std::string);

void bind_unary(py::class_<PyBuilder, BuilderPtr>& c, const char* op, Unary f) {
  c.def(
      op,
      [op, f](PyBuilder& p, const PyValue& x, std::string name) {
        return p.done((p.b.*f)(p.in(x, op), std::move(name)));
      },
      py::arg("x"), py::arg("name") = "");
}

void bind_binary(py::class_<PyBuilder, BuilderPtr>& c, const char* op, Binary f) {
  c.def(
      op,
      [op, f](PyBuilder& p, const PyValue& a, const PyValue& b, std::string name) {
        return p.done((p.b.*f)(p.in(a, op), p.in(b, op), std::move(name)));
      },
      py::arg("a"), py::arg("b"), py::arg("name") = "");
}

}  // namespace

py::object wrap_graph(duet::Graph g) {
  return py::cast(PyGraph{std::make_shared<const duet::Graph>(std::move(g))});
}

GraphPtr graph_from_object(py::handle obj) {
  if (py::isinstance<PyGraph>(obj)) return obj.cast<const PyGraph&>().g;
  if (py::isinstance<py::str>(obj) || py::hasattr(obj, "__fspath__")) {
    const std::string path = py::str(py::module_::import("os").attr("fspath")(obj));
    duet::Result<duet::Graph> g = duet::Status(duet::Code::internal, "not loaded");
    {
      py::gil_scoped_release nogil;
      g = duet::load_model(path);
    }
    return std::make_shared<const duet::Graph>(unwrap(std::move(g)));
  }
  bad_input("expected a duet.Graph or the path of a model file, got " +
            std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
}

void bind_graph(py::module_& m) {
  py::class_<PyGraph>(m, "Graph",
                      "A graph of duet's ops: built with GraphBuilder or loaded with load().")
      .def_property_readonly("name", [](const PyGraph& p) { return p.g->name(); })
      .def_property_readonly(
          "inputs", [](const PyGraph& p) { return tensor_list(*p.g, p.g->inputs()); },
          "The inputs, in order: dicts of name, dtype and shape.")
      .def_property_readonly("outputs",
                             [](const PyGraph& p) { return tensor_list(*p.g, p.g->outputs()); })
      .def_property_readonly("constants",
                             [](const PyGraph& p) { return tensor_list(*p.g, p.g->constants()); })
      .def_property_readonly("states",
                             [](const PyGraph& p) { return tensor_list(*p.g, p.g->states()); })
      .def_property_readonly(
          "nodes",
          [](const PyGraph& p) {
            py::list out;
            for (const duet::GraphNode& n : p.g->nodes()) {
              py::list ins;
              for (int i : n.inputs) ins.append(p.g->value(i).name);
              py::dict d;
              d["name"] = n.name;
              d["op"] = std::string(duet::op_name(n.kind()));
              d["inputs"] = ins;
              d["output"] = n.op.output.str();
              out.append(d);
            }
            return out;
          },
          "The nodes in dependency order: dicts of name, op, inputs and output.")
      .def(
          "to_json", [](const PyGraph& p) { return duet::graph_to_json(*p.g); },
          "The graph as duet-graph JSON (constants with a file source written as references).")
      .def(
          "save",
          [](const PyGraph& p, py::object path, int64_t inline_limit) {
            check(duet::save_graph(*p.g, py::str(py::module_::import("os").attr("fspath")(path)),
                                   inline_limit));
          },
          py::arg("path"), py::arg("inline_limit") = 4096,
          "Writes the graph file; large constants go to a .safetensors (or .gguf) file beside it.")
      .def("__repr__", [](const PyGraph& p) {
        return "duet.Graph('" + p.g->name() + "', " + std::to_string(p.g->nodes().size()) +
               " nodes, " + std::to_string(p.g->inputs().size()) + " inputs, " +
               std::to_string(p.g->outputs().size()) + " outputs)";
      });

  m.def(
      "load",
      [](py::object path, std::map<std::string, int64_t> dims,
         std::map<std::string, std::vector<int64_t>> input_shapes) {
        duet::ModelOptions o;
        o.onnx.dims = std::move(dims);
        o.onnx.input_shapes = std::move(input_shapes);
        std::vector<std::string> notes;
        o.onnx.notes = &notes;
        const std::string p = py::str(py::module_::import("os").attr("fspath")(path));
        duet::Result<duet::Graph> g = duet::Status(duet::Code::internal, "not loaded");
        {
          py::gil_scoped_release nogil;
          g = duet::load_model(p, o);
        }
        return wrap_graph(unwrap(std::move(g)));
      },
      py::arg("path"), py::arg("dims") = std::map<std::string, int64_t>{},
      py::arg("input_shapes") = std::map<std::string, std::vector<int64_t>>{},
      R"(Loads a model file: duet-graph JSON (constants from .safetensors or memory-mapped .gguf
files) or ONNX. ONNX only: `dims` sizes symbolic dimensions ({"batch": 4}), `input_shapes` fixes
whole input shapes.)");

  py::class_<PyValue>(m, "Value", "A value of a graph being built (GraphBuilder).")
      .def_property_readonly("dtype",
                             [](const PyValue& v) {
                               const duet::TensorDesc* d = v.owner->b.desc(v.id);
                               return std::string(d ? duet::dtype_name(d->dtype) : "?");
                             })
      .def_property_readonly("shape",
                             [](const PyValue& v) {
                               const duet::TensorDesc* d = v.owner->b.desc(v.id);
                               std::vector<int64_t> s;
                               if (d) s.assign(d->dims().begin(), d->dims().end());
                               return py::tuple(py::cast(s));
                             })
      .def("__repr__", [](const PyValue& v) {
        const duet::TensorDesc* d = v.owner->b.desc(v.id);
        return "duet.Value(" + (d ? d->str() : std::string("?")) + ")";
      });

  using V = const PyValue&;
  using S = const std::string&;
  py::class_<PyBuilder, BuilderPtr> builder(
      m, "GraphBuilder",
      R"(Builds a graph, as duet::GraphBuilder does in C++: every call
validates its op (shapes and dtypes inferred) and raises where it fails.)");
  builder
      .def(py::init([](std::string name) { return std::make_shared<PyBuilder>(std::move(name)); }),
           py::arg("name") = "graph")
      .def(
          "input",
          [](PyBuilder& p, std::string name, S dtype, std::vector<int64_t> shape) {
            return p.done(p.b.input(std::move(name), dtype_arg(dtype), std::move(shape)));
          },
          py::arg("name"), py::arg("dtype"), py::arg("shape"))
      .def(
          "constant",
          [](PyBuilder& p, std::string name, py::handle data, py::object dtype) {
            Borrowed keep;
            duet::DType t{};
            const bool typed = !dtype.is_none();
            if (typed) t = dtype_arg(py::str(dtype));
            const std::string what = "constant '" + name + "'";
            if (typed && duet::is_quantized(t)) {
              // Float weights quantized row by row into the block format (as duet quantizes).
              duet::HostTensor f = tensor_from_object(data, what, nullptr, keep);
              return p.done(p.b.constant(std::move(name), unwrap(duet::quantize(f, t, what))));
            }
            duet::HostTensor h = tensor_from_object(data, what, typed ? &t : nullptr, keep);
            return p.done(p.b.constant(std::move(name), h.contiguous()));
          },
          py::arg("name"), py::arg("data"), py::arg("dtype") = py::none(),
          "A constant holding a copy of `data` (bf16: dtype='bf16' with uint16 bits; a block "
          "format such as dtype='q8_0' quantizes float data row by row).")
      .def(
          "state",
          [](PyBuilder& p, std::string name, S dtype, std::vector<int64_t> shape) {
            return p.done(p.b.state(std::move(name), dtype_arg(dtype), std::move(shape)));
          },
          py::arg("name"), py::arg("dtype"), py::arg("shape"))
      .def(
          "op",
          [](PyBuilder& p, S kind, std::vector<PyValue> inputs, std::string name,
             py::kwargs attrs) {
            auto k = duet::parse_op(kind);
            if (!k) bad_input("op '" + kind + "': no such op (see duet ops)");
            std::vector<duet::ValueId> ids;
            for (const PyValue& v : inputs) ids.push_back(p.in(v, kind.c_str()));
            const std::string text = py::str(py::module_::import("json").attr("dumps")(attrs));
            nlohmann::json j = nlohmann::json::parse(text);
            duet::OpAttrs a = unwrap(duet::attrs_from_json(j, name.empty() ? kind : name));
            return p.done(p.b.op(*k, std::move(ids), std::move(a), std::move(name)));
          },
          py::arg("kind"), py::arg("inputs"), py::arg("name") = "",
          "Any op by name, its attributes as keyword arguments named as in graph files.")
      .def(
          "output",
          [](PyBuilder& p, V v) {
            p.b.output(p.in(v, "output"));
            p.done({});
          },
          py::arg("value"))
      .def(
          "matmul",
          [](PyBuilder& p, V a, V b, bool tb, std::string name) {
            return p.done(p.b.matmul(p.in(a, "matmul"), p.in(b, "matmul"), tb, std::move(name)));
          },
          py::arg("a"), py::arg("b"), py::arg("transpose_b") = false, py::arg("name") = "")
      .def(
          "scale",
          [](PyBuilder& p, V x, float alpha, std::string name) {
            return p.done(p.b.scale(p.in(x, "scale"), alpha, std::move(name)));
          },
          py::arg("x"), py::arg("alpha"), py::arg("name") = "")
      .def(
          "rmsnorm",
          [](PyBuilder& p, V x, V w, float eps, std::string name) {
            return p.done(
                p.b.rmsnorm(p.in(x, "rmsnorm"), p.in(w, "rmsnorm"), eps, std::move(name)));
          },
          py::arg("x"), py::arg("weight"), py::arg("eps") = 1e-5f, py::arg("name") = "")
      .def(
          "rope",
          [](PyBuilder& p, V x, py::object pos, std::string name) {
            if (py::isinstance<PyValue>(pos))
              return p.done(p.b.rope(p.in(x, "rope"), p.in(pos.cast<const PyValue&>(), "rope"),
                                     std::move(name)));
            return p.done(p.b.rope(p.in(x, "rope"), pos.cast<int64_t>(), std::move(name)));
          },
          py::arg("x"), py::arg("offset") = 0, py::arg("name") = "",
          "RoPE from position `offset`: a number, or a Value (i32 [1]) given at run time.")
      .def(
          "attention",
          [](PyBuilder& p, V q, V k, V v, bool causal, py::object kv_len, std::string name) {
            if (!kv_len.is_none())
              return p.done(p.b.attention(
                  p.in(q, "attention"), p.in(k, "attention"), p.in(v, "attention"),
                  p.in(kv_len.cast<const PyValue&>(), "attention"), causal, std::move(name)));
            return p.done(p.b.attention(p.in(q, "attention"), p.in(k, "attention"),
                                        p.in(v, "attention"), causal, std::move(name)));
          },
          py::arg("q"), py::arg("k"), py::arg("v"), py::arg("causal") = false,
          py::arg("kv_len") = py::none(), py::arg("name") = "")
      .def(
          "write_slice",
          [](PyBuilder& p, V state, V x, V pos, int axis, std::string name) {
            return p.done(p.b.write_slice(p.in(state, "write_slice"), p.in(x, "write_slice"),
                                          p.in(pos, "write_slice"), axis, std::move(name)));
          },
          py::arg("state"), py::arg("x"), py::arg("pos"), py::arg("axis"), py::arg("name") = "")
      .def(
          "cast",
          [](PyBuilder& p, V x, S to, std::string name) {
            return p.done(p.b.cast(p.in(x, "cast"), dtype_arg(to), std::move(name)));
          },
          py::arg("x"), py::arg("to"), py::arg("name") = "")
      .def(
          "concat",
          [](PyBuilder& p, std::vector<PyValue> xs, int axis, std::string name) {
            std::vector<duet::ValueId> ids;
            for (const PyValue& v : xs) ids.push_back(p.in(v, "concat"));
            return p.done(p.b.concat(std::move(ids), axis, std::move(name)));
          },
          py::arg("xs"), py::arg("axis"), py::arg("name") = "")
      .def(
          "embedding",
          [](PyBuilder& p, V table, V ids, std::string name) {
            return p.done(
                p.b.embedding(p.in(table, "embedding"), p.in(ids, "embedding"), std::move(name)));
          },
          py::arg("table"), py::arg("ids"), py::arg("name") = "")
      .def(
          "reshape",
          [](PyBuilder& p, V x, std::vector<int64_t> shape, std::string name) {
            return p.done(p.b.reshape(p.in(x, "reshape"), std::move(shape), std::move(name)));
          },
          py::arg("x"), py::arg("shape"), py::arg("name") = "")
      .def(
          "transpose",
          [](PyBuilder& p, V x, int d0, int d1, std::string name) {
            return p.done(p.b.transpose(p.in(x, "transpose"), d0, d1, std::move(name)));
          },
          py::arg("x"), py::arg("dim0"), py::arg("dim1"), py::arg("name") = "")
      .def(
          "permute",
          [](PyBuilder& p, V x, std::vector<int> perm, std::string name) {
            return p.done(p.b.permute(p.in(x, "permute"), std::move(perm), std::move(name)));
          },
          py::arg("x"), py::arg("perm"), py::arg("name") = "")
      .def(
          "slice",
          [](PyBuilder& p, V x, int axis, int64_t start, int64_t stop, int64_t step,
             std::string name) {
            return p.done(p.b.slice(p.in(x, "slice"), axis, start, stop, step, std::move(name)));
          },
          py::arg("x"), py::arg("axis"), py::arg("start"), py::arg("stop"), py::arg("step") = 1,
          py::arg("name") = "")
      .def("build", [](PyBuilder& p) {
        if (p.built) bad_input("GraphBuilder: build() was already called");
        p.built = true;
        return wrap_graph(unwrap(p.b.build()));
      });
  using B = duet::GraphBuilder;
  for (auto [op, f] : {std::pair{"add", Binary(&B::add)}, std::pair{"sub", Binary(&B::sub)},
                       std::pair{"mul", Binary(&B::mul)}, std::pair{"div", Binary(&B::div)}})
    bind_binary(builder, op, f);
  for (auto [op, f] :
       {std::pair{"silu", Unary(&B::silu)}, std::pair{"gelu", Unary(&B::gelu)},
        std::pair{"relu", Unary(&B::relu)}, std::pair{"exp", Unary(&B::exp)},
        std::pair{"softmax", Unary(&B::softmax)}, std::pair{"copy", Unary(&B::copy)}})
    bind_unary(builder, op, f);
}

}  // namespace duetpy
