// Graph files: every op and every attribute survive save and load exactly; broken files give
// errors that say what is wrong and where.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "duet/graph_file.h"
#include "duet/safetensors.h"

namespace duet {
namespace {

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

std::string tmp(const std::string& name) {
  return std::string(DUET_TEST_TMPDIR) + "/" + name;
}

HostTensor ramp(DType t, std::vector<int64_t> shape, double step = 0.37) {
  HostTensor h = HostTensor::empty(t, shape);
  std::vector<double> v(static_cast<size_t>(h.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = is_integer(t) ? double(i % 7) : (double(i) - 3.0) * step;
  h.from_doubles(v);
  return h;
}

// A graph using every op kind, and one node carrying every OpAttrs field at a non-default,
// awkward value (floats that are not short decimals, infinities).
Graph every_op_graph(bool external_weight) {
  GraphBuilder b("every_op");
  ValueId x = b.input("x", DType::f32, {2, 4, 8, 16});
  ValueId ids = b.input("ids", DType::i32, {3});
  ValueId w = external_weight
                  ? b.constant("w", DType::f32, {16, 16}, {"every_op_w.safetensors", "weight"})
                  : b.constant("w", ramp(DType::f32, {16, 16}));
  ValueId table = b.constant("table", ramp(DType::bf16, {10, 16}));
  ValueId gamma = b.constant("gamma", ramp(DType::f32, {16}, 0.01));
  ValueId beta = b.constant("beta", ramp(DType::f32, {16}, 0.02));
  ValueId m = b.matmul(x, w, true, "mm");
  ValueId a = b.add(m, x, "a");
  ValueId s = b.sub(a, x, "s");
  ValueId mu = b.mul(s, x, "mu");
  ValueId dv = b.div(mu, b.exp(x, "ex"), "dv");
  ValueId sc = b.scale(dv, 0.1f, "sc");
  ValueId smu = b.op(OpKind::silu_mul, {sc, x}, {}, "smu");
  ValueId si = b.silu(smu, "si");
  OpAttrs gt;
  gt.gelu_approx = GeluApprox::tanh;
  ValueId ge = b.op(OpKind::gelu, {si}, gt, "ge");
  ValueId re0 = b.relu(ge, "re0");
  OpAttrs pw;
  pw.exponent = 1.5f;
  ValueId sg = b.op(OpKind::sigmoid, {re0}, {}, "sg");
  ValueId th = b.op(OpKind::tanh, {sg}, {}, "th");
  ValueId ef = b.op(OpKind::erf, {th}, {}, "ef");
  ValueId sq = b.op(OpKind::sqrt, {ef}, {}, "sq");
  ValueId re = b.op(OpKind::pow, {sq}, pw, "re");
  ValueId ab = b.op(OpKind::abs, {re}, {}, "ab");
  ValueId lg = b.op(OpKind::log, {ab}, {}, "lg");
  // The comparisons, fmod, then the trigonometric and hyperbolic functions, chained.
  ValueId cmp =
      b.op(OpKind::equal,
           {b.op(OpKind::less_equal, {b.op(OpKind::less, {lg, ab}, {}, "lt"), ab}, {}, "le"), ab},
           {}, "eq");
  ValueId tg = b.op(OpKind::fmod, {cmp, ab}, {}, "fm");
  for (OpKind k : {OpKind::sin, OpKind::cos, OpKind::tan, OpKind::asin, OpKind::acos, OpKind::atan,
                   OpKind::sinh, OpKind::cosh, OpKind::asinh, OpKind::acosh, OpKind::atanh})
    tg = b.op(k, {tg}, {}, std::string(op_name(k)));
  OpAttrs sm;
  sm.scale = 0.7f;
  ValueId so = b.op(OpKind::softmax, {lg}, sm, "so");
  ValueId rn = b.rmsnorm(so, gamma, 1e-6f, "rn");
  OpAttrs ln;
  ln.eps = 3e-5f;
  ValueId la = b.op(OpKind::layernorm, {rn, gamma, beta}, ln, "ln");
  OpAttrs ro;
  ro.rope_mode = RopeMode::gptj;
  ro.rope_offset = 3;
  ro.rope_dims = 8;
  ro.rope_theta = 500000.0f;
  ValueId rp = b.op(OpKind::rope, {la}, ro, "rp");
  OpAttrs at;
  at.causal = true;
  at.scale = 0.125f;
  ValueId att = b.op(OpKind::attention, {rp, x, x}, at, "att");
  ValueId ca = b.cast(att, DType::f16, "ca");
  ValueId cp = b.copy(ca, "cp");
  ValueId cc = b.concat({cp, cp}, -1, "cc");
  ValueId rs = b.reshape(cc, {2, 4, -1}, "rs");
  ValueId tr = b.transpose(rs, 0, 1, "tr");
  ValueId pm = b.permute(tr, {2, 0, 1}, "pm");
  ValueId sl = b.slice(pm, 0, 1, 200, 3, "sl");
  ValueId em = b.embedding(table, ids, "em");
  ValueId pos = b.input("pos", DType::i32, {1});
  ValueId cache = b.state("cache", DType::f32, {2, 4, 20, 16});
  ValueId ws = b.write_slice(cache, x, pos, 2, "ws");
  OpAttrs rd;
  rd.axes = {1, -1};
  ValueId rsum = b.op(OpKind::reduce_sum, {x}, rd, "rsum");
  ValueId rmean = b.op(OpKind::reduce_mean, {rsum}, rd, "rmean");
  ValueId rmax = b.op(OpKind::reduce_max, {rmean}, rd, "rmax");
  ValueId rmin = b.op(OpKind::reduce_min, {rmax}, rd, "rmin");
  ValueId rprod = b.op(OpKind::reduce_prod, {rmin}, rd, "rprod");
  OpAttrs all;
  all.transpose_a = true;
  all.transpose_b = true;
  all.alpha = 0.1f;
  all.scale = -std::numeric_limits<float>::infinity();
  all.eps = 1.17549435e-38f;
  all.causal = true;
  all.gelu_approx = GeluApprox::tanh;
  all.rope_mode = RopeMode::gptj;
  all.rope_offset = 123456789012;
  all.rope_theta = 1e30f;
  all.rope_dims = 6;
  all.to = DType::bf16;
  all.axis = -2;
  all.start = -5;
  all.stop = 9;
  all.step = 2;
  all.dim0 = 3;
  all.dim1 = 2;
  all.shape = {1, -1, 7};
  all.perm = {3, 2, 1, 0};
  all.axes = {2, 0};
  all.negative_ids = true;
  ValueId odd = b.op(OpKind::relu, {em}, all, "every_attr");
  b.output(b.copy(sl, "out"));
  b.output(odd);
  b.output(ws);
  b.output(rprod);
  b.output(tg);
  auto g = b.build();
  EXPECT_TRUE(g.ok()) << g.status().message();
  return std::move(*g);
}

TEST(GraphFile, EveryOpAndAttributeRoundTripsExactly) {
  Graph g = every_op_graph(false);
  ASSERT_EQ(g.nodes().size(), 54u);
  std::set<OpKind> kinds;
  for (const GraphNode& n : g.nodes()) kinds.insert(n.kind());
  EXPECT_EQ(kinds.size(), static_cast<size_t>(kNumOpKinds)) << "the graph must use every op";

  const std::string text = graph_to_json(g);
  auto back = graph_from_json(text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  std::string diff;
  EXPECT_TRUE(g.same_as(*back, &diff)) << diff;
  EXPECT_EQ(graph_to_json(*back), text);
  // The awkward attributes by field.
  const GraphValue& odd = back->value(*back->find("every_attr"));
  const OpAttrs& a = back->nodes()[static_cast<size_t>(odd.producer)].op.attrs;
  EXPECT_EQ(a.alpha, 0.1f);
  EXPECT_EQ(
      back->nodes()[static_cast<size_t>(back->value(*back->find("re")).producer)].op.attrs.exponent,
      1.5f);
  EXPECT_EQ(a.scale, -std::numeric_limits<float>::infinity());
  EXPECT_EQ(a.eps, 1.17549435e-38f);
  EXPECT_EQ(a.rope_offset, 123456789012);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{1, -1, 7}));
  EXPECT_EQ(a.axes, (std::vector<int>{2, 0}));
  EXPECT_TRUE(a.negative_ids);
}

TEST(GraphFile, ConstantsFromSafetensorsLoadAndSave) {
  ASSERT_TRUE(
      write_safetensors(tmp("every_op_w.safetensors"), {{"weight", ramp(DType::f32, {16, 16})}})
          .ok());
  Graph g = every_op_graph(true);
  ASSERT_TRUE(save_graph(g, tmp("every_op.json")).ok());
  auto back = load_graph(tmp("every_op.json"));
  ASSERT_TRUE(back.ok()) << back.status().message();
  const GraphValue& w = back->value(*back->find("w"));
  ASSERT_TRUE(w.data);
  EXPECT_EQ(w.source.file, "every_op_w.safetensors");
  EXPECT_EQ(w.source.key, "weight");
  EXPECT_EQ(w.data->to_doubles(), ramp(DType::f32, {16, 16}).to_doubles());
  EXPECT_EQ(graph_to_json(*back), graph_to_json(g));
  // Without loading constants the graph is the same, its weights unbound.
  auto lazy = load_graph(tmp("every_op.json"), {.load_constants = false});
  ASSERT_TRUE(lazy.ok()) << lazy.status().message();
  EXPECT_EQ(lazy->unbound_constants(), std::vector<std::string>{"w"});
}

TEST(GraphFile, LargeConstantsGoToASafetensorsFileBesideTheGraph) {
  GraphBuilder b("big");
  ValueId x = b.input("x", DType::f16, {4, 64});
  ValueId w = b.constant("w", ramp(DType::f16, {64, 128}, 0.001));
  b.output(b.matmul(x, w, false, "y"));
  Graph g = *b.build();
  ASSERT_TRUE(save_graph(g, tmp("big.json"), 1000).ok());
  EXPECT_TRUE(std::filesystem::exists(tmp("big.safetensors")));
  auto back = load_graph(tmp("big.json"));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->value(*back->find("w")).data->to_doubles(),
            g.value(*g.find("w")).data->to_doubles());
}

std::string load_error(const std::string& text) {
  auto g = graph_from_json(text, DUET_TEST_TMPDIR);
  EXPECT_FALSE(g.ok()) << "expected an error for: " << text;
  return g.ok() ? std::string() : g.status().message();
}

const char* kHead = R"("format": "duet-graph", "version": 1, "name": "g", )";

std::string file(const std::string& body) {
  return std::string("{") + kHead + body + "}";
}

TEST(GraphFile, NamesThatAreNotUtf8AreWrittenAsReplacementCharacters) {
  // A graph built through the API may carry any bytes in its names; writing it never throws.
  GraphBuilder b(std::string("g\xff"));
  ValueId x = b.input(std::string("x\xc3"), DType::f32, {4});
  b.output(b.relu(x));
  auto g = b.build();
  ASSERT_TRUE(g.ok()) << g.status().message();
  const std::string text = graph_to_json(*g);
  EXPECT_HAS(text, "\"g\xef\xbf\xbd\"");
  EXPECT_HAS(text, "\"x\xef\xbf\xbd\"");
  auto back = graph_from_json(text);
  EXPECT_TRUE(back.ok()) << back.status().message();
}

TEST(GraphFile, BrokenFilesSayWhatIsWrong) {
  EXPECT_HAS(load_error("{not json"), "malformed JSON");
  EXPECT_HAS(load_error(R"({"format": "duet-graph", "version": 7, "name": "g"})"), "newer duet");
  EXPECT_HAS(load_error(R"({"format": "onnx", "version": 1, "name": "g"})"), "duet-graph");
  EXPECT_HAS(load_error(file(R"("inputs": [], "nodes": [], "outputs": [], "extra": 1)")),
             "'extra'");
  const std::string in = R"("inputs": [{"name": "x", "dtype": "f32", "shape": [4]}], )";
  EXPECT_HAS(
      load_error(file(
          in + R"("nodes": [{"name": "y", "op": "conv", "inputs": ["x"]}], "outputs": ["y"])")),
      "an op name");
  EXPECT_HAS(
      load_error(file(
          in + R"("nodes": [{"name": "y", "op": "relu", "inputs": ["z"]}], "outputs": ["y"])")),
      "tensor 'z'");
  EXPECT_HAS(
      load_error(file(
          in +
          R"("nodes": [{"name": "y", "op": "relu", "inputs": ["x"], "attrs": {"alpah": 2}}], "outputs": ["y"])")),
      "attrs.alpah");
  EXPECT_HAS(
      load_error(file(
          in +
          R"("nodes": [{"name": "y", "op": "scale", "inputs": ["x"], "attrs": {"alpha": "big"}}], "outputs": ["y"])")),
      "attrs.alpha");
  EXPECT_HAS(
      load_error(file(
          in +
          R"("nodes": [{"name": "y", "op": "matmul", "inputs": ["x", "x"]}], "outputs": ["y"])")),
      "matmul 'y'");
  EXPECT_HAS(load_error(file(R"("inputs": [{"name": "x", "dtype": "f64", "shape": [4]}])")),
             "dtype");
  EXPECT_HAS(load_error(file(R"("inputs": [{"name": "x", "dtype": "f32", "shape": [4, -1]}])")),
             "positive integers");
  EXPECT_HAS(
      load_error(file(
          in + R"("constants": [{"name": "w", "dtype": "f32", "shape": [2], "values": [1]}])")),
      "an array of 2 numbers");
  EXPECT_HAS(
      load_error(file(
          in +
          R"("constants": [{"name": "w", "dtype": "f32", "shape": [2], "file": "missing.safetensors"}])")),
      "missing.safetensors");
  ASSERT_TRUE(write_safetensors(tmp("small.safetensors"), {{"w", ramp(DType::f32, {3})}}).ok());
  EXPECT_HAS(
      load_error(file(
          in +
          R"("constants": [{"name": "w", "dtype": "f32", "shape": [2], "file": "small.safetensors"}])")),
      "f32[2] as declared");
  EXPECT_HAS(
      load_error(file(
          in +
          R"("constants": [{"name": "v", "dtype": "f32", "shape": [3], "file": "small.safetensors"}])")),
      "tensor 'v'");
}

TEST(GraphFile, JsonFromOutsideIsReadWithinADepthAndAMemoryBudget) {
  // Nesting 60,000 deep crashed the recursive printer of messages: refused at 64 levels.
  const std::string deep = std::string("{") + kHead + "\"inputs\": " + std::string(60000, '[') +
                           std::string(60000, ']') + "}";
  EXPECT_HAS(load_error(deep), "graph file: JSON nested deeper than 64 levels");
  // An unknown top-level field is refused when its key is read (its value never held).
  EXPECT_HAS(load_error(std::string("{\"junk\": [") + std::string(1 << 20, '[')),
             "expected fields constants, format, inputs, name, nodes, outputs, states, version, "
             "got 'junk'");
  // Inline values past the memory budget of the load.
  std::string values = "0";
  for (int i = 1; i < 100000; ++i) values += ",0";
  const std::string big = file(R"("inputs": [], "constants": [{"name": "w", "dtype": "f32",
      "shape": [100000], "values": [)" +
                               values + "]}], \"nodes\": [], \"outputs\": []");
  GraphLoadOptions small;
  small.memory_budget = 1 << 20;
  auto refused = graph_from_json(big, DUET_TEST_TMPDIR, small);
  ASSERT_FALSE(refused.ok());
  EXPECT_HAS(refused.status().message(),
             "a JSON document that takes more than 1.00 MiB of memory once parsed");
  // A value echoed in a message is an excerpt, not the whole value.
  std::string shape = "1";
  for (int i = 1; i < 100000; ++i) shape += ",1";
  const std::string wide =
      file(R"("inputs": [{"name": "x", "dtype": "f32", "shape": [)" + shape + "]}]");
  const std::string m = load_error(wide);
  EXPECT_HAS(m, "an array of at most 4 positive integers, got [1,1,1,");
  EXPECT_LT(m.size(), 400u) << m;
}

TEST(GraphFile, ConstantsFilesLieInsideTheGraphsFolder) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(DUET_TEST_TMPDIR) / "inside";
  fs::remove_all(dir);
  fs::create_directories(dir / "model");
  ASSERT_TRUE(
      write_safetensors((dir / "outside.safetensors").string(), {{"w", ramp(DType::f32, {2})}})
          .ok());
  fs::create_symlink("../outside.safetensors", dir / "model/link.safetensors");
  const std::string in = R"("inputs": [{"name": "x", "dtype": "f32", "shape": [2]}], )";
  for (const std::string& name :
       {std::string("link.safetensors"), std::string("../outside.safetensors"),
        (dir / "outside.safetensors").string()}) {
    std::ofstream((dir / "model/g.json").string())
        << file(in + R"("constants": [{"name": "w", "dtype": "f32", "shape": [2], "file": ")" +
                name + R"("}], "nodes": [{"name": "y", "op": "add", "inputs": ["x", "w"]}],
                "outputs": ["y"])");
    auto g = load_graph((dir / "model/g.json").string());
    ASSERT_FALSE(g.ok()) << name;
    EXPECT_HAS(g.status().message(), "expected a file inside the model's folder");
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace duet
