// Constants read in place on the CPU: a model whose weights come from memory-mapped GGUF and
// safetensors files (through a duet graph file) costs about the files' size in memory, not twice
// it. Measured on the process's anonymous memory, which a copy of the weights would grow.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "check/check.h"
#include "duet/builtin_engine.h"
#include "duet/engine.h"
#include "duet/gguf.h"
#include "duet/graph_file.h"
#include "duet/safetensors.h"
#include "graph_reference.h"

namespace duet {
namespace {

using testing_graph::random_tensor;

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

// Anonymous memory of this process, in bytes (/proc/self/smaps_rollup), or -1.
int64_t anonymous_bytes() {
  std::ifstream f("/proc/self/smaps_rollup");
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string key;
    int64_t kb = 0;
    if (in >> key >> kb && key == "Anonymous:") return kb * 1024;
  }
  return -1;
}

Device& host_cpu() {
  return *shared_registry()->find("cpu:0");
}

std::string tmp(const std::string& name) {
  return std::string(DUET_TEST_TMPDIR) + "/" + name;
}

// Two projections, one weight from a GGUF file (q8_0), one from a safetensors file (f32).
TEST(BorrowedConstants, WeightsFromMappedFilesAreReadInPlaceNotCopied) {
  Device& cpu = host_cpu();
  if (anonymous_bytes() < 0) GTEST_SKIP() << "no /proc/self/smaps_rollup";
  constexpr int64_t K = 4096, N = 1024, M = 2048;
  {
    const HostTensor up = random_tensor(DType::q8_0, {N, K}, 1);
    const HostTensor down = random_tensor(DType::f32, {M, N}, 2);
    ASSERT_TRUE(write_gguf(tmp("borrowed.gguf"), {}, {{"up", up}}).ok());
    ASSERT_TRUE(write_safetensors(tmp("borrowed.safetensors"), {{"down", down}}).ok());
  }
  std::ofstream(tmp("borrowed.json")) << R"({"format": "duet-graph", "version": 1, "name": "mlp",
    "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 4096]}],
    "constants": [{"name": "up", "dtype": "q8_0", "shape": [1024, 4096], "file": "borrowed.gguf"},
                  {"name": "down", "dtype": "f32", "shape": [2048, 1024],
                   "file": "borrowed.safetensors"}],
    "nodes": [{"name": "h", "op": "matmul", "inputs": ["x", "up"], "attrs": {"transpose_b": true}},
              {"name": "y", "op": "matmul", "inputs": ["h", "down"],
               "attrs": {"transpose_b": true}}],
    "outputs": ["y"]})";
  auto g = load_graph(tmp("borrowed.json"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  const std::map<std::string, HostTensor> in = {{"x", random_tensor(DType::f32, {1, K}, 3)}};
  auto want = testing_graph::reference_run(*g, in);
  ASSERT_TRUE(want.ok()) << want.status().message();

  const int64_t before = anonymous_bytes();
  auto e = Engine::create(*g, {&cpu});
  ASSERT_TRUE(e.ok()) << e.status().message();
  auto out = (*e)->run(in);
  ASSERT_TRUE(out.ok()) << out.status().message();
  const int64_t grown = anonymous_bytes() - before;

  const uint64_t weights =
      static_cast<uint64_t>(dtype_bytes(DType::q8_0, N * K) + dtype_bytes(DType::f32, M * N));
  const DeviceMemoryPlan& m = (*e)->plan().memory[0];
  EXPECT_EQ(m.constant_bytes, weights);
  EXPECT_EQ(m.borrowed_bytes, weights);
  EXPECT_HAS((*e)->explain(), "borrow up: cpu:0 reads it where the host holds it");
  // A copy of the weights would grow anonymous memory by their size (12.8 MB); what the plan and
  // the run allocate besides (a sanitizer's redzones and quarantine included) is far less.
  EXPECT_LT(grown, static_cast<int64_t>(weights / 2))
      << "anonymous memory grew by " << grown << " bytes for " << weights << " bytes of weights";
  // The q8_0 product's bound (check::tolerance: activations quantized to 8 bits per 32), carried
  // through the second projection.
  check::Tolerance tol;
  tol.nmse = 1e-3;
  tol.max_rel = 0.1;
  const check::Metrics r = check::compare(out->at("y").to_doubles(), want->at("y"), false);
  EXPECT_TRUE(check::passes(r, tol))
      << "nmse " << r.nmse << " max_rel " << r.max_rel << " nan " << r.nan;
}

// Storage the kernels cannot read where it lies (an f32 constant at an odd address) is copied,
// and the run is the same.
TEST(BorrowedConstants, MisalignedStorageIsCopiedInstead) {
  const HostTensor w = random_tensor(DType::f32, {8, 16}, 4);
  auto bytes = std::make_shared<std::vector<std::byte>>(w.storage_bytes() + 1);
  std::memcpy(bytes->data() + 1, w.storage(), w.storage_bytes());
  auto odd = HostTensor::borrow(w.desc(), bytes->data() + 1, w.storage_bytes(), bytes);
  ASSERT_TRUE(odd.ok());
  GraphBuilder b("odd");
  ValueId x = b.input("x", DType::f32, {2, 16});
  b.output(b.matmul(x, b.constant("w", *odd), true, "y"));
  auto g = b.build();
  ASSERT_TRUE(g.ok());
  const std::map<std::string, HostTensor> in = {{"x", random_tensor(DType::f32, {2, 16}, 5)}};
  auto e = Engine::create(*g, {&host_cpu()});
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ((*e)->plan().memory[0].borrowed_bytes, w.storage_bytes());  // as planned
  auto out = (*e)->run(in);
  ASSERT_TRUE(out.ok()) << out.status().message();
  auto want = testing_graph::reference_run(*g, in);
  ASSERT_TRUE(want.ok());
  const check::Metrics r = check::compare(out->at("y").to_doubles(), want->at("y"), false);
  EXPECT_TRUE(check::passes(r, testing_graph::graph_tolerance(DType::f32)))
      << "nmse " << r.nmse << " max_rel " << r.max_rel << " nan " << r.nan;
}

}  // namespace
}  // namespace duet
