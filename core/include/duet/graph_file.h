// Graph files: versioned JSON (format "duet-graph", version 1; see docs/planner.md).
//
//   {"format": "duet-graph", "version": 1, "name": "mlp",
//    "inputs":    [{"name": "x", "dtype": "f16", "shape": [8, 64]}],
//    "constants": [{"name": "w", "dtype": "f16", "shape": [64, 64],
//                   "file": "mlp.safetensors", "key": "w"},          // data from a file,
//                  {"name": "up", "dtype": "q4_k", "shape": [14336, 4096],
//                   "file": "model.gguf", "key": "blk.0.ffn_up.weight"},  // a GGUF tensor,
//                  {"name": "o", "dtype": "q4_z", "shape": [4096, 4096],  // a GPTQ/AWQ module:
//                   "file": "model.safetensors", "key": "model.layers.0.self_attn.o_proj"},
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
  // Read constants' data from their files (else they stay unbound). A file is GGUF when it starts
  // with GGUF's magic, else safetensors; a safetensors key that names no tensor but has
  // `<key>.qweight` is a GPTQ/AWQ int4 module (duet/int4_checkpoint.h). GGUF tensors are
  // memory-mapped, not copied.
  bool load_constants = true;
  // The memory parsing the file may take (its JSON document), in bytes; 0: DUET_IMPORT_MEMORY when
  // set, else 1 GiB. JSON nested deeper than 64 levels is refused.
  uint64_t memory_budget = 0;
};

// `base_dir` resolves relative constant files, which must lie inside it.
DUET_API Result<Graph> graph_from_json(std::string_view text, const std::string& base_dir = ".",
                                       const GraphLoadOptions& options = {});
// Constants with a source are written as references; constants with data and no source are
// written inline ("values").
DUET_API std::string graph_to_json(const Graph& graph);

// The graph file at `path` (a regular file or a stream: a pipe, /dev/stdin, read once, at most
// 256 MiB). Its constants' files must lie inside its folder, symbolic links resolved (or inside
// the folder of the file `path` links to), and have one hard link (docs/security.md).
DUET_API Result<Graph> load_graph(const std::string& path, const GraphLoadOptions& options = {});
// The same from the text of the file at `path`, already read.
DUET_API Result<Graph> graph_from_json_file(std::string_view text, const std::string& path,
                                            const GraphLoadOptions& options = {});
// Writes the graph; constants with data and no source of more than `inline_limit` elements are
// written to "<path without .json>.safetensors" beside it and referenced from the graph; quantized
// constants without a source go to "<path without .json>.gguf".
DUET_API Status save_graph(const Graph& graph, const std::string& path,
                           int64_t inline_limit = 4096);

}  // namespace duet
