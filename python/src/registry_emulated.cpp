// The registry of the module's test build (duet_python_emulated, never installed): the CPU and one
// emulated CUDA card, the CUDA backend over tests/cuda's fake driver with its kernels on the host
// emulator (a T4: "emu-t4:0"), so that pytest runs device memory in and out without a GPU.
// duet._emulated_copies() counts the fake driver's copies between host and device;
// _emulated_stream() and _EmulatedConsumer stand for another library taking a duet.DeviceTensor
// through DLPack and reading it on a stream of its own (queued: the fake driver runs a stream's
// work when it is synchronized).
#include <cstring>
#include <mutex>
#include <vector>

#include <dlpack/dlpack.h>

#include "common.h"
#include "dlpack_versioned.h"
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

namespace {

// A consumer of a capsule: it takes the capsule, queues a read of the whole tensor on its stream
// (as a PyTorch kernel would), and frees the tensor when told, before or after that read has run.
struct Consumer {
  std::shared_ptr<void> owner;  // the producer's deleter, called once
  duet::cuda::Stream stream = nullptr;
  std::vector<std::byte> seen;
  uint64_t address = 0;
  bool versioned = false;
  uint64_t flags = 0;

  void free() { owner.reset(); }
};

}  // namespace

void bind_registry(py::module_& m) {
  m.def("_emulated_copies", [] {
    registry();
    const FakeDriver& d = *fake_driver();
    return py::make_tuple(d.copies_to_device, d.copies_to_host);
  });
  m.def("_emulated_stream", [] {
    registry();
    FakeDriver& d = *fake_driver();
    (void)d.use(0);
    duet::Result<duet::cuda::Stream> s = d.stream_create();
    if (!s.ok()) raise(s.status());
    return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(*s));
  });
  py::class_<Consumer>(m, "_EmulatedConsumer")
      .def(py::init([](py::capsule cap, uint64_t stream) {
        auto c = std::make_unique<Consumer>();
        const DLTensor* tensor = nullptr;
        if (PyCapsule_IsValid(cap.ptr(), kCapsuleVersioned)) {
          auto* m = static_cast<DLManagedTensorVersioned*>(
              PyCapsule_GetPointer(cap.ptr(), kCapsuleVersioned));
          PyCapsule_SetName(cap.ptr(), kCapsuleVersionedUsed);
          c->owner = std::shared_ptr<void>(m, [](void* p) {
            auto* v = static_cast<DLManagedTensorVersioned*>(p);
            v->deleter(v);
          });
          c->versioned = true;
          c->flags = m->flags;
          tensor = &m->dl_tensor;
        } else if (PyCapsule_IsValid(cap.ptr(), kCapsuleLegacy)) {
          auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap.ptr(), kCapsuleLegacy));
          PyCapsule_SetName(cap.ptr(), kCapsuleLegacyUsed);
          c->owner = std::shared_ptr<void>(m, [](void* p) {
            auto* l = static_cast<DLManagedTensor*>(p);
            l->deleter(l);
          });
          tensor = &m->dl_tensor;
        } else {
          bad_input("not an unused dltensor or dltensor_versioned capsule");
        }
        const DLTensor& t = *tensor;
        int64_t n = t.dtype.bits / 8;
        for (int i = 0; i < t.ndim; ++i) n *= t.shape[i];
        c->seen.assign(static_cast<size_t>(n), std::byte{0});
        c->address = reinterpret_cast<uintptr_t>(t.data) + t.byte_offset;
        c->stream = reinterpret_cast<duet::cuda::Stream>(static_cast<uintptr_t>(stream));
        duet::Status s = fake_driver()->copy_to_host(
            c->seen.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(c->address)),
            c->seen.size(), c->stream);
        if (!s.ok()) raise(s);
        return c;
      }))
      .def_readonly("address", &Consumer::address)
      .def_readonly("versioned", &Consumer::versioned)
      .def_readonly("flags", &Consumer::flags)
      .def("free", &Consumer::free, "Frees the tensor (DLPack's deleter), its read still queued.")
      .def("result", [](Consumer& c) {
        duet::Status s = fake_driver()->stream_sync(c.stream);
        if (!s.ok()) raise(s);
        return py::bytes(reinterpret_cast<const char*>(c.seen.data()), c.seen.size());
      });
}

}  // namespace duetpy
