// Precision as a floor (precision.h): which kernel choices meet what an op asks for, which the
// policy accepts below it, and why the others are refused.
#include "precision.h"

#include "planner_state.h"

namespace duet::planning {

Precision asked_precision(const OpDesc& op) {
  for (const TensorDesc& t : op.inputs)
    if (is_float(t.dtype)) return precision_of(t.dtype);
  return is_float(op.output.dtype) ? precision_of(op.output.dtype) : Precision::f32;
}

PrecisionFloor::PrecisionFloor(const Policy& policy, const OpDesc& op)
    : policy_(policy), kind_(op.kind), asked_(asked_precision(op)) {
  data_movement_ = planning::data_movement(op.kind);
  // Data movement has no arithmetic precision: only precision.OP= applies to it.
  if (!data_movement_ || policy.op_precision.count(op.kind))
    forced_ = policy.forced_precision(op.kind, &forced_term_);
}

namespace {

// The narrowest precision at which the kernel stores one of the op's floating-point tensors,
// when it stores one narrower than the graph does (a cast that loses bits).
std::optional<Precision> narrowed_storage(const KernelChoice& c, const OpDesc& op,
                                          std::string* what) {
  auto check = [&](DType graph, DType stored, const std::string& name) -> std::optional<Precision> {
    if (!is_float(graph) || !is_float(stored) || holds(stored, graph)) return std::nullopt;
    *what = "stores " + name + " (" + std::string(dtype_name(graph)) + ") as " +
            std::string(dtype_name(stored));
    return precision_of(stored);
  };
  for (size_t i = 0; i < op.inputs.size() && i < c.input_dtypes.size(); ++i)
    if (auto p = check(op.inputs[i].dtype, c.input_dtypes[i], "'" + op.input_name(i) + "'"))
      return p;
  return check(op.output.dtype, c.output_dtype, "its output");
}

}  // namespace

Standing PrecisionFloor::judge(const KernelChoice& c, const OpDesc& op,
                               bool asked_on_device) const {
  Standing s;
  s.kept = c.precision;
  const std::string asked = std::string(precision_name(asked_));
  if (forced_) {
    if (c.precision == *forced_) {
      s.kind = Standing::meets;
      s.by_policy = true;
      s.term = forced_term_;
    } else {
      s.by_policy = true;
      s.term = forced_term_;
      s.why = "policy forces " + std::string(precision_name(*forced_)) + " (" + forced_term_ + ")";
    }
    return s;
  }
  if (c.precision == Precision::f64) {
    s.why = "f64 is the checking precision (select it with precision=f64)";
    return s;
  }
  if (data_movement_) {
    s.kind = Standing::meets;  // no arithmetic: any kernel that moves the values exactly
    return s;
  }
  std::string narrowing;
  const std::optional<Precision> narrow = narrowed_storage(c, op, &narrowing);
  if (narrow && covers(c.precision, *narrow)) s.kept = *narrow;
  if (covers(s.kept, asked_)) {
    s.kind = Standing::meets;
    return s;
  }
  const std::string kept(precision_name(s.kept));
  if (asked_ == Precision::bf16 && s.kept == Precision::f16 &&
      policy_.bf16_fallback == Precision::f16 && !asked_on_device) {
    s.kind = Standing::substitute;
    s.term = "fallback=f16";
    s.why =
        "the device has no bf16 kernel for it; f16 with f32 accumulation instead "
        "(fallback=f16, the default; fallback=f32 keeps the floor)";
    return s;
  }
  if (std::string term = policy_.lower_allowed(kind_, s.kept); !term.empty()) {
    s.kind = Standing::substitute;
    s.by_policy = true;
    s.term = term;
    s.why = kept + " below the " + asked + " asked, allowed by policy (" + term + ")";
    return s;
  }
  s.why = kept + " is less precise than the " + asked + " the graph asks for" +
          (narrowing.empty() ? "" : " (it " + narrowing + ")") + "; lower=" + kept + " allows it";
  return s;
}

}  // namespace duet::planning
