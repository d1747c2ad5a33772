// The ONNX importer on models built here, op by op: what folds at import, what maps onto which
// duet op, what the errors say, and numerics through the CPU device against hand-computed values.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "check/graph_check.h"
#include "duet/backends.h"
#include "duet/engine.h"
#include "duet/graph_file.h"
#include "duet/model_file.h"
#include "duet/onnx.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

// A model under construction: a graph of the default domain at `opset`.
class Model {
 public:
  explicit Model(int opset = 17) {
    m_.set_ir_version(8);
    auto* o = m_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    m_.mutable_graph()->set_name("g");
  }

  Model& input(const std::string& name, int elem, std::vector<int64_t> dims,
               std::vector<std::string> symbols = {}) {
    auto* v = m_.mutable_graph()->add_input();
    type(v, name, elem, dims, symbols);
    return *this;
  }
  Model& output(const std::string& name, int elem = onnx::TensorProto::FLOAT) {
    auto* v = m_.mutable_graph()->add_output();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
    return *this;
  }
  onnx::TensorProto& init(const std::string& name, std::vector<int64_t> dims,
                          std::vector<float> values) {
    auto* t = m_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float v : values) t->add_float_data(v);
    return *t;
  }
  onnx::TensorProto& init_i64(const std::string& name, std::vector<int64_t> dims,
                              std::vector<int64_t> values) {
    auto* t = m_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t v : values) t->add_int64_data(v);
    return *t;
  }
  onnx::NodeProto& node(const std::string& type, std::vector<std::string> in,
                        std::vector<std::string> out, const std::string& name = {}) {
    auto* n = m_.mutable_graph()->add_node();
    n->set_op_type(type);
    n->set_name(name);
    for (auto& i : in) n->add_input(i);
    for (auto& o : out) n->add_output(o);
    return *n;
  }
  static void attr(onnx::NodeProto& n, const std::string& name, int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr(onnx::NodeProto& n, const std::string& name, float v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr(onnx::NodeProto& n, const std::string& name, const std::string& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static void attr(onnx::NodeProto& n, const std::string& name, std::vector<int64_t> v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }

  Result<Graph> import(OnnxOptions o = {}) const {
    const std::string bytes = m_.SerializeAsString();
    return import_onnx({reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}, ".",
                       "model.onnx", o);
  }
  void save(const std::string& path) const {
    std::ofstream f(path, std::ios::binary);
    m_.SerializeToOstream(&f);
  }
  onnx::ModelProto& proto() { return m_; }

 private:
  static void type(onnx::ValueInfoProto* v, const std::string& name, int elem,
                   const std::vector<int64_t>& dims, const std::vector<std::string>& symbols) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    auto* s = t->mutable_shape();
    for (size_t i = 0; i < dims.size(); ++i) {
      auto* d = s->add_dim();
      if (i < symbols.size() && !symbols[i].empty())
        d->set_dim_param(symbols[i]);
      else
        d->set_dim_value(dims[i]);
    }
  }
  onnx::ModelProto m_;
};

constexpr int kF32 = onnx::TensorProto::FLOAT;
constexpr int kI64 = onnx::TensorProto::INT64;

int count_kind(const Graph& g, OpKind k) {
  int n = 0;
  for (const GraphNode& node : g.nodes()) n += node.kind() == k;
  return n;
}

HostTensor tensor(std::vector<int64_t> shape, std::vector<float> values) {
  HostTensor t = HostTensor::empty(DType::f32, shape);
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

// Runs a graph on the CPU device.
std::map<std::string, HostTensor> run_cpu(const Graph& g,
                                          const std::map<std::string, HostTensor>& inputs) {
  static Registry reg = open_registry();
  Device* cpu = reg.find("cpu:0");
  auto e = Engine::create(g, {cpu});
  EXPECT_TRUE(e.ok()) << e.status().message();
  if (!e.ok()) return {};
  auto out = (*e)->run(inputs);
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? *out : std::map<std::string, HostTensor>{};
}

TEST(OnnxImport, ShapeArithmeticFoldsAtImport) {
  // y = reshape(x, concat(shape(x)[0:1], [-1])): the exporter's way of writing flatten.
  Model m;
  m.input("x", kF32, {2, 3, 4}).output("y");
  m.init_i64("zero", {1}, {0});
  m.init_i64("minus_one", {1}, {-1});
  m.node("Shape", {"x"}, {"s"});
  m.node("Gather", {"s", "zero"}, {"batch"});
  Model::attr(m.node("Concat", {"batch", "minus_one"}, {"shape"}), "axis", int64_t{0});
  m.node("Reshape", {"x", "shape"}, {"y"});
  auto g = m.import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->nodes().size(), 1u);
  EXPECT_EQ(g->nodes()[0].kind(), OpKind::reshape);
  EXPECT_EQ(g->constants().size(), 0u);
  const TensorDesc& y = g->value(g->outputs()[0]).desc;
  EXPECT_EQ(y.shape_str(), "[2,12]");
}

TEST(OnnxImport, AnUnmappedOpNamesTheNodeTheTypeAndTheOpset) {
  Model m(15);
  m.input("x", kF32, {4}).output("y");
  m.node("NonZero", {"x"}, {"y"}, "the_node");
  auto g = m.import();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), Code::unsupported);
  const std::string& msg = g.status().message();
  EXPECT_NE(msg.find("model.onnx"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node 'the_node'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("NonZero"), std::string::npos) << msg;
  EXPECT_NE(msg.find("opset 15"), std::string::npos) << msg;
}

TEST(OnnxImport, AVectorMatMulWhoseLengthsDoNotMeetIsAnErrorNotACrash) {
  // Found by the ONNX fuzz target: a 1-D MatMul operand whose length differs from the matrix's
  // rows crashed the importer (it read the shape of the matmul the builder had refused).
  Model m;
  m.input("x", kF32, {5}).output("y");
  m.init("w", {3, 4}, std::vector<float>(12, 0.5f));
  m.node("MatMul", {"x", "w"}, {"y"});
  auto g = m.import();
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("MatMul"), std::string::npos) << g.status().message();
}

TEST(OnnxImport, NodesMissingWhatTheirSchemaRequiresAreRefusedBeforeFusion) {
  // Found by the ONNX fuzz target: a Softmax without its input, read by a MatMul as in an
  // attention pattern, crashed the fusion pass, which ran before the per-node checks.
  Model m;
  m.input("x", kF32, {2, 2}).output("y");
  m.node("Softmax", {}, {"p"}, "s");
  m.node("MatMul", {"p", "x"}, {"y"});
  auto g = m.import();
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("node 's' (Softmax, opset 17): input 0"), std::string::npos)
      << g.status().message();
  Model no_output;
  no_output.input("x", kF32, {2, 2}).output("y");
  no_output.node("Softmax", {"x"}, {}, "s");
  no_output.node("Relu", {"x"}, {"y"});
  auto h = no_output.import();
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("expected at least 1 output"), std::string::npos)
      << h.status().message();
}

TEST(OnnxImport, OpsNewerThanTheOnnxLibraryAndFusedOnlyTypesAreChecked) {
  // Found by the ONNX fuzz target: a node of ONNX's domain typed "Attention" reached the mapping
  // of the fused attention pattern, which read inputs the node did not have. ONNX's own
  // Attention (opset 23) means something else (K untransposed), so the type is not mapped.
  Model attention(18);
  attention.input("q", kF32, {1, 1, 2, 4}).input("k", kF32, {1, 1, 2, 4}).output("y");
  attention.node("Attention", {"q", "k"}, {"y"}, "a");
  auto g = attention.import();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), Code::unsupported);
  EXPECT_NE(g.status().message().find("op type 'Attention' is not mapped"), std::string::npos)
      << g.status().message();
  for (const char* type : {"Silu", "RmsNormalization"}) {
    Model m(17);
    m.input("x", kF32, {2, 4}).output("y");
    m.node(type, {"x"}, {"y"});
    auto h = m.import();
    ASSERT_FALSE(h.ok()) << type;
    EXPECT_EQ(h.status().code(), Code::unsupported) << h.status().message();
  }
  // Gelu (ONNX's from opset 20) has no schema at the opsets duet imports: its input is still
  // required.
  Model gelu(18);
  gelu.input("x", kF32, {2, 4}).output("y");
  gelu.node("Gelu", {}, {"y"}, "g");
  auto e = gelu.import();
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("node 'g' (Gelu, opset 18): input 0 is required"),
            std::string::npos)
      << e.status().message();
  Model gelu_ok(18);
  gelu_ok.input("x", kF32, {2, 4}).output("y");
  gelu_ok.node("Gelu", {"x"}, {"y"});
  auto ok = gelu_ok.import();
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(count_kind(*ok, OpKind::gelu), 1);
}

TEST(OnnxImport, ValuesEvaluatedAtImportHaveABoundedSize) {
  // Found by the ONNX fuzz target: Expand of a known value to a shape whose sizes' product
  // overflows 64 bits before a 0 makes it empty (signed overflow while sizing the folded value).
  // Folding is refused past 2^28 elements, and a negative size or sizes whose product overflows
  // (even before a 0) are an error, before anything is allocated.
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{int64_t{1} << 40, int64_t{1} << 40, 102},
        std::vector<int64_t>{int64_t{1} << 15, int64_t{1} << 14}, std::vector<int64_t>{-3, 2}}) {
    Model m;
    m.input("x", kF32, {2}).output("y");
    m.init("c", {1}, {1.5f});
    m.init_i64("shape", {static_cast<int64_t>(shape.size())}, shape);
    m.node("Expand", {"c", "shape"}, {"e"}, "expand");
    m.node("Add", {"x", "e"}, {"y"});
    auto g = m.import();
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), Code::invalid_argument) << g.status().message();
    EXPECT_NE(g.status().message().find("node 'expand'"), std::string::npos)
        << g.status().message();
  }
  {
    Model empty;
    empty.input("x", kF32, {1}).output("y");
    empty.init("c", {1}, {1.5f});
    empty.init_i64("shape", {3}, {int64_t{1} << 40, int64_t{1} << 40, 0});
    empty.node("Expand", {"c", "shape"}, {"e"});
    empty.node("Add", {"x", "e"}, {"y"});
    auto g = empty.import();
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.status().message().find("overflows"), std::string::npos) << g.status().message();
  }
  Model ok;
  ok.input("x", kF32, {2, 3}).output("y");
  ok.init("c", {1}, {1.5f});
  ok.init_i64("shape", {2}, {2, 3});
  ok.node("Expand", {"c", "shape"}, {"e"});
  ok.node("Add", {"x", "e"}, {"y"});
  auto g = ok.import();
  ASSERT_TRUE(g.ok()) << g.status().message();
}

TEST(OnnxImport, NamesThatAreNotUtf8AreRefusedNamingWhere) {
  // Found by the ONNX fuzz target: a graph name with a stray byte reached the graph file writer,
  // whose JSON library threw. Every name the graph takes is checked at import.
  const std::string bad_cases[] = {std::string("a\x61\xff"), std::string("\xc3"),
                                   std::string("\xed\xa0\x80"), std::string("\xc0\xaf")};
  for (const std::string& bad : bad_cases) {
    Model graph_name, value_name;
    graph_name.proto().mutable_graph()->set_name(bad);
    graph_name.input("x", kF32, {4}).output("y");
    graph_name.node("Relu", {"x"}, {"y"});
    value_name.input("x", kF32, {4}).output("y");
    value_name.node("Relu", {"x"}, {bad + "t"});
    value_name.node("Relu", {bad + "t"}, {"y"});
    auto a = graph_name.import();
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), Code::invalid_argument);
    EXPECT_NE(a.status().message().find("the graph's name is not valid UTF-8"), std::string::npos)
        << a.status().message();
    auto b = value_name.import();
    ASSERT_FALSE(b.ok());
    EXPECT_NE(b.status().message().find("an output name of node 0 is not valid UTF-8"),
              std::string::npos)
        << b.status().message();
  }
  Model fine;  // multi-byte names that are well-formed pass
  fine.proto().mutable_graph()->set_name("gr\xc3\xa4ph \xe2\x82\xac \xf0\x9f\x99\x82");
  fine.input("x", kF32, {4}).output("y");
  fine.node("Relu", {"x"}, {"y"});
  auto g = fine.import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_NE(graph_to_json(*g).find("gr\xc3\xa4ph \xe2\x82\xac"), std::string::npos);
}

// Below opset 7 only ops whose definition has not changed since are read (Add broadcast
// differently there); above 18 nothing.
TEST(OnnxImport, OpsetsOutsideTheImportedRangeAreRefused) {
  Model old_add(6), old_relu(6), ok(13), new_relu(19);
  old_add.input("x", kF32, {4}).output("y");
  old_add.node("Add", {"x", "x"}, {"y"}, "add");
  for (Model* m : {&old_relu, &ok, &new_relu}) {
    m->input("x", kF32, {4}).output("y");
    m->node("Relu", {"x"}, {"y"});
  }
  auto g = old_add.import();
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("node 'add' (Add, opset 6): opset 6 of the default domain"),
            std::string::npos)
      << g.status().message();
  auto newer = new_relu.import();
  ASSERT_FALSE(newer.ok());
  EXPECT_NE(newer.status().message().find("opset 19"), std::string::npos)
      << newer.status().message();
  EXPECT_TRUE(ok.import().ok());
  EXPECT_TRUE(old_relu.import().ok());
}

TEST(OnnxImport, Int64ThatDoesNotFitI32IsAnErrorNamingTheTensor) {
  Model m;
  m.input("table", kF32, {4, 2}).output("y");
  m.init_i64("ids", {2}, {1, int64_t{1} << 40});
  m.node("Gather", {"table", "ids"}, {"y"});
  auto g = m.import();
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("1099511627776"), std::string::npos) << g.status().message();
}

TEST(OnnxImport, GatherOfRowsMapsOntoEmbeddingWithNegativeIndicesMadePositive) {
  Model m;
  m.input("table", kF32, {4, 2}).output("y");
  m.init_i64("ids", {3}, {3, -4, 1});
  m.node("Gather", {"table", "ids"}, {"y"});
  auto g = m.import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(count_kind(*g, OpKind::embedding), 1);
  auto out = run_cpu(*g, {{"table", tensor({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7})}});
  ASSERT_TRUE(out.count("y"));
  const float* y = out.at("y").data<float>();
  EXPECT_EQ(std::vector<float>(y, y + 6), (std::vector<float>{6, 7, 0, 1, 2, 3}));
}

// Run-time ids count from the end below 0 (ONNX's meaning); one outside [-4, 4) is an error of
// the run naming the op's range and the id, not a crash.
// GatherND, ScatterND and ScatterElements with indices given at run time (negative ones count
// from the end); an index outside its range is an error of the run, never a silent pick.
TEST(OnnxImport, GathersAndScattersTakeIndicesComputedAtRunTime) {
  static Registry reg = open_registry();
  auto ints = [](std::vector<int64_t> shape, std::vector<int32_t> v) {
    HostTensor t = HostTensor::empty(DType::i32, shape);
    std::copy(v.begin(), v.end(), t.data<int32_t>());
    return t;
  };
  auto values = [](const HostTensor& t) {
    const float* p = t.data<float>();
    return std::vector<float>(p, p + t.numel());
  };
  Model gnd(13);
  gnd.input("x", kF32, {2, 3}).input("i", kI64, {2, 1}).output("y");
  gnd.node("GatherND", {"x", "i"}, {"y"});
  Model snd(13);
  snd.input("x", kF32, {4}).input("i", kI64, {2, 1}).input("u", kF32, {2}).output("y");
  snd.node("ScatterND", {"x", "i", "u"}, {"y"});
  Model sel(13);
  sel.input("x", kF32, {2, 3}).input("i", kI64, {2, 1}).input("u", kF32, {2, 1}).output("y");
  Model::attr(sel.node("ScatterElements", {"x", "i", "u"}, {"y"}), "axis", int64_t{1});
  struct Case {
    const Model& m;
    std::map<std::string, HostTensor> in;
    std::vector<float> want;
    HostTensor bad;
  } cases[] = {
      {gnd,
       {{"x", tensor({2, 3}, {1, 2, 3, 4, 5, 6})}, {"i", ints({2, 1}, {-1, 0})}},
       {4, 5, 6, 1, 2, 3},
       ints({2, 1}, {2, 0})},
      {snd,
       {{"x", tensor({4}, {1, 2, 3, 4})},
        {"i", ints({2, 1}, {3, -4})},
        {"u", tensor({2}, {-7, -8})}},
       {-8, 2, 3, -7},
       ints({2, 1}, {0, -5})},
      {sel,
       {{"x", tensor({2, 3}, {1, 2, 3, 4, 5, 6})},
        {"i", ints({2, 1}, {2, -3})},
        {"u", tensor({2, 1}, {-7, -8})}},
       {1, 2, -7, -8, 5, 6},
       ints({2, 1}, {3, 0})},
  };
  for (Case& c : cases) {
    auto g = c.m.import();
    ASSERT_TRUE(g.ok()) << g.status().message();
    auto e = Engine::create(*g, {reg.find("cpu:0")});
    ASSERT_TRUE(e.ok()) << e.status().message();
    auto out = (*e)->run(c.in);
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ(values(out->at("y")), c.want) << g->name();
    c.in["i"] = c.bad;
    EXPECT_FALSE((*e)->run(c.in).ok()) << "an index outside its range";
  }
}

TEST(OnnxImport, GatherWithRunTimeNegativeIdsCountsFromTheEnd) {
  Model m;
  m.input("table", kF32, {4, 2}).input("ids", kI64, {3}).output("y");
  m.node("Gather", {"table", "ids"}, {"y"});
  auto g = m.import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  static Registry reg = open_registry();
  auto e = Engine::create(*g, {reg.find("cpu:0")});
  ASSERT_TRUE(e.ok()) << e.status().message();
  const HostTensor table = tensor({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  HostTensor ids = HostTensor::empty(DType::i32, std::vector<int64_t>{3});
  const int32_t good[3] = {-1, 0, -4};
  std::copy(good, good + 3, ids.data<int32_t>());
  auto out = (*e)->run({{"table", table}, {"ids", ids}});
  ASSERT_TRUE(out.ok()) << out.status().message();
  const float* y = out->at("y").data<float>();
  EXPECT_EQ(std::vector<float>(y, y + 6), (std::vector<float>{6, 7, 0, 1, 0, 1}));
  ids.data<int32_t>()[1] = -5;
  out = (*e)->run({{"table", table}, {"ids", ids}});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("ids in [-4, 4)"), std::string::npos)
      << out.status().message();
  EXPECT_NE(out.status().message().find("id -5"), std::string::npos) << out.status().message();
}

// ReduceMean's axes: an attribute up to opset 17, an input from 18; keepdims = 0 drops them.
TEST(OnnxImport, ReduceMeanAxesFollowTheOpset) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};  // [2, 3, 2]
  for (int opset : {13, 18}) {
    Model m(opset);
    m.input("x", kF32, {2, 3, 2}).output("y");
    std::vector<std::string> in = {"x"};
    if (opset >= 18) {
      m.init_i64("axes", {2}, {0, -1});
      in.push_back("axes");
    }
    auto& n = m.node("ReduceMean", in, {"y"});
    if (opset < 18) Model::attr(n, "axes", std::vector<int64_t>{0, -1});
    Model::attr(n, "keepdims", int64_t{0});
    auto g = m.import();
    ASSERT_TRUE(g.ok()) << g.status().message();
    EXPECT_EQ(count_kind(*g, OpKind::reduce_mean), 1) << "opset " << opset;
    auto out = run_cpu(*g, {{"x", tensor({2, 3, 2}, x)}});
    ASSERT_TRUE(out.count("y"));
    EXPECT_EQ(out.at("y").desc().shape_str(), "[3]");
    const float* y = out.at("y").data<float>();
    // Means over dims 0 and 2 of each middle index: (1+2+7+8)/4, (3+4+9+10)/4, (5+6+11+12)/4.
    EXPECT_EQ(std::vector<float>(y, y + 3), (std::vector<float>{4.5f, 6.5f, 8.5f}))
        << "opset " << opset;
  }
}

TEST(OnnxImport, AScalarGatherIndexIsASliceView) {
  Model m;
  m.input("x", kF32, {2, 3}).output("y");
  m.init_i64("last", {}, {-1});
  Model::attr(m.node("Gather", {"x", "last"}, {"y"}), "axis", int64_t{1});
  auto g = m.import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(count_kind(*g, OpKind::slice), 1);
  auto out = run_cpu(*g, {{"x", tensor({2, 3}, {1, 2, 3, 4, 5, 6})}});
  ASSERT_TRUE(out.count("y"));
  EXPECT_EQ(out.at("y").desc().shape_str(), "[2]");
  EXPECT_EQ(out.at("y").data<float>()[0], 3.0f);
  EXPECT_EQ(out.at("y").data<float>()[1], 6.0f);
}

TEST(OnnxImport, GemmWithEveryAttributeMatchesItsDefinition) {
  // y = 0.5 * A^T B^T + 2 * C
  Model m;
  m.input("a", kF32, {2, 3}).input("b", kF32, {2, 2}).output("y");
  m.init("c", {1, 2}, {1, -1});
  auto& n = m.node("Gemm", {"a", "b", "c"}, {"y"});
  Model::attr(n, "alpha", 0.5f);
  Model::attr(n, "beta", 2.0f);
  Model::attr(n, "transA", int64_t{1});
  Model::attr(n, "transB", int64_t{1});
  OnnxOptions o;
  o.input_shapes["a"] = {2, 3};
  auto g = m.import(o);
  ASSERT_TRUE(g.ok()) << g.status().message();
  const std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {1, 2, 3, 4};
  auto out = run_cpu(*g, {{"a", tensor({2, 3}, a)}, {"b", tensor({2, 2}, b)}});
  ASSERT_TRUE(out.count("y"));
  const float c[2] = {1, -1};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) {
      float s = 0;
      for (int k = 0; k < 2; ++k)
        s += a[static_cast<size_t>(k * 3 + i)] * b[static_cast<size_t>(j * 2 + k)];
      EXPECT_FLOAT_EQ(out.at("y").data<float>()[i * 2 + j], 0.5f * s + 2.0f * c[j])
          << i << "," << j;
    }
}

TEST(OnnxImport, SoftmaxAxisFollowsTheOpsetsSemantics) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  for (int opset : {11, 13}) {
    Model m(opset);
    m.input("x", kF32, {2, 2, 2}).output("y");
    Model::attr(m.node("Softmax", {"x"}, {"y"}), "axis", int64_t{1});
    auto g = m.import();
    ASSERT_TRUE(g.ok()) << g.status().message();
    auto out = run_cpu(*g, {{"x", tensor({2, 2, 2}, x)}});
    ASSERT_TRUE(out.count("y"));
    const float* y = out.at("y").data<float>();
    if (opset == 11) {  // over the 4 trailing elements of each batch row, flattened
      double z = 0;
      for (int k = 0; k < 4; ++k) z += std::exp(x[static_cast<size_t>(k)]);
      EXPECT_NEAR(y[0], std::exp(1.0) / z, 1e-6);
    } else {  // over axis 1 alone: pairs (x[0], x[2])
      EXPECT_NEAR(y[0], std::exp(1.0) / (std::exp(1.0) + std::exp(3.0)), 1e-6);
    }
  }
}

TEST(OnnxImport, LayerNormalizationOverSeveralAxesFlattensThem) {
  Model m;
  m.input("x", kF32, {2, 2, 2}).output("y");
  m.init("scale", {2, 2}, {1, 2, 3, 4});
  Model::attr(m.node("LayerNormalization", {"x", "scale"}, {"y"}), "axis", int64_t{1});
  auto g = m.import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(count_kind(*g, OpKind::layernorm), 1);
  const std::vector<float> x = {1, 2, 3, 4, 10, 20, 30, 40};
  auto out = run_cpu(*g, {{"x", tensor({2, 2, 2}, x)}});
  ASSERT_TRUE(out.count("y"));
  const double mean = 2.5, var = 1.25;
  EXPECT_NEAR(out.at("y").data<float>()[3], 4.0 * (4 - mean) / std::sqrt(var + 1e-5), 1e-4);
}

TEST(OnnxImport, GeluWrittenOutByTheExporterBecomesOneOp) {
  // y = x * 0.5 * (1 + erf(x / sqrt(2))), as PyTorch exports nn.GELU below opset 20.
  Model m;
  m.input("x", kF32, {8}).output("y");
  m.init("sqrt2", {}, {1.4142135f});
  m.init("one", {}, {1.0f});
  m.init("half", {}, {0.5f});
  m.node("Div", {"x", "sqrt2"}, {"t"});
  m.node("Erf", {"t"}, {"e"});
  m.node("Add", {"e", "one"}, {"a"});
  m.node("Mul", {"x", "a"}, {"m"});
  m.node("Mul", {"m", "half"}, {"y"});
  std::vector<std::string> notes;
  OnnxOptions o;
  o.notes = &notes;
  auto g = m.import(o);
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_EQ(g->nodes().size(), 1u);
  EXPECT_EQ(g->nodes()[0].kind(), OpKind::gelu);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("Gelu"), std::string::npos) << notes[0];
}

// softmax(q @ kt * 0.5 + mask) @ v over q, kt, v of the given shapes, mask [L, L] causal.
Model attention_model(std::vector<int64_t> q, std::vector<int64_t> kt, std::vector<int64_t> v) {
  Model m;
  m.input("q", kF32, q).input("kt", kF32, kt).input("v", kF32, v).output("y");
  const int64_t l = q[q.size() - 2];
  std::vector<float> mask;
  for (int64_t i = 0; i < l; ++i)
    for (int64_t j = 0; j < l; ++j) mask.push_back(j <= i ? 0.0f : -INFINITY);
  m.init("mask", {l, l}, mask);
  m.init("half", {}, {0.5f});
  m.node("MatMul", {"q", "kt"}, {"s"});
  m.node("Mul", {"s", "half"}, {"scaled"});
  m.node("Add", {"scaled", "mask"}, {"masked"});
  m.node("Softmax", {"masked"}, {"p"});
  m.node("MatMul", {"p", "v"}, {"y"});
  return m;
}

// The same computed op by op in double: what either form must give.
std::vector<double> attention_by_hand(const std::vector<float>& q, const std::vector<float>& kt,
                                      const std::vector<float>& v, int64_t heads, int64_t l,
                                      int64_t d) {
  std::vector<double> y(static_cast<size_t>(heads * l * d), 0.0);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < l; ++i) {
      std::vector<double> p(static_cast<size_t>(l));
      double z = 0;
      for (int64_t j = 0; j <= i; ++j) {
        double s = 0;
        for (int64_t c = 0; c < d; ++c)
          s += q[static_cast<size_t>((h * l + i) * d + c)] *
               kt[static_cast<size_t>((h * d + c) * l + j)];
        p[static_cast<size_t>(j)] = std::exp(0.5 * s);
        z += p[static_cast<size_t>(j)];
      }
      for (int64_t j = 0; j <= i; ++j)
        for (int64_t c = 0; c < d; ++c)
          y[static_cast<size_t>((h * l + i) * d + c)] +=
              p[static_cast<size_t>(j)] / z * v[static_cast<size_t>((h * l + j) * d + c)];
    }
  return y;
}

std::vector<float> ramp(size_t n, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) * step);
  return v;
}

TEST(OnnxImport, AttentionWrittenOutBecomesDuetsCausalAttention) {
  const int64_t h = 2, l = 5, d = 4;
  auto g = attention_model({1, h, l, d}, {1, h, d, l}, {1, h, l, d}).import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_EQ(count_kind(*g, OpKind::attention), 1);
  EXPECT_EQ(count_kind(*g, OpKind::softmax), 0);
  for (const GraphNode& n : g->nodes())
    if (n.kind() == OpKind::attention) {
      EXPECT_TRUE(n.op.attrs.causal);  // the known -inf mask above the diagonal
      EXPECT_EQ(n.inputs.size(), 3u);
    }
  const auto q = ramp(40, 0.3f), kt = ramp(40, 0.7f), v = ramp(40, 1.1f);
  auto out = run_cpu(*g, {{"q", tensor({1, h, l, d}, q)},
                          {"kt", tensor({1, h, d, l}, kt)},
                          {"v", tensor({1, h, l, d}, v)}});
  ASSERT_TRUE(out.count("y"));
  const std::vector<double> want = attention_by_hand(q, kt, v, h, l, d);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(out.at("y").data<float>()[i], want[i], 1e-5);
}

TEST(OnnxImport, PatternsAreMadeOfOnnxsOwnOpsOnly) {
  // Found by the ONNX fuzz target seeded with the fusion patterns: an attention pattern whose
  // last MatMul was of another domain, with one input, was read as the pattern's (input 1 of a
  // one-input list). A node of another domain is never part of a pattern; it is refused as such.
  Model m = attention_model({1, 1, 3, 2}, {1, 1, 2, 3}, {1, 1, 3, 2});
  for (auto& n : *m.proto().mutable_graph()->mutable_node())
    if (n.output(0) == "y") {
      n.set_domain("com.example");
      n.mutable_input()->RemoveLast();
    }
  auto g = m.import();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), Code::unsupported) << g.status().message();
  EXPECT_NE(g.status().message().find("com.example"), std::string::npos) << g.status().message();
}

TEST(OnnxImport, AttentionWithHeadsFoldedIntoTheBatchIsOneOp) {
  // [B*H, L, D], as nn.MultiheadAttention exports it: one batch of B*H heads.
  const int64_t h = 2, l = 5, d = 4;
  auto g = attention_model({h, l, d}, {h, d, l}, {h, l, d}).import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(count_kind(*g, OpKind::attention), 1);
  EXPECT_EQ(count_kind(*g, OpKind::softmax), 0);
  const auto q = ramp(40, 0.3f), kt = ramp(40, 0.7f), v = ramp(40, 1.1f);
  auto out = run_cpu(
      *g,
      {{"q", tensor({h, l, d}, q)}, {"kt", tensor({h, d, l}, kt)}, {"v", tensor({h, l, d}, v)}});
  ASSERT_TRUE(out.count("y"));
  EXPECT_EQ(out.at("y").desc().shape_str(), "[2,5,4]");
  const std::vector<double> want = attention_by_hand(q, kt, v, h, l, d);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(out.at("y").data<float>()[i], want[i], 1e-5);
}

TEST(OnnxImport, AnAttentionPatternOfOtherShapesRunsAsItsOpsAndSaysSo) {
  // Rank 2: not duet's attention, so the matmuls, scale, mask and softmax stay, and the note
  // that counts the pattern is followed by one saying what runs.
  const int64_t l = 5, d = 4;
  std::vector<std::string> notes;
  OnnxOptions o;
  o.notes = &notes;
  auto g = attention_model({l, d}, {d, l}, {l, d}).import(o);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(count_kind(*g, OpKind::attention), 0);
  EXPECT_EQ(count_kind(*g, OpKind::softmax), 1);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[1].find("runs as matmul, softmax and matmul"), std::string::npos) << notes[1];
  const auto q = ramp(20, 0.3f), kt = ramp(20, 0.7f), v = ramp(20, 1.1f);
  auto out =
      run_cpu(*g, {{"q", tensor({l, d}, q)}, {"kt", tensor({d, l}, kt)}, {"v", tensor({l, d}, v)}});
  ASSERT_TRUE(out.count("y"));
  const std::vector<double> want = attention_by_hand(q, kt, v, 1, l, d);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(out.at("y").data<float>()[i], want[i], 1e-5);
}

TEST(OnnxImport, NormsWrittenWithReduceMeanBecomeDuetsNorms) {
  const std::vector<float> x = {1, 2, 3, 4, -1, 0.5f, 2, 8};
  const std::vector<float> w = {1, 2, 0.5f, -1}, b = {0, 1, 0, -1};
  {  // LayerNorm as PyTorch exports it below opset 17.
    Model m(14);
    m.input("x", kF32, {2, 4}).output("y");
    m.init("two", {}, {2.0f});
    m.init("eps", {}, {1e-5f});
    m.init("w", {4}, w);
    m.init("b", {4}, b);
    Model::attr(m.node("ReduceMean", {"x"}, {"mean"}), "axes", std::vector<int64_t>{-1});
    m.node("Sub", {"x", "mean"}, {"d"});
    m.node("Pow", {"d", "two"}, {"d2"});
    Model::attr(m.node("ReduceMean", {"d2"}, {"var"}), "axes", std::vector<int64_t>{-1});
    m.node("Add", {"var", "eps"}, {"ve"});
    m.node("Sqrt", {"ve"}, {"sd"});
    m.node("Div", {"d", "sd"}, {"n"});
    m.node("Mul", {"n", "w"}, {"nw"});
    m.node("Add", {"nw", "b"}, {"y"});
    auto g = m.import();
    ASSERT_TRUE(g.ok()) << g.status().message();
    ASSERT_EQ(g->nodes().size(), 1u);
    EXPECT_EQ(g->nodes()[0].kind(), OpKind::layernorm);
    auto out = run_cpu(*g, {{"x", tensor({2, 4}, x)}});
    ASSERT_TRUE(out.count("y"));
    for (int r = 0; r < 2; ++r) {
      double mean = 0, var = 0;
      for (int c = 0; c < 4; ++c) mean += x[static_cast<size_t>(r * 4 + c)] / 4.0;
      for (int c = 0; c < 4; ++c)
        var += std::pow(x[static_cast<size_t>(r * 4 + c)] - mean, 2) / 4.0;
      for (int c = 0; c < 4; ++c)
        EXPECT_NEAR(out.at("y").data<float>()[r * 4 + c],
                    (x[static_cast<size_t>(r * 4 + c)] - mean) / std::sqrt(var + 1e-5) *
                            w[static_cast<size_t>(c)] +
                        b[static_cast<size_t>(c)],
                    1e-5);
    }
  }
  {  // RMSNorm as LLaMA-style models export it: w * (x * (1 / sqrt(mean(x^2) + eps))).
    Model m(18);
    m.input("x", kF32, {2, 4}).output("y");
    m.init("two", {}, {2.0f});
    m.init("eps", {}, {1e-6f});
    m.init("one", {}, {1.0f});
    m.init_i64("last", {1}, {-1});
    m.init("w", {4}, w);
    m.node("Pow", {"x", "two"}, {"x2"});
    m.node("ReduceMean", {"x2", "last"}, {"ms"});
    m.node("Add", {"ms", "eps"}, {"mse"});
    m.node("Sqrt", {"mse"}, {"rms"});
    m.node("Div", {"one", "rms"}, {"inv"});
    m.node("Mul", {"x", "inv"}, {"n"});
    m.node("Mul", {"w", "n"}, {"y"});
    auto g = m.import();
    ASSERT_TRUE(g.ok()) << g.status().message();
    ASSERT_EQ(g->nodes().size(), 1u);
    EXPECT_EQ(g->nodes()[0].kind(), OpKind::rmsnorm);
    auto out = run_cpu(*g, {{"x", tensor({2, 4}, x)}});
    ASSERT_TRUE(out.count("y"));
    for (int r = 0; r < 2; ++r) {
      double ms = 0;
      for (int c = 0; c < 4; ++c) ms += std::pow(x[static_cast<size_t>(r * 4 + c)], 2) / 4.0;
      for (int c = 0; c < 4; ++c)
        EXPECT_NEAR(
            out.at("y").data<float>()[r * 4 + c],
            x[static_cast<size_t>(r * 4 + c)] / std::sqrt(ms + 1e-6) * w[static_cast<size_t>(c)],
            1e-5);
    }
  }
}

TEST(OnnxImport, APatternWhoseInnerValueIsReadElsewhereIsNotFused) {
  Model m;
  m.input("x", kF32, {8}).output("y").output("s");
  m.node("Sigmoid", {"x"}, {"s"});
  m.node("Mul", {"x", "s"}, {"y"});
  auto g = m.import();
  // Sigmoid is needed on its own then, which duet maps only when known.
  EXPECT_FALSE(g.ok() && count_kind(*g, OpKind::silu) == 1);
  Model fused;
  fused.input("x", kF32, {8}).output("y");
  fused.node("Sigmoid", {"x"}, {"s"});
  fused.node("Mul", {"s", "x"}, {"y"});
  auto f = fused.import();
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(count_kind(*f, OpKind::silu), 1);
}

TEST(OnnxImport, SymbolicDimsComeFromTheOptionsOrAreOneWithANote) {
  Model m;
  m.input("x", kF32, {0, 0, 8}, {"batch", "seq"}).output("y");
  m.node("Relu", {"x"}, {"y"});
  std::vector<std::string> notes;
  OnnxOptions o;
  o.dims["seq"] = 5;
  o.notes = &notes;
  auto g = m.import(o);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->value(g->inputs()[0]).desc.shape_str(), "[1,5,8]");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("'batch'"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("duet_graph_load_onnx(path, \"batch=N\""), std::string::npos) << notes[0];
  // A given tensor's shape sizes them too, and a --dim that contradicts it is an error.
  o.input_shapes["x"] = {3, 4, 8};
  auto clash = m.import(o);
  ASSERT_FALSE(clash.ok());
  EXPECT_NE(clash.status().message().find("seq=5"), std::string::npos) << clash.status().message();
  EXPECT_NE(clash.status().message().find("[3,4,8]"), std::string::npos);
  o.dims.clear();
  auto g2 = m.import(o);
  ASSERT_TRUE(g2.ok()) << g2.status().message();
  EXPECT_EQ(g2->value(g2->inputs()[0]).desc.shape_str(), "[3,4,8]");
  // Imported from bytes (no file to import again from), the graph runs at those sizes only (its
  // shape arithmetic was folded for them): another size is an error that says how to import it
  // again. (A model read from a file is imported again at other sizes: exported_models_test.)
  auto other = g2->with_input_shapes({{"x", TensorDesc::contiguous(DType::f32, {2, 4, 8})}});
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("[3,4,8] only"), std::string::npos)
      << other.status().message();
  EXPECT_NE(other.status().message().find("duet_graph_load_onnx(path, \"batch=4\""),
            std::string::npos)
      << other.status().message();
}

TEST(OnnxImport, WhereWithAKnownConditionSelectsByArithmetic) {
  // c picks x where set: once with y known (finite and -inf fills), once with both at run time.
  Model m;
  m.input("x", kF32, {2, 3}).input("z", kF32, {2, 3}).output("fill").output("both");
  auto& c = *m.proto().mutable_graph()->add_initializer();
  c.set_name("c");
  c.set_data_type(onnx::TensorProto::BOOL);
  c.add_dims(3);
  for (int v : {1, 0, 1}) c.add_int32_data(v);
  m.init("y", {2, 1}, {-2.5f, -INFINITY});
  m.node("Where", {"c", "x", "y"}, {"fill"});
  m.node("Where", {"c", "x", "z"}, {"both"});
  auto g = m.import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  const std::vector<float> x = {1, 2, 3, 4, 5, 6}, z = {-1, -2, -3, -4, -5, -6};
  auto out = run_cpu(*g, {{"x", tensor({2, 3}, x)}, {"z", tensor({2, 3}, z)}});
  ASSERT_TRUE(out.count("fill") && out.count("both"));
  const std::vector<float> fill = {1, -2.5f, 3, 4, -INFINITY, 6}, both = {1, -2, 3, 4, -5, 6};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(out.at("fill").data<float>()[i], fill[i]) << i;
    EXPECT_EQ(out.at("both").data<float>()[i], both[i]) << i;
  }
}

// masked_fill with a mask computed at run time: Where selects, so an infinite or NaN value in the
// branch not taken stays out of the result (arithmetic would give inf * 0 = NaN).
TEST(OnnxImport, WhereWithARunTimeConditionSelectsEveryValueExactly) {
  Model m;
  m.input("x", kF32, {2, 3}).input("z", kF32, {3}).output("filled").output("picked");
  m.init("zero", {}, {0.0f});
  m.init("fill", {}, {-INFINITY});
  m.node("Less", {"x", "zero"}, {"negative"});
  m.node("Where", {"negative", "fill", "x"}, {"filled"});
  m.node("Where", {"negative", "z", "x"}, {"picked"});
  auto g = m.import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  const std::vector<float> x = {-1, 2, INFINITY, 4, -INFINITY, NAN};
  auto out = run_cpu(*g, {{"x", tensor({2, 3}, x)}, {"z", tensor({3}, {NAN, -INFINITY, 7})}});
  ASSERT_TRUE(out.count("filled") && out.count("picked"));
  const float* f = out.at("filled").data<float>();
  const float* p = out.at("picked").data<float>();
  const std::vector<float> filled = {-INFINITY, 2, INFINITY, 4, -INFINITY},
                           picked = {NAN, 2, INFINITY, 4, -INFINITY};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(f[i], filled[i]) << i;
    if (i > 0) {
      EXPECT_EQ(p[i], picked[i]) << i;
    }
  }
  EXPECT_TRUE(std::isnan(p[0]));
  EXPECT_TRUE(std::isnan(f[5]) && std::isnan(p[5]));  // NaN < 0 is false: x's NaN kept
}

TEST(OnnxImport, BoolTensorsAtRunTimeAreZeroOrOneInI8) {
  // A condition computed at run time (Less), logic with a bool input, Cast to bool (x != 0, NaN
  // true): bools are i8 tensors of 0 and 1, as ONNX stores them.
  constexpr int kBoolElem = onnx::TensorProto::BOOL;
  Model r;
  r.input("x", kF32, {4}).input("b", kBoolElem, {4});
  r.output("y").output("nonzero", kBoolElem).output("either", kBoolElem);
  r.init("zero", {}, {0.0f});
  r.node("Less", {"x", "zero"}, {"neg"});
  r.node("Where", {"neg", "zero", "x"}, {"y"});
  Model::attr(r.node("Cast", {"x"}, {"nonzero"}), "to", int64_t{kBoolElem});
  r.node("Or", {"neg", "b"}, {"either"});
  auto g = r.import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  const std::vector<int64_t> four = {4};
  HostTensor b = HostTensor::empty(DType::i8, four);
  const int8_t bv[] = {0, 0, 1, 0};
  std::copy(std::begin(bv), std::end(bv), b.data<int8_t>());
  auto out = run_cpu(*g, {{"x", tensor({4}, {-1.5f, 0.5f, 0.0f, NAN})}, {"b", b}});
  ASSERT_EQ(out.size(), 3u);
  const float y[] = {0.0f, 0.5f, 0.0f};
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(out.at("y").data<float>()[i], y[i]) << i;
  EXPECT_TRUE(std::isnan(out.at("y").data<float>()[3]));
  ASSERT_EQ(out.at("nonzero").dtype(), DType::i8);
  const int8_t nonzero[] = {1, 1, 0, 1}, either[] = {1, 0, 1, 0};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(out.at("nonzero").data<int8_t>()[i], nonzero[i]) << i;
    EXPECT_EQ(out.at("either").data<int8_t>()[i], either[i]) << i;
  }
}

// Mod: known integers fold with the divisor's sign (fmod 0, Python's %) or the dividend's (fmod 1,
// C's), INT64_MIN % -1 without overflow; floats at run time are duet's fmod, exact where the
// rounded quotient is an integer too many (0.3 / 0.1) and far beyond 2^24; float Mod with fmod 0
// is invalid ONNX.
// Equal(input_ids, pad_id) and the like: integers compared at run time in f32, exact below 2^24
// in magnitude; a larger value fails the run (never a comparison of rounded values), and a known
// one is refused at import.
TEST(OnnxImport, IntegerComparisonsAtRunTimeAreExactOrFail) {
  constexpr int kBoolElem = onnx::TensorProto::BOOL;
  Model m;
  m.input("ids", kI64, {4}).output("pad", kBoolElem).output("after", kBoolElem);
  m.init_i64("pad_id", {1}, {16777215});
  m.node("Equal", {"ids", "pad_id"}, {"pad"});
  m.node("Greater", {"ids", "pad_id"}, {"after"});
  auto g = m.import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  static Registry reg = open_registry();
  auto e = Engine::create(*g, {reg.find("cpu:0")});
  ASSERT_TRUE(e.ok()) << e.status().message();
  HostTensor ids = HostTensor::empty(DType::i32, std::vector<int64_t>{4});
  const int32_t v[] = {16777215, -16777215, 16777214, 7};
  std::copy(std::begin(v), std::end(v), ids.data<int32_t>());
  auto out = (*e)->run({{"ids", ids}});
  ASSERT_TRUE(out.ok()) << out.status().message();
  const int8_t* pad = out->at("pad").data<int8_t>();
  EXPECT_EQ(std::vector<int8_t>(pad, pad + 4), (std::vector<int8_t>{1, 0, 0, 0}));
  const int8_t* after = out->at("after").data<int8_t>();
  EXPECT_EQ(std::vector<int8_t>(after, after + 4), (std::vector<int8_t>{0, 0, 0, 0}));
  ids.data<int32_t>()[3] = 16777216;  // rounds to 2^24 in f32: refused when it runs
  out = (*e)->run({{"ids", ids}});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("beyond_2^24"), std::string::npos)
      << out.status().message();
  Model big;
  big.input("ids", kI64, {4}).output("pad", kBoolElem);
  big.init_i64("pad_id", {1}, {16777217});
  big.node("Equal", {"ids", "pad_id"}, {"pad"});
  auto refused = big.import();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("16777217"), std::string::npos)
      << refused.status().message();
}

// CumSum at run time, every way (exclusive, reverse) along either axis, against sums one by one;
// then RoBERTa's position ids from its input ids, integer arithmetic at run time: mask = ids != 1,
// cumsum(mask) * mask + 1, exact in f32, and a sum beyond 2^24 fails the run.
TEST(OnnxImport, CumSumAndIntegerArithmeticAtRunTime) {
  const std::vector<float> x = {1, -2, 3.5f, 4, 5, -6, 7, 8, 9, 10};
  for (int64_t axis : {0, 1})
    for (int64_t exclusive : {0, 1})
      for (int64_t reverse : {0, 1}) {
        Model m;
        m.input("x", kF32, {2, 5}).output("y");
        m.init_i64("axis", {}, {axis});
        auto& node = m.node("CumSum", {"x", "axis"}, {"y"});
        Model::attr(node, "exclusive", exclusive);
        Model::attr(node, "reverse", reverse);
        auto g = m.import();
        ASSERT_TRUE(g.ok()) << g.status().message();
        auto out = run_cpu(*g, {{"x", tensor({2, 5}, x)}});
        ASSERT_TRUE(out.count("y"));
        const int64_t len = axis == 0 ? 2 : 5, stride = axis == 0 ? 5 : 1;
        for (int64_t e = 0; e < 10; ++e) {
          const int64_t at = axis == 0 ? e / 5 : e % 5, first = e - at * stride;
          double want = 0;
          for (int64_t k = 0; k < len; ++k)
            if (reverse ? (k > at || (k == at && !exclusive)) : (k < at || (k == at && !exclusive)))
              want += x[static_cast<size_t>(first + k * stride)];
          EXPECT_FLOAT_EQ(out.at("y").data<float>()[e], static_cast<float>(want))
              << "axis " << axis << " exclusive " << exclusive << " reverse " << reverse << " at "
              << e;
        }
      }
  Model p;
  p.input("ids", kI64, {2, 4}).output("pos", kI64);
  p.init_i64("pad", {}, {1});
  p.init_i64("one", {}, {1});
  p.init_i64("axis", {}, {1});
  p.node("Equal", {"ids", "pad"}, {"is_pad"});
  p.node("Not", {"is_pad"}, {"keep"});
  Model::attr(p.node("Cast", {"keep"}, {"mask"}), "to", int64_t{kI64});
  p.node("CumSum", {"mask", "axis"}, {"count"});
  p.node("Mul", {"count", "mask"}, {"masked"});
  p.node("Add", {"masked", "one"}, {"pos"});
  auto g = p.import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  static Registry reg = open_registry();
  auto e = Engine::create(*g, {reg.find("cpu:0")});
  ASSERT_TRUE(e.ok()) << e.status().message();
  HostTensor ids = HostTensor::empty(DType::i32, std::vector<int64_t>{2, 4});
  const int32_t v[] = {5, 7, 1, 1, 3, 16777215, 9, 1};
  std::copy(std::begin(v), std::end(v), ids.data<int32_t>());
  auto out = (*e)->run({{"ids", ids}});
  ASSERT_TRUE(out.ok()) << out.status().message();
  const int32_t* pos = out->at("pos").data<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(pos, pos + 8), (std::vector<int32_t>{2, 3, 1, 1, 2, 3, 4, 1}));
  Model s;
  s.input("a", kI64, {2}).input("b", kI64, {2}).output("sum", kI64);
  s.node("Add", {"a", "b"}, {"sum"});
  auto sg = s.import();
  ASSERT_TRUE(sg.ok()) << sg.status().message();
  auto se = Engine::create(*sg, {reg.find("cpu:0")});
  ASSERT_TRUE(se.ok()) << se.status().message();
  HostTensor a = HostTensor::empty(DType::i32, std::vector<int64_t>{2});
  a.data<int32_t>()[0] = 16777215;
  a.data<int32_t>()[1] = -3;
  auto sum = (*se)->run({{"a", a}, {"b", a}});
  ASSERT_FALSE(sum.ok());  // 2 * (2^24 - 1) does not fit f32 exactly
  EXPECT_NE(sum.status().message().find("beyond_2^24"), std::string::npos)
      << sum.status().message();
}

// A bidirectional LSTM and GRU (layout 0 and 1) are their forward pass and their reverse pass side
// by side: the same model's one-direction cells (what the node suite checks against ONNX's data)
// with each direction's weights give the same values, bit for bit.
TEST(OnnxImport, BidirectionalCellsAreTheirTwoDirectionsSideBySide) {
  for (const std::string type : {"LSTM", "GRU"})
    for (int64_t layout : {0, 1}) {
      const int64_t gates = type == "LSTM" ? 4 : 3, hidden = 3, in = 4, seq = 3, batch = 2;
      auto values = [](size_t count, float seed) {
        std::vector<float> v(count);
        for (size_t i = 0; i < count; ++i) v[i] = std::sin(seed + 0.7f * static_cast<float>(i));
        return v;
      };
      const auto w = values(static_cast<size_t>(2 * gates * hidden * in), 1.0f);
      const auto r = values(static_cast<size_t>(2 * gates * hidden * hidden), 2.0f);
      const auto b = values(static_cast<size_t>(2 * 2 * gates * hidden), 3.0f);
      auto half = [](const std::vector<float>& v, int d) {
        const size_t n = v.size() / 2;
        return std::vector<float>(v.begin() + static_cast<long>(d * n),
                                  v.begin() + static_cast<long>((d + 1) * n));
      };
      Model m;
      const std::vector<int64_t> xd =
          layout ? std::vector<int64_t>{batch, seq, in} : std::vector<int64_t>{seq, batch, in};
      m.input("x", kF32, xd).output("y").output("y_h").output("yf").output("yr");
      m.init("w", {2, gates * hidden, in}, w);
      m.init("r", {2, gates * hidden, hidden}, r);
      m.init("b", {2, 2 * gates * hidden}, b);
      for (int d = 0; d < 2; ++d) {
        const std::string k = std::to_string(d);
        m.init("w" + k, {1, gates * hidden, in}, half(w, d));
        m.init("r" + k, {1, gates * hidden, hidden}, half(r, d));
        m.init("b" + k, {1, 2 * gates * hidden}, half(b, d));
      }
      auto cell = [&](std::vector<std::string> in_names, std::vector<std::string> out,
                      const std::string& dir) {
        auto& node = m.node(type, std::move(in_names), std::move(out));
        Model::attr(node, "hidden_size", hidden);
        Model::attr(node, "direction", dir);
        Model::attr(node, "layout", layout);
      };
      cell({"x", "w", "r", "b"}, {"y", "y_h"}, "bidirectional");
      cell({"x", "w0", "r0", "b0"}, {"yf"}, "forward");
      cell({"x", "w1", "r1", "b1"}, {"yr"}, "reverse");
      auto g = m.import();
      ASSERT_TRUE(g.ok()) << type << ": " << g.status().message();
      auto out =
          run_cpu(*g, {{"x", tensor(xd, values(static_cast<size_t>(seq * batch * in), 4.0f))}});
      ASSERT_EQ(out.size(), 4u) << type;
      const float *y = out.at("y").data<float>(), *yf = out.at("yf").data<float>(),
                  *yr = out.at("yr").data<float>(), *yh = out.at("y_h").data<float>();
      // y [seq, 2, batch, hidden] (layout 1: [batch, seq, 2, hidden]); y_h [2, batch, hidden]
      // ([batch, 2, hidden]); yf and yr with a direction axis of 1.
      for (int64_t s = 0; s < seq; ++s)
        for (int64_t n = 0; n < batch; ++n)
          for (int64_t h = 0; h < hidden; ++h)
            for (int64_t d = 0; d < 2; ++d) {
              const int64_t at = layout ? ((n * seq + s) * 2 + d) * hidden + h
                                        : ((s * 2 + d) * batch + n) * hidden + h;
              const int64_t one =
                  layout ? (n * seq + s) * hidden + h : (s * batch + n) * hidden + h;
              EXPECT_EQ(y[at], (d == 0 ? yf : yr)[one]) << type << " layout " << layout;
              const int64_t last = d == 0 ? seq - 1 : 0;
              if (s != last) continue;
              const int64_t hat = layout ? (n * 2 + d) * hidden + h : (d * batch + n) * hidden + h;
              EXPECT_EQ(yh[hat], y[at]) << type << " layout " << layout;
            }
    }
}

TEST(OnnxImport, ModFoldsIntegersEitherWayAndIsExactForFloats) {
  Model m;
  m.input("x", kF32, {6});
  m.output("y").output("python").output("c");
  const std::vector<float> d = {0.1f, -0.1f, 3.0f, -3.0f, 1e-3f, 0.75f};
  m.init("d", {6}, d);
  Model::attr(m.node("Mod", {"x", "d"}, {"y"}), "fmod", int64_t{1});
  m.init_i64("a", {4}, {7, -7, 7, std::numeric_limits<int64_t>::min()});
  m.init_i64("b", {4}, {-3, 3, 3, -1});
  m.node("Mod", {"a", "b"}, {"py"});
  Model::attr(m.node("Mod", {"a", "b"}, {"cm"}), "fmod", int64_t{1});
  Model::attr(m.node("Cast", {"py"}, {"python"}), "to", int64_t{kF32});
  Model::attr(m.node("Cast", {"cm"}, {"c"}), "to", int64_t{kF32});
  auto g = m.import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(count_kind(*g, OpKind::fmod), 1);
  const std::vector<float> x = {0.3f, 0.3f, -7.5f, 7.5f, 3e5f, -1e30f};
  auto out = run_cpu(*g, {{"x", tensor({6}, x)}});
  ASSERT_EQ(out.size(), 3u);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(out.at("y").data<float>()[i], std::fmod(x[i], d[i])) << i;
  const float python[] = {-2, 2, 1, 0}, c[] = {1, -1, 1, 0};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(out.at("python").data<float>()[i], python[i]) << i;
    EXPECT_EQ(out.at("c").data<float>()[i], c[i]) << i;
  }
  Model bad;
  bad.input("x", kF32, {2}).output("y");
  bad.init("d", {2}, {1.0f, 2.0f});
  bad.node("Mod", {"x", "d"}, {"y"});
  auto refused = bad.import();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("fmod=0"), std::string::npos)
      << refused.status().message();
}

TEST(OnnxImport, PadModesAndNegativePadsMatchTheirDefinitions) {
  // x = [[1, 2, 3], [4, 5, 6]]; pads [begin rows, begin cols, end rows, end cols].
  Model m;
  m.input("x", kF32, {2, 3}).output("c").output("e").output("r");
  m.init_i64("pc", {4}, {1, -1, 0, 1});  // a row of 7 before, the first column cropped, one after
  m.init_i64("pe", {4}, {0, 2, 1, 0});
  m.init_i64("pr", {4}, {0, 2, 0, -1});  // mirrored about the edge, the last column cropped
  m.init("seven", {}, {7.0f});
  m.node("Pad", {"x", "pc", "seven"}, {"c"});
  Model::attr(m.node("Pad", {"x", "pe"}, {"e"}), "mode", std::string("edge"));
  Model::attr(m.node("Pad", {"x", "pr"}, {"r"}), "mode", std::string("reflect"));
  auto g = m.import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto out = run_cpu(*g, {{"x", tensor({2, 3}, {1, 2, 3, 4, 5, 6})}});
  ASSERT_TRUE(out.count("c") && out.count("e") && out.count("r"));
  auto values = [&](const char* name) {
    const HostTensor& t = out.at(name);
    return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
  };
  EXPECT_EQ(out.at("c").desc().shape_str(), "[3,3]");
  EXPECT_EQ(values("c"), (std::vector<float>{7, 7, 7, 2, 3, 7, 5, 6, 7}));
  EXPECT_EQ(out.at("e").desc().shape_str(), "[3,5]");
  EXPECT_EQ(values("e"), (std::vector<float>{1, 1, 1, 2, 3, 4, 4, 4, 5, 6, 4, 4, 4, 5, 6}));
  EXPECT_EQ(out.at("r").desc().shape_str(), "[2,4]");
  EXPECT_EQ(values("r"), (std::vector<float>{3, 2, 1, 2, 6, 5, 4, 5}));
  // Reflect pads longer than the axis allows, and modes duet does not map, are refused by name.
  Model bad;
  bad.input("x", kF32, {2, 3}).output("y");
  bad.init_i64("p", {4}, {0, 3, 0, 0});
  Model::attr(bad.node("Pad", {"x", "p"}, {"y"}, "pad"), "mode", std::string("reflect"));
  auto refused = bad.import();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("node 'pad' (Pad, opset 17): reflect pads of 3"),
            std::string::npos)
      << refused.status().message();
}

TEST(OnnxImport, MaxMinAndClipAreExactForValuesOfAnyMagnitude) {
  // max(a, b) as (a + b + |a - b|) / 2 would lose 1e-3 beside -1e8: the stacked reduction does not.
  Model m;
  m.input("a", kF32, {2, 2}).input("b", kF32, {2}).output("mx").output("mn").output("cl");
  m.init("lo", {}, {-1.0f});
  m.init("hi", {}, {1e-3f});
  m.node("Max", {"a", "b"}, {"mx"});
  m.node("Min", {"a", "b", "a"}, {"mn"});
  m.node("Clip", {"a", "lo", "hi"}, {"cl"});
  auto g = m.import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto out = run_cpu(
      *g, {{"a", tensor({2, 2}, {-1e8f, 5e-4f, 3.0f, -2.0f})}, {"b", tensor({2}, {1e-3f, -1e8f})}});
  ASSERT_TRUE(out.count("mx") && out.count("mn") && out.count("cl"));
  const std::vector<float> mx = {1e-3f, 5e-4f, 3.0f, -2.0f}, mn = {-1e8f, -1e8f, 1e-3f, -1e8f},
                           cl = {-1.0f, 5e-4f, 1e-3f, -1.0f};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(out.at("mx").data<float>()[i], mx[i]) << i;
    EXPECT_EQ(out.at("mn").data<float>()[i], mn[i]) << i;
    EXPECT_EQ(out.at("cl").data<float>()[i], cl[i]) << i;
  }
}

// The activations written as their definitions: HardSigmoid and HardSwish clip exactly at any
// magnitude, Elu/Selu/Celu are exactly x above 0 and their exp side below, a known input folds;
// bad attributes and shapes are errors naming the node, the op and what was expected.
TEST(OnnxImport, ActivationsMatchTheirDefinitionsAndRefuseBadAttributes) {
  Model m(14);
  m.input("x", kF32, {6}).output("hs").output("hw").output("elu").output("selu").output("celu");
  m.output("sp").output("ss").output("folded");
  Model::attr(m.node("HardSigmoid", {"x"}, {"hs"}), "alpha", 0.25f);
  m.node("HardSwish", {"x"}, {"hw"});
  Model::attr(m.node("Elu", {"x"}, {"elu"}), "alpha", 2.0f);
  m.node("Selu", {"x"}, {"selu"});
  Model::attr(m.node("Celu", {"x"}, {"celu"}), "alpha", 0.5f);
  m.node("Softplus", {"x"}, {"sp"});
  m.node("Softsign", {"x"}, {"ss"});
  m.init("k", {2}, {-1.0f, 3.0f});
  m.node("Elu", {"k"}, {"folded"});
  auto g = m.import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  const std::vector<float> x = {-1e30f, -3.0f, -0.5f, 0.0f, 0.75f, 1e30f};
  auto out = run_cpu(*g, {{"x", tensor({6}, x)}});
  ASSERT_EQ(out.size(), 8u);
  const double selu_a = 1.67326319217681884765625, selu_g = 1.05070102214813232421875;
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double hs = std::min(1.0, std::max(0.0, 0.25 * v + 0.5));
    const double hw = v * std::min(1.0, std::max(0.0, v / 6 + 0.5));
    EXPECT_EQ(out.at("hs").data<float>()[i], static_cast<float>(hs)) << i;
    if (std::fabs(v) < 1e29) {
      EXPECT_NEAR(out.at("hw").data<float>()[i], hw, 1e-6) << i;
    }
    const double elu = v > 0 ? v : 2.0 * std::expm1(v);
    const double selu = selu_g * (v > 0 ? v : selu_a * std::expm1(v));
    const double celu = v > 0 ? v : 0.5 * std::expm1(v / 0.5);
    EXPECT_NEAR(out.at("elu").data<float>()[i], elu, 1e-6 * std::max(1.0, std::fabs(elu))) << i;
    EXPECT_NEAR(out.at("selu").data<float>()[i], selu, 1e-6 * std::max(1.0, std::fabs(selu))) << i;
    EXPECT_NEAR(out.at("celu").data<float>()[i], celu, 1e-6 * std::max(1.0, std::fabs(celu))) << i;
    if (std::fabs(v) < 1e29) {
      EXPECT_NEAR(out.at("sp").data<float>()[i], std::log1p(std::exp(v)), 1e-6) << i;
      EXPECT_NEAR(out.at("ss").data<float>()[i], v / (1 + std::fabs(v)), 1e-6) << i;
    }
  }
  EXPECT_EQ(out.at("hw").data<float>()[0], -0.0f);
  EXPECT_EQ(out.at("hw").data<float>()[5], 1e30f);
  EXPECT_EQ(out.at("folded").data<float>()[0], static_cast<float>(std::expm1(-1.0)));
  EXPECT_EQ(out.at("folded").data<float>()[1], 3.0f);

  Model celu0;
  celu0.input("x", kF32, {2}).output("y");
  Model::attr(celu0.node("Celu", {"x"}, {"y"}, "act"), "alpha", 0.0f);
  auto bad = celu0.import();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("node 'act' (Celu, opset 17): alpha 0"), std::string::npos)
      << bad.status().message();
}

// InstanceNormalization (opset 6 is read: its definition has not changed) normalises each
// (n, c) over its pixels; scale and B must be [C]. MeanVarianceNormalization's axes must exist.
TEST(OnnxImport, InstanceAndMeanVarianceNormalizationMatchTheirDefinitions) {
  Model m(6);
  m.input("x", kF32, {1, 2, 2, 2}).output("y");
  m.init("s", {2}, {2.0f, -1.0f});
  m.init("b", {2}, {0.5f, 1.0f});
  Model::attr(m.node("InstanceNormalization", {"x", "s", "b"}, {"y"}), "epsilon", 1e-3f);
  auto g = m.import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  const std::vector<float> x = {1, 2, 3, 4, -2, 0, 0, 6};
  auto out = run_cpu(*g, {{"x", tensor({1, 2, 2, 2}, x)}});
  ASSERT_TRUE(out.count("y"));
  for (int c = 0; c < 2; ++c) {
    double mean = 0, var = 0;
    for (int i = 0; i < 4; ++i) mean += x[c * 4 + i] / 4.0;
    for (int i = 0; i < 4; ++i) var += (x[c * 4 + i] - mean) * (x[c * 4 + i] - mean) / 4.0;
    for (int i = 0; i < 4; ++i) {
      const double want = (c == 0 ? 2.0 : -1.0) * (x[c * 4 + i] - mean) / std::sqrt(var + 1e-3) +
                          (c == 0 ? 0.5 : 1.0);
      EXPECT_NEAR(out.at("y").data<float>()[c * 4 + i], want, 1e-5) << c << " " << i;
    }
  }

  Model wrong(17);
  wrong.input("x", kF32, {1, 2, 3}).output("y");
  wrong.init("s", {3}, {1, 1, 1});
  wrong.init("b", {2}, {0, 0});
  wrong.node("InstanceNormalization", {"x", "s", "b"}, {"y"}, "in");
  auto bad = wrong.import();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(
                "node 'in' (InstanceNormalization, opset 17): scale of shape [3] (expected [C] = "
                "[2])"),
            std::string::npos)
      << bad.status().message();

  Model mvn(13);
  mvn.input("x", kF32, {2, 3}).output("y");
  mvn.node("MeanVarianceNormalization", {"x"}, {"y"}, "mvn");  // default axes 0, 2, 3
  auto refused = mvn.import();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("node 'mvn' (MeanVarianceNormalization, opset 13)"),
            std::string::npos)
      << refused.status().message();
}

// ArgMax, ArgMin and Hardmax tell apart values one unit in the last place apart at any
// magnitude, and pick the first (or, with select_last_index, the last) of equal extremes.
TEST(OnnxImport, ArgMaxArgMinAndHardmaxFindExactExtremes) {
  Model m(13);
  m.input("x", kF32, {2, 4}).output("first", kI64).output("last", kI64).output("min", kI64);
  m.output("hard");
  auto& first = m.node("ArgMax", {"x"}, {"first"});
  Model::attr(first, "axis", int64_t{1});
  Model::attr(first, "keepdims", int64_t{0});
  auto& last = m.node("ArgMax", {"x"}, {"last"});
  Model::attr(last, "axis", int64_t{-1});
  Model::attr(last, "select_last_index", int64_t{1});
  Model::attr(m.node("ArgMin", {"x"}, {"min"}), "axis", int64_t{1});
  m.node("Hardmax", {"x"}, {"hard"});
  auto g = m.import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  const float big = 1e30f, big1 = std::nextafter(big, INFINITY);
  const float tiny = 1e-37f, tiny1 = std::nextafter(tiny, INFINITY);
  auto out = run_cpu(*g, {{"x", tensor({2, 4}, {big, big1, -3.0f, big1, tiny, tiny1, tiny1, -1})}});
  ASSERT_EQ(out.size(), 4u);
  ASSERT_EQ(out.at("first").desc().dtype, DType::i32);
  auto dims = [&](const char* name) {
    const auto& d = out.at(name).desc().dims();
    return std::vector<int64_t>(d.begin(), d.end());
  };
  EXPECT_EQ(dims("first"), (std::vector<int64_t>{2}));
  EXPECT_EQ(dims("last"), (std::vector<int64_t>{2, 1}));
  const std::vector<int32_t> want_first = {1, 1}, want_last = {3, 2}, want_min = {2, 3};
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(out.at("first").data<int32_t>()[i], want_first[i]) << i;
    EXPECT_EQ(out.at("last").data<int32_t>()[i], want_last[i]) << i;
    EXPECT_EQ(out.at("min").data<int32_t>()[i], want_min[i]) << i;
  }
  const std::vector<float> hard = {0, 1, 0, 0, 0, 1, 0, 0};
  for (size_t i = 0; i < hard.size(); ++i) EXPECT_EQ(out.at("hard").data<float>()[i], hard[i]) << i;

  Model bad(13);
  bad.input("x", kF32, {2, 4}).output("y", kI64);
  Model::attr(bad.node("ArgMax", {"x"}, {"y"}, "am"), "select_last_index", int64_t{2});
  auto refused = bad.import();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(
                "node 'am' (ArgMax, opset 13): select_last_index 2 (expected 0 or 1)"),
            std::string::npos)
      << refused.status().message();
}

// Round (half to even), Floor, Ceil and Sign are exact at every magnitude: halves, values just
// below 2^23 where the spacing is 0.5, huge values, tiny ones either side of 0, infinities.
TEST(OnnxImport, RoundFloorCeilAndSignAreExactAtEveryMagnitude) {
  Model m(13);
  m.input("x", kF32, {12}).output("round").output("floor").output("ceil").output("sign");
  m.node("Round", {"x"}, {"round"});
  m.node("Floor", {"x"}, {"floor"});
  m.node("Ceil", {"x"}, {"ceil"});
  m.node("Sign", {"x"}, {"sign"});
  auto g = m.import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  const std::vector<float> x = {2.5f,       -2.5f,       3.5f,        -0.3f,  1e-30f,   -1e-30f,
                                8388607.5f, -4194304.5f, 16777215.0f, -3e38f, INFINITY, 0.0f};
  auto out = run_cpu(*g, {{"x", tensor({12}, x)}});
  ASSERT_EQ(out.size(), 4u);
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    EXPECT_EQ(out.at("round").data<float>()[i], static_cast<float>(std::nearbyint(v))) << v;
    EXPECT_EQ(out.at("floor").data<float>()[i], static_cast<float>(std::floor(v))) << v;
    EXPECT_EQ(out.at("ceil").data<float>()[i], static_cast<float>(std::ceil(v))) << v;
    EXPECT_EQ(out.at("sign").data<float>()[i], v > 0 ? 1.0f : v < 0 ? -1.0f : 0.0f) << v;
  }
}

// GatherND with known indices picks slices at run time (negative indices from the end); a
// batch_dims the shapes cannot have is an error naming the node.
TEST(OnnxImport, GatherNdTakesSlicesAtKnownIndices) {
  Model m(13);
  m.input("x", kF32, {2, 3}).output("y");
  m.init_i64("i", {2, 1}, {-1, 0});
  m.node("GatherND", {"x", "i"}, {"y"});
  auto g = m.import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto out = run_cpu(*g, {{"x", tensor({2, 3}, {1, 2, 3, 4, 5, 6})}});
  ASSERT_TRUE(out.count("y"));
  const std::vector<float> want = {4, 5, 6, 1, 2, 3};
  for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(out.at("y").data<float>()[k], want[k]) << k;

  Model bad(13);
  bad.input("x", kF32, {2, 3}).output("y");
  bad.init_i64("i", {2, 1}, {0, 1});
  Model::attr(bad.node("GatherND", {"x", "i"}, {"y"}, "gnd"), "batch_dims", int64_t{2});
  auto refused = bad.import();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(
                "node 'gnd' (GatherND, opset 13): batch_dims 2 (expected 0 to 1)"),
            std::string::npos)
      << refused.status().message();
}

TEST(OnnxImport, InputsKeepTheirNamesAndAliasedOutputsGetCopies) {
  Model m;
  m.input("input.1", kF32, {4}).output("same").output("flat");
  m.node("Identity", {"input.1"}, {"same"});
  m.node("Dropout", {"input.1"}, {"flat"});
  auto g = m.import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->value(g->inputs()[0]).name, "input.1");
  ASSERT_EQ(g->outputs().size(), 2u);
  EXPECT_EQ(g->value(g->outputs()[0]).name, "same");
  EXPECT_EQ(g->value(g->outputs()[1]).name, "flat");
  EXPECT_EQ(count_kind(*g, OpKind::copy), 2);
}

TEST(OnnxImport, FrozenInputsBecomeConstantsAndFold) {
  Model m;
  m.input("x", kF32, {2, 6}).input("shape", kI64, {2}).output("y");
  m.node("Reshape", {"x", "shape"}, {"y"});
  EXPECT_FALSE(m.import().ok());  // the shape is computed at run time
  OnnxOptions o;
  HostTensor s = HostTensor::empty(DType::i32, std::vector<int64_t>{2});
  s.data<int32_t>()[0] = 3;
  s.data<int32_t>()[1] = -1;
  o.frozen_inputs["shape"] = s;
  auto g = m.import(o);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->inputs().size(), 1u);
  EXPECT_EQ(g->value(g->outputs()[0]).desc.shape_str(), "[3,4]");
}

TEST(OnnxImport, MatMulWithVectorsDropsThePromotedDims) {
  Model m;
  m.input("v", kF32, {3}).input("w", kF32, {3, 2}).output("y");
  m.node("MatMul", {"v", "w"}, {"y"});
  auto g = m.import();
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->value(g->outputs()[0]).desc.shape_str(), "[2]");
}

TEST(OnnxImport, MalformedBytesAreAParseError) {
  const std::string junk = "\x08\x07\x12\xff\xff\xff\xff\x0f garbage";
  auto g = import_onnx({reinterpret_cast<const std::byte*>(junk.data()), junk.size()}, ".", "junk");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), Code::parse_error) << g.status().message();
}

TEST(OnnxImport, NodesOfOtherDomainsAndNonTensorInputsAreRefused) {
  Model m;
  m.input("x", kF32, {4}).output("y");
  m.node("FusedGemm", {"x"}, {"y"}).set_domain("com.microsoft");
  auto g = m.import();
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("com.microsoft"), std::string::npos);

  Model s;
  auto* in = s.proto().mutable_graph()->add_input();
  in->set_name("seq");
  in->mutable_type()->mutable_sequence_type();
  s.output("y");
  s.node("Identity", {"seq"}, {"y"});
  auto g2 = s.import();
  ASSERT_FALSE(g2.ok());
  EXPECT_NE(g2.status().message().find("'seq'"), std::string::npos) << g2.status().message();
}

TEST(OnnxImport, ValuesEvaluatedAtImportStayWithinTheMemoryBudget) {
  // ConstantOfShape of 2^18 floats (1 MiB) summed at import: within a 16 MiB budget, refused
  // under 256 KiB before anything is allocated, naming the node and the budget.
  auto model = [](std::vector<int64_t> shape, bool twice) {
    Model m(13);
    m.input("x", kF32, {1}).output("y");
    m.init_i64("shape", {static_cast<int64_t>(shape.size())}, shape);
    m.node("ConstantOfShape", {"shape"}, {"c"}, "fill");
    // `twice`: a second value read by the same later node, so both are alive at once.
    if (twice) m.node("ConstantOfShape", {"shape"}, {"d"}, "fill2");
    m.node("Add", {"c", twice ? "d" : "c"}, {"s"}, "sum");
    m.node("ReduceSum", {"s"}, {"r"}, "reduce");
    m.node("Add", {"x", "r"}, {"y"});
    return m;
  };
  OnnxOptions roomy;
  roomy.memory_budget = 16 << 20;
  auto ok = model({1 << 18}, false).import(roomy);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  OnnxOptions tight;
  tight.memory_budget = 256 << 10;
  auto refused = model({1 << 18}, false).import(tight);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::invalid_argument);
  EXPECT_NE(refused.status().message().find("node 'fill' (ConstantOfShape, opset 13): a value of "
                                            "shape [262144] evaluated at import would take 1.00 "
                                            "MiB"),
            std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("more than the import's memory budget of 256 KiB"),
            std::string::npos)
      << refused.status().message();
  // Values alive at once add up: one of 1 MiB and the 7 MiB of the sum's working memory fit in
  // 8.5 MiB, two of them do not.
  OnnxOptions some;
  some.memory_budget = 17 << 19;
  ASSERT_TRUE(model({1 << 18}, false).import(some).ok());
  auto both = model({1 << 18}, true).import(some);
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("node 'sum'"), std::string::npos)
      << both.status().message();
  // The default budget (1 GiB) refuses 2^28 doubles (2 GiB) without allocating them.
  Model big(13);
  big.input("x", kF32, {1}).output("y");
  big.init_i64("shape", {1}, {int64_t{1} << 28});
  auto& fill = big.node("ConstantOfShape", {"shape"}, {"c"}, "fill");
  auto* value = fill.add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(onnx::TensorProto::DOUBLE);
  value->mutable_t()->add_dims(1);
  value->mutable_t()->add_double_data(1.0);
  big.node("ReduceSum", {"c"}, {"r"});
  big.node("Cast", {"r"}, {"rf"});
  Model::attr(big.proto().mutable_graph()->mutable_node()->at(2), "to", int64_t{kF32});
  big.node("Add", {"x", "rf"}, {"y"});
  auto g = big.import();
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("would take 2.00 GiB"), std::string::npos)
      << g.status().message();
}

class OnnxFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(DUET_TEST_TMPDIR) /
           ("onnx-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(OnnxFiles, OnlyRegularFilesAreReadAsModels) {
  for (const char* p : {"/dev/zero", "/nonexistent/m.onnx"}) {
    auto g = import_onnx(p);
    ASSERT_FALSE(g.ok()) << p;
    EXPECT_NE(g.status().message().find(p), std::string::npos) << g.status().message();
  }
  auto dir = import_onnx(dir_.string());
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("folder"), std::string::npos) << dir.status().message();
}

TEST_F(OnnxFiles, ExternalDataIsReadBesideTheModel) {
  Model m;
  m.input("x", kF32, {4}).output("y");
  auto& w = m.init("w", {4}, {});
  w.clear_float_data();
  w.set_data_location(onnx::TensorProto::EXTERNAL);
  auto kv = [&](const char* k, const std::string& v) {
    auto* e = w.add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  kv("location", "weights.bin");
  kv("offset", "8");
  kv("length", "16");
  m.node("Mul", {"x", "w"}, {"y"});
  m.save((dir_ / "m.onnx").string());
  const float data[6] = {-1, -1, 1, 2, 3, 4};
  std::ofstream((dir_ / "weights.bin").string(), std::ios::binary)
      .write(reinterpret_cast<const char*>(data), sizeof data);
  auto g = load_model((dir_ / "m.onnx").string());
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto out = run_cpu(*g, {{"x", tensor({4}, {1, 1, 1, 1})}});
  ASSERT_TRUE(out.count("y"));
  EXPECT_EQ(out.at("y").data<float>()[3], 4.0f);

  kv("location", "../outside.bin");  // a second location entry wins when read last
  w.mutable_external_data()->DeleteSubrange(0, 1);
  m.save((dir_ / "escape.onnx").string());
  auto bad = load_model((dir_ / "escape.onnx").string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("outside.bin"), std::string::npos)
      << bad.status().message();
}

TEST_F(OnnxFiles, ExternalDataThatIsReallyAFileOutsideTheModelsFolderIsRefused) {
  // A link out of the folder (to a file, through a folder), a second hard link of a file
  // elsewhere, a fifo, and a NUL byte in the location: each refused, naming what it is.
  const float data[4] = {1, 2, 3, 4};
  fs::create_directories(dir_ / "model");
  fs::create_directories(dir_ / "elsewhere");
  for (const char* f : {"secret.bin", "elsewhere/w.bin"})
    std::ofstream((dir_ / f).string(), std::ios::binary)
        .write(reinterpret_cast<const char*>(data), sizeof data);
  fs::create_symlink("../secret.bin", dir_ / "model/link.bin");
  fs::create_directory_symlink("../elsewhere", dir_ / "model/d");
  fs::create_hard_link(dir_ / "secret.bin", dir_ / "model/hard.bin");
  ASSERT_EQ(::mkfifo((dir_ / "model/fifo.bin").c_str(), 0600), 0);
  const std::pair<std::string, std::string> cases[] = {
      {"link.bin", "expected a file inside the model's folder"},
      {"d/w.bin", "expected a file inside the model's folder"},
      {"hard.bin", "got 2 hard links"},
      {"fifo.bin", "expected a regular file, got a fifo"},
      {std::string("w.bin\0/../../secret.bin", 23), "'w.bin\\x00/../../secret.bin'"}};
  for (const auto& [location, why] : cases) {
    Model m;
    m.input("x", kF32, {4}).output("y");
    auto& w = m.init("w", {4}, {});
    w.clear_float_data();
    w.set_data_location(onnx::TensorProto::EXTERNAL);
    auto* e = w.add_external_data();
    e->set_key("location");
    e->set_value(location);
    m.node("Mul", {"x", "w"}, {"y"});
    m.save((dir_ / "model/m.onnx").string());
    auto g = load_model((dir_ / "model/m.onnx").string());
    ASSERT_FALSE(g.ok()) << location;
    EXPECT_NE(g.status().message().find(why), std::string::npos) << g.status().message();
  }
}

TEST_F(OnnxFiles, WeightsFilesGivenAsModelsAreNamedNotParsedAsOnnx) {
  // A GGUF or safetensors file passed where a graph is expected once failed as "not a valid ONNX
  // model (the protobuf does not parse)".
  const std::string gguf = (dir_ / "w.gguf").string(), st = (dir_ / "w.safetensors").string();
  std::ofstream(gguf, std::ios::binary)
      << std::string("GGUF\x03\0\0\0", 8) << std::string(32, '\0');
  const std::string header = R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>(header.size() >> (8 * i));
  std::ofstream(st, std::ios::binary) << len << header << std::string(4, '\0');
  for (const auto& [path, kind] : {std::pair{gguf, "a GGUF file"}, {st, "a safetensors file"}}) {
    auto g = load_model(path);
    ASSERT_FALSE(g.ok()) << path;
    EXPECT_EQ(g.status().code(), Code::invalid_argument) << g.status().message();
    EXPECT_NE(g.status().message().find(kind), std::string::npos) << g.status().message();
    EXPECT_NE(g.status().message().find("expected a duet graph (JSON) or an ONNX model"),
              std::string::npos)
        << g.status().message();
  }
}

}  // namespace
}  // namespace duet
