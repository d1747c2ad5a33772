// Real exported models: a GPT-2-style decoder block, a BERT-style encoder layer with its
// embeddings, a Conv1d audio encoder, a ResNet-style block and nanoGPT-style masked attention
// with nn.MultiheadAttention, exported by PyTorch at opset 17 (tools/onnx/export_test_models.py),
// run on the CPU and every Vulkan device within tolerance of PyTorch's own outputs, and checked op
// by op on every tier by the machinery of `duet check MODEL`.
#include <gtest/gtest.h>

#include "check/graph_check.h"
#include "check/inputs.h"
#include "duet/backends.h"
#include "duet/engine.h"
#include "duet/model_file.h"
#include "duet/safetensors.h"

namespace duet {
namespace {

Registry& registry() {
  static Registry r = open_registry();
  return r;
}

std::string model_path(const std::string& name, const std::string& suffix) {
  return std::string(DUET_TEST_MODELS) + "/" + name + suffix;
}

struct Loaded {
  Graph graph;
  std::map<std::string, HostTensor> inputs;
};

Loaded load(const std::string& name, std::map<std::string, int64_t> dims = {}) {
  Loaded l;
  auto in = check::read_inputs_file(model_path(name, ".inputs.safetensors"));
  EXPECT_TRUE(in.ok()) << in.status().message();
  ModelOptions o;
  if (dims.empty()) {
    l.inputs = *in;
    for (const auto& [n, t] : l.inputs)
      o.onnx.input_shapes[n] = {t.desc().dims().begin(), t.desc().dims().end()};
  }
  o.onnx.dims = dims;
  auto g = load_model(model_path(name, ".onnx"), o);
  EXPECT_TRUE(g.ok()) << g.status().message();
  if (g.ok()) l.graph = std::move(*g);
  return l;
}

int count(const Graph& g, OpKind k) {
  int n = 0;
  for (const GraphNode& node : g.nodes()) n += node.kind() == k;
  return n;
}

class ExportedModel : public testing::TestWithParam<std::string> {};

TEST_P(ExportedModel, MatchesPyTorchOnTheCpuAndEveryVulkanDevice) {
  Loaded m = load(GetParam());
  ASSERT_FALSE(m.graph.nodes().empty());
  auto want = load_safetensors(model_path(GetParam(), ".outputs.safetensors"));
  ASSERT_TRUE(want.ok()) << want.status().message();
  int ran = 0;
  for (Device* d : registry().devices()) {
    if (d->caps().backend == BackendKind::cuda) continue;  // tests/cuda covers GPUs
    auto e = Engine::create(m.graph, {d});
    ASSERT_TRUE(e.ok()) << d->id() << ": " << e.status().message();
    auto out = (*e)->run(m.inputs);
    ASSERT_TRUE(out.ok()) << d->id() << ": " << out.status().message();
    const HostTensor& y = out->at("y");
    const HostTensor& ref = want->at("y");
    ASSERT_TRUE(y.desc().same_shape(ref.desc())) << y.desc().str() << " vs " << ref.desc().str();
    const check::Metrics mt = check::compare(y.to_doubles(), ref.to_doubles(), false);
    // PyTorch's f32 kernels are not a float64 reference: a few f32 roundings apart.
    EXPECT_LT(mt.nmse, 1e-10) << d->id();
    EXPECT_LT(mt.max_rel, 1e-4) << d->id();
    ++ran;
  }
  EXPECT_GE(ran, 1);
}

TEST_P(ExportedModel, EveryOpAgreesWithTheReferenceOnEveryDeviceAndTier) {
  Loaded m = load(GetParam());
  auto ref = check::reference_graph(m.graph, m.inputs);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  for (Device* d : registry().devices()) {
    for (const check::GraphCheck& r : check::check_graph(m.graph, *ref, m.inputs, *d, {})) {
      EXPECT_TRUE(r.error.empty()) << r.device << " " << r.deny << ": " << r.error;
      EXPECT_GT(r.nodes.size(), 10u);
      if (r.first_failure >= 0) {
        const check::NodeCheck& k = r.nodes[static_cast<size_t>(r.first_failure)];
        ADD_FAILURE() << r.device << " " << r.deny << ": '"
                      << m.graph.nodes()[static_cast<size_t>(k.node)].name << "' nmse "
                      << k.metrics.nmse << ", tolerance " << k.tol.str();
      }
    }
  }
}

TEST_P(ExportedModel, OtherSequenceLengthsFoldTheirShapeArithmeticAnew) {
  // The ResNet block's only symbolic dim is its batch; the encoder's sequence is its dim 2.
  const bool image = GetParam() == "resnet_block", audio = GetParam() == "conv1d_encoder";
  Loaded m =
      load(GetParam(), image ? std::map<std::string, int64_t>{{"batch", 1}}
                             : std::map<std::string, int64_t>{{"batch", 1}, {"sequence", 5}});
  for (int id : m.graph.inputs()) {
    EXPECT_EQ(m.graph.value(id).desc.dim(0), 1);
    if (!image) {
      EXPECT_EQ(m.graph.value(id).desc.dim(audio ? 2 : 1), 5);
    }
  }
  std::string note;
  auto inputs = check::graph_inputs(m.graph, nullptr, {}, note);
  ASSERT_TRUE(inputs.ok());
  // An attention mask of ones (random integers would be offsets of up to 90000 added to the
  // scores, beyond what f32 holds to the reference's precision).
  if (inputs->count("attention_mask"))
    for (int64_t i = 0; i < inputs->at("attention_mask").numel(); ++i)
      inputs->at("attention_mask").data<int32_t>()[i] = 1;
  auto ref = check::reference_graph(m.graph, *inputs);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  for (const check::GraphCheck& r :
       check::check_graph(m.graph, *ref, *inputs, *registry().find("cpu:0"), {})) {
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_LT(r.first_failure, 0);
  }
}

TEST(ExportedModels, AGraphImportedAtSomeSizesRunsAtOthersImportedAgain) {
  // Imported at batch 1 and sequence 5 (`--dim`), run with PyTorch's inputs of other sizes: the
  // engine plans again, the model imported again from its file at the new sizes, and matches.
  const Loaded small = load("gpt2_block", {{"batch", 1}, {"sequence", 5}});
  const Loaded full = load("gpt2_block");
  ASSERT_EQ(full.inputs.count("x"), 1u);
  const TensorDesc& imported = small.graph.value(small.graph.inputs()[0]).desc;
  ASSERT_FALSE(full.inputs.at("x").desc().same_shape(imported)) << imported.str();
  auto e = Engine::create(small.graph, {registry().find("cpu:0")});
  ASSERT_TRUE(e.ok()) << e.status().message();
  auto out = (*e)->run(full.inputs);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*e)->plans_made(), 2);
  auto want = load_safetensors(model_path("gpt2_block", ".outputs.safetensors"));
  ASSERT_TRUE(want.ok()) << want.status().message();
  ASSERT_TRUE(out->at("y").desc().same_shape(want->at("y").desc()));
  EXPECT_LT(check::compare(out->at("y").to_doubles(), want->at("y").to_doubles(), false).nmse,
            1e-10);
}

INSTANTIATE_TEST_SUITE_P(Models, ExportedModel,
                         testing::Values("gpt2_block", "bert_layer", "conv1d_encoder",
                                         "resnet_block", "masked_attention"));

TEST(ExportedModels, ExporterPatternsBecomeDuetOps) {
  const Loaded gpt2 = load("gpt2_block");
  EXPECT_EQ(count(gpt2.graph, OpKind::gelu), 1);  // tanh form, written out with Pow and Tanh
  EXPECT_EQ(count(gpt2.graph, OpKind::layernorm), 2);
  EXPECT_EQ(count(gpt2.graph, OpKind::softmax), 0);
  // MatMul, Mul, Add of the causal mask, Softmax, MatMul: duet's causal attention, no mask read.
  for (const GraphNode& n : gpt2.graph.nodes())
    if (n.kind() == OpKind::attention) {
      EXPECT_TRUE(n.op.attrs.causal);
      EXPECT_EQ(n.inputs.size(), 3u);
      EXPECT_FLOAT_EQ(*n.op.attrs.scale, 0.25f);
    }
  EXPECT_EQ(count(gpt2.graph, OpKind::attention), 1);
  const Loaded bert = load("bert_layer");
  EXPECT_EQ(count(bert.graph, OpKind::attention), 1);  // with the padding mask as an input
  EXPECT_EQ(count(bert.graph, OpKind::gelu), 1);       // erf form
  EXPECT_EQ(count(bert.graph, OpKind::embedding), 1);  // token ids (positions fold at import)
  EXPECT_EQ(count(bert.graph, OpKind::cast), 1);       // the attention mask, int64 to float
}

TEST(ExportedModels, BatchNormalizationFoldsIntoTheConvolutionBeforeIt) {
  // Every BatchNormalization follows a Conv with known weights: none leaves a scale or shift.
  // The encoder's depthwise Conv is three per-channel products (one per tap); the others are
  // matrix products of the weights with the input's patches.
  const Loaded audio = load("conv1d_encoder");
  EXPECT_EQ(count(audio.graph, OpKind::mul), 3);
  EXPECT_EQ(count(audio.graph, OpKind::matmul), 1 + 1 + 2);  // conv1, down, two groups
  EXPECT_EQ(count(audio.graph, OpKind::reduce_max), 1);      // LogSoftmax's shift
  const Loaded image = load("resnet_block");
  EXPECT_EQ(count(image.graph, OpKind::mul), 0);
  EXPECT_EQ(count(image.graph, OpKind::matmul), 4 + 1);   // four Convs and the classifier
  EXPECT_EQ(count(image.graph, OpKind::reduce_mean), 1);  // GlobalAveragePool
}

TEST(ExportedModels, MasksFromBooleanBuffersAndMultiheadAttentionImport) {
  std::vector<std::string> notes;
  ModelOptions o;
  o.onnx.notes = &notes;
  auto g = load_model(model_path("masked_attention", ".onnx"), o);
  ASSERT_TRUE(g.ok()) << g.status().message();
  // Two attention ops: nanoGPT's block (its boolean mask became the causal flag) and
  // nn.MultiheadAttention (its heads folded into its batch).
  EXPECT_EQ(count(*g, OpKind::attention), 2);
  for (const std::string& n : notes) EXPECT_EQ(n.find("runs as matmul"), std::string::npos) << n;
}

}  // namespace
}  // namespace duet
