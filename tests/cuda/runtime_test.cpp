// The real CUDA runtime driver, on whatever machine runs the tests: without an NVIDIA driver it
// must say so (and the program must have started), with one it must open or say why not.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "cuda_backend.h"
#include "errors.h"
#include "runtime_driver.h"

namespace duet::cuda {
namespace {

bool driver_installed() {
  void* h = dlopen(kDriverLibrary, RTLD_NOW | RTLD_LOCAL);
  if (h) dlclose(h);
  return h != nullptr;
}

TEST(CudaRuntime, BackendExplainsWhyItCannotOpenOrOpens) {
  Result<BackendOpenResult> r = factory().open({});
  if (!driver_installed()) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::unsupported);
    EXPECT_EQ(r.status().message(), "no NVIDIA driver (libcuda.so.1 not found)");
    return;
  }
  if (!r.ok()) {
    EXPECT_FALSE(r.status().message().empty());
    return;
  }
  for (const auto& d : r->devices) {
    EXPECT_EQ(d->caps().backend, BackendKind::cuda);
    EXPECT_TRUE(d->caps().extra.count("kernel_image")) << d->id();
  }
}

TEST(CudaRuntime, CublasLtLoadsWhereTheToolkitHasIt) {
  const std::string lib = runtime_driver()->blas_library();
  if (!std::filesystem::exists(DUET_TEST_CUBLASLT)) {
    EXPECT_EQ(lib.rfind("unavailable", 0), 0u) << lib;
    return;
  }
  const std::string path = DUET_TEST_CUBLASLT;
  const std::string major = path.substr(path.rfind('.') + 1);  // libcublasLt.so.<major>
  EXPECT_EQ(lib.rfind("cuBLASLt " + major + ".", 0), 0u) << lib;
}

}  // namespace
}  // namespace duet::cuda
