// What the ranks of a distributed run must agree on before any work: the same duet build and the
// same graph. Each rank offers its own; a mismatch ends the start on every rank with an error
// naming the rank that differs and how.
#pragma once

#include <string>
#include <string_view>

#include "duet/build_identity.h"
#include "duet/dist/transport.h"
#include "duet/graph.h"
#include "duet/status.h"

namespace duet::dist {

// A short hash of the graph's structure: names, ops, attributes, shapes, wiring and constant
// sources (graph_to_json), not the constants' data (each rank reads those from its own path).
std::string graph_fingerprint(const Graph& graph);

// Every rank offers its build (duet::build_identity(): version, source revision, compiler, build
// type and flags) and `fingerprint`; all must agree with rank 0's (BuildIdentity::difference: a
// revision unknown on either side is not compared). A collective. A refusal is the same on every
// rank: it names the rank that differs and rank 0, with both builds or both fingerprints.
Status agree_on_start(Transport& transport, const BuildIdentity& build,
                      std::string_view fingerprint);

// Whether `s` is agree_on_start's refusal: every rank returned the same one, so each may end on
// its own (no MPI_Abort is needed to stop the others).
bool refused_at_start(const Status& s);

}  // namespace duet::dist
