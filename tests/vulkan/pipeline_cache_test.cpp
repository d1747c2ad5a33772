// The pipeline cache on disk: written at shutdown, read at the next start, and a corrupt file is
// ignored with a warning (never fatal). Each test uses its own temporary directory.
#include <stdlib.h>

#include <fstream>
#include <thread>

#include "vulkan_test_util.h"

namespace duet::vulkan::testing {
namespace {

std::vector<std::string> cache_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".pcache") out.push_back(e.path().string());
  return out;
}

bool run_relu(Device& d) {
  return run_on(d, make_case("cache/relu", OpKind::relu, {dense(DType::f32, {3, 17})})).passed;
}

TEST(PipelineCache, IsWrittenAtShutdownAndReadAtTheNextStart) {
  TempDir dir;
  {
    auto r = open_vulkan({}, dir);
    if (!r.ok()) GTEST_SKIP() << r.status().message();
    EXPECT_FALSE(vk(*r->devices[0]).pipelines().loaded_from_disk());
    EXPECT_TRUE(run_relu(*r->devices[0]));
  }
  auto files = cache_files(dir.path);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_NE(files[0].find("vulkan-"), std::string::npos) << files[0];
  auto r = open_vulkan({}, dir);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(vk(*r->devices[0]).pipelines().loaded_from_disk());
  EXPECT_TRUE(run_relu(*r->devices[0]));
}

TEST(PipelineCache, ACorruptFileIsIgnored) {
  TempDir dir;
  {
    auto r = open_vulkan({}, dir);
    if (!r.ok()) GTEST_SKIP() << r.status().message();
    EXPECT_TRUE(run_relu(*r->devices[0]));
  }
  auto files = cache_files(dir.path);
  ASSERT_EQ(files.size(), 1u);
  // One flipped byte in the payload, then garbage, then an empty file: each is ignored.
  std::string good;
  {
    std::ifstream f(files[0], std::ios::binary);
    good.assign(std::istreambuf_iterator<char>(f), {});
  }
  ASSERT_GT(good.size(), 40u);
  std::string flipped = good;
  flipped[30] = static_cast<char>(flipped[30] ^ 0x5a);
  for (const std::string& content : {flipped, std::string("not a pipeline cache"), std::string()}) {
    {
      std::ofstream f(files[0], std::ios::binary | std::ios::trunc);
      f << content;
    }
    auto r = open_vulkan({}, dir);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_FALSE(vk(*r->devices[0]).pipelines().loaded_from_disk());
    EXPECT_TRUE(run_relu(*r->devices[0]));
  }
}

// Pipelines are made on worker threads; requests for one key, however many and from whichever
// thread, get the one pipeline, made once; an unknown shader is refused by name at once.
TEST(Pipelines, AreMadeOnceEachWhoeverAsks) {
  TempDir dir;
  auto r = open_vulkan({}, dir);
  if (!r.ok()) GTEST_SKIP() << r.status().message();
  Pipelines& p = vk(*r->devices[0]).pipelines();
  std::vector<VkPipeline> got(4, VK_NULL_HANDLE);
  std::vector<std::thread> askers;
  for (size_t i = 0; i < got.size(); ++i)
    askers.emplace_back([&, i] {
      auto made = p.get("eltwise_f32", {});
      if (made.ok()) got[i] = *made;
    });
  for (std::thread& t : askers) t.join();
  EXPECT_NE(got[0], VK_NULL_HANDLE);
  for (VkPipeline g : got) EXPECT_EQ(g, got[0]);
  EXPECT_EQ(p.stats().created, 1u);
  auto bad = p.request("no_such_shader", {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no_such_shader"), std::string::npos);
  EXPECT_NE(p.summary().find("1 pipeline made"), std::string::npos) << p.summary();
}

TEST(PipelineCache, LocationFollowsOptionThenEnvironmentThenXdg) {
  BackendOptions o;
  unsetenv("DUET_VULKAN_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(default_cache_dir(o), "/xdg/duet");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(default_cache_dir(o), "/home/someone/.cache/duet");
  setenv("DUET_VULKAN_CACHE_DIR", "/env/cache", 1);
  EXPECT_EQ(default_cache_dir(o), "/env/cache");
  o.values["vulkan.cache_dir"] = "/option/cache";
  EXPECT_EQ(default_cache_dir(o), "/option/cache");
}

}  // namespace
}  // namespace duet::vulkan::testing
