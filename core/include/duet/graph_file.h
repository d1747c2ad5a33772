// Graph files: versioned JSON (format "duet-graph", version 1; see docs/planner.md).
//
//   {"format": "duet-graph", "version": 1, "name": "mlp",
//    "inputs":    [{"name": "x", "dtype": "f16", "shape": [8, 64]}],
//    "constants": [{"name": "w", "dtype": "f16", "shape": [64, 64],
//                   "file": "mlp.safetensors", "key": "w"},          // data from a file,
//                  {"name": "b", "dtype": "f32", "shape": [2], "values": [0.5, -1]}],  // inline,
//                                                                    // or neither: bound later
//    "nodes":     [{"name": "h", "op": "matmul", "inputs": ["x", "w"],
//                   "attrs": {"transpose_b": true}}],
//    "outputs":   ["h"]}
//
// Attributes that differ from their defaults are written, each OpAttrs field by its own name;
// non-finite floats are written as "inf", "-inf", "nan". Loading then saving gives the same text,
// and loading what was saved gives a graph that is same_as() the original.
#pragma once

#include <string>
#include <string_view>

#include "duet/export.h"
#include "duet/graph.h"

namespace duet {

inline constexpr int kGraphFormatVersion = 1;

struct DUET_API GraphLoadOptions {
  // Read constants' data from their safetensors files (else they stay unbound).
  bool load_constants = true;
};

// `base_dir` resolves relative constant files.
DUET_API Result<Graph> graph_from_json(std::string_view text, const std::string& base_dir = ".",
                                       const GraphLoadOptions& options = {});
// Constants with a source are written as references; constants with data and no source are
// written inline ("values").
DUET_API std::string graph_to_json(const Graph& graph);

DUET_API Result<Graph> load_graph(const std::string& path, const GraphLoadOptions& options = {});
// Writes the graph; constants with data and no source of more than `inline_limit` elements are
// written to "<path without .json>.safetensors" beside it and referenced from the graph.
DUET_API Status save_graph(const Graph& graph, const std::string& path,
                           int64_t inline_limit = 4096);

}  // namespace duet
