// JSON from outside (graph files, safetensors headers, profiles, calibrations): parsed within a
// nesting depth and a memory budget, refused with a clear error beyond them rather than crashing
// a recursive printer or exhausting memory; and printed into messages as a short excerpt.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "duet/status.h"

namespace duet {

// The deepest nesting of arrays and objects accepted (duet's own files nest 5 deep).
inline constexpr int kJsonMaxDepth = 64;

struct JsonLimits {
  uint64_t memory = 0;  // what the parsed document may take, estimated; 0: import_memory_budget()
  int max_depth = kJsonMaxDepth;
  bool unique_keys = false;  // a key given twice in one object is an error (not the last kept)
  // Called for every key as it is read, with its depth (1: the top object's keys); an error stops
  // the parse at once (a graph file's unknown field before the rest of the file is held).
  std::function<Status(int depth, std::string_view key)> on_key;
};

// The document, or a parse_error: "malformed JSON (...)", "JSON nested deeper than 64 levels",
// "a JSON document larger than <budget> once parsed", "key 'k' given twice", or on_key's error.
Result<nlohmann::json> parse_json(std::string_view text, const JsonLimits& limits = {});
Result<nlohmann::ordered_json> parse_ordered_json(std::string_view text,
                                                  const JsonLimits& limits = {});

// At most about `max` characters of `j` as JSON text, for a message: "[1,2,3,...]" (a long array
// or string cut with "...", nesting printed without recursion).
std::string json_excerpt(const nlohmann::json& j, size_t max = 80);
std::string json_excerpt(const nlohmann::ordered_json& j, size_t max = 80);

}  // namespace duet
