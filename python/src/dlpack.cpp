// DLPack (https://dmlc.github.io/dlpack): tensors of other libraries in host memory in,
// duet.Tensor out, without a copy; both capsule kinds, DLPack 1.0's "dltensor_versioned" (with
// its flags) and the older "dltensor", made and taken (dlpack_versioned.h). Device memory is
// device_memory.cpp's: here a tensor in a GPU's memory is refused with the reason before anything
// is read from it (no stream is synchronised for it).
#include <atomic>
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

namespace {

// Calls a producer's deleter once, with the GIL (a NumPy producer's deleter releases a Python
// reference); not at all once the interpreter is gone.
template <class Managed>
void release(Managed* m) {
  if (!m || !m->deleter) return;
  if (!Py_IsInitialized()) return;
  py::gil_scoped_acquire gil;
  m->deleter(m);
}

std::atomic<long> g_exports_alive{0};

}  // namespace

Export::Export() {
  ++g_exports_alive;
}
Export::~Export() {
  --g_exports_alive;
}
long exports_alive() {
  return g_exports_alive.load();
}

void refuse_export(const std::string& message) {
  throw StatusError(duet::Status(duet::Code::unsupported, message), "DLPackError");
}

Ask parse_ask(const std::string& who, const py::object& max_version, const py::object& dl_device,
              const py::object& copy) {
  Ask a;
  auto pair = [&](const py::object& o, const char* name) {
    if (!py::isinstance<py::tuple>(o) || py::len(o) != 2 ||
        !py::isinstance<py::int_>(o[py::int_(0)]) || !py::isinstance<py::int_>(o[py::int_(1)]))
      bad_input(who + ": " + name + " must be None or a tuple of two ints (DLPack), got " +
                std::string(py::repr(o)));
    return std::pair<int, int>(o[py::int_(0)].cast<int>(), o[py::int_(1)].cast<int>());
  };
  if (!max_version.is_none()) a.versioned = pair(max_version, "max_version").first >= 1;
  if (!dl_device.is_none()) a.device = pair(dl_device, "dl_device");
  if (!copy.is_none()) {
    if (!py::isinstance<py::bool_>(copy))
      bad_input(who + ": copy must be None, True or False, got " + std::string(py::repr(copy)));
    a.copy = copy.cast<bool>();
  }
  return a;
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

duet::HostTensor tensor_from_dlpack(py::handle obj, const std::string& what, bool* read_only) {
  if (read_only) *read_only = false;
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
  Taken taken = take_capsule(ask_capsule(obj, py::none()), what);
  const DLTensor& t = *taken.tensor;
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
  auto h = duet::HostTensor::borrow(d, const_cast<std::byte*>(base), bytes, std::move(taken.owner));
  if (!h.ok()) bad_input(what + ": " + h.status().message());
  // Misaligned data (a byte offset into a buffer) is copied: kernels read whole elements.
  if (reinterpret_cast<uintptr_t>(base) % item != 0) return h->contiguous();
  if (read_only) *read_only = taken.read_only;
  return std::move(*h);
}

py::object ask_capsule(py::handle obj, const py::object& stream) {
  py::object f = obj.attr("__dlpack__");
  try {
    return f(py::arg("stream") = stream,
             py::arg("max_version") = py::make_tuple(kDLPackMajor, kDLPackMinor));
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_TypeError)) throw;
  }
  // A producer of DLPack before 1.0 (NumPy 1.24, PyTorch 1.13): no max_version keyword.
  return stream.is_none() ? f() : f(py::arg("stream") = stream);
}

Taken take_capsule(const py::object& cap, const std::string& what) {
  Taken out;
  PyObject* c = cap.ptr();
  if (PyCapsule_IsValid(c, kCapsuleVersioned)) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, kCapsuleVersioned));
    PyCapsule_SetName(c, kCapsuleVersionedUsed);
    out.owner = std::shared_ptr<void>(
        m, [](void* p) { release(static_cast<DLManagedTensorVersioned*>(p)); });
    // The version comes first in every major version: one duet does not know is handed back
    // (its deleter has a fixed place too) before anything else is read.
    if (m->version.major != kDLPackMajor)
      raise(duet::Status(duet::Code::unsupported,
                         what + ": a DLPack " + std::to_string(m->version.major) + "." +
                             std::to_string(m->version.minor) + " capsule; duet reads DLPack " +
                             std::to_string(kDLPackMajor) + ".x"));
    out.tensor = &m->dl_tensor;
    out.read_only = (m->flags & kDLPackReadOnly) != 0;
    return out;
  }
  if (PyCapsule_IsValid(c, kCapsuleLegacy)) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, kCapsuleLegacy));
    PyCapsule_SetName(c, kCapsuleLegacyUsed);
    out.owner =
        std::shared_ptr<void>(m, [](void* p) { release(static_cast<DLManagedTensor*>(p)); });
    out.tensor = &m->dl_tensor;
    return out;
  }
  bad_input(what +
            ": __dlpack__ returned no unused \"dltensor_versioned\" or \"dltensor\" "
            "capsule");
}

void describe(Export& e, const duet::TensorDesc& d, std::optional<uint64_t> block_bytes) {
  DLTensor& dl = e.tensor;
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

namespace {

// The capsules' destructors: one still under its unused name was never taken, and is freed here;
// a consumer that took it renamed it and calls the deleter itself.
void free_untaken_versioned(PyObject* c) {
  if (!PyCapsule_IsValid(c, kCapsuleVersioned)) return;
  auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, kCapsuleVersioned));
  m->deleter(m);
}
void free_untaken_legacy(PyObject* c) {
  if (!PyCapsule_IsValid(c, kCapsuleLegacy)) return;
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, kCapsuleLegacy));
  m->deleter(m);
}

}  // namespace

py::capsule export_capsule(Export* e, void* data, DLDevice device, bool versioned, uint64_t flags) {
  e->tensor.data = data;
  e->tensor.device = device;
  PyObject* cap = nullptr;
  if (versioned) {
    DLManagedTensorVersioned& v = e->versioned;
    v.version = {kDLPackMajor, kDLPackMinor};
    v.manager_ctx = e;
    v.deleter = [](DLManagedTensorVersioned* m) { delete static_cast<Export*>(m->manager_ctx); };
    v.flags = flags;
    v.dl_tensor = e->tensor;
    cap = PyCapsule_New(&v, kCapsuleVersioned, free_untaken_versioned);
  } else {
    DLManagedTensor& m = e->legacy;
    m.manager_ctx = e;
    m.deleter = [](DLManagedTensor* t) { delete static_cast<Export*>(t->manager_ctx); };
    m.dl_tensor = e->tensor;
    cap = PyCapsule_New(&m, kCapsuleLegacy, free_untaken_legacy);
  }
  if (!cap) {
    delete e;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(cap);
}

py::capsule dlpack_capsule(const duet::HostTensor& t, bool versioned, uint64_t flags) {
  auto* e = new HostExport(t);
  const duet::TensorDesc& d = e->t.desc();
  // Block-quantized tensors have no DLPack type: the bytes of their blocks.
  describe(
      *e, d,
      duet::is_quantized(d.dtype) ? std::optional<uint64_t>(e->t.storage_bytes()) : std::nullopt);
  return export_capsule(e, e->t.storage(), {kDLCPU, 0}, versioned, flags);
}

}  // namespace duetpy
