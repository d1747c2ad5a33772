// The checks make_op's shape rules share, each an error sentence naming the op and the tensor.
#include "op_facts.h"

namespace duet::ops {

Err Check::fail(size_t input) const {
  Err e(Code::invalid_argument);
  e.op(op_name(op_.kind), op_.name);
  if (input < op_.inputs.size()) e.tensor(op_.input_name(input));
  return e;
}

Err Check::fail_attr() const {
  Err e(Code::invalid_argument);
  e.op(op_name(op_.kind), op_.name);
  return e;
}

Status Check::rank(size_t i, int lo, int hi) const {
  const TensorDesc& t = op_.inputs[i];
  if (t.rank >= lo && t.rank <= hi) return {};
  std::string want = lo == hi ? "rank " + std::to_string(lo)
                              : "rank " + std::to_string(lo) + " to " + std::to_string(hi);
  return fail(i).expected(want).got(t.str());
}

Status Check::float_dtype(size_t i) const {
  if (is_float(op_.inputs[i].dtype)) return {};
  return fail(i)
      .expected(is_quantized(op_.inputs[i].dtype)
                    ? "a float dtype (f32, f16, bf16): a quantized tensor is read by matmul "
                      "(as 'b'), embedding (as the table) and cast (to a float dtype)"
                    : "a float dtype (f32, f16, bf16)")
      .got(op_.inputs[i].str());
}

Status Check::not_quantized(size_t i) const {
  if (!is_quantized(op_.inputs[i].dtype)) return {};
  return fail(i)
      .expected(
          "an element dtype: a quantized tensor is read by matmul (as 'b'), embedding (as "
          "the table) and cast (to a float dtype)")
      .got(op_.inputs[i].str());
}

Status Check::same_dtype(size_t i, size_t j) const {
  if (op_.inputs[i].dtype == op_.inputs[j].dtype) return {};
  return fail(j)
      .expected(std::string(dtype_name(op_.inputs[i].dtype)) + " like '" + op_.input_name(i) + "'")
      .got(op_.inputs[j].str());
}

Status Check::mask(size_t i, size_t like, std::span<const int64_t> target) const {
  const TensorDesc& m = op_.inputs[i];
  if (m.dtype != DType::f32 && m.dtype != op_.inputs[like].dtype)
    return fail(i)
        .expected("f32 or " + std::string(dtype_name(op_.inputs[like].dtype)))
        .got(m.str());
  if (!broadcast_to(m, target).ok()) {
    std::string want = "a shape that broadcasts to [";
    for (size_t d = 0; d < target.size(); ++d) want += (d ? "," : "") + std::to_string(target[d]);
    return fail(i).expected(want + "]").got(m.str());
  }
  return {};
}

Status Check::scalar(size_t i) const {
  if (is_runtime_scalar(op_.inputs[i])) return {};
  return fail(i).expected("a run-time scalar (i32 with one element)").got(op_.inputs[i].str());
}

Status Check::channel_vector(size_t i, int64_t n, size_t like) const {
  const TensorDesc& w = op_.inputs[i];
  if (w.rank != 1 || w.shape[0] != n)
    return fail(i).expected("shape [" + std::to_string(n) + "]").got(w.str());
  return same_dtype(like, i);
}

}  // namespace duet::ops
