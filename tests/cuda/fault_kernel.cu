// A kernel that writes through a bad pointer: an illegal address, a sticky error that leaves
// the device's CUDA context unusable for the rest of the process.
#include <cuda_runtime_api.h>

namespace {
__global__ void write_through_bad_pointer(int* p) {
  *p = 1;
}
}  // namespace

// Returns the cudaError_t the fault produced (cudaErrorIllegalAddress expected).
int duet_test_fault_device(int ordinal) {
  if (cudaSetDevice(ordinal) != cudaSuccess) return -1;
  write_through_bad_pointer<<<1, 1>>>(reinterpret_cast<int*>(16));
  return static_cast<int>(cudaDeviceSynchronize());
}
