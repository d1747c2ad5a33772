#include <gtest/gtest.h>

#include "duet/backends.h"

namespace duet {
namespace {

TEST(Registry, ListsUnavailableBackendsWithAReason) {
  BackendFactory broken{"broken", [](const BackendOptions&) -> Result<BackendOpenResult> {
                          return Status(Code::unsupported, "no loader: libbroken.so not found");
                        }};
  BackendFactory empty{"empty", [](const BackendOptions&) -> Result<BackendOpenResult> {
                         return BackendOpenResult{};
                       }};
  BackendFactory throws{"throws", [](const BackendOptions&) -> Result<BackendOpenResult> {
                          throw std::runtime_error("boom");
                        }};
  Registry r = Registry::open({broken, empty, throws});
  ASSERT_EQ(r.backends().size(), 3u);
  EXPECT_FALSE(r.backends()[0].available);
  EXPECT_EQ(r.backends()[0].reason, "no loader: libbroken.so not found");
  EXPECT_EQ(r.backends()[1].reason, "no device");
  EXPECT_NE(r.backends()[2].reason.find("boom"), std::string::npos);
  EXPECT_TRUE(r.devices().empty());
}

TEST(Registry, BuiltinRegistryAlwaysHasTheCpu) {
  Registry r = open_registry();
  Device* cpu = r.find("cpu:0");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->caps().backend, BackendKind::cpu);
  EXPECT_GE(cpu->caps().compute_units, 1);
  EXPECT_EQ(r.backends().size(), 3u) << "cuda, vulkan and cpu are always reported";
  for (const BackendReport& b : r.backends())
    if (!b.available) {
      EXPECT_FALSE(b.reason.empty()) << b.backend;
    }
}

TEST(Registry, CpuThreadCountIsConfigurable) {
  BackendOptions o;
  o.values["cpu.threads"] = "1";
  Registry r = open_registry(o);
  EXPECT_EQ(r.find("cpu:0")->caps().compute_units, 1);
}

}  // namespace
}  // namespace duet
