#include "duet/kernels/launch.h"

namespace duet::kernels {

View make_view(const TensorDesc& desc, void* storage_base) {
  View v;
  // Block formats: the offset is a whole number of blocks (views never split one).
  v.data = static_cast<std::byte*>(storage_base) + dtype_bytes(desc.dtype, desc.offset);
  v.dtype = desc.dtype;
  v.rank = desc.rank;
  for (int i = 0; i < desc.rank; ++i) {
    v.shape[i] = desc.shape[static_cast<size_t>(i)];
    v.strides[i] = desc.strides[static_cast<size_t>(i)];
  }
  return v;
}

}  // namespace duet::kernels
