// duet's errors as Python exceptions: the class of duet.errors that matches the Status's code,
// with duet's message and the code's name as its `kind`.
#include <new>

#include <pybind11/stl.h>

#include "common.h"

namespace duetpy {

namespace {

void set_python_error(const duet::Status& s, const std::string& python_class = {}) {
  py::module_ errors = py::module_::import("duet.errors");
  py::object cls = python_class.empty()
                       ? errors.attr("error_class")(std::string(duet::code_name(s.code())))
                       : errors.attr(python_class.c_str());
  py::object e = cls(s.message(), std::string(duet::code_name(s.code())));
  PyErr_SetObject(cls.ptr(), e.ptr());
}

}  // namespace

void bind_errors(py::module_& m) {
  m.def("_codes", [] {
    std::vector<std::string> names;
    for (int c = 1; c <= static_cast<int>(duet::Code::internal); ++c)
      names.emplace_back(duet::code_name(static_cast<duet::Code>(c)));
    return names;
  });
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      set_python_error(e.status, e.python_class);
    } catch (const std::bad_alloc&) {
      set_python_error(duet::Status(duet::Code::out_of_memory, "out of host memory"));
    }
  });
}

}  // namespace duetpy
