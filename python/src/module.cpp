// duet._duet: the compiled half of the duet package (python/duet holds the Python half).
#include "common.h"
#include "duet/version.h"

PYBIND11_MODULE(_duet, m) {
  m.doc() = "duet's engine, graphs and checks (use the duet package, not this module)";
  m.attr("__version__") = DUET_VERSION_STRING;
  duetpy::bind_errors(m);
  duetpy::bind_tensors(m);
  duetpy::bind_device_tensors(m);
  duetpy::bind_graph(m);
  duetpy::bind_engine(m);
  duetpy::bind_check(m);
  duetpy::bind_registry(m);
}
