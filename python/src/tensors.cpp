// Tensors between Python and duet: NumPy arrays (and anything with the buffer protocol or
// __dlpack__) in, zero-copy where the memory can be read as it is; NumPy arrays over duet's own
// storage out; duet.Tensor, a host tensor that speaks the buffer protocol and DLPack.
#include <cstring>
#include <limits>
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "common.h"
#include "dlpack_types.h"

namespace duetpy {

namespace {

// A host tensor as Python holds it: duet.Tensor. `read_only`: memory a DLPack producer lent
// read-only, which duet's views of it (NumPy, the buffer protocol, DLPack) keep read-only.
struct PyTensor {
  duet::HostTensor t;
  bool read_only = false;
};

std::string shape_text(const py::array& a) {
  std::string s = "[";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s += (i ? "," : "") + std::to_string(a.shape(i));
  return s + "]";
}

std::string numpy_name(duet::DType t) {
  switch (t) {
    case duet::DType::f32:
      return "float32";
    case duet::DType::f16:
      return "float16";
    case duet::DType::bf16:
      return "ml_dtypes.bfloat16, or its bit patterns as uint16";
    case duet::DType::i8:
      return "int8";
    case duet::DType::i32:
      return "int32 (int64 is narrowed where every value fits)";
    default:
      return "uint8 bytes of its blocks";
  }
}

// The dtype of an array, when it is one duet has; int64 and uint16 are told apart by the caller.
enum class Kind { f32, f16, bf16, i8, i32, i64, u16, other };
Kind kind_of(const py::array& a) {
  const py::dtype d = a.dtype();
  const char k = d.kind();
  const py::ssize_t n = d.itemsize();
  if (k == 'f' && n == 4) return Kind::f32;
  if (k == 'f' && n == 2) return Kind::f16;
  if (k == 'i' && n == 1) return Kind::i8;
  if (k == 'i' && n == 4) return Kind::i32;
  if (k == 'i' && n == 8) return Kind::i64;
  if (k == 'u' && n == 2) return Kind::u16;
  if (n == 2 && py::str(d.attr("name")).cast<std::string>() == "bfloat16") return Kind::bf16;
  return Kind::other;
}

duet::DType dtype_of(Kind k) {
  switch (k) {
    case Kind::f16:
      return duet::DType::f16;
    case Kind::bf16:
    case Kind::u16:
      return duet::DType::bf16;
    case Kind::i8:
      return duet::DType::i8;
    case Kind::i32:
    case Kind::i64:
      return duet::DType::i32;
    default:
      return duet::DType::f32;
  }
}

// int64 ids (what PyTorch and ONNX use) as i32, every value checked to fit.
duet::HostTensor narrow_ids(const py::array& a, const std::string& what) {
  py::array_t<int64_t, py::array::c_style | py::array::forcecast> c(a);
  std::vector<int64_t> shape(c.shape(), c.shape() + c.ndim());
  duet::HostTensor t = duet::HostTensor::empty(duet::DType::i32, shape);
  const int64_t* src = c.data();
  int32_t* dst = t.data<int32_t>();
  for (py::ssize_t i = 0; i < c.size(); ++i) {
    if (src[i] < std::numeric_limits<int32_t>::min() ||
        src[i] > std::numeric_limits<int32_t>::max())
      bad_input(what + ": int64 value " + std::to_string(src[i]) + " at flat index " +
                std::to_string(i) + " does not fit i32, the dtype the graph takes");
    dst[i] = static_cast<int32_t>(src[i]);
  }
  return t;
}

duet::HostTensor from_array(py::array a, const std::string& what, const duet::DType* expected,
                            Borrowed& keep) {
  const Kind k = kind_of(a);
  if (k == Kind::other || (k == Kind::i64 && expected && *expected != duet::DType::i32) ||
      (k == Kind::u16 && expected && *expected != duet::DType::bf16) ||
      (!expected && (k == Kind::i64 || k == Kind::u16)))
    bad_input(what + ": NumPy dtype " + py::str(a.dtype()).cast<std::string>() +
              (expected ? " cannot be read as " + std::string(duet::dtype_name(*expected)) +
                              " (give " + numpy_name(*expected) + ")"
                        : std::string(" has no duet dtype (float32, float16, bfloat16, int8 or "
                                      "int32)")));
  const duet::DType dt = dtype_of(k);
  if (expected && dt != *expected)
    bad_input(what + ": expected dtype " + std::string(duet::dtype_name(*expected)) + " (NumPy " +
              numpy_name(*expected) + "), got " + py::str(a.dtype()).cast<std::string>());
  if (a.ndim() > duet::kMaxRank)
    bad_input(what + ": " + std::to_string(a.ndim()) + " dimensions " + shape_text(a) +
              ", duet's tensors have at most " + std::to_string(duet::kMaxRank));
  if (a.size() == 0)
    bad_input(what + ": no elements (shape " + shape_text(a) +
              "); duet's tensors have at least one");
  if (k == Kind::i64) return narrow_ids(a, what);
  // Read in place when every stride is a non-negative number of whole elements and the data is
  // aligned to its element size; otherwise one dense copy (negative strides: a reversed view).
  const py::ssize_t item = a.itemsize();
  bool in_place = reinterpret_cast<uintptr_t>(a.data()) % static_cast<uintptr_t>(item) == 0;
  for (py::ssize_t i = 0; i < a.ndim(); ++i)
    in_place = in_place && a.strides(i) >= 0 && a.strides(i) % item == 0;
  if (!in_place) a = py::module_::import("numpy").attr("ascontiguousarray")(a);
  duet::TensorDesc d;
  d.dtype = dt;
  d.rank = static_cast<int>(a.ndim());
  for (int i = 0; i < d.rank; ++i) {
    d.shape[static_cast<size_t>(i)] = a.shape(i);
    d.strides[static_cast<size_t>(i)] = a.strides(i) / item;
  }
  const uint64_t bytes = static_cast<uint64_t>(d.storage_extent()) * static_cast<uint64_t>(item);
  keep.keep.push_back(a);
  auto t = duet::HostTensor::borrow(d, const_cast<void*>(a.data()), bytes);
  if (!t.ok()) bad_input(what + ": " + t.status().message());
  return std::move(*t);
}

// NumPy's type numbers (NPY_FLOAT, NPY_HALF, ...): a dtype from its number is a table lookup,
// where a dtype from its name is parsed on every call.
py::dtype numpy_dtype(duet::DType t) {
  switch (t) {
    case duet::DType::f32:
      return py::dtype(11);  // NPY_FLOAT
    case duet::DType::f16:
      return py::dtype(23);  // NPY_HALF
    case duet::DType::i8:
      return py::dtype(1);  // NPY_BYTE
    case duet::DType::i32:
      return py::dtype(5);  // NPY_INT
    case duet::DType::bf16:
      if (have_ml_dtypes())
        return py::dtype::from_args(py::module_::import("ml_dtypes").attr("bfloat16"));
      return py::dtype(4);  // NPY_USHORT
    default:
      return py::dtype(2);  // NPY_UBYTE
  }
}

const char* buffer_format(duet::DType t) {
  switch (t) {
    case duet::DType::f32:
      return "f";
    case duet::DType::f16:
      return "e";
    case duet::DType::i8:
      return "b";
    case duet::DType::i32:
      return "i";
    case duet::DType::bf16:
      return "H";  // the buffer protocol has no bfloat16: its bit patterns
    default:
      return "B";
  }
}

}  // namespace

bool have_ml_dtypes() {
  static const bool have = [] {
    try {
      py::module_::import("ml_dtypes");
      return true;
    } catch (const py::error_already_set&) {
      return false;
    }
  }();
  return have;
}

duet::HostTensor tensor_from_object(py::handle obj, const std::string& what,
                                    const duet::DType* expected, Borrowed& keep) {
  if (py::isinstance<PyTensor>(obj)) {
    const duet::HostTensor& t = obj.cast<const PyTensor&>().t;
    if (expected && t.dtype() != *expected)
      bad_input(what + ": expected dtype " + std::string(duet::dtype_name(*expected)) +
                ", got a duet.Tensor of " + std::string(duet::dtype_name(t.dtype())));
    return t;
  }
  if (py::isinstance<py::array>(obj))
    return from_array(py::reinterpret_borrow<py::array>(obj), what, expected, keep);
  if (py::hasattr(obj, "__dlpack__")) {
    duet::HostTensor t = tensor_from_dlpack(obj, what);
    if (expected && t.dtype() != *expected)
      bad_input(what + ": expected dtype " + std::string(duet::dtype_name(*expected)) + ", got " +
                std::string(duet::dtype_name(t.dtype())));
    return t;
  }
  if (PyObject_CheckBuffer(obj.ptr()))
    return from_array(py::module_::import("numpy").attr("asarray")(obj), what, expected, keep);
  bad_input(what +
            ": expected a NumPy array, a duet.Tensor, or an object with the buffer "
            "protocol or __dlpack__; got " +
            std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
}

py::object to_numpy(duet::HostTensor t, bool read_only) {
  if (!t.desc().is_contiguous()) {
    t = t.contiguous();
    read_only = false;  // a copy of its own
  }
  auto* held = new duet::HostTensor(std::move(t));
  py::capsule owner(held, [](void* p) { delete static_cast<duet::HostTensor*>(p); });
  const duet::TensorDesc& d = held->desc();
  std::byte* base = held->storage();
  if (duet::is_quantized(d.dtype)) {
    py::array a(numpy_dtype(d.dtype), {static_cast<py::ssize_t>(held->storage_bytes())},
                {py::ssize_t{1}}, base, owner);
    if (read_only) a.attr("setflags")(py::arg("write") = false);
    return a;
  }
  const auto item = static_cast<py::ssize_t>(duet::dtype_size(d.dtype));
  std::vector<py::ssize_t> shape, strides;
  for (int i = 0; i < d.rank; ++i) {
    shape.push_back(d.dim(i));
    strides.push_back(d.stride(i) * item);
  }
  py::array a(numpy_dtype(d.dtype), shape, strides, base + d.offset * item, owner);
  if (read_only) a.attr("setflags")(py::arg("write") = false);
  return a;
}

void bind_tensors(py::module_& m) {
  py::class_<PyTensor>(m, "Tensor", py::buffer_protocol(),
                       R"(A tensor in host memory, owned by duet.

Speaks the buffer protocol (bf16 as its uint16 bit patterns) and DLPack
(``torch.from_dlpack(t)``, ``numpy.from_dlpack(t)``), without a copy.)")
      .def_property_readonly(
          "dtype", [](const PyTensor& p) { return std::string(duet::dtype_name(p.t.dtype())); })
      .def_property_readonly("shape",
                             [](const PyTensor& p) {
                               py::tuple s(static_cast<size_t>(p.t.desc().rank));
                               for (int i = 0; i < p.t.desc().rank; ++i)
                                 s[static_cast<size_t>(i)] = p.t.desc().dim(i);
                               return s;
                             })
      .def(
          "numpy", [](const PyTensor& p) { return to_numpy(p.t, p.read_only); },
          "A NumPy array over the same memory (bf16: ml_dtypes.bfloat16 where installed, else "
          "uint16 bit patterns), read-only where the memory was lent read-only.")
      .def_property_readonly(
          "read_only", [](const PyTensor& p) { return p.read_only; },
          "Whether the memory was lent read-only (DLPack 1.0's flag): duet's views of it are.")
      .def(
          "__array__",
          [](const PyTensor& p, py::object dtype) {
            py::object a = to_numpy(p.t, p.read_only);
            return dtype.is_none() ? a : a.attr("astype")(dtype);
          },
          py::arg("dtype") = py::none())
      .def(
          "__dlpack__",
          [](const PyTensor& p, py::object stream, py::object max_version, py::object dl_device,
             py::object copy) {
            const Ask ask = parse_ask("duet.Tensor.__dlpack__", max_version, dl_device, copy);
            // Host memory: DLPack asks for no stream.
            if (!stream.is_none())
              bad_input(
                  "duet.Tensor.__dlpack__: the tensor is in host memory; stream must be "
                  "None (DLPack), got " +
                  std::string(py::repr(stream)));
            if (ask.device && *ask.device != std::pair<int, int>(kDLCPU, 0))
              refuse_export(
                  "duet.Tensor.__dlpack__: the tensor is in host memory (device (1, 0)); it "
                  "cannot be exported to device " +
                  std::string(py::repr(dl_device)));
            // copy=True: a copy of its own, which the consumer may write; copy=False and None:
            // the memory itself (host memory never needs a copy to be exported).
            if (ask.copy.value_or(false))
              return dlpack_capsule(p.t.contiguous(), ask.versioned, kDLPackIsCopied);
            return dlpack_capsule(p.t, ask.versioned, p.read_only ? kDLPackReadOnly : 0);
          },
          py::kw_only(), py::arg("stream") = py::none(), py::arg("max_version") = py::none(),
          py::arg("dl_device") = py::none(), py::arg("copy") = py::none())
      .def("__dlpack_device__", [](const PyTensor&) { return py::make_tuple(1, 0); })
      .def("__repr__", [](const PyTensor& p) { return "duet.Tensor(" + p.t.desc().str() + ")"; })
      .def_buffer([](PyTensor& p) -> py::buffer_info {
        if (!p.t.desc().is_contiguous()) {
          p.t = p.t.contiguous();
          p.read_only = false;  // a copy of its own now
        }
        const duet::TensorDesc& d = p.t.desc();
        if (duet::is_quantized(d.dtype))
          return py::buffer_info(p.t.storage(), 1, "B", 1,
                                 {static_cast<py::ssize_t>(p.t.storage_bytes())}, {py::ssize_t{1}},
                                 p.read_only);
        const auto item = static_cast<py::ssize_t>(duet::dtype_size(d.dtype));
        std::vector<py::ssize_t> shape, strides;
        for (int i = 0; i < d.rank; ++i) {
          shape.push_back(d.dim(i));
          strides.push_back(d.stride(i) * item);
        }
        return py::buffer_info(p.t.storage() + d.offset * item, item, buffer_format(d.dtype),
                               d.rank, shape, strides, p.read_only);
      });

  m.def(
      "_tensor_from",
      [](py::handle obj, py::object copy) {
        // A Tensor that owns or shares what it reads. copy None: arrays are copied (they may
        // change later), DLPack's host memory is shared; True: a copy of its own whatever it
        // is; False: shared through DLPack (arrays too), refused where only a copy can be made.
        const bool never = !copy.is_none() && !copy.cast<bool>();
        const bool always = !copy.is_none() && copy.cast<bool>();
        const bool dlpack = py::hasattr(obj, "__dlpack__");
        if (dlpack && (never || !py::isinstance<py::array>(obj))) {
          PyTensor t;
          t.t = tensor_from_dlpack(obj, "from_dlpack", &t.read_only);
          if (always) t = PyTensor{t.t.contiguous()};
          return t;
        }
        if (never)
          refuse_export("from_dlpack(copy=False): " +
                        std::string(py::str(py::type::of(obj).attr("__name__"))) +
                        " has no __dlpack__, so duet can only copy it (copy=None or True)");
        Borrowed keep;
        return PyTensor{tensor_from_object(obj, "tensor", nullptr, keep).contiguous()};
      },
      py::arg("obj"), py::arg("copy") = py::none());
  m.def("_dlpack_exports_alive", &exports_alive,
        "DLPack exports made and not yet deleted (the tests count deleters with it).");
}

py::object wrap_tensor(duet::HostTensor t) {
  return py::cast(PyTensor{std::move(t)});
}

}  // namespace duetpy
