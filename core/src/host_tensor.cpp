#include "duet/host_tensor.h"

#include <cstring>

#include "duet/half.h"

namespace duet {

namespace {
std::shared_ptr<std::byte[]> alloc_bytes(uint64_t n) {
  // Aligned for any vector load a backend may use on host memory.
  return std::shared_ptr<std::byte[]>(
      new (std::align_val_t(64)) std::byte[static_cast<size_t>(std::max<uint64_t>(n, 1))],
      [](std::byte* p) { ::operator delete[](p, std::align_val_t(64)); });
}
}  // namespace

HostTensor HostTensor::empty(DType dtype, std::span<const int64_t> shape) {
  HostTensor t;
  t.desc_ = TensorDesc::contiguous(dtype, shape);
  t.bytes_ = static_cast<uint64_t>(t.desc_.nbytes());
  t.storage_ = alloc_bytes(t.bytes_);
  return t;
}

Result<HostTensor> HostTensor::with_storage(const TensorDesc& desc, uint64_t storage_bytes) {
  if (static_cast<uint64_t>(dtype_bytes(desc.dtype, desc.storage_extent())) > storage_bytes)
    return Err(Code::invalid_argument)
        .expected("storage of at least " +
                  std::to_string(dtype_bytes(desc.dtype, desc.storage_extent())) + " bytes")
        .got(std::to_string(storage_bytes) + " bytes for " + desc.str());
  HostTensor t;
  t.desc_ = desc;
  t.bytes_ = storage_bytes;
  t.storage_ = alloc_bytes(storage_bytes);
  return t;
}

Result<HostTensor> HostTensor::borrow(const TensorDesc& desc, void* storage,
                                      uint64_t storage_bytes) {
  HostTensor t;
  t.storage_ = std::shared_ptr<std::byte[]>(static_cast<std::byte*>(storage), [](std::byte*) {});
  t.bytes_ = storage_bytes;
  return t.view(desc);
}

Result<HostTensor> HostTensor::view(const TensorDesc& desc) const {
  DUET_TRY(validate(desc));
  if (static_cast<uint64_t>(dtype_bytes(desc.dtype, desc.storage_extent())) > bytes_)
    return Err(Code::invalid_argument)
        .expected("a view inside " + std::to_string(bytes_) + " bytes of storage")
        .got(desc.str());
  HostTensor t = *this;
  t.desc_ = desc;
  return t;
}

HostTensor HostTensor::contiguous() const {
  HostTensor out = empty(desc_.dtype, desc_.dims());
  const size_t es = dtype_size(desc_.dtype);
  std::byte* dst = out.storage();
  const std::byte* src = storage();
  for_each_index(desc_, [&](int64_t linear, int64_t off) {
    std::memcpy(dst + static_cast<size_t>(linear) * es, src + static_cast<size_t>(off) * es, es);
  });
  return out;
}

std::vector<double> HostTensor::to_doubles() const {
  std::vector<double> v(static_cast<size_t>(numel()));
  for_each_index(desc_, [&](int64_t linear, int64_t off) {
    v[static_cast<size_t>(linear)] = load_as_double(storage(), desc_.dtype, off);
  });
  return v;
}

void HostTensor::from_doubles(std::span<const double> values) {
  for_each_index(desc_, [&](int64_t linear, int64_t off) {
    store_from_double(storage(), desc_.dtype, off, values[static_cast<size_t>(linear)]);
  });
}

void HostTensor::fill_bytes(uint8_t pattern) {
  if (storage_) std::memset(storage_.get(), pattern, static_cast<size_t>(bytes_));
}

}  // namespace duet
