// `duet-llama --distributed`: the tiny Llama fixture split over two ranks of this machine gives
// one process's greedy ids (a prompt over several runs, then decode steps reading the caches on
// both ranks); a rank given another file is refused at start, by name, on every rank.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "duet/gguf.h"
#include "mpirun.h"

namespace {
using duet::test::Launch;
using duet::test::mpirun;
namespace fs = std::filesystem;

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

const std::string kFixture = std::string(DUET_LLAMA_DATA) + "/llamacpp_tiny.gguf";
// The CPU alone: no Vulkan loader, one device.
const std::string kCpu = "DUET_VULKAN_LOADER=/nonexistent";
const std::string kArgs =
    " --prompt 'the quick brown fox' -n 6 --temp 0 --print-ids "
    "--prefill-chunk 3 --devices cpu:0";

std::string ids_line(const std::string& output) {
  const size_t at = output.find("ids:");
  return at == std::string::npos ? std::string() : output.substr(at, output.find('\n', at) - at);
}

TEST(DistributedLlama, TwoRanksGiveOneProcesssGreedyIds) {
  std::string single;
  {
    FILE* pipe =
        popen((kCpu + " " + DUET_LLAMA_BIN + " " + kFixture + kArgs + " 2>&1").c_str(), "r");
    char buf[4096];
    size_t n = 0;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) single.append(buf, n);
    ASSERT_EQ(WEXITSTATUS(pclose(pipe)), 0) << single;
  }
  const std::string want = ids_line(single);
  ASSERT_EQ(std::count(want.begin(), want.end(), ' '), 6) << single;
  Launch split =
      mpirun(2, DUET_LLAMA_BIN, kFixture + kArgs + " --distributed --every-rank --explain", kCpu);
  ASSERT_EQ(split.exit_code, 0) << split.output;
  EXPECT_HAS(split.output, "2 stages");
  EXPECT_HAS(split.output, "stage 1 on rank1");
  EXPECT_EQ(ids_line(split.output), want) << split.output;
}

TEST(DistributedLlama, ARankGivenAnotherFileIsRefusedAtStart) {
  // The fixture with one weight of its output norm changed: same shapes, another model.
  auto f = duet::read_gguf(kFixture);
  ASSERT_TRUE(f.ok()) << f.status().message();
  const duet::GgufTensorInfo* norm = f->find("output_norm.weight");
  ASSERT_NE(norm, nullptr);
  std::ifstream in(kFixture, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  bytes[f->data_offset + norm->offset] ^= 0x40;
  const fs::path other =
      fs::path(DUET_TEST_TMPDIR) / ("other." + std::to_string(getpid()) + ".gguf");
  std::ofstream(other, std::ios::binary) << bytes;
  const std::string rest = kArgs + " --distributed --every-rank";
  Launch r =
      mpirun(1, DUET_LLAMA_BIN,
             kFixture + rest + " : -np 1 " + DUET_LLAMA_BIN + " " + other.string() + rest, kCpu);
  fs::remove(other);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_HAS(r.output, "every rank must load the same model");
  EXPECT_HAS(r.output, "rank 1 (");
  EXPECT_LT(r.seconds, 100) << "refused at start, not at a timeout";
}
}  // namespace
