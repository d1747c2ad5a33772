#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "check/check.h"
#include "duet/half.h"

namespace duet::check {

namespace {

// How an op's error is judged: exact (data movement and views), element-wise, row ops,
// contractions.
enum class Judged { exact, elementwise, rows, contraction };

Judged judged_as(OpKind k) {
  switch (op_class(k)) {
    case OpClass::data_movement:
    case OpClass::view:
      return Judged::exact;
    case OpClass::rows:
      return Judged::rows;
    case OpClass::contraction:
      return Judged::contraction;
    case OpClass::elementwise:
      break;
  }
  return Judged::elementwise;
}

// NMSE and max-error-over-rms caused by rounding a value once to `t`.
void rounding_floor(DType t, double* nmse, double* rel) {
  switch (t) {
    case DType::f16:
      *nmse = 4e-7, *rel = 2e-2;
      return;
    case DType::bf16:
      *nmse = 2e-5, *rel = 1e-1;
      return;
    default:
      *nmse = 1e-13, *rel = 1e-6;
      return;
  }
}

}  // namespace

std::string Tolerance::str() const {
  if (exact) return "exact";
  std::ostringstream s;
  s << "nmse<=" << nmse << " maxrel<=" << max_rel;
  return s.str();
}

Tolerance tolerance(const OpDesc& op, Precision used) {
  Tolerance t;
  const Judged c = judged_as(op.kind);
  if (c == Judged::exact) {
    t.exact = true;
    return t;
  }
  const int ci = c == Judged::elementwise ? 0 : c == Judged::rows ? 1 : 2;
  // Rows: elementwise, row-wise (softmax, norms, rope), contractions (matmul, attention).
  static constexpr double kNmse[4][3] = {
      {1e-10, 1e-9, 1e-8},    // f32
      {1e-6, 2e-6, 2e-5},     // f16: intermediates rounded to f16, f32 accumulation
      {3e-5, 5e-5, 2e-4},     // bf16
      {1e-13, 1e-13, 1e-12},  // f64 reference
  };
  static constexpr double kRel[4][3] = {
      {1e-4, 1e-3, 1e-3}, {2e-2, 2e-2, 5e-2}, {1e-1, 1e-1, 2e-1}, {1e-9, 1e-9, 1e-9}};
  const int pi = static_cast<int>(used);
  double fn = 0, fr = 0;
  rounding_floor(op.output.dtype, &fn, &fr);
  t.nmse = std::max(kNmse[pi][ci], fn);
  t.max_rel = std::max(kRel[pi][ci], fr);
  // A quantized weight: the product is against the weight's exact dequantization, and a kernel
  // may quantize the activations to 8 bits per 32 or per 256 (as ggml does), an error of about
  // 4e-3 (per 32) to 7e-3 (per 256) of the rms per output on unit data. Bound: NMSE 5e-4, the
  // largest error 5% of the rms.
  if (op.kind == OpKind::matmul && op.inputs.size() > 1 && is_quantized(op.inputs[1].dtype) &&
      used != Precision::f64) {
    t.nmse = std::max(5e-4, fn);
    t.max_rel = std::max(5e-2, fr);
  }
  return t;
}

Metrics compare(std::span<const double> got, std::span<const double> want, bool exact) {
  Metrics m;
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got[i], w = want[i];
    if (std::isnan(w)) {
      // The reference has no value here (an input outside the op's domain, such as log of a
      // negative number): not compared, except that data movement must carry the NaN.
      ++m.undefined;
      if (exact && !std::isnan(g)) ++m.mismatches;
      continue;
    }
    if (std::isnan(g)) {
      if (!(exact && std::isnan(w))) ++m.nan;
      continue;
    }
    if (std::isinf(g) || std::isinf(w)) {
      if (g != w) ++m.inf_mismatch;
      continue;
    }
    const double e = std::abs(g - w);
    if (exact && g != w) ++m.mismatches;
    if (e > m.max_abs || m.worst < 0) {
      m.max_abs = std::max(m.max_abs, e);
      if (e >= m.max_abs) m.worst = static_cast<int64_t>(i);
    }
    err2 += e * e;
    ref2 += w * w;
  }
  const double n =
      static_cast<double>(std::max<int64_t>(static_cast<int64_t>(want.size()) - m.undefined, 1));
  m.nmse = ref2 > 0 ? err2 / ref2 : err2;
  const double rms = std::sqrt(ref2 / n);
  m.max_rel = rms > 0 ? m.max_abs / rms : m.max_abs;
  return m;
}

bool passes(const Metrics& m, const Tolerance& t) {
  if (m.nan || m.inf_mismatch) return false;
  if (t.exact) return m.mismatches == 0;
  return m.nmse <= t.nmse && m.max_rel <= t.max_rel;
}

}  // namespace duet::check
