#include <chrono>
#include <cstring>
#include <vector>

#include "check/check.h"
#include "duet/half.h"
#include "duet/internal/text.h"

namespace duet::check {

namespace {

constexpr uint64_t kGuard = 4096;     // bytes before and after the output
constexpr uint8_t kSentinel = 0xA5;   // guard content
constexpr uint8_t kPoisonNaN = 0xFF;  // all-ones: NaN in f32, f16 and bf16

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

// One execution with the output poisoned by `poison`; returns the output as doubles.
Result<std::vector<double>> execute_once(Device& device, const KernelChoice& choice,
                                         const OpDesc& op,
                                         std::span<const std::shared_ptr<Buffer>> in_buffers,
                                         uint8_t poison, double* seconds) {
  const uint64_t out_bytes = static_cast<uint64_t>(op.output.nbytes());
  DUET_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> out, device.allocate(out_bytes + 2 * kGuard));
  std::vector<uint8_t> host(out_bytes + 2 * kGuard, kSentinel);
  std::memset(host.data() + kGuard, poison, out_bytes);
  DUET_TRY(device.write(*out, 0, host.data(), host.size()));

  std::vector<TensorRef> refs;
  for (size_t i = 0; i < op.inputs.size(); ++i) refs.push_back({op.inputs[i], in_buffers[i].get()});
  TensorRef out_ref{op.output, out.get()};
  out_ref.desc.offset = static_cast<int64_t>(kGuard / dtype_size(op.output.dtype));

  const auto t0 = std::chrono::steady_clock::now();
  DUET_TRY(device.execute(PlannedOp{op, choice}, refs, out_ref));
  DUET_TRY(device.synchronize());
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  DUET_TRY(device.read(*out, 0, host.data(), host.size()));
  for (uint64_t i = 0; i < kGuard; ++i) {
    if (host[i] != kSentinel || host[kGuard + out_bytes + i] != kSentinel) {
      const bool before = host[i] != kSentinel;
      return Err(Code::internal)
          .op(op_name(op.kind), op.name)
          .tensor("output")
          .device(device.id())
          .note("wrote outside the output (" + std::string(before ? "before" : "after") +
                " it, guard byte " + std::to_string(before ? i : i) + ")");
    }
  }
  std::vector<double> y(static_cast<size_t>(op.output.numel()));
  for (size_t i = 0; i < y.size(); ++i)
    y[i] = load_as_double(host.data() + kGuard, op.output.dtype, static_cast<int64_t>(i));
  return y;
}

}  // namespace

Outcome run_case(Device& device, const KernelChoice& choice, const OpDesc& op,
                 std::span<const HostTensor> inputs, std::span<const double> reference) {
  Outcome o;
  o.tol = tolerance(op, choice.precision);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i < choice.input_dtypes.size() && choice.input_dtypes[i] != inputs[i].dtype()) {
      o.skipped = true;
      o.message = "kernel reads " + std::string(dtype_name(choice.input_dtypes[i])) + " for '" +
                  op.input_name(i) + "', the case has " +
                  std::string(dtype_name(inputs[i].dtype()));
      return o;
    }
  }
  std::vector<std::shared_ptr<Buffer>> buffers;
  for (const HostTensor& t : inputs) {
    auto b = device.allocate(t.storage_bytes());
    if (!b.ok()) {
      o.message = b.status().message();
      return o;
    }
    if (Status s = device.write(**b, 0, t.storage(), t.storage_bytes()); !s.ok()) {
      o.message = s.message();
      return o;
    }
    buffers.push_back(*b);
  }

  auto y = execute_once(device, choice, op, buffers, kPoisonNaN, &o.seconds);
  if (!y.ok()) {
    o.message = y.status().message();
    return o;
  }
  if (is_integer(op.output.dtype)) {
    // NaN poison cannot mark an unwritten integer; a second run with other poison must agree.
    double t2 = 0;
    auto y2 = execute_once(device, choice, op, buffers, 0x5A, &t2);
    if (!y2.ok()) {
      o.message = y2.status().message();
      return o;
    }
    if (*y2 != *y) {
      o.message = "output depends on the poison value: some elements were not written";
      return o;
    }
  }
  // The reference rounded once to the output dtype: overflow to infinity is then the expected
  // answer, and exact ops compare bit for bit.
  std::vector<double> want(reference.begin(), reference.end());
  if (is_float(op.output.dtype)) {
    double one = 0;
    uint8_t scratch[8];
    for (double& w : want) {
      store_from_double(scratch, op.output.dtype, 0, w);
      one = load_as_double(scratch, op.output.dtype, 0);
      w = one;
    }
  }
  o.metrics = compare(*y, want, o.tol.exact);
  o.passed = passes(o.metrics, o.tol);
  if (!o.passed) {
    const Metrics& m = o.metrics;
    if (m.nan)
      o.message = counted(m.nan, "NaN output") + " (unwritten or invalid)";
    else if (m.inf_mismatch)
      o.message = counted(m.inf_mismatch, "infinity") +
                  (m.inf_mismatch == 1 ? " differs" : " differ") + " from the reference";
    else if (o.tol.exact)
      o.message = counted(m.mismatches, "element") + (m.mismatches == 1 ? " differs" : " differ") +
                  " (exact expected)";
    else
      o.message = "nmse " + fmt(m.nmse) + ", max rel " + fmt(m.max_rel) + " at element " +
                  std::to_string(m.worst) + " (got " + fmt((*y)[static_cast<size_t>(m.worst)]) +
                  ", want " + fmt(want[static_cast<size_t>(m.worst)]) + "); tolerance " +
                  o.tol.str();
  }
  return o;
}

}  // namespace duet::check
