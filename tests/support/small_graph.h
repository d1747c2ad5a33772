// A small graph with constants and a few op kinds, and its float64 reference: what the
// concurrency tests and the allocation fault sweep run. y = softmax(silu(x @ w + b)) over rows of
// 16, x [rows, 16] f32, the constants w [16, 16] and b [16] written inline in the JSON.
#pragma once

#include <string>
#include <vector>

namespace duet::test_support {

inline constexpr int kSmallGraphWidth = 16;

std::string small_graph_json(int rows);
// Inputs for `rows` rows, never zero, different for every seed.
std::vector<float> small_graph_input(int rows, float seed);
// The largest difference of `y` from the float64 reference on `x` (with w and b as the JSON
// writes them), +inf when `y` is null or holds a NaN. f32 results are within 1e-5.
double small_graph_error(const std::vector<float>& x, const float* y, int rows);

}  // namespace duet::test_support
