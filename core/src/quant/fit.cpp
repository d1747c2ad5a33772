#include "fit.h"

#include <algorithm>
#include <cmath>

namespace duet::quant {

namespace {

int nearest(double v, int lo, int hi) {
  if (!(v == v)) return lo;
  return static_cast<int>(
      std::clamp(std::nearbyint(v), static_cast<double>(lo), static_cast<double>(hi)));
}

// Candidate inverse scales per fit: steps of a tenth of a level either side of the exact map.
constexpr int kSteps = 12;

}  // namespace

void round_to(const float* x, int n, double d, double z, int qmin, int qmax, int* q) {
  const double id = d == 0 ? 0 : 1 / d;
  for (int i = 0; i < n; ++i) q[i] = nearest(x[i] * id + z, qmin, qmax);
}

double squared_error(const float* x, int n, double d, const int* q, double off) {
  double e = 0;
  for (int i = 0; i < n; ++i) {
    const double r = x[i] - (d * q[i] + off);
    e += r * r;
  }
  return e;
}

double fit_symmetric(const float* x, int n, int qmin, int qmax, int* q) {
  double amax = 0, m = 0;
  for (int i = 0; i < n; ++i)
    if (std::abs(x[i]) > amax) amax = std::abs(x[i]), m = x[i];
  if (amax == 0) {
    std::fill(q, q + n, 0);
    return 0;
  }
  int tq[256];
  double best_err = -1, best_d = 0;
  // The extreme value goes to either end of the levels (the negative one has one level more).
  // Wide integer ranges (8 bits) gain nothing from a fine search.
  const int steps = qmax - qmin > 64 ? 2 : kSteps;
  for (int end : {qmin, qmax}) {
    for (int s = -steps; s <= steps; ++s) {
      const double target = end + (end < 0 ? -0.1 : 0.1) * s;
      if (target * end <= 0) continue;
      const double is = target / m;
      double sxq = 0, sqq = 0;
      for (int i = 0; i < n; ++i) {
        tq[i] = nearest(x[i] * is, qmin, qmax);
        sxq += x[i] * tq[i];
        sqq += static_cast<double>(tq[i]) * tq[i];
      }
      if (sqq == 0) continue;
      const double d = sxq / sqq;
      // sum (x - d q)^2 = sum x^2 - 2 d sxq + d^2 sqq = sum x^2 - sxq^2 / sqq at the optimum.
      const double gain = sxq * sxq / sqq;
      if (best_err < 0 || gain > best_err) {
        best_err = gain;
        best_d = d;
        std::copy(tq, tq + n, q);
      }
    }
  }
  return best_d;
}

void fit_affine(const float* x, int n, int qmax, bool offset_nonpositive, int* q, double* scale,
                double* offset) {
  double lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) lo = std::min<double>(lo, x[i]), hi = std::max<double>(hi, x[i]);
  if (offset_nonpositive) lo = std::min(lo, 0.0);
  if (hi == lo) {
    std::fill(q, q + n, 0);
    *scale = 0;
    *offset = lo;
    return;
  }
  double sx = 0;
  for (int i = 0; i < n; ++i) sx += x[i];
  int tq[256];
  double best_err = -1;
  for (int s = -kSteps; s <= kSteps; ++s) {
    const double target = qmax + 0.1 * s;
    if (target <= 0) continue;
    const double is = target / (hi - lo);
    double sq = 0, sqq = 0, sxq = 0;
    for (int i = 0; i < n; ++i) {
      tq[i] = nearest((x[i] - lo) * is, 0, qmax);
      sq += tq[i];
      sqq += static_cast<double>(tq[i]) * tq[i];
      sxq += x[i] * tq[i];
    }
    // Least squares for x ~ a q + b: [sqq sq; sq n] [a; b] = [sxq; sx].
    const double det = sqq * n - sq * sq;
    double a, b;
    if (det > 0) {
      a = (sxq * n - sq * sx) / det;
      b = (sqq * sx - sq * sxq) / det;
    } else {
      a = 0;
      b = sx / n;
    }
    if (offset_nonpositive && b > 0) {
      b = 0;
      a = sqq > 0 ? sxq / sqq : 0;
    }
    if (a < 0) continue;
    const double err = squared_error(x, n, a, tq, b);
    if (best_err < 0 || err < best_err) {
      best_err = err;
      *scale = a;
      *offset = b;
      std::copy(tq, tq + n, q);
    }
  }
  if (best_err < 0) {  // no candidate had a non-negative slope: min/max rounding
    *scale = (hi - lo) / qmax;
    *offset = lo;
    round_to(x, n, *scale, -lo / *scale, 0, qmax, q);
  }
}

}  // namespace duet::quant
