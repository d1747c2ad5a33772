// Device memory through DLPack: a tensor in a CUDA device's memory (a PyTorch CUDA tensor) goes
// into a run in place, and the outputs a kernel wrote on a CUDA device come back as
// duet.DeviceTensor, in the buffer the kernel wrote, which DLPack consumers take without a copy.
//
// Streams (DLPack's __dlpack__(stream=...)): duet asks a producer to order its pending work on
// the tensor before duet's stream (Device::native_queue) and keeps the producer's capsule until
// its run, which waits for its devices before it returns (also when it fails), is over. What duet
// exports is complete on every stream when the run returns, so a consumer's stream has nothing
// to wait for; but the consumer's work may still use the memory after the consumer has freed it
// (DLPack's deleter runs then), so the consumer's stream is lent the buffer (Device::lend): duet
// does not reuse the memory before the work queued there by then has completed.
#include <mutex>
#include <string>

#include "common.h"
#include "dlpack_types.h"

namespace duetpy {

namespace {

// The number a device's id ends with: its CUDA ordinal ("cuda:1", "emu-t4:0").
int ordinal_of(const duet::Device& d) {
  const std::string& id = d.id();
  const size_t colon = id.rfind(':');
  return colon == std::string::npos ? -1 : std::atoi(id.c_str() + colon + 1);
}

// duet's device for CUDA device `ordinal`, or an UnsupportedError naming `what`.
duet::Device* cuda_device(int ordinal, const std::string& what) {
  std::string known;
  for (duet::Device* d : registry()->devices()) {
    if (d->caps().backend == duet::BackendKind::cuda && ordinal_of(*d) == ordinal) return d;
    known += (known.empty() ? "" : ", ") + d->id();
  }
  raise(duet::Status(duet::Code::unsupported,
                     what + ": the tensor is in the memory of CUDA device " +
                         std::to_string(ordinal) + ", and duet has no CUDA device " +
                         std::to_string(ordinal) + " open (its devices: " + known +
                         "); copy it to the host first (torch: tensor.cpu())"));
}

std::string dtype_text(duet::DType t) {
  return std::string(duet::dtype_name(t));
}

// What a duet.DeviceTensor exports: the tensor, whose buffer it keeps alive.
struct DeviceExport : Export {
  explicit DeviceExport(duet::DeviceTensor d) : t(std::move(d)) {}
  duet::DeviceTensor t;
};

py::capsule device_capsule(const duet::DeviceTensor& t, bool versioned) {
  auto* e = new DeviceExport(t);
  describe(*e, t.desc);
  return export_capsule(e,
                        reinterpret_cast<void*>(static_cast<uintptr_t>(t.buffer->device_address())),
                        {kDLCUDA, ordinal_of(*t.device)}, versioned);
}

// A host copy of a device tensor (what a consumer asking for it on the CPU gets): read once,
// the device's work done.
duet::HostTensor host_copy(const duet::DeviceTensor& t, const std::string& who) {
  if (!t.desc.is_contiguous() || duet::is_quantized(t.desc.dtype))
    refuse_export(who + ": only a contiguous tensor of a plain dtype is copied to the host");
  duet::HostTensor h = duet::HostTensor::empty(t.desc.dtype, t.desc.dims());
  duet::Status s;
  {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(duet::device_mutex(*t.device));
    s = t.device->read(*t.buffer, 0, h.storage(), h.storage_bytes());
  }
  if (!s.ok()) raise(s.with_context(who));
  return h;
}

}  // namespace

bool in_device_memory(py::handle obj) {
  if (py::isinstance<PyDeviceTensor>(obj)) return true;
  if (!py::hasattr(obj, "__dlpack_device__") || !py::hasattr(obj, "__dlpack__")) return false;
  py::tuple dev = obj.attr("__dlpack_device__")();
  return dev[0].cast<int>() == kDLCUDA;
}

duet::DeviceTensor device_tensor_from_object(py::handle obj, const std::string& what,
                                             duet::DType expected) {
  if (py::isinstance<PyDeviceTensor>(obj)) {
    const duet::DeviceTensor& t = obj.cast<const PyDeviceTensor&>().t;
    if (t.desc.dtype != expected)
      bad_input(what + ": expected dtype " + dtype_text(expected) +
                ", got a duet.DeviceTensor of " + dtype_text(t.desc.dtype));
    return t;
  }
  py::tuple dev = obj.attr("__dlpack_device__")();
  const int ordinal = dev[1].cast<int>();
  duet::Device* device = cuda_device(ordinal, what);
  duet::Result<uint64_t> queue = duet::Status(duet::Code::internal, "not asked");
  {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(duet::device_mutex(*device));
    queue = device->native_queue();
  }
  if (!queue.ok()) raise(queue.status().with_context(what));
  // DLPack: the producer makes `stream` (duet's) wait for its work on the tensor; 1 is CUDA's
  // legacy default stream, for a device that names none.
  // The capsule is taken whatever its flags: duet only reads an input.
  Taken taken = take_capsule(ask_capsule(obj, *queue ? py::int_(*queue) : py::int_(1)), what);
  const DLTensor& t = *taken.tensor;
  if (t.device.device_type != kDLCUDA || t.device.device_id != ordinal)
    bad_input(what + ": __dlpack_device__ said CUDA device " + std::to_string(ordinal) +
              ", the capsule says " + device_type_name(t.device.device_type) + " device " +
              std::to_string(t.device.device_id));
  const std::optional<duet::DType> dt = dtype_of(t.dtype);
  if (!dt)
    bad_input(what + ": DLPack dtype " + dl_type_text(t.dtype) +
              " has no duet dtype in device memory (float32, float16, bfloat16, int8 or int32; "
              "duet narrows int64 ids on the host only)");
  if (*dt != expected)
    bad_input(what + ": expected dtype " + dtype_text(expected) + ", got " + dtype_text(*dt));
  if (t.ndim > duet::kMaxRank)
    bad_input(what + ": " + std::to_string(t.ndim) + " dimensions, duet's tensors have at most " +
              std::to_string(duet::kMaxRank));
  std::vector<int64_t> dims;
  int64_t dense = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] <= 0)
      bad_input(what + ": dimension " + std::to_string(i) + " has size " +
                std::to_string(t.shape[i]) + "; duet's tensors have at least one element");
    if (t.strides && t.shape[i] > 1 && t.strides[i] != dense)
      bad_input(what +
                ": a non-contiguous tensor in device memory; duet reads device memory in place "
                "and makes no device copies: make it contiguous first (torch: "
                "tensor.contiguous())");
    dense *= t.shape[i];
  }
  for (int i = 0; i < t.ndim; ++i) dims.push_back(t.shape[i]);
  const uint64_t item = duet::dtype_size(*dt);
  const uint64_t address = reinterpret_cast<uintptr_t>(t.data) + t.byte_offset;
  if (address % item != 0)
    bad_input(what + ": device memory at an address not aligned to its " + std::to_string(item) +
              "-byte elements");
  duet::Result<std::shared_ptr<duet::Buffer>> b =
      device->adopt(address, static_cast<uint64_t>(dense) * item, std::move(taken.owner));
  if (!b.ok()) raise(b.status().with_context(what));
  return duet::DeviceTensor{device, std::move(*b), duet::TensorDesc::contiguous(*dt, dims)};
}

py::object wrap_device_tensor(duet::DeviceTensor t) {
  return py::cast(PyDeviceTensor{std::move(t)});
}

void bind_device_tensors(py::module_& m) {
  py::class_<PyDeviceTensor>(m, "DeviceTensor",
                             R"(A tensor in a CUDA device's memory, written by a duet kernel.

What engine.run(..., device_outputs=True) returns for outputs computed on a CUDA
device. It keeps its memory alive, goes back into runs in place, and speaks DLPack
(``torch.from_dlpack(t)``) without a copy.)")
      .def_property_readonly("dtype",
                             [](const PyDeviceTensor& p) { return dtype_text(p.t.desc.dtype); })
      .def_property_readonly("shape",
                             [](const PyDeviceTensor& p) {
                               py::tuple s(static_cast<size_t>(p.t.desc.rank));
                               for (int i = 0; i < p.t.desc.rank; ++i)
                                 s[static_cast<size_t>(i)] = p.t.desc.dim(i);
                               return s;
                             })
      .def_property_readonly("device", [](const PyDeviceTensor& p) { return p.t.device->id(); })
      .def(
          "__dlpack__",
          [](const PyDeviceTensor& p, py::object stream, py::object max_version,
             py::object dl_device, py::object copy) {
            const char* who = "duet.DeviceTensor.__dlpack__";
            const Ask ask = parse_ask(who, max_version, dl_device, copy);
            // Any stream DLPack defines for CUDA is ready: the run that wrote the tensor waited
            // for its device before it returned. 0 is not one (ambiguous, DLPack says).
            auto bad_stream = [&] {
              bad_input(std::string(who) +
                        ": stream must be None, -1, 1, 2 or a CUDA stream (DLPack), got " +
                        std::string(py::repr(stream)));
            };
            if (!stream.is_none() && !py::isinstance<py::int_>(stream)) bad_stream();
            // None is the legacy default stream (1); -1 asks for no synchronization, the
            // consumer's to do (nothing to lend to).
            const int64_t consumer = stream.is_none() ? 1 : stream.cast<int64_t>();
            if (consumer == 0 || consumer < -1) bad_stream();
            const std::pair<int, int> own(kDLCUDA, ordinal_of(*p.t.device));
            const std::string own_text =
                "(" + std::to_string(own.first) + ", " + std::to_string(own.second) + ")";
            if (ask.device && *ask.device == std::pair<int, int>(kDLCPU, 0)) {
              // To the host: a copy (the array API's cross-device export), unless forbidden.
              if (ask.copy == false)
                refuse_export(std::string(who) + ": the tensor is on " + p.t.device->id() +
                              " (DLPack device " + own_text +
                              "); exporting it to the host (1, 0) needs a copy, and copy=False "
                              "forbids one");
              return dlpack_capsule(host_copy(p.t, who), ask.versioned, kDLPackIsCopied);
            }
            if (ask.device && *ask.device != own)
              refuse_export(std::string(who) + ": the tensor is on " + p.t.device->id() +
                            " (DLPack device " + own_text + "); duet cannot export it to " +
                            std::string(py::repr(dl_device)) + " (only there, or to the host)");
            if (ask.copy == true)
              refuse_export(std::string(who) +
                            ": duet makes no device copies (copy=True); take it without one and "
                            "copy it there, or ask for a host copy (dl_device=(1, 0))");
            if (consumer != -1) {
              duet::Status lent;
              {
                py::gil_scoped_release nogil;
                std::lock_guard<std::mutex> lock(duet::device_mutex(*p.t.device));
                lent = p.t.device->lend(*p.t.buffer, static_cast<uint64_t>(consumer));
              }
              if (!lent.ok()) raise(lent.with_context(who));
            }
            return device_capsule(p.t, ask.versioned);
          },
          py::kw_only(), py::arg("stream") = py::none(), py::arg("max_version") = py::none(),
          py::arg("dl_device") = py::none(), py::arg("copy") = py::none())
      .def("__dlpack_device__",
           [](const PyDeviceTensor& p) {
             return py::make_tuple(int{kDLCUDA}, ordinal_of(*p.t.device));
           })
      .def("__repr__", [](const PyDeviceTensor& p) {
        return "duet.DeviceTensor(" + p.t.desc.str() + " on " + p.t.device->id() + ")";
      });
}

}  // namespace duetpy
