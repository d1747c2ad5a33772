// GPTQ and AWQ int4 checkpoints: modules packed here exactly as AutoGPTQ's QuantLinear.pack and
// AutoAWQ's WQLinear_GEMM.from_linear pack them read back as duet weights whose dequantization is
// scales * (q - zeros), value for value; what cannot be held exactly is refused with the reason.
// Graph files name such a module, or a GGUF tensor, as one constant.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "duet/gguf.h"
#include "duet/graph_file.h"
#include "duet/half.h"
#include "duet/int4_checkpoint.h"
#include "duet/quantize.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

// A linear layer's integer weights, zero points and scales, and what they mean.
struct Layer {
  int64_t n = 0, k = 0, group = 0;
  std::vector<int> q;            // [K][N] as the packers hold it (intweight after .t())
  std::vector<int> zeros;        // [G][N]
  std::vector<uint16_t> scales;  // [G][N], f16 bits
  int64_t groups() const { return k / group; }
  double w(int64_t n_, int64_t k_) const {
    const int64_t g = k_ / group;
    return static_cast<double>(f16_to_f32(scales[static_cast<size_t>(g * n + n_)])) *
           (q[static_cast<size_t>(k_ * n + n_)] - zeros[static_cast<size_t>(g * n + n_)]);
  }
};

Layer random_layer(int64_t n, int64_t k, int64_t group, bool symmetric, uint64_t seed) {
  Layer l{n, k, group, {}, {}, {}};
  std::mt19937_64 rng(seed);
  l.q.resize(static_cast<size_t>(k * n));
  for (int& v : l.q) v = static_cast<int>(rng() % 16);
  l.zeros.resize(static_cast<size_t>(l.groups() * n));
  // Zero points 1..15: AutoGPTQ's v1 packing stores zero - 1, and a zero of 0 would spill into
  // the neighbouring nibbles (a known defect of that format, not exercised here).
  for (int& z : l.zeros) z = symmetric ? 8 : 1 + static_cast<int>(rng() % 15);
  for (size_t i = 0; i < l.zeros.size(); ++i)
    l.scales.push_back(f32_to_f16(0.001f + 0.01f * static_cast<float>(rng() % 1000) / 1000.0f));
  return l;
}

HostTensor i32_tensor(const std::vector<uint32_t>& v, std::vector<int64_t> shape) {
  HostTensor t = HostTensor::empty(DType::i32, shape);
  std::memcpy(t.storage(), v.data(), v.size() * 4);
  return t;
}

HostTensor scales_tensor(const Layer& l) {
  HostTensor t = HostTensor::empty(DType::f16, std::vector<int64_t>{l.groups(), l.n});
  std::memcpy(t.storage(), l.scales.data(), l.scales.size() * 2);
  return t;
}

// AutoGPTQ QuantLinear.pack (4 bits): qweight rows pack 8 consecutive k of one column; zeros are
// stored minus one (checkpoint format "gptq", v1) unless v2, packed 8 columns per word.
std::vector<std::pair<std::string, HostTensor>> pack_gptq(const Layer& l, const std::string& p,
                                                          bool v2, bool with_g_idx) {
  std::vector<uint32_t> qweight(static_cast<size_t>(l.k / 8 * l.n), 0);
  for (int64_t row = 0, i = 0; row < l.k / 8; ++row, i += 8)
    for (int64_t j = i; j < i + 8; ++j)
      for (int64_t c = 0; c < l.n; ++c)
        qweight[static_cast<size_t>(row * l.n + c)] |=
            static_cast<uint32_t>(l.q[static_cast<size_t>(j * l.n + c)]) << (4 * (j - i));
  std::vector<uint32_t> qzeros(static_cast<size_t>(l.groups() * l.n / 8), 0);
  for (int64_t g = 0; g < l.groups(); ++g)
    for (int64_t col = 0, i = 0; col < l.n / 8; ++col, i += 8)
      for (int64_t j = i; j < i + 8; ++j) {
        const uint32_t z =
            static_cast<uint32_t>(l.zeros[static_cast<size_t>(g * l.n + j)] - (v2 ? 0 : 1));
        qzeros[static_cast<size_t>(g * l.n / 8 + col)] |= z << (4 * (j - i));
      }
  std::vector<std::pair<std::string, HostTensor>> out = {
      {p + ".qweight", i32_tensor(qweight, {l.k / 8, l.n})},
      {p + ".qzeros", i32_tensor(qzeros, {l.groups(), l.n / 8})},
      {p + ".scales", scales_tensor(l)}};
  if (with_g_idx) {
    std::vector<uint32_t> g_idx(static_cast<size_t>(l.k));
    for (int64_t k = 0; k < l.k; ++k)
      g_idx[static_cast<size_t>(k)] = static_cast<uint32_t>(k / l.group);
    out.emplace_back(p + ".g_idx", i32_tensor(g_idx, {l.k}));
  }
  return out;
}

// AutoAWQ WQLinear_GEMM.from_linear: qweight [K, N/8], column 8c + order_map[i] in nibble i.
std::vector<std::pair<std::string, HostTensor>> pack_awq(const Layer& l, const std::string& p) {
  const int order_map[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  std::vector<uint32_t> qweight(static_cast<size_t>(l.k * l.n / 8), 0);
  for (int64_t k = 0; k < l.k; ++k)
    for (int64_t col = 0; col < l.n / 8; ++col)
      for (int i = 0; i < 8; ++i)
        qweight[static_cast<size_t>(k * l.n / 8 + col)] |=
            static_cast<uint32_t>(l.q[static_cast<size_t>(k * l.n + col * 8 + order_map[i])])
            << (4 * i);
  std::vector<uint32_t> qzeros(static_cast<size_t>(l.groups() * l.n / 8), 0);
  for (int64_t g = 0; g < l.groups(); ++g)
    for (int64_t col = 0; col < l.n / 8; ++col)
      for (int i = 0; i < 8; ++i)
        qzeros[static_cast<size_t>(g * l.n / 8 + col)] |=
            static_cast<uint32_t>(l.zeros[static_cast<size_t>(g * l.n + col * 8 + order_map[i])])
            << (4 * i);
  return {{p + ".qweight", i32_tensor(qweight, {l.k, l.n / 8})},
          {p + ".qzeros", i32_tensor(qzeros, {l.groups(), l.n / 8})},
          {p + ".scales", scales_tensor(l)}};
}

SafetensorsFile file_of(const std::vector<std::pair<std::string, HostTensor>>& ts) {
  auto bytes = encode_safetensors(ts);
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  auto f = parse_safetensors(*bytes);
  EXPECT_TRUE(f.ok()) << f.status().message();
  return std::move(*f);
}

void expect_weights(const HostTensor& t, const Layer& l) {
  ASSERT_EQ(t.desc(), TensorDesc::contiguous(t.dtype(), {l.n, l.k}));
  const std::vector<double> v = t.to_doubles();
  int64_t bad = 0;
  for (int64_t n = 0; n < l.n; ++n)
    for (int64_t k = 0; k < l.k; ++k)
      if (v[static_cast<size_t>(n * l.k + k)] != l.w(n, k) && bad++ < 5)
        ADD_FAILURE() << "w[" << n << "][" << k << "] = " << v[static_cast<size_t>(n * l.k + k)]
                      << ", checkpoint " << l.w(n, k);
  EXPECT_EQ(bad, 0);
}

Result<HostTensor> read(const SafetensorsFile& f, DType as, Int4Config c = {},
                        Int4Module* m = nullptr) {
  return read_int4_module(f, "layers.0.mlp.up_proj", as, c, "test", m);
}

const std::string kP = "layers.0.mlp.up_proj";

TEST(Int4Checkpoint, GptqV1AsymmetricGroupsOf128ReadExactly) {
  const Layer l = random_layer(48, 512, 128, false, 1);
  Int4Module m;
  auto t = read(file_of(pack_gptq(l, kP, false, true)), DType::q4_z, {}, &m);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(m.packing, Int4Packing::gptq);
  EXPECT_EQ(m.group, 128);
  EXPECT_FALSE(m.symmetric);
  expect_weights(*t, l);
}

TEST(Int4Checkpoint, GptqV2ZerosAreReadAsStoredWhenTheConfigSaysSo) {
  const Layer l = random_layer(16, 256, 64, false, 2);
  Int4Config c;
  c.method = "gptq";
  c.checkpoint_format = "gptq_v2";
  auto t = read(file_of(pack_gptq(l, kP, true, false)), DType::q4_z, c);
  ASSERT_TRUE(t.ok()) << t.status().message();
  expect_weights(*t, l);
  // Read as v1 instead, the same bytes mean other zero points: the configuration matters.
  auto wrong = read(file_of(pack_gptq(l, kP, true, false)), DType::q4_z);
  ASSERT_TRUE(wrong.ok());
  EXPECT_NE(wrong->to_doubles(), t->to_doubles());
}

TEST(Int4Checkpoint, SymmetricGptqReadsAsQ4_0OrQ4_zAndAsymmetricOnlyAsQ4_z) {
  const Layer sym = random_layer(24, 256, 32, true, 3);
  const SafetensorsFile f = file_of(pack_gptq(sym, kP, false, true));
  for (DType as : {DType::q4_0, DType::q4_z}) {
    auto t = read(f, as);
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_EQ(t->dtype(), as);
    expect_weights(*t, sym);
  }
  auto asym =
      read(file_of(pack_gptq(random_layer(24, 256, 32, false, 4), kP, false, true)), DType::q4_0);
  ASSERT_FALSE(asym.ok());
  EXPECT_HAS(asym.status().message(), "declare it q4_z");
}

TEST(Int4Checkpoint, AwqGemmPackingReadsExactly) {
  for (int64_t group : {32, 64, 128}) {
    const Layer l = random_layer(40, 256, group, false, 5 + static_cast<uint64_t>(group));
    Int4Module m;
    auto t = read(file_of(pack_awq(l, kP)), DType::q4_z, {}, &m);
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_EQ(m.packing, Int4Packing::awq);
    EXPECT_EQ(m.group, group);
    expect_weights(*t, l);
  }
}

TEST(Int4Checkpoint, OneGroupOverTheWholeRowIsAGroupSize) {
  const Layer l = random_layer(8, 96, 96, false, 9);  // group_size -1 in a config: K
  auto t = read(file_of(pack_gptq(l, kP, false, false)), DType::q4_z);
  ASSERT_TRUE(t.ok()) << t.status().message();
  expect_weights(*t, l);
}

TEST(Int4Checkpoint, ActOrderIsRefusedWithTheReason) {
  const Layer l = random_layer(8, 256, 128, false, 10);
  auto ts = pack_gptq(l, kP, false, true);
  // desc_act: g_idx assigns columns to groups out of K's order.
  std::vector<uint32_t> g_idx(256);
  for (int k = 0; k < 256; ++k) g_idx[static_cast<size_t>(k)] = static_cast<uint32_t>((k * 7) % 2);
  ts.back().second = i32_tensor(g_idx, {256});
  auto t = read(file_of(ts), DType::q4_z);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), Code::unsupported);
  EXPECT_HAS(t.status().message(), "act-order");
  EXPECT_HAS(t.status().message(), "g_idx[1] = 1");
}

TEST(Int4Checkpoint, WhatDuetCannotHoldExactlyIsRefusedByName) {
  // Groups of 16: duet's blocks hold one scale per 32 weights.
  auto small =
      read(file_of(pack_gptq(random_layer(8, 64, 16, false, 11), kP, false, false)), DType::q4_z);
  ASSERT_FALSE(small.ok());
  EXPECT_HAS(small.status().message(), "a multiple of 32");
  // 8-bit per the configuration.
  Int4Config c;
  c.bits = 8;
  c.source = "quantize_config.json";
  auto eight = read(file_of(pack_gptq(random_layer(8, 64, 32, false, 12), kP, false, false)),
                    DType::q4_z, c);
  ASSERT_FALSE(eight.ok());
  EXPECT_HAS(eight.status().message(), "4-bit");
  // f32 scales f16 cannot hold.
  const Layer l = random_layer(8, 64, 32, false, 13);
  auto ts = pack_gptq(l, kP, false, false);
  HostTensor s32 = HostTensor::empty(DType::f32, std::vector<int64_t>{2, 8});
  for (int i = 0; i < 16; ++i) s32.data<float>()[i] = 0.1f;  // not an f16 value
  ts[2].second = s32;
  auto f32s = read(file_of(ts), DType::q4_z);
  ASSERT_FALSE(f32s.ok());
  EXPECT_HAS(f32s.status().message(), "f16 holds exactly");
  // Shapes that are neither packing, a missing tensor, a dtype other than q4_z / q4_0.
  ts = pack_gptq(l, kP, false, false);
  ts[2].second = HostTensor::empty(DType::f16, std::vector<int64_t>{2, 7});
  EXPECT_HAS(read(file_of(ts), DType::q4_z).status().message(), "GPTQ packing");
  ts = pack_gptq(l, kP, false, false);
  ts.erase(ts.begin() + 1);
  EXPECT_HAS(read(file_of(ts), DType::q4_z).status().message(), "qzeros");
  EXPECT_HAS(read(file_of(pack_gptq(l, kP, false, false)), DType::q4_k).status().message(), "q4_z");
}

// ---- Graph files: a GGUF tensor and a GPTQ module as constants.

fs::path scratch(const std::string& name) {
  const fs::path d = fs::path(DUET_TEST_TMPDIR) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream(p) << s;
}

TEST(Int4Checkpoint, GraphConstantsNameGgufTensorsAndInt4ModulesAlike) {
  const fs::path d = scratch("constants");
  // A GGUF file with a q4_k weight [N=256, K=512], written innermost first.
  HostTensor f = HostTensor::empty(DType::f32, std::vector<int64_t>{256, 512});
  for (int64_t i = 0; i < f.numel(); ++i)
    f.data<float>()[i] = std::sin(0.01f * static_cast<float>(i));
  HostTensor w = *quantize(f, DType::q4_k);
  ASSERT_TRUE(write_gguf((d / "model.gguf").string(), {}, {{"blk.0.ffn_up.weight", w}}).ok());
  // A GPTQ checkpoint with its configuration beside it (v2 zero points).
  const Layer l = random_layer(16, 512, 128, false, 20);
  ASSERT_TRUE(write_safetensors((d / "model.safetensors").string(),
                                pack_gptq(l, "model.layers.0.self_attn.o_proj", true, true))
                  .ok());
  write_text(d / "quantize_config.json",
             R"({"bits": 4, "group_size": 128, "desc_act": false, "sym": false,
                 "quant_method": "gptq", "checkpoint_format": "gptq_v2"})");
  const std::string graph = R"({"format": "duet-graph", "version": 1, "name": "q",
    "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 512]}],
    "constants": [
      {"name": "up", "dtype": "q4_k", "shape": [256, 512], "file": "model.gguf", "key": "blk.0.ffn_up.weight"},
      {"name": "o", "dtype": "q4_z", "shape": [16, 512], "file": "model.safetensors", "key": "model.layers.0.self_attn.o_proj"}],
    "nodes": [{"name": "a", "op": "matmul", "inputs": ["x", "up"], "attrs": {"transpose_b": true}},
              {"name": "b", "op": "matmul", "inputs": ["x", "o"], "attrs": {"transpose_b": true}}],
    "outputs": ["a", "b"]})";
  write_text(d / "g.json", graph);
  auto g = load_graph((d / "g.json").string());
  ASSERT_TRUE(g.ok()) << g.status().message();
  const GraphValue& up = g->value(*g->find("up"));
  ASSERT_TRUE(up.data);
  EXPECT_EQ(up.data->to_doubles(), w.to_doubles());
  const GraphValue& o = g->value(*g->find("o"));
  ASSERT_TRUE(o.data);
  expect_weights(*o.data, l);
  // Saving keeps the references; loading again gives the same graph.
  ASSERT_TRUE(save_graph(*g, (d / "again.json").string()).ok());
  auto again = load_graph((d / "again.json").string());
  ASSERT_TRUE(again.ok()) << again.status().message();
  std::string diff;
  EXPECT_TRUE(again->same_as(*g, &diff)) << diff;

  // A declaration that does not match the file names both, and GGUF's dimension order.
  std::string bad = graph;
  bad.replace(bad.find("[256, 512]"), 10, "[512, 256]");
  write_text(d / "bad.json", bad);
  auto e = load_graph((d / "bad.json").string());
  ASSERT_FALSE(e.ok());
  EXPECT_HAS(e.status().message(), "constant 'up'");
  EXPECT_HAS(e.status().message(), "q4_k[512,256] as declared");
  EXPECT_HAS(e.status().message(), "innermost first");
  bad = graph;
  bad.replace(bad.find("\"q4_z\""), 6, "\"q4_0\"");
  write_text(d / "bad.json", bad);
  e = load_graph((d / "bad.json").string());
  ASSERT_FALSE(e.ok());
  EXPECT_HAS(e.status().message(), "constant 'o'");
  EXPECT_HAS(e.status().message(), "declare it q4_z");
}

TEST(Int4Checkpoint, QuantizedConstantsWithoutAFileAreSavedToGgufBesideTheGraph) {
  const fs::path d = scratch("save");
  GraphBuilder b("s");
  ValueId x = b.input("x", DType::f32, {1, 64});
  HostTensor f = HostTensor::empty(DType::f32, std::vector<int64_t>{3, 64});
  for (int64_t i = 0; i < f.numel(); ++i) f.data<float>()[i] = 0.01f * static_cast<float>(i % 17);
  ValueId w = b.constant("w", *quantize(f, DType::q8_0));
  b.output(b.matmul(x, w, true, "y"));
  auto g = b.build();
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_TRUE(save_graph(*g, (d / "s.json").string()).ok());
  EXPECT_TRUE(is_gguf_file((d / "s.gguf").string()));
  auto back = load_graph((d / "s.json").string());
  ASSERT_TRUE(back.ok()) << back.status().message();
  const GraphValue& bw = back->value(*back->find("w"));
  EXPECT_EQ(bw.source.file, "s.gguf");
  ASSERT_TRUE(bw.data);
  EXPECT_EQ(bw.data->dtype(), DType::q8_0);
  EXPECT_EQ(bw.data->to_doubles(), g->value(*g->find("w")).data->to_doubles());
  // q4_z has no GGUF type: saving it without its checkpoint is refused by name.
  GraphBuilder z("z");
  ValueId zx = z.input("x", DType::f32, {1, 64});
  z.output(z.matmul(zx, z.constant("wz", *quantize(f, DType::q4_z)), true, "y"));
  auto zg = z.build();
  ASSERT_TRUE(zg.ok());
  Status s = save_graph(*zg, (d / "z.json").string());
  ASSERT_FALSE(s.ok());
  EXPECT_HAS(s.message(), "wz");
  // Inline values cannot declare a block format.
  const std::string inline_q = R"({"format": "duet-graph", "version": 1, "name": "i",
    "constants": [{"name": "w", "dtype": "q8_0", "shape": [1, 32], "values": [1]}],
    "outputs": []})";
  auto i = graph_from_json(inline_q);
  ASSERT_FALSE(i.ok());
  EXPECT_HAS(i.status().message(), "a \"file\" for a q8_0 constant");
}

TEST(Int4Checkpoint, ConfigurationsAreReadBesideTheWeights) {
  const fs::path d = scratch("config");
  write_text(d / "config.json", R"({"model_type": "llama", "quantization_config":
      {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": true, "version": "gemm"}})");
  auto c = int4_config_near((d / "model.safetensors").string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->method, "awq");
  EXPECT_EQ(c->group_size, 128);
  write_text(d / "config.json",
             R"({"quantization_config": {"quant_method": "awq", "version": "gemv"}})");
  auto gemv = int4_config_near((d / "model.safetensors").string());
  ASSERT_FALSE(gemv.ok());
  EXPECT_HAS(gemv.status().message(), "GEMM");
  fs::remove(d / "config.json");
  auto none = int4_config_near((d / "model.safetensors").string());
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->method, "");
  EXPECT_TRUE(none->gptq_v1());
}

}  // namespace
}  // namespace duet
