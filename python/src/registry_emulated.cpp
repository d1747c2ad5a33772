// The registry of the module's test build (duet_python_emulated, never installed): the CPU and one
// emulated CUDA card, the CUDA backend over tests/cuda's fake driver with its kernels on the host
// emulator (a T4: "emu-t4:0"), so that pytest runs device memory in and out without a GPU.
// duet._emulated_copies() counts the fake driver's copies between host and device.
#include <mutex>
#include <vector>

#include "common.h"
#include "duet/backends.h"
#include "emulated.h"
#include "fake_driver.h"

namespace duetpy {

namespace {

using duet::cuda::testing::FakeDriver;

std::shared_ptr<FakeDriver>& fake_driver() {
  static auto* d = new std::shared_ptr<FakeDriver>();
  return *d;
}

duet::BackendFactory emulated_t4() {
  return {"cuda-emulated",
          [](const duet::BackendOptions& o) -> duet::Result<duet::BackendOpenResult> {
            DUET_ASSIGN_OR_RETURN(duet::cuda::DeviceProps props, duet::cuda::testing::card("t4"));
            auto driver = std::make_shared<FakeDriver>(std::vector<duet::cuda::DeviceProps>{props});
            driver->blas = "unavailable: an emulated device has no cuBLASLt";
            fake_driver() = driver;
            duet::cuda::DeviceOptions options = duet::cuda::DeviceOptions::from(o);
            options.id_prefix = "emu-t4";
            return duet::cuda::open_backend(driver, duet::cuda::testing::emulated_build(), options);
          }};
}

}  // namespace

std::shared_ptr<duet::Registry> registry() {
  static std::mutex m;
  static auto* r = new std::shared_ptr<duet::Registry>();  // never destroyed, as shared_registry
  std::lock_guard<std::mutex> g(m);
  if (!*r) {
    std::vector<duet::BackendFactory> factories{emulated_t4()};
    for (duet::BackendFactory& f : duet::builtin_backends())
      if (f.name == "cpu") factories.push_back(std::move(f));
    *r = std::make_shared<duet::Registry>(duet::Registry::open(factories));
  }
  return *r;
}

void bind_registry(py::module_& m) {
  m.def("_emulated_copies", [] {
    registry();
    const FakeDriver& d = *fake_driver();
    return py::make_tuple(d.copies_to_device, d.copies_to_host);
  });
}

}  // namespace duetpy
