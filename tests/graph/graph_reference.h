// Runs a graph on the float64 CPU reference, node by node: what every plan's results are
// compared against. Values between nodes are stored in their graph dtype (as any device stores
// them); outputs are returned before their final rounding.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "check/check.h"
#include "duet/graph.h"
#include "reference/reference.h"

namespace duet::testing_graph {

inline Result<std::map<std::string, std::vector<double>>> reference_run(
    const Graph& g, const std::map<std::string, HostTensor>& inputs) {
  std::vector<HostTensor> values(g.values().size());
  for (int id : g.inputs()) values[static_cast<size_t>(id)] = inputs.at(g.value(id).name);
  for (int id : g.constants()) values[static_cast<size_t>(id)] = *g.value(id).data;
  std::map<std::string, std::vector<double>> exact;
  for (const GraphNode& n : g.nodes()) {
    std::vector<HostTensor> ins;
    std::vector<TensorDesc> descs;
    for (int in : n.inputs) {
      ins.push_back(values[static_cast<size_t>(in)]);
      descs.push_back(ins.back().desc());
    }
    DUET_ASSIGN_OR_RETURN(OpDesc op, make_op(n.kind(), n.op.attrs, descs, {}, n.name));
    DUET_ASSIGN_OR_RETURN(std::vector<double> y, reference::evaluate(op, ins));
    HostTensor out = HostTensor::empty(op.output.dtype, op.output.dims());
    out.from_doubles(y);
    values[static_cast<size_t>(n.output)] = out;
    exact[n.name] = std::move(y);
  }
  std::map<std::string, std::vector<double>> outs;
  for (int id : g.outputs()) outs[g.value(id).name] = exact[g.value(id).name];
  return outs;
}

// Random values in +-[0.05, 1] (never zero), deterministic per seed.
inline HostTensor random_tensor(DType t, std::vector<int64_t> shape, uint32_t seed) {
  HostTensor h = HostTensor::empty(t, shape);
  std::vector<double> v(static_cast<size_t>(h.numel()));
  uint32_t x = seed * 2654435761u + 12345u;
  for (double& e : v) {
    x = x * 1664525u + 1013904223u;
    const double m = 0.05 + 0.95 * static_cast<double>(x >> 8) / 16777216.0;
    e = (x & 1) ? m : -m;
  }
  h.from_doubles(v);
  return h;
}

// Graph-level tolerance: the dtype's rounding, compounded over a few ops.
inline check::Tolerance graph_tolerance(DType t) {
  check::Tolerance tol;
  tol.nmse = t == DType::f32 ? 1e-9 : t == DType::f16 ? 2e-5 : 5e-4;
  tol.max_rel = t == DType::f32 ? 1e-3 : t == DType::f16 ? 5e-2 : 2.5e-1;
  return tol;
}

}  // namespace duet::testing_graph
