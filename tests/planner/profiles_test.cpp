// Capability profiles: every required device model is there, loads, names its source, and is
// found by name from the source tree or DUET_PROFILES.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "duet/internal/caps_json.h"
#include "fixtures.h"

namespace duet::testing_planner {
namespace {

TEST(Profiles, EveryRequiredDeviceModelLoads) {
  struct Want {
    const char* name;
    BackendKind backend;
    int cc;  // CUDA: major*10+minor
  };
  const Want want[] = {
      {"v100", BackendKind::cuda, 70},         {"t4", BackendKind::cuda, 75},
      {"rtx2080ti", BackendKind::cuda, 75},    {"a100", BackendKind::cuda, 80},
      {"rtx3090", BackendKind::cuda, 86},      {"rtx4090", BackendKind::cuda, 89},
      {"h100", BackendKind::cuda, 90},         {"rtx5090", BackendKind::cuda, 120},
      {"gtx1060", BackendKind::cuda, 61},      {"rx7900xtx", BackendKind::vulkan, 0},
      {"arc-a770", BackendKind::vulkan, 0},    {"apple-m2max", BackendKind::vulkan, 0},
      {"lavapipe", BackendKind::vulkan, 0},    {"ryzen7-5800x", BackendKind::cpu, 0},
      {"gtx1660super", BackendKind::cuda, 75}, {"jetson-orin-nano", BackendKind::cuda, 87},
      {"ryzen9-7950x", BackendKind::cpu, 0}};
  for (const Want& w : want) {
    auto c = load_profile(w.name);
    ASSERT_TRUE(c.ok()) << w.name << ": " << c.status().message();
    EXPECT_EQ(c->backend, w.backend) << w.name;
    EXPECT_EQ(c->cc_major * 10 + c->cc_minor, w.cc) << w.name;
    EXPECT_GT(c->source.size(), 40u) << w.name << " must name its source";
    EXPECT_GT(c->memory_bytes, 0u) << w.name;
    EXPECT_GT(c->peak_gflops_f32, 0.0) << w.name;
    EXPECT_GT(c->memory_gbps, 0.0) << w.name;
    if (w.backend != BackendKind::cpu) {
      EXPECT_GT(c->shared_mem_per_block, 0u) << w.name;
    }
    if (w.backend == BackendKind::cuda) {
      EXPECT_EQ(c->arch, "sm_" + std::to_string(w.cc)) << w.name;
      EXPECT_EQ(c->bf16_arith, w.cc >= 80) << w.name;
      // Turing's TU116 (GTX 16xx) is the one sm_7x chip without tensor cores.
      EXPECT_EQ(c->tensor_cores, w.cc >= 70 && w.name != std::string("gtx1660super")) << w.name;
      EXPECT_EQ(c->async_copy, w.cc >= 80) << w.name;
      EXPECT_EQ(c->subgroup_size, 32) << w.name;
    }
  }
  EXPECT_GE(profile_names().size(), 17u);
  EXPECT_FALSE(profile("ryzen7-5800x").bf16_arith) << "AVX2 only";
  EXPECT_TRUE(profile("ryzen9-7950x").bf16_arith) << "AVX512-BF16";
}

TEST(Profiles, FilesAreInTheCanonicalCapabilityFormat) {
  for (const std::string& name : profile_names()) {
    DeviceCaps c = profile(name);
    auto again = parse_profile(profile_json(c), name);
    ASSERT_TRUE(again.ok()) << again.status().message();
    EXPECT_EQ(caps_to_json(*again), caps_to_json(c)) << name;
  }
}

TEST(Profiles, UnknownNamesListWhatExists) {
  auto c = load_profile("rtx9090");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::not_found);
  EXPECT_HAS(c.status().message(), "rtx9090");
  EXPECT_HAS(c.status().message(), "rtx2080ti");
  EXPECT_HAS(c.status().message(), "DUET_PROFILES");
}

TEST(Profiles, AProfileMustNameItsSourceAndUseKnownFields) {
  auto no_source = parse_profile(R"({"backend": "cuda", "name": "x"})", "x.json");
  ASSERT_FALSE(no_source.ok());
  EXPECT_HAS(no_source.status().message(), "source");
  auto typo = parse_profile(R"({"backend": "cuda", "memroy_bytes": 5, "source": "s"})", "y.json");
  ASSERT_FALSE(typo.ok());
  EXPECT_HAS(typo.status().message(), "memroy_bytes");
  EXPECT_HAS(typo.status().message(), "y.json");
  EXPECT_FALSE(parse_profile("{", "z.json").ok());
}

TEST(Profiles, DuetProfilesAddsFoldersSearchedFirst) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "duet_profiles_test";
  std::filesystem::create_directories(dir);
  DeviceCaps c = profile("t4");
  c.name = "Tesla T4 (my lab's)";
  c.memory_bytes = 1u << 30;
  std::ofstream(dir / "t4.json") << profile_json(c);
  std::ofstream(dir / "mine.json") << profile_json(c);
  ::setenv("DUET_PROFILES", dir.c_str(), 1);
  auto mine = load_profile("mine");
  auto t4 = load_profile("t4");
  ::unsetenv("DUET_PROFILES");
  ASSERT_TRUE(mine.ok()) << mine.status().message();
  ASSERT_TRUE(t4.ok());
  EXPECT_EQ(t4->name, "Tesla T4 (my lab's)");
  EXPECT_EQ(profile("t4").name, "Tesla T4");
  auto by_path = load_profile((dir / "mine.json").string());
  EXPECT_TRUE(by_path.ok());
}

TEST(Profiles, ProfileDevicesAreNumberedPerBackend) {
  std::vector<std::string> names = {"rtx2080ti", "lavapipe", "rtx3090", "ryzen7-5800x"};
  auto d = profile_devices(names);
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ(d->size(), 4u);
  EXPECT_EQ((*d)[0].id, "cuda:0");
  EXPECT_EQ((*d)[1].id, "vulkan:0");
  EXPECT_EQ((*d)[2].id, "cuda:1");
  EXPECT_EQ((*d)[3].id, "cpu:0");
  EXPECT_EQ((*d)[2].label, "rtx3090");
  EXPECT_EQ((*d)[0].rules, &builtin_rules(BackendKind::cuda));
}

// The call as docs/planner.md and docs/embedding.md write it: a braced list of names.
TEST(Profiles, ProfileDevicesTakeABracedListOfNames) {
  auto d = profile_devices({"rtx2080ti", "rtx3090"});
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ(d->size(), 2u);
  EXPECT_EQ((*d)[1].id, "cuda:1");
  EXPECT_EQ((*d)[1].label, "rtx3090");
  auto unknown = profile_devices({"rtx9999"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("rtx9999"), std::string::npos);
}

}  // namespace
}  // namespace duet::testing_planner
