#include "duet/host_tensor.h"

#include <cstring>
#include <new>

#include "duet/half.h"
#include "duet/internal/fault.h"
#include "duet/quantize.h"

namespace duet {

namespace {
// Null when the memory is not there.
std::shared_ptr<std::byte[]> alloc_bytes(uint64_t n) {
  if (fault::allocation_fails() || n > SIZE_MAX / 2) return nullptr;
  // Aligned for any vector load a backend may use on host memory.
  auto* p = static_cast<std::byte*>(::operator new[](static_cast<size_t>(std::max<uint64_t>(n, 1)),
                                                     std::align_val_t(64), std::nothrow));
  if (!p) return nullptr;
  return std::shared_ptr<std::byte[]>(
      p, [](std::byte* q) { ::operator delete[](q, std::align_val_t(64)); });
}

Status out_of_host_memory(uint64_t bytes, const TensorDesc& desc) {
  return Err(Code::out_of_memory)
      .note("out of host memory: allocating " + std::to_string(bytes) + " bytes for " +
            desc.str() + " failed");
}
}  // namespace

HostTensor HostTensor::empty(DType dtype, std::span<const int64_t> shape) {
  HostTensor t;
  t.desc_ = TensorDesc::contiguous(dtype, shape);
  t.bytes_ = static_cast<uint64_t>(t.desc_.nbytes());
  t.storage_ = alloc_bytes(t.bytes_);
  if (!t.storage_) throw std::bad_alloc();  // with_storage() returns an error instead
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
  if (!t.storage_) return out_of_host_memory(storage_bytes, desc);
  return t;
}

Result<HostTensor> HostTensor::borrow(const TensorDesc& desc, void* storage,
                                      uint64_t storage_bytes) {
  HostTensor t;
  t.storage_ = std::shared_ptr<std::byte[]>(static_cast<std::byte*>(storage), [](std::byte*) {});
  t.bytes_ = storage_bytes;
  return t.view(desc);
}

Result<HostTensor> HostTensor::borrow(const TensorDesc& desc, void* storage, uint64_t storage_bytes,
                                      std::shared_ptr<void> owner) {
  HostTensor t;
  t.storage_ = std::shared_ptr<std::byte[]>(std::move(owner), static_cast<std::byte*>(storage));
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

namespace {

// Calls f(row, storage element offset of the row's first element) for every row (last dim) of a
// view, in row-major order.
template <class F>
void for_each_row(const TensorDesc& d, F&& f) {
  const int64_t inner = d.rank ? d.dim(-1) : 1;
  const int64_t rows = d.numel() / inner;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t off = d.offset, rem = r;
    for (int j = d.rank - 2; j >= 0; --j) {
      off += rem % d.shape[static_cast<size_t>(j)] * d.strides[static_cast<size_t>(j)];
      rem /= d.shape[static_cast<size_t>(j)];
    }
    f(r, off);
  }
}

}  // namespace

HostTensor HostTensor::contiguous() const {
  HostTensor out = empty(desc_.dtype, desc_.dims());
  if (is_quantized(desc_.dtype)) {
    // Rows of whole blocks (validate() keeps block formats' rows dense).
    const int64_t row_bytes = dtype_bytes(desc_.dtype, desc_.rank ? desc_.dim(-1) : 1);
    for_each_row(desc_, [&](int64_t r, int64_t off) {
      std::memcpy(out.storage() + r * row_bytes,
                  storage() + quantized_byte_offset(desc_.dtype, off),
                  static_cast<size_t>(row_bytes));
    });
    return out;
  }
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
  if (is_quantized(desc_.dtype)) {
    const int64_t k = desc_.rank ? desc_.dim(-1) : 1;
    for_each_row(desc_, [&](int64_t r, int64_t off) {
      dequantize(desc_.dtype, storage() + quantized_byte_offset(desc_.dtype, off), v.data() + r * k,
                 k);
    });
    return v;
  }
  for_each_index(desc_, [&](int64_t linear, int64_t off) {
    v[static_cast<size_t>(linear)] = load_as_double(storage(), desc_.dtype, off);
  });
  return v;
}

void HostTensor::from_doubles(std::span<const double> values) {
  if (is_quantized(desc_.dtype)) {
    const int64_t k = desc_.rank ? desc_.dim(-1) : 1;
    std::vector<float> row(static_cast<size_t>(k));
    for_each_row(desc_, [&](int64_t r, int64_t off) {
      for (int64_t i = 0; i < k; ++i)
        row[static_cast<size_t>(i)] = static_cast<float>(values[static_cast<size_t>(r * k + i)]);
      (void)quantize(desc_.dtype, row.data(), storage() + quantized_byte_offset(desc_.dtype, off),
                     k);
    });
    return;
  }
  for_each_index(desc_, [&](int64_t linear, int64_t off) {
    store_from_double(storage(), desc_.dtype, off, values[static_cast<size_t>(linear)]);
  });
}

void HostTensor::fill_bytes(uint8_t pattern) {
  if (storage_) std::memset(storage_.get(), pattern, static_cast<size_t>(bytes_));
}

}  // namespace duet
