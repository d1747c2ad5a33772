#include "support/small_graph.h"

#include <algorithm>
#include <cmath>

namespace duet::test_support {

namespace {
constexpr int kK = kSmallGraphWidth, kN = kSmallGraphWidth;

// The constants as the JSON writes them (std::to_string: 6 decimals), so the reference uses
// exactly the values the engine reads.
double w_at(int k, int n) {
  return std::stod(std::to_string(0.25f * std::sin(0.37f * float(k * kN + n) + 0.5f)));
}
double b_at(int n) {
  return std::stod(std::to_string(0.1f * std::cos(1.3f * float(n))));
}
}  // namespace

std::string small_graph_json(int rows) {
  std::string w, b;
  for (int k = 0; k < kK; ++k)
    for (int n = 0; n < kN; ++n) w += (w.empty() ? "" : ", ") + std::to_string(w_at(k, n));
  for (int n = 0; n < kN; ++n) b += (b.empty() ? "" : ", ") + std::to_string(b_at(n));
  return R"({"format": "duet-graph", "version": 1, "name": "small",
    "inputs": [{"name": "x", "dtype": "f32", "shape": [)" +
         std::to_string(rows) + R"(, 16]}],
    "constants": [{"name": "w", "dtype": "f32", "shape": [16, 16], "values": [)" +
         w + R"(]},
                  {"name": "b", "dtype": "f32", "shape": [16], "values": [)" +
         b + R"(]}],
    "nodes": [{"name": "xw", "op": "matmul", "inputs": ["x", "w"]},
              {"name": "xwb", "op": "add", "inputs": ["xw", "b"]},
              {"name": "s", "op": "silu", "inputs": ["xwb"]},
              {"name": "y", "op": "softmax", "inputs": ["s"]}],
    "outputs": ["y"]})";
}

std::vector<float> small_graph_input(int rows, float seed) {
  std::vector<float> x(size_t(rows) * kK);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(seed + 0.7f * float(i)) + 0.05f;
  return x;
}

double small_graph_error(const std::vector<float>& x, const float* y, int rows) {
  if (!y) return INFINITY;
  double worst = 0;
  for (int r = 0; r < rows; ++r) {
    double row[kN], mx = -INFINITY, sum = 0;
    for (int n = 0; n < kN; ++n) {
      double acc = b_at(n);
      for (int k = 0; k < kK; ++k) acc += double(x[size_t(r * kK + k)]) * w_at(k, n);
      row[n] = acc / (1 + std::exp(-acc));
      mx = std::max(mx, row[n]);
    }
    for (int n = 0; n < kN; ++n) sum += std::exp(row[n] - mx);
    for (int n = 0; n < kN; ++n) {
      const double d = std::fabs(double(y[r * kN + n]) - std::exp(row[n] - mx) / sum);
      worst = std::isnan(d) ? INFINITY : std::max(worst, d);
    }
  }
  return worst;
}

}  // namespace duet::test_support
