// Calibration: what it measures, where it is kept (cache, fixed file, nowhere), when it is
// measured again (another driver), and how the cost model uses it.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "duet/calibration.h"
#include "fixtures.h"

namespace duet::testing_planner {
namespace {

Device& cpu() {
  return *shared_registry()->find("cpu:0");
}

std::string temp_dir(const std::string& name) {
  const std::string d = std::string(DUET_TEST_TMPDIR) + "/" + name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

Calibration made_up(const std::string& key, double launch_us) {
  Calibration c;
  c.device_key = key;
  c.launch_us = launch_us;
  c.rates.push_back({CostFamily::memory, Tier::simd, Precision::f32, 0, 40, "add f32[1024,1024]"});
  c.rates.push_back({CostFamily::matmul, Tier::simd, Precision::f32, 150, 0, "256x512x512"});
  return c;
}

void write(const std::string& path, std::vector<Calibration> cs) {
  std::ofstream(path) << calibrations_to_json(cs);
}

TEST(Calibration, MeasuresTheLaunchBandwidthAndEachFamilyOnTheCpu) {
  auto c = calibrate(cpu());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->device_key, calibration_key(cpu().caps()));
  EXPECT_GT(c->launch_us, 0);
  for (CostFamily f : {CostFamily::memory, CostFamily::matmul, CostFamily::attention}) {
    bool found = false;
    for (const MeasuredRate& r : c->rates)
      if (r.family == f) {
        found = true;
        EXPECT_EQ(r.tier, Tier::simd);
        EXPECT_GT(f == CostFamily::memory ? r.gbps : r.gflops, 0) << cost_family_name(f);
        EXPECT_FALSE(r.shape.empty());
      }
    EXPECT_TRUE(found) << cost_family_name(f);
  }
  EXPECT_FALSE(c->measured_at.empty());
  EXPECT_GT(c->cost_s, 0);
}

TEST(Calibration, JsonRoundTripsAndMalformedFilesAreErrorsNamingTheFile) {
  const std::vector<Calibration> cs = {made_up("a", 3), made_up("b", 30)};
  auto back = calibrations_from_json(calibrations_to_json(cs), "x.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, cs);
  for (const char* bad :
       {"not json", R"({"format":"other"})", R"({"format":"duet-calibration","version":2})",
        R"({"format":"duet-calibration","version":1,"devices":[{"rates":[]}]})",
        R"({"format":"duet-calibration","version":1,"devices":[{"device":"a","rates":[)"
        R"({"family":"conv","tier":"t","precision":"f32","gflops":1}]}]})",
        R"({"format":"duet-calibration","version":1,"devices":[{"device":"a","rates":[)"
        R"({"family":"matmul","tier":"t","precision":"f32"}]}]})"}) {
    auto r = calibrations_from_json(bad, "bad.json");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_HAS(r.status().message(), "bad.json");
  }
}

// A Vulkan device measured when its shared-memory GEMM was named 'tiled' keeps its rate.
TEST(Calibration, ARateMeasuredUnderTheOldNameOfVulkansSharedMemoryTierCounts) {
  Calibration c;
  c.rates.push_back({CostFamily::matmul, Tier::tiled, Precision::f32, 90, 0, "256x512x512"});
  const MeasuredRate* r = c.find(CostFamily::matmul, Tier::shared_memory, Precision::f32);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->gflops, 90);
  EXPECT_EQ(c.find(CostFamily::matmul, Tier::shared_memory, Precision::f16), nullptr);
}

TEST(Calibration, TheKeyChangesWithTheDriverAndTheThreads) {
  DeviceCaps c = profile("lavapipe");
  const std::string key = calibration_key(c);
  DeviceCaps newer = c;
  newer.driver_version = "Mesa 24.0.1";
  EXPECT_NE(calibration_key(newer), key);
  DeviceCaps wider = c;
  wider.compute_units = 16;
  EXPECT_NE(calibration_key(wider), key);
  EXPECT_EQ(calibration_key(c), key);
}

TEST(Calibration, TheCacheIsReadWhenItHasTheDeviceAndAddedToWhenTheDriverChanged) {
  const std::string dir = temp_dir("calibration_cache");
  const std::string file = dir + "/calibration.json";
  CalibrationSettings s;
  s.mode = CalibrationSettings::cached;
  s.file = file;
  const std::string key = calibration_key(cpu().caps());
  write(file, {made_up(key, 123)});
  Calibration got = calibration_for(cpu(), s);
  EXPECT_EQ(got.launch_us, 123);
  EXPECT_HAS(got.source, "cache " + file);

  // The same device under an older driver's entry only: measured now and added beside it. On a
  // machine so busy that a kernel ran 8 times slower than the device's peaks allow, the
  // measurement is doubted (Calibration::doubt) and not used, and cached as such: the next
  // process uses peaks without measuring again.
  const std::string other = dir + "/older.json";
  write(other, {made_up(key + " (older driver)", 7)});
  s.file = other;
  Calibration fresh = calibration_for(cpu(), s);
  EXPECT_HAS(fresh.source, "measured now");
  EXPECT_NE(fresh.launch_us, 7);
  auto all = calibrations_from_json(read(other), other);
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(all->size(), 2u) << fresh.source;
  EXPECT_EQ((*all)[1].device_key, key);
  EXPECT_EQ((*all)[1].doubt.empty(), fresh.source.find("not used") == std::string::npos);
}

// A doubted measurement is cached with its doubt (lavapipe's kernels always run far from its
// peaks): read back it is not used, says why, and nothing is measured again.
TEST(Calibration, ADoubtedMeasurementIsCachedAndNotUsedByTheNextProcess) {
  const std::string dir = temp_dir("calibration_doubt");
  const std::string file = dir + "/calibration.json";
  Calibration doubted = made_up(calibration_key(cpu().caps()), 55);
  doubted.doubt = "matmul simd f32 ran 11 times slower than the device's peaks predict";
  write(file, {doubted});
  auto back = calibrations_from_json(read(file), file);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ((*back)[0].doubt, doubted.doubt);
  CalibrationSettings s;
  s.mode = CalibrationSettings::cached;
  s.file = file;
  Calibration got = calibration_for(cpu(), s);
  EXPECT_TRUE(got.empty()) << got.source;
  EXPECT_HAS(got.source, "cache " + file);
  EXPECT_HAS(got.source, "not used: matmul simd f32 ran 11 times slower");
  EXPECT_HAS(got.source, "DUET_CALIBRATION=refresh");
}

TEST(Calibration, AFixedFileIsUsedAsItIsAndNeverWritten) {
  const std::string dir = temp_dir("calibration_fixed");
  const std::string file = dir + "/fixed.json";
  write(file, {made_up(calibration_key(cpu().caps()), 42)});
  const std::string before = read(file);
  CalibrationSettings s;
  s.mode = CalibrationSettings::fixed;
  s.file = file;
  Calibration got = calibration_for(cpu(), s);
  EXPECT_EQ(got.launch_us, 42);
  EXPECT_HAS(got.source, "fixed " + file);
  EXPECT_EQ(read(file), before);

  const std::string other = dir + "/other.json";
  write(other, {made_up("another machine", 1)});
  s.file = other;
  Calibration none = calibration_for(cpu(), s);
  EXPECT_TRUE(none.empty());
  EXPECT_HAS(none.source, "no entry for this device");
}

TEST(Calibration, SettingsComeFromTheEnvironment) {
  const char* old = std::getenv("DUET_CALIBRATION");
  const std::string saved = old ? old : "";
  setenv("DUET_CALIBRATION", "off", 1);
  EXPECT_EQ(CalibrationSettings::from_env().mode, CalibrationSettings::off);
  setenv("DUET_CALIBRATION", "refresh", 1);
  EXPECT_EQ(CalibrationSettings::from_env().mode, CalibrationSettings::refresh);
  setenv("DUET_CALIBRATION", "/some/where.json", 1);
  EXPECT_EQ(CalibrationSettings::from_env().mode, CalibrationSettings::fixed);
  EXPECT_EQ(CalibrationSettings::from_env().file, "/some/where.json");
  unsetenv("DUET_CALIBRATION");
  setenv("DUET_CACHE_DIR", "/cache/here", 1);
  EXPECT_EQ(CalibrationSettings::from_env().mode, CalibrationSettings::cached);
  EXPECT_EQ(CalibrationSettings::from_env().file, "/cache/here/calibration.json");
  unsetenv("DUET_CACHE_DIR");
  if (old) setenv("DUET_CALIBRATION", saved.c_str(), 1);
  // Off: nothing measured, the planner uses peaks.
  CalibrationSettings off;
  off.mode = CalibrationSettings::off;
  Calibration c = calibration_for(cpu(), off);
  EXPECT_TRUE(c.empty());
  EXPECT_HAS(c.source, "off");
}

TEST(Calibration, TheCostModelUsesMeasuredRatesAndSaysSo) {
  GraphBuilder b("mm");
  b.output(b.matmul(b.input("x", DType::f32, {1024, 1024}), b.input("w", DType::f32, {1024, 1024}),
                    false, "mm"));
  const Graph g = *b.build();
  const OpDesc& op = g.nodes()[0].op;
  const DeviceCaps caps = profile("ryzen7-5800x");
  const KernelChoice simd = builtin_rules(BackendKind::cpu).choices(caps, op)[0];
  const Calibration m = made_up(calibration_key(caps), 10);
  // 2.15 GFLOP at the measured 150 GFLOP/s, plus the measured launch.
  EXPECT_NEAR(estimate_kernel_us(op, simd, caps, &m), 2.147483648e9 / 150e3 + 10, 1.0);
  EXPECT_HAS(estimate_basis(op, simd, caps, &m), "150 GFLOP/s (measured matmul simd f32)");
  EXPECT_HAS(estimate_basis(op, simd, caps), "peak x simd efficiency");
  // A family it did not measure is scaled from one it did.
  Calibration mm_only = m;
  mm_only.rates.erase(mm_only.rates.begin());
  EXPECT_GT(estimate_kernel_us(op, simd, caps, &mm_only), 0);
}

}  // namespace
}  // namespace duet::testing_planner
