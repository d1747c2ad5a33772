// `duet run --distributed` and `duet plan` over ranks: a graph with per-layer caches split over two
// ranks of this machine gives what one process gives, bit for bit, across runs that read the
// caches the runs before them wrote (pipelined over the stages or one by one); a rank that stops
// answering ends the run with its name.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <random>

#include "duet/graph.h"
#include "duet/graph_file.h"
#include "duet/safetensors.h"
#include "duet/version.h"
#include "mpirun.h"

namespace {
using duet::test::Launch;
using duet::test::mpirun;
namespace fs = std::filesystem;

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

duet::HostTensor random_tensor(std::mt19937& rng, std::vector<int64_t> shape) {
  std::uniform_real_distribution<double> dist(-1, 1);
  duet::HostTensor t = duet::HostTensor::empty(duet::DType::f32, shape);
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (double& x : v) x = dist(rng);
  t.from_doubles(v);
  return t;
}

// Layers that each add to a cache (a state) what they compute and read the sum back: the output
// of the third run depends on what the first two left in every cache.
struct Model {
  fs::path dir, graph, inputs;
};

const Model& model() {
  static const Model m = [] {
    Model out;
    // One folder per process: ctest runs these tests in parallel, each in a process of its own.
    out.dir = fs::path(DUET_TEST_TMPDIR) / ("dist_run." + std::to_string(getpid()));
    fs::create_directories(out.dir);
    out.graph = out.dir / "cached.json";
    out.inputs = out.dir / "inputs.safetensors";
    std::mt19937 rng(11);
    duet::GraphBuilder b("cached");
    duet::ValueId x = b.input("x", duet::DType::f32, {2, 32});
    duet::ValueId pos = b.input("pos", duet::DType::i32, {1});
    for (int l = 0; l < 6; ++l) {
      const std::string p = "l" + std::to_string(l) + ".";
      duet::ValueId cache = b.state(p + "cache", duet::DType::f32, {4, 32});
      duet::ValueId prev = b.slice(cache, 0, 0, 2, 1, p + "prev");
      duet::ValueId h = b.silu(
          b.matmul(x, b.constant(p + "w", random_tensor(rng, {32, 32})), false, p + "mm"), p + "h");
      duet::ValueId written = b.write_slice(cache, b.add(prev, h, p + "acc"), pos, 0, p + "write");
      x = b.add(b.scale(x, 0.5f, p + "half"), b.slice(written, 0, 0, 2, 1, p + "read"), p + "x");
    }
    b.output(x);
    auto g = b.build();
    EXPECT_TRUE(g.ok()) << g.status().message();
    EXPECT_TRUE(duet::save_graph(*g, out.graph.string(), 64).ok());
    duet::HostTensor p = duet::HostTensor::empty(duet::DType::i32, std::vector<int64_t>{1});
    p.data<int32_t>()[0] = 0;
    EXPECT_TRUE(duet::write_safetensors(out.inputs.string(),
                                        {{"x", random_tensor(rng, {2, 32})}, {"pos", p}})
                    .ok());
    return out;
  }();
  return m;
}

std::vector<double> output_of(const fs::path& file) {
  auto t = duet::load_safetensors(file.string());
  EXPECT_TRUE(t.ok()) << t.status().message();
  if (!t.ok() || t->empty()) return {};
  return t->begin()->second.to_doubles();
}

Launch one_process(const std::string& args) {
  Launch out;
  FILE* pipe = popen((std::string(DUET_BIN) + " " + args + " 2>&1").c_str(), "r");
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.output.append(buf, n);
  out.exit_code = WEXITSTATUS(pclose(pipe));
  return out;
}

TEST(DistributedRun, TwoRanksGiveOneProcesssOutputsAcrossRunsThatReadTheCaches) {
  const Model& m = model();
  const std::string common = "run " + m.graph.string() + " --inputs " + m.inputs.string() +
                             " --repeats 3 --policy deny=vulkan --outputs ";
  const fs::path one = m.dir / "one.safetensors", two = m.dir / "two.safetensors";
  fs::remove(one);
  fs::remove(two);
  Launch single = one_process(common + one.string());
  ASSERT_EQ(single.exit_code, 0) << single.output;
  // The three runs pipelined (rank 0 starts run i+1 while rank 1 runs run i; the C API's test
  // below runs them one by one): each still reads what the runs before it left in the caches.
  Launch split = mpirun(
      2, DUET_BIN, common + two.string() + " --distributed --every-rank --explain --pipelined");
  ASSERT_EQ(split.exit_code, 0) << split.output;
  EXPECT_HAS(split.output, "stage 0: rank0");
  EXPECT_HAS(split.output, "stage 1: rank1");
  EXPECT_HAS(split.output, "links:\n  rank0 -> rank1: ");
  EXPECT_HAS(split.output, "(measured)");
  EXPECT_HAS(split.output, "slower than rank");  // two ranks of one machine: said plainly
  EXPECT_HAS(split.output, "3 runs pipelined over the stages");
  const std::vector<double> want = output_of(one), got = output_of(two);
  ASSERT_EQ(want.size(), 64u);
  EXPECT_EQ(got, want);
}

// The C API (duet_dist_*), from a C program linking libduet.so alone: its runs over two ranks are
// one process's engine's, byte for byte, and the plan names each rank's MPI library.
TEST(DistributedRun, TheCApiRunsTheStagesAsOneProcess) {
  const Model& m = model();
  Launch r = mpirun(2, DUET_DIST_C, m.graph.string() + " " + m.inputs.string() + " 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_HAS(r.output, "stage 1 on rank1");
  EXPECT_HAS(r.output, "  rank1: Open MPI");
  EXPECT_HAS(r.output, "; CUDA-aware: ");
  EXPECT_HAS(r.output, "c api: 3 runs over 2 ranks, each output identical to one process's");
}

TEST(DistributedRun, StalledRankEndsTheRunNamingItAndTheRun) {
  const Model& m = model();
  Launch r = mpirun(2, DUET_BIN,
                    "run " + m.graph.string() + " --inputs " + m.inputs.string() +
                        " --repeats 3 --policy deny=vulkan --distributed --every-rank --timeout 1",
                    "DUET_DIST_TEST_FAULT=1:stall:1");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_HAS(r.output, "duet: rank 0 (");
  EXPECT_HAS(r.output, "step 'run 1");
  EXPECT_HAS(r.output, "from rank 1: nothing after 1.0 s");
  EXPECT_LT(r.seconds, 300) << "rank 1 sleeps an hour: the run must end at the timeout";
}

// A rank of another duet build (another commit: DUET_DIST_TEST_FAULT makes rank 1 say so) is
// refused at start on every rank, each naming both ranks and both builds, with exit status 1.
TEST(DistributedRun, ARankOfAnotherBuildIsRefusedOnEveryRank) {
  Launch r = mpirun(2, DUET_BIN, "plan " + model().graph.string() + " --distributed",
                    "DUET_DIST_TEST_FAULT=1:build:0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  for (const char* rank : {"duet plan: rank 0 (", "duet plan: rank 1 ("}) {
    const size_t at = r.output.find(rank);
    ASSERT_NE(at, std::string::npos) << r.output;
    const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
    EXPECT_HAS(line, "): start refused: rank 1 (");
    EXPECT_HAS(line, ") runs duet " DUET_VERSION_STRING ", ");
    EXPECT_HAS(line, "; rank 0 (");
    EXPECT_HAS(line, "every rank must run the same duet build");
    // The injected build is another commit, or where this build's commit is unknown, another
    // compiler.
    EXPECT_TRUE(line.find("commit 0123456789ab, ") != std::string::npos ||
                line.find("(another build)") != std::string::npos)
        << line;
  }
  EXPECT_LT(r.seconds, 100) << "refused at start, not at a timeout";
}

TEST(DistributedRun, WithoutMpirunItSaysHowToStart) {
  Launch r = one_process("run " + model().graph.string() + " --distributed");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_HAS(r.output, "start it with mpirun");
}

TEST(DistributedPlan, ProfilesOfSeveralHostsArePlannedWithoutThem) {
  Launch r =
      one_process("plan " + model().graph.string() +
                  " --profile rank0/ryzen9-7950x,rank1/ryzen9-7950x --link 30,5 --every-rank");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_HAS(r.output, "cluster plan for graph 'cached': 2 stages");
  EXPECT_HAS(r.output, "rank0 -> rank1: 30.0 us + 5 GB/s (--link)");
  EXPECT_HAS(r.output, "activation 'l");
  Launch bad = one_process("plan " + model().graph.string() + " --profile rank1/ryzen9-7950x");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_HAS(bad.output, "rank0 has no profile");
  // Planned for pipelined runs: the estimate per run is the slowest stage's.
  Launch piped =
      one_process("plan " + model().graph.string() +
                  " --profile rank0/ryzen9-7950x,rank1/ryzen9-7950x --every-rank --pipelined");
  ASSERT_EQ(piped.exit_code, 0) << piped.output;
  EXPECT_HAS(piped.output, "per run pipelined (");
  EXPECT_HAS(piped.output, "with the runs pipelined");
  // A cluster's options without a cluster are refused, not ignored.
  Launch alone =
      one_process("plan " + model().graph.string() + " --profile ryzen9-7950x --pipelined");
  EXPECT_EQ(alone.exit_code, 2) << alone.output;
  EXPECT_HAS(alone.output, "--pipelined plans a cluster: give every profile its rank");
}
}  // namespace
