// An op's attributes from JSON, as graph files write them ("attrs": {"transpose_b": true}):
// graph_from_json reads nodes with it, and the Python module's GraphBuilder.op(**attrs) too, so
// both accept the same names and values and refuse a bad one with the same sentence.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "duet/op.h"
#include "duet/status.h"

namespace duet {

// Unknown keys and values of the wrong type are errors naming the node and the field.
Result<OpAttrs> attrs_from_json(const nlohmann::json& j, const std::string& node);

}  // namespace duet
