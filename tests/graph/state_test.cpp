// Persistent state: a KV cache declared as graph states, appended to by write_slice at a run-time
// position and read by attention over a run-time number of valid keys. Steps run on one plan,
// the cache survives runs and re-plans, reads back, resets, and every step matches the float64
// reference run with the same cache contents.
#include <gtest/gtest.h>

#include "duet/backends.h"
#include "duet/builtin_engine.h"
#include "duet/engine.h"
#include "duet/graph_file.h"
#include "duet/planner.h"
#include "graph_reference.h"

namespace duet::testing_graph {
namespace {

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

constexpr int64_t kHq = 4, kHkv = 2, kCap = 24, kD = 16;

// One attention layer that appends its new K and V rows to the cache at `pos` and attends over
// the first `len` keys; the query is rotated at its run-time position.
Graph cache_graph(DType t, int64_t rows) {
  GraphBuilder b("kv_cache");
  ValueId q = b.input("q", t, {1, kHq, rows, kD});
  ValueId k = b.input("k", t, {1, kHkv, rows, kD});
  ValueId v = b.input("v", t, {1, kHkv, rows, kD});
  ValueId pos = b.input("pos", DType::i32, {1});
  ValueId len = b.input("len", DType::i32, {1});
  ValueId kc = b.state("k_cache", t, {1, kHkv, kCap, kD});
  ValueId vc = b.state("v_cache", t, {1, kHkv, kCap, kD});
  ValueId kw = b.write_slice(kc, b.rope(k, pos), pos, 2, "k_write");
  ValueId vw = b.write_slice(vc, v, pos, 2, "v_write");
  b.output(b.attention(b.rope(q, pos), kw, vw, len, true, "attn"));
  auto g = b.build();
  EXPECT_TRUE(g.ok()) << g.status().message();
  return *g;
}

HostTensor scalar(int32_t v) {
  HostTensor h = HostTensor::empty(DType::i32, std::vector<int64_t>{1});
  h.from_doubles(std::vector<double>{static_cast<double>(v)});
  return h;
}

// The float64 reference of one step, the cache contents carried in `states` (graph dtype).
std::vector<double> reference_step(const Graph& g, const std::map<std::string, HostTensor>& in,
                                   std::map<std::string, HostTensor>& states) {
  std::vector<HostTensor> values(g.values().size());
  for (int id : g.inputs()) values[static_cast<size_t>(id)] = in.at(g.value(id).name);
  for (int id : g.states()) values[static_cast<size_t>(id)] = states.at(g.value(id).name);
  std::vector<double> out;
  for (const GraphNode& n : g.nodes()) {
    std::vector<HostTensor> ins;
    std::vector<TensorDesc> descs;
    for (int i : n.inputs) {
      ins.push_back(values[static_cast<size_t>(i)]);
      descs.push_back(ins.back().desc());
    }
    auto op = make_op(n.kind(), n.op.attrs, descs, {}, n.name);
    EXPECT_TRUE(op.ok()) << op.status().message();
    auto y = reference::evaluate(*op, ins);
    EXPECT_TRUE(y.ok()) << y.status().message();
    HostTensor h = HostTensor::empty(op->output.dtype, op->output.dims());
    h.from_doubles(*y);
    values[static_cast<size_t>(n.output)] = h;
    if (n.kind() == OpKind::write_slice) states[g.value(n.inputs[0]).name] = h;
    if (n.output == g.outputs()[0]) out = *y;
  }
  return out;
}

std::map<std::string, HostTensor> zero_states(const Graph& g) {
  std::map<std::string, HostTensor> s;
  for (int id : g.states()) {
    const TensorDesc& d = g.value(id).desc;
    HostTensor h =
        HostTensor::empty(d.dtype, std::vector<int64_t>(d.dims().begin(), d.dims().end()));
    h.from_doubles(std::vector<double>(static_cast<size_t>(h.numel()), 0.0));
    s[g.value(id).name] = h;
  }
  return s;
}

std::map<std::string, HostTensor> step_inputs(DType t, int64_t rows, int32_t pos, uint32_t seed) {
  return {{"q", random_tensor(t, {1, kHq, rows, kD}, seed)},
          {"k", random_tensor(t, {1, kHkv, rows, kD}, seed + 1)},
          {"v", random_tensor(t, {1, kHkv, rows, kD}, seed + 2)},
          {"pos", scalar(pos)},
          {"len", scalar(pos + static_cast<int32_t>(rows))}};
}

void expect_close(const HostTensor& got, const std::vector<double>& want, DType t,
                  const std::string& what) {
  const std::vector<double> g = got.to_doubles();
  ASSERT_EQ(g.size(), want.size()) << what;
  const check::Tolerance tol = graph_tolerance(t);
  double err = 0, norm = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    err += (g[i] - want[i]) * (g[i] - want[i]);
    norm += want[i] * want[i];
  }
  EXPECT_LE(err / std::max(norm, 1e-30), tol.nmse) << what;
}

// A prefill of 5 rows, then single-row decode steps: the decode steps share one plan, the
// prefill's cache survives the re-plan, and every step matches the reference.
void decode_matches(Device& dev, DType t) {
  Graph prefill = cache_graph(t, 5), step = cache_graph(t, 1);
  auto e = Engine::create(prefill, {&dev});
  ASSERT_TRUE(e.ok()) << e.status().message();
  std::map<std::string, HostTensor> ref = zero_states(prefill);
  auto in = step_inputs(t, 5, 0, 11);
  auto out = (*e)->run(in);
  ASSERT_TRUE(out.ok()) << out.status().message();
  expect_close(out->begin()->second, reference_step(prefill, in, ref), t, "prefill");
  const int plans = (*e)->plans_made();
  for (int32_t p = 5; p < 12; ++p) {
    in = step_inputs(t, 1, p, 100 + static_cast<uint32_t>(p));
    out = (*e)->run(in);
    ASSERT_TRUE(out.ok()) << out.status().message();
    expect_close(out->begin()->second, reference_step(step, in, ref), t,
                 "step at " + std::to_string(p) + " on " + dev.id());
  }
  // One plan for the prefill and one for every decode step after it.
  EXPECT_EQ((*e)->plans_made(), plans + 1);
  // V is stored exactly as given; K as rotated on the device.
  auto vs = (*e)->read_state("v_cache");
  ASSERT_TRUE(vs.ok()) << vs.status().message();
  EXPECT_EQ(vs->desc().str(), ref.at("v_cache").desc().str());
  EXPECT_EQ(vs->to_doubles(), ref.at("v_cache").to_doubles());
  auto ks = (*e)->read_state("k_cache");
  ASSERT_TRUE(ks.ok()) << ks.status().message();
  expect_close(*ks, ref.at("k_cache").to_doubles(), t, "k_cache");
}

TEST(State, ADecodeLoopOnTheCpuMatchesTheReference) {
  Device& cpu = *shared_registry()->find("cpu:0");
  for (DType t : {DType::f32, DType::f16}) decode_matches(cpu, t);
}

Device* first_vulkan_device() {
  for (Device* d : shared_registry()->devices())
    if (d->caps().backend == BackendKind::vulkan) return d;
  return nullptr;
}

TEST(State, ADecodeLoopOnVulkanMatchesTheReference) {
  Device* vk = first_vulkan_device();
  if (!vk) GTEST_SKIP() << "no Vulkan device opened on this machine (duet devices says why)";
  for (DType t : {DType::f32, DType::f16}) decode_matches(*vk, t);
}

TEST(State, StatesAreReadWrittenAndReset) {
  Graph g = cache_graph(DType::f32, 1);
  auto e = Engine::create(g, {shared_registry()->find("cpu:0")});
  ASSERT_TRUE(e.ok()) << e.status().message();
  auto zero = (*e)->read_state("k_cache");
  ASSERT_TRUE(zero.ok()) << zero.status().message();
  for (double x : zero->to_doubles()) ASSERT_EQ(x, 0.0);

  HostTensor filled = random_tensor(DType::f32, {1, kHkv, kCap, kD}, 7);
  ASSERT_TRUE((*e)->write_state("v_cache", filled).ok());
  auto back = (*e)->read_state("v_cache");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->to_doubles(), filled.to_doubles());
  ASSERT_TRUE((*e)->run(step_inputs(DType::f32, 1, 3, 1)).ok());
  ASSERT_TRUE((*e)->reset_states().ok());
  for (const char* name : {"k_cache", "v_cache"})
    for (double x : (*e)->read_state(name)->to_doubles()) ASSERT_EQ(x, 0.0) << name;

  auto bad = (*e)->write_state("v_cache", random_tensor(DType::f32, {1, kHkv, 3, kD}, 1));
  ASSERT_FALSE(bad.ok());
  EXPECT_HAS(bad.message(), "v_cache");
  EXPECT_HAS(bad.message(), "f32[1,2,24,16]");
  auto missing = (*e)->read_state("cache");
  ASSERT_FALSE(missing.ok());
  EXPECT_HAS(missing.status().message(), "k_cache, v_cache");
}

TEST(State, AWriteOutsideTheCacheIsAnErrorNotAWritePastIt) {
  for (Device* d : shared_registry()->devices()) {
    if (d->caps().backend == BackendKind::cuda) continue;
    Graph g = cache_graph(DType::f32, 2);
    auto e = Engine::create(g, {d});
    ASSERT_TRUE(e.ok()) << e.status().message();
    for (int32_t pos : {static_cast<int32_t>(kCap - 1), -1}) {
      auto out = (*e)->run(step_inputs(DType::f32, 2, pos, 3));
      ASSERT_FALSE(out.ok()) << d->id() << " pos " << pos;
      EXPECT_HAS(out.status().message(), pos < 0 ? "tensor 'pos'" : "write_slice");
    }
    // A visible length past the capacity is refused too.
    auto in = step_inputs(DType::f32, 2, 0, 3);
    in["len"] = scalar(kCap + 1);
    auto out = (*e)->run(in);
    ASSERT_FALSE(out.ok()) << d->id();
    EXPECT_HAS(out.status().message(), "attention");
    // The engine still runs after the errors.
    ASSERT_TRUE((*e)->run(step_inputs(DType::f32, 2, 0, 3)).ok()) << d->id();
  }
}

TEST(State, TheMemoryPlanAndExplainCountStates) {
  Graph g = cache_graph(DType::f16, 1);
  auto e = Engine::create(g, {shared_registry()->find("cpu:0")});
  ASSERT_TRUE(e.ok()) << e.status().message();
  const Plan& p = (*e)->plan();
  const uint64_t bytes = 2 * kHkv * kCap * kD * 2;
  uint64_t states = 0;
  for (const DeviceMemoryPlan& m : p.memory) {
    states += m.state_bytes;
    EXPECT_GE(m.peak_bytes, m.state_bytes);
  }
  EXPECT_EQ(states, bytes);
  EXPECT_EQ(p.states.size(), 2u);
  const std::string text = explain(p);
  EXPECT_HAS(text, "states (kept across runs): 2");
  EXPECT_HAS(text, "writes 'k_cache' in place");
  EXPECT_HAS(plan_json(p), "\"state_bytes\"");

  // A budget smaller than the states is refused with their size named.
  auto small = Engine::create(g, {shared_registry()->find("cpu:0")}, *parse_policy("budget=2KiB"));
  ASSERT_FALSE(small.ok());
}

TEST(State, StatesRoundTripThroughTheGraphFile) {
  Graph g = cache_graph(DType::f32, 1);
  const std::string text = graph_to_json(g);
  EXPECT_HAS(text, "\"states\"");
  auto back = graph_from_json(text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->states().size(), 2u);
  EXPECT_EQ(graph_to_json(*back), text);
  EXPECT_EQ(back->value(back->states()[0]).kind, ValueKind::state);
}

TEST(State, TheBuilderRefusesWhatWouldMakeAStateAmbiguous) {
  auto build = [](int mode) {
    GraphBuilder b("bad");
    ValueId x = b.input("x", DType::f32, {2, 4});
    ValueId pos = b.input("pos", DType::i32, {1});
    ValueId s = b.state("s", DType::f32, {8, 4});
    ValueId w = b.write_slice(s, x, pos, 0, "w");
    if (mode == 0) b.write_slice(s, x, pos, 0, "w2");  // a second write
    if (mode == 1) b.output(b.add(s, s));              // a read of the state after the write
    if (mode == 2) b.write_slice(b.slice(s, 0, 0, 4), x, pos, 0);  // a write into a view
    b.output(w);
    return b.build();
  };
  for (int m : {0, 1, 2}) {
    auto g = build(m);
    ASSERT_FALSE(g.ok()) << m;
    EXPECT_HAS(g.status().message(), "state 's'");
  }
  GraphBuilder q("quant");
  q.state("s", DType::q8_0, {4, 32});
  EXPECT_FALSE(q.build().ok());
}

}  // namespace
}  // namespace duet::testing_graph
