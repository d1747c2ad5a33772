// The cluster planner (duet/cluster.h): where a graph is cut into pipeline stages over the ranks
// of a distributed run, from capability profiles and given links, and what each stage runs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "duet/cluster.h"
#include "duet/engine.h"
#include "fixtures.h"

namespace duet::testing_planner {
namespace {

// A Llama-shaped decoder of `layers` layers at decode (one row): per layer a norm, q/k/v
// projections, k and v written into per-layer caches (states), attention over the caches, the
// output projection and the gated MLP, every weight in `wdtype` ([out, in], read transposed).
// Constants are declared by shape only: planning needs no data.
Graph decoder(int layers, int64_t embd, int64_t ff, int64_t kv, int64_t context, DType wdtype) {
  GraphBuilder b("decoder");
  ValueId x = b.input("x", DType::f32, {1, embd});
  ValueId pos = b.input("pos", DType::i32, {1});
  auto w = [&](const std::string& name, int64_t out, int64_t in) {
    return b.constant(name, wdtype, {out, in});
  };
  for (int l = 0; l < layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    ValueId h = b.rmsnorm(x, b.constant(p + "attn_norm", DType::f32, {embd}), 1e-5f, p + "h");
    ValueId q = b.matmul(h, w(p + "attn_q", embd, embd), true, p + "q");
    ValueId k = b.matmul(h, w(p + "attn_k", kv, embd), true, p + "k");
    ValueId v = b.matmul(h, w(p + "attn_v", kv, embd), true, p + "v");
    ValueId kc =
        b.write_slice(b.state(p + "k_cache", DType::f32, {context, kv}), k, pos, 0, p + "kc");
    ValueId vc =
        b.write_slice(b.state(p + "v_cache", DType::f32, {context, kv}), v, pos, 0, p + "vc");
    ValueId s = b.softmax(b.matmul(b.slice(q, 1, 0, kv, 1, p + "qh"), kc, true, p + "s"), p + "p");
    ValueId a = b.matmul(s, vc, false, p + "a");
    std::vector<ValueId> heads(static_cast<size_t>(embd / kv), a);
    ValueId o =
        b.matmul(b.concat(heads, 1, p + "heads"), w(p + "attn_output", embd, embd), true, p + "o");
    x = b.add(x, o, p + "x1");
    ValueId h2 = b.rmsnorm(x, b.constant(p + "ffn_norm", DType::f32, {embd}), 1e-5f, p + "h2");
    ValueId g = b.silu(b.matmul(h2, w(p + "ffn_gate", ff, embd), true, p + "g"), p + "sg");
    ValueId up = b.matmul(h2, w(p + "ffn_up", ff, embd), true, p + "up");
    x = b.add(x, b.matmul(b.mul(g, up, p + "m"), w(p + "ffn_down", embd, ff), true, p + "d"),
              p + "x2");
  }
  b.output(b.rmsnorm(x, b.constant("output_norm", DType::f32, {embd}), 1e-5f, "out"));
  auto g = b.build();
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? std::move(*g) : Graph{};
}

ClusterRank rank_of(const std::string& host, std::vector<DeviceCaps> caps) {
  ClusterRank r;
  r.host = host;
  r.devices = profile_devices(caps, {});
  return r;
}

Cluster cluster_of(std::vector<ClusterRank> ranks, double latency_us, double gbps) {
  Cluster c;
  c.ranks = std::move(ranks);
  c.links.assign(c.ranks.size(), std::vector<ClusterLink>(c.ranks.size()));
  for (auto& row : c.links)
    for (ClusterLink& l : row) l = {latency_us, gbps, "test"};
  return c;
}

DeviceCaps gpu_with(uint64_t gib) {
  DeviceCaps c = profile("rtx4090");
  c.memory_bytes = gib << 30;
  return c;
}

// A 70B-class decoder in q4_k (80 layers, 8192 wide, 28672 FFN, 4096 rows of cache): about
// 41 GB of weights and caches.
Graph llama70b() {
  return decoder(80, 8192, 28672, 1024, 4096, DType::q4_k);
}

TEST(ClusterPlanner, SeventyBillionOnTwo24GbGpuHostsIsSplitAcrossBothGpus) {
  const Graph g = llama70b();
  const Cluster c = cluster_of({rank_of("a", {gpu_with(24), profile("ryzen9-7950x")}),
                                rank_of("b", {gpu_with(24), profile("ryzen9-7950x")})},
                               50, 1.25);
  auto p = plan_cluster(g, c);
  ASSERT_TRUE(p.ok()) << p.status().message();
  const std::string text = explain(*p, g);
  ASSERT_EQ(p->stages.size(), 2u) << text;
  for (const Stage& s : p->stages) {
    // Each half on its rank's GPU, by memory: neither GPU alone holds the model.
    ASSERT_EQ(s.devices_used.size(), 1u) << text;
    EXPECT_HAS(s.devices_used[0], "/cuda:0");
    EXPECT_GT(s.range.end - s.range.begin, static_cast<int>(g.nodes().size()) / 3) << text;
  }
  // One activation row crosses between the stages; faster than any single rank (which would
  // have to hold most layers in host memory).
  EXPECT_HAS(text, "activation 'blk.");
  EXPECT_HAS(text, "rank0 -> rank1: 32.0 KiB");
  EXPECT_LT(p->est_us, p->single_us) << text;
  EXPECT_HAS(text, "rank0/cuda:0 ");
}

TEST(ClusterPlanner, SeventyBillionOnTwo48GbGpuHostsStaysOnOneGpu) {
  // One 48 GB GPU holds it: a split would only add crossings (a pipeline of one request runs its
  // stages one after the other).
  const Graph g = llama70b();
  const Cluster c = cluster_of({rank_of("a", {gpu_with(48), profile("ryzen9-7950x")}),
                                rank_of("b", {gpu_with(48), profile("ryzen9-7950x")})},
                               50, 1.25);
  auto p = plan_cluster(g, c);
  ASSERT_TRUE(p.ok()) << p.status().message();
  const std::string text = explain(*p, g);
  ASSERT_EQ(p->stages.size(), 1u) << text;
  EXPECT_EQ(p->stages[0].range.rank, 0) << text;
  EXPECT_HAS(text, "alone: every split over several ranks is estimated slower");

  // Runs pipelined over the stages (a prompt's chunks, a batch): the two GPUs compute at the
  // same time, so the layers are split by rate, about half on each GPU, each stage within its
  // GPU's memory and none on a CPU; one run alone is slower than on one GPU, pipelined runs
  // nearly twice as fast.
  ClusterOptions piped;
  piped.pipelined = true;
  auto pp = plan_cluster(g, c, {}, piped);
  ASSERT_TRUE(pp.ok()) << pp.status().message();
  const std::string ptext = explain(*pp, g);
  ASSERT_EQ(pp->stages.size(), 2u) << ptext;
  for (const Stage& s : pp->stages) {
    ASSERT_EQ(s.devices_used.size(), 1u) << ptext;
    EXPECT_HAS(s.devices_used[0], "/cuda:0");
    EXPECT_NEAR(s.compute_us, p->single_us / 2, p->single_us / 10) << ptext;
  }
  EXPECT_LT(pp->pipelined_us, 0.6 * p->single_us) << ptext;
  EXPECT_GT(pp->est_us, p->single_us) << ptext;
  EXPECT_HAS(ptext, "per run pipelined (");
  EXPECT_HAS(ptext, "with the runs pipelined (the slowest stage or link bounds it)");
}

TEST(ClusterPlanner, RanksOnOneHostShareItsMemory) {
  // Two ranks of one 16 GiB host, CPUs only: each gets half of the host's 14.4 GiB budget, not
  // all of it, so a model of 7.3 GiB must be split; on two hosts either rank holds it.
  const Graph g = decoder(8, 4096, 16384, 1024, 1024, DType::f32);
  DeviceCaps cpu = profile("ryzen9-7950x");
  cpu.memory_bytes = uint64_t{16} << 30;
  auto one_host = plan_cluster(g, cluster_of({rank_of("h", {cpu}), rank_of("h", {cpu})}, 5, 10));
  ASSERT_TRUE(one_host.ok()) << one_host.status().message();
  EXPECT_EQ(one_host->stages.size(), 2u) << explain(*one_host, g);
  EXPECT_HAS(explain(*one_host, g), "host memory shared with 1 other rank(s) on h");
  auto two_hosts = plan_cluster(g, cluster_of({rank_of("h", {cpu}), rank_of("k", {cpu})}, 5, 10));
  ASSERT_TRUE(two_hosts.ok()) << two_hosts.status().message();
  EXPECT_EQ(two_hosts->stages.size(), 1u) << explain(*two_hosts, g);

  // Pipelined runs: two hosts' CPUs compute at once, so a model either holds is split by rate;
  // two ranks of one host share its cores as well as its memory, so one rank computes as fast.
  const Graph small = decoder(4, 1024, 4096, 256, 256, DType::f32);
  ClusterOptions piped;
  piped.pipelined = true;
  auto apart =
      plan_cluster(small, cluster_of({rank_of("h", {cpu}), rank_of("k", {cpu})}, 5, 10), {}, piped);
  ASSERT_TRUE(apart.ok()) << apart.status().message();
  EXPECT_EQ(apart->stages.size(), 2u) << explain(*apart, small);
  EXPECT_LT(apart->pipelined_us, apart->single_us) << explain(*apart, small);
  auto together =
      plan_cluster(small, cluster_of({rank_of("h", {cpu}), rank_of("h", {cpu})}, 5, 10), {}, piped);
  ASSERT_TRUE(together.ok()) << together.status().message();
  EXPECT_EQ(together->stages.size(), 1u) << explain(*together, small);
  EXPECT_HAS(explain(*together, small), "even pipelined");
}

TEST(ClusterPlanner, ForcedSplitIsReportedSlowerThanOneRank) {
  const Graph g = decoder(4, 64, 128, 16, 32, DType::f32);
  DeviceCaps cpu = profile("ryzen9-7950x");
  const Cluster c = cluster_of({rank_of("a", {cpu}), rank_of("b", {cpu})}, 30, 5);
  auto alone = plan_cluster(g, c);
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  EXPECT_EQ(alone->stages.size(), 1u);
  EXPECT_TRUE(alone->crossings.empty());
  ClusterOptions every;
  every.every_rank = true;
  auto split = plan_cluster(g, c, {}, every);
  ASSERT_TRUE(split.ok()) << split.status().message();
  const std::string text = explain(*split, g);
  ASSERT_EQ(split->stages.size(), 2u) << text;
  EXPECT_GT(split->est_us, split->single_us);
  EXPECT_HAS(text, "slower than rank0 alone");
  // An activation crosses to rank 1; the output comes back to rank 0's caller.
  EXPECT_HAS(text, "activation 'blk.");
  EXPECT_HAS(text, "output 'out' rank1 -> rank0");
}

TEST(ClusterPlanner, NoCutSeparatesACacheFromTheNodesUsingIt) {
  const Graph g = decoder(3, 64, 128, 16, 32, DType::f32);
  ClusterOptions every;
  every.every_rank = true;
  DeviceCaps cpu = profile("ryzen9-7950x");
  auto p = plan_cluster(
      g, cluster_of({rank_of("a", {cpu}), rank_of("b", {cpu}), rank_of("c", {cpu})}, 30, 5), {},
      every);
  ASSERT_TRUE(p.ok()) << p.status().message();
  for (const Stage& s : p->stages)
    for (int v : s.receives) EXPECT_LACKS(g.value(v).name, "c") << "a cache crossed a cut";
  // A cut between a cache's write and its reader is refused.
  const int reader = [&] {
    for (size_t n = 0; n < g.nodes().size(); ++n)
      if (g.nodes()[n].name == "blk.0.s") return static_cast<int>(n);
    return -1;
  }();
  ASSERT_GT(reader, 0);
  const int n = static_cast<int>(g.nodes().size());
  auto bad = cluster_stages(g, {{0, 0, reader}, {1, reader, n}});
  ASSERT_FALSE(bad.ok());
  EXPECT_HAS(bad.status().message(), "would separate a state from the nodes using it");
}

TEST(ClusterPlanner, StageGraphsRunInTurnGiveTheWholeGraphsOutputs) {
  // A small decoder with data, cut in three: each stage's graph run on the CPU in turn, handing
  // its sends to the next, gives what the whole graph gives, bit for bit.
  GraphBuilder b("mlp");
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> dist(-1, 1);
  auto data = [&](std::vector<int64_t> shape) {
    HostTensor t = HostTensor::empty(DType::f32, shape);
    std::vector<double> v(static_cast<size_t>(t.numel()));
    for (double& x : v) x = dist(rng);
    t.from_doubles(v);
    return t;
  };
  ValueId x = b.input("x", DType::f32, {2, 16});
  ValueId w0 = b.constant("w0", data({16, 16}));
  for (int l = 0; l < 6; ++l) {
    const std::string p = "l" + std::to_string(l) + ".";
    // Each layer reads the first weight through a view: recomputed where needed, never sent.
    ValueId wt = b.transpose(w0, 0, 1, p + "wt");
    ValueId h = b.silu(b.matmul(x, b.constant(p + "w", data({16, 16})), false, p + "mm"), p + "h");
    x = b.add(x, b.matmul(h, wt, false, p + "mm2"), p + "x");
  }
  b.output(x);
  auto g = b.build();
  ASSERT_TRUE(g.ok()) << g.status().message();
  const int n = static_cast<int>(g->nodes().size());
  auto stages = cluster_stages(*g, {{0, 0, n / 3}, {1, n / 3, 2 * n / 3}, {2, 2 * n / 3, n}});
  ASSERT_TRUE(stages.ok()) << stages.status().message();

  const HostTensor in = data({2, 16});
  Registry reg = open_registry();
  std::vector<Device*> cpu;
  for (Device* d : reg.devices())
    if (d->caps().backend == BackendKind::cpu) cpu.push_back(d);
  ASSERT_FALSE(cpu.empty());
  auto whole = Engine::create(*g, cpu);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  auto expected = (*whole)->run({{"x", in}});
  ASSERT_TRUE(expected.ok()) << expected.status().message();

  std::map<std::string, HostTensor> carried{{"x", in}};
  std::map<std::string, HostTensor> outputs;
  for (const Stage& s : stages->stages) {
    EXPECT_LE(s.nodes.size(), static_cast<size_t>(s.range.end - s.range.begin) + 1);
    auto sg = stage_graph(*g, s);
    ASSERT_TRUE(sg.ok()) << sg.status().message();
    std::map<std::string, HostTensor> ins;
    for (int v : s.inputs) ins[g->value(v).name] = carried.at(g->value(v).name);
    for (int v : s.receives) ins[g->value(v).name] = carried.at(g->value(v).name);
    auto e = Engine::create(std::move(*sg), cpu);
    ASSERT_TRUE(e.ok()) << e.status().message();
    auto out = (*e)->run(ins);
    ASSERT_TRUE(out.ok()) << out.status().message();
    for (auto& [name, t] : *out) carried[name] = t;
    for (int v : s.outputs) outputs[g->value(v).name] = carried.at(g->value(v).name);
  }
  ASSERT_EQ(outputs.size(), 1u);
  const HostTensor& got = outputs.begin()->second;
  const HostTensor& want = expected->begin()->second;
  EXPECT_EQ(got.to_doubles(), want.to_doubles());
}

}  // namespace
}  // namespace duet::testing_planner
