// DLPack (https://dmlc.github.io/dlpack): tensors of other libraries in host memory in,
// duet.Tensor out, without a copy. Device memory is device_memory.cpp's: here a tensor in a GPU's
// memory is refused with the reason before anything is read from it (no stream is synchronised
// for it).
#include <cstring>
#include <limits>

#include <dlpack/dlpack.h>

#include "common.h"
#include "dlpack_types.h"

namespace duetpy {

const char* device_type_name(int type) {
  switch (type) {
    case kDLCPU:
      return "CPU";
    case kDLCUDA:
      return "CUDA";
    case kDLCUDAHost:
      return "CUDA pinned host";
    case kDLOpenCL:
      return "OpenCL";
    case kDLVulkan:
      return "Vulkan";
    case kDLMetal:
      return "Metal";
    case kDLROCM:
      return "ROCm";
    case kDLROCMHost:
      return "ROCm pinned host";
    case kDLCUDAManaged:
      return "CUDA managed";
    default:
      return "unknown";
  }
}

bool host_readable(int type) {
  return type == kDLCPU || type == kDLCUDAHost || type == kDLROCMHost;
}

std::optional<duet::DType> dtype_of(const DLDataType& t) {
  if (t.lanes != 1) return std::nullopt;
  if (t.code == kDLFloat && t.bits == 32) return duet::DType::f32;
  if (t.code == kDLFloat && t.bits == 16) return duet::DType::f16;
  if (t.code == kDLBfloat && t.bits == 16) return duet::DType::bf16;
  if (t.code == kDLInt && t.bits == 8) return duet::DType::i8;
  if (t.code == kDLInt && t.bits == 32) return duet::DType::i32;
  return std::nullopt;
}

std::string dl_type_text(const DLDataType& t) {
  const char* code = t.code == kDLInt       ? "int"
                     : t.code == kDLUInt    ? "uint"
                     : t.code == kDLFloat   ? "float"
                     : t.code == kDLBfloat  ? "bfloat"
                     : t.code == kDLComplex ? "complex"
                                            : "code ";
  std::string s = code + std::to_string(t.bits);
  if (t.lanes != 1) s += "x" + std::to_string(t.lanes);
  return s;
}

void release(DLManagedTensor* m) {
  if (!m || !m->deleter) return;
  if (!Py_IsInitialized()) return;
  py::gil_scoped_acquire gil;
  m->deleter(m);
}

DLDataType dl_dtype(duet::DType t) {
  switch (t) {
    case duet::DType::f32:
      return {kDLFloat, 32, 1};
    case duet::DType::f16:
      return {kDLFloat, 16, 1};
    case duet::DType::bf16:
      return {kDLBfloat, 16, 1};
    case duet::DType::i8:
      return {kDLInt, 8, 1};
    default:
      return {kDLInt, 32, 1};
  }
}

namespace {

// What a duet.Tensor exports: the tensor (sharing its storage) and the arrays DLPack points at.
struct HostExport : Export {
  explicit HostExport(duet::HostTensor h) : t(std::move(h)) {}
  duet::HostTensor t;
};

}  // namespace

duet::HostTensor tensor_from_dlpack(py::handle obj, const std::string& what) {
  // Where the memory is, before taking it: a producer synchronises streams for the consumer when
  // asked for the capsule, so a tensor duet cannot read is refused first.
  if (py::hasattr(obj, "__dlpack_device__")) {
    py::tuple dev = obj.attr("__dlpack_device__")();
    const int type = dev[0].cast<int>();
    const int id = dev[1].cast<int>();
    if (!host_readable(type))
      raise(duet::Status(
          duet::Code::unsupported,
          what + ": the tensor is in " + device_type_name(type) + " device memory (DLPack device " +
              std::to_string(type) + ", id " + std::to_string(id) +
              "); this takes host memory (engine.run takes CUDA device memory in place): copy it "
              "to the host first (torch: tensor.cpu())"));
  }
  // Host memory: no stream to name (DLPack's stream argument is for device memory).
  DLManagedTensor* m = nullptr;
  std::shared_ptr<void> owner = take_capsule(obj.attr("__dlpack__")(), what, m);
  const DLTensor& t = m->dl_tensor;
  if (!host_readable(t.device.device_type))
    raise(duet::Status(duet::Code::unsupported,
                       what + ": the tensor is in " + device_type_name(t.device.device_type) +
                           " device memory; duet's engines take host memory"));
  if (t.ndim > duet::kMaxRank)
    bad_input(what + ": " + std::to_string(t.ndim) + " dimensions, duet's tensors have at most " +
              std::to_string(duet::kMaxRank));
  for (int i = 0; i < t.ndim; ++i)
    if (t.shape[i] <= 0)
      bad_input(what + ": dimension " + std::to_string(i) + " has size " +
                std::to_string(t.shape[i]) + "; duet's tensors have at least one element");
  const auto* base = static_cast<const std::byte*>(t.data) + t.byte_offset;
  const bool is_int64 = t.dtype.code == kDLInt && t.dtype.bits == 64 && t.dtype.lanes == 1;
  const std::optional<duet::DType> dt = is_int64 ? duet::DType::i32 : dtype_of(t.dtype);
  if (!dt)
    bad_input(what + ": DLPack dtype " + dl_type_text(t.dtype) +
              " has no duet dtype (float32, float16, bfloat16, int8 or int32)");
  duet::TensorDesc d;
  d.dtype = *dt;
  d.rank = t.ndim;
  int64_t dense = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    const auto u = static_cast<size_t>(i);
    d.shape[u] = t.shape[i];
    d.strides[u] = t.strides ? t.strides[i] : dense;
    dense *= t.shape[i];
    if (d.strides[u] < 0)
      bad_input(what + ": negative strides (a reversed view); make it contiguous first");
  }
  const size_t item = static_cast<size_t>(t.dtype.bits / 8);
  if (is_int64) {
    // The ids PyTorch and ONNX give as int64, narrowed into i32 (a copy), each checked to fit.
    duet::HostTensor out = duet::HostTensor::empty(duet::DType::i32, d.dims());
    int32_t* dst = out.data<int32_t>();
    duet::TensorDesc src = d;
    src.dtype = duet::DType::i32;  // for the walk only: strides are in elements either way
    duet::for_each_index(src, [&](int64_t linear, int64_t at) {
      int64_t v;
      std::memcpy(&v, base + static_cast<size_t>(at) * item, sizeof v);
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
        bad_input(what + ": int64 value " + std::to_string(v) + " at flat index " +
                  std::to_string(linear) + " does not fit i32, the dtype duet takes ids in");
      dst[linear] = static_cast<int32_t>(v);
    });
    return out;
  }
  const uint64_t bytes = static_cast<uint64_t>(d.storage_extent()) * item;
  auto h = duet::HostTensor::borrow(d, const_cast<std::byte*>(base), bytes, std::move(owner));
  if (!h.ok()) bad_input(what + ": " + h.status().message());
  // Misaligned data (a byte offset into a buffer) is copied: kernels read whole elements.
  if (reinterpret_cast<uintptr_t>(base) % item != 0) return h->contiguous();
  return std::move(*h);
}

std::shared_ptr<void> take_capsule(const py::object& cap, const std::string& what,
                                   DLManagedTensor*& m) {
  if (!PyCapsule_IsValid(cap.ptr(), "dltensor"))
    bad_input(what + ": __dlpack__ returned no unused \"dltensor\" capsule");
  m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap.ptr(), "dltensor"));
  PyCapsule_SetName(cap.ptr(), "used_dltensor");
  return std::shared_ptr<void>(m, [](void* p) { release(static_cast<DLManagedTensor*>(p)); });
}

void describe(Export& e, const duet::TensorDesc& d, std::optional<uint64_t> block_bytes) {
  DLTensor& dl = e.m.dl_tensor;
  if (block_bytes) {
    e.shape = {static_cast<int64_t>(*block_bytes)};
    e.strides = {1};
    dl.dtype = {kDLUInt, 8, 1};
  } else {
    for (int i = 0; i < d.rank; ++i) {
      e.shape.push_back(d.dim(i));
      e.strides.push_back(d.stride(i));
    }
    dl.byte_offset = static_cast<uint64_t>(d.offset) * duet::dtype_size(d.dtype);
    dl.dtype = dl_dtype(d.dtype);
  }
  dl.ndim = static_cast<int>(e.shape.size());
  dl.shape = e.shape.data();
  dl.strides = e.strides.data();
}

py::capsule export_capsule(Export* e, void* data, DLDevice device) {
  e->m.dl_tensor.data = data;
  e->m.dl_tensor.device = device;
  e->m.manager_ctx = e;
  e->m.deleter = [](DLManagedTensor* m) { delete static_cast<Export*>(m->manager_ctx); };
  PyObject* cap = PyCapsule_New(&e->m, "dltensor", [](PyObject* c) {
    // Still named "dltensor": no consumer took it, so it is freed here.
    if (PyCapsule_IsValid(c, "dltensor")) {
      auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
      m->deleter(m);
    }
  });
  if (!cap) {
    delete e;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(cap);
}

py::capsule dlpack_capsule(const duet::HostTensor& t) {
  auto* e = new HostExport(t);
  const duet::TensorDesc& d = e->t.desc();
  // Block-quantized tensors have no DLPack type: the bytes of their blocks.
  describe(
      *e, d,
      duet::is_quantized(d.dtype) ? std::optional<uint64_t>(e->t.storage_bytes()) : std::nullopt);
  return export_capsule(e, e->t.storage(), {kDLCPU, 0});
}

}  // namespace duetpy
