// What the pieces of the Python module share: duet's errors raised as duet's Python exceptions,
// tensors between Python objects and HostTensor, the handles the Python classes hold.
#pragma once

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>

#include "duet/engine.h"
#include "duet/graph.h"
#include "duet/host_tensor.h"
#include "duet/registry.h"
#include "duet/status.h"

namespace duetpy {

namespace py = pybind11;

// A duet Status on its way to Python: the translator registered by bind_errors raises the
// exception class of duet.errors that matches its code, carrying the message and the kind.
struct StatusError : std::runtime_error {
  explicit StatusError(duet::Status s, std::string cls = {})
      : std::runtime_error(s.message()), status(std::move(s)), python_class(std::move(cls)) {}
  duet::Status status;
  std::string python_class;  // a class of duet.errors other than the code's own (EngineClosedError)
};

[[noreturn]] inline void raise(duet::Status s) {
  throw StatusError(std::move(s));
}
inline void check(const duet::Status& s) {
  if (!s.ok()) raise(s);
}
template <class T>
T unwrap(duet::Result<T>&& r) {
  if (!r.ok()) raise(r.status());
  return std::move(r).value();
}
// An invalid_argument error (bad input from Python).
[[noreturn]] inline void bad_input(const std::string& message) {
  raise(duet::Status(duet::Code::invalid_argument, message));
}

// A graph shared by the Python objects that use it (graphs are immutable once built).
using GraphPtr = std::shared_ptr<const duet::Graph>;

// Python objects converted to tensors for one call: keeps what they borrow alive until the call
// is over (destroy with the GIL held).
struct Borrowed {
  std::vector<py::object> keep;
};

// A Python object as a host tensor: a duet.Tensor, a NumPy array (or anything with the buffer
// protocol), or an object with __dlpack__ in host memory. Zero-copy where the memory can be read
// as it is (non-negative strides in whole elements); otherwise copied. `expected` is the dtype the
// graph declares (int64 ids are narrowed to i32 when every value fits, uint16 read as bf16 bits).
// Errors name `what` ("input 'x'").
duet::HostTensor tensor_from_object(py::handle obj, const std::string& what,
                                    const duet::DType* expected, Borrowed& keep);
// A host tensor as a NumPy array over its storage (no copy): f16 as float16, bf16 as
// ml_dtypes.bfloat16 where installed, else its uint16 bit patterns; not writeable when
// `read_only` (memory a producer lent read-only).
py::object to_numpy(duet::HostTensor t, bool read_only = false);
// A host tensor as a duet.Tensor (sharing its storage).
py::object wrap_tensor(duet::HostTensor t);
// Whether bf16 arrays are ml_dtypes.bfloat16 (else uint16).
bool have_ml_dtypes();

// The host memory behind an object with __dlpack__, shared (device memory refused, naming
// `what`); int64 is narrowed into an i32 copy where every value fits. `read_only` (when given)
// says whether the producer marked the memory read-only (DLPack 1.0's flag; never for a copy).
duet::HostTensor tensor_from_dlpack(py::handle obj, const std::string& what,
                                    bool* read_only = nullptr);
// A capsule over a host tensor's storage (it keeps the storage alive): DLPack 1.0's
// "dltensor_versioned" with `flags` when `versioned`, else "dltensor".
py::capsule dlpack_capsule(const duet::HostTensor& t, bool versioned, uint64_t flags = 0);

// A tensor in a CUDA device's memory as Python holds it: duet.DeviceTensor (device_memory.cpp).
struct PyDeviceTensor {
  duet::DeviceTensor t;
};
// Whether `obj` is in CUDA device memory: a duet.DeviceTensor, or __dlpack_device__ says CUDA.
bool in_device_memory(py::handle obj);
// Such an object as a tensor of the CUDA device duet opened with its ordinal, read in place (the
// producer's stream ordered before duet's); `expected` is the dtype the graph declares. Errors
// name `what`: a dtype not `expected`, a non-contiguous tensor, a device duet has not opened.
duet::DeviceTensor device_tensor_from_object(py::handle obj, const std::string& what,
                                             duet::DType expected);
py::object wrap_device_tensor(duet::DeviceTensor t);

// This process's registry of devices (duet::shared_registry; the test build of the module adds
// an emulated CUDA card: registry_emulated.cpp).
std::shared_ptr<duet::Registry> registry();
// What the registry's build adds to the module (the test build: duet._emulated_copies()).
void bind_registry(py::module_& m);

void bind_errors(py::module_& m);
void bind_device_tensors(py::module_& m);
void bind_tensors(py::module_& m);
void bind_graph(py::module_& m);
void bind_engine(py::module_& m);
void bind_check(py::module_& m);

// The Graph behind a duet.Graph, or a path loaded as a model (duet-graph JSON or ONNX).
GraphPtr graph_from_object(py::handle obj);
// duet.Graph from the C++ graph.
py::object wrap_graph(duet::Graph g);
// Inputs for a graph from a dict of Python objects, checked by name and dtype. Those in CUDA
// device memory go to `device` (refused, as host memory is expected, when it is null).
std::map<std::string, duet::HostTensor> graph_inputs_from_dict(
    const duet::Graph& g, const py::dict& inputs, Borrowed& keep,
    std::map<std::string, duet::DeviceTensor>* device = nullptr);
// The policy from Python: None (DUET_POLICY, or none) or its text.
std::optional<duet::Policy> policy_from_object(py::handle policy);
// The devices of this process's registry with these ids (all when None).
std::vector<duet::Device*> select_devices(py::handle ids);

}  // namespace duetpy
