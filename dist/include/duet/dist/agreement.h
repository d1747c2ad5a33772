// What the ranks of a distributed run must agree on before any work: the same duet build and the
// same graph. Each rank offers its own; a mismatch ends the start on every rank with an error
// naming the rank that differs and how.
#pragma once

#include <string>
#include <string_view>

#include "duet/dist/transport.h"
#include "duet/graph.h"
#include "duet/status.h"

namespace duet::dist {

// A short hash of the graph's structure: names, ops, attributes, shapes, wiring and constant
// sources (graph_to_json), not the constants' data (each rank reads those from its own path).
std::string graph_fingerprint(const Graph& graph);

// Every rank offers `duet_version` and `fingerprint`; all must equal rank 0's. A collective.
Status agree_on_start(Transport& transport, std::string_view duet_version,
                      std::string_view fingerprint);

}  // namespace duet::dist
